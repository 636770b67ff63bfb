/*
 * server.c — the libwebsockets side, thin (server.h): the lws context on
 * our loop, the lws callback that hands each event to the routes (http.c)
 * or to a connection through its kind's ops (conn.h), the token-expiry
 * timer, drain and stop.
 */
#include "server.h"

#include <errno.h>
#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "httpres.h"
#include "log.h"
#include "lwsver.h"
#include "run/feed.h"
#include "srv.h"

/* ==== lws callback ======================================================================= */

static void deflate_response(struct lws_process_html_args *args, struct tc_upgrade *up);

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
	struct tc_server *srv = lws_context_user(lws_get_context(wsi));
	/* `user` is only our pss in the callbacks below that use it. */
	struct tc_pss *pss = user;
	struct tc_conn *c;
	struct tc_ws *w;
	int rc;

	switch (reason) {
	case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
		tc_handshake_begin(&srv->handshakes, wsi);
		return 0;

	case LWS_CALLBACK_WSI_DESTROY:
		tc_handshake_end(&srv->handshakes, wsi);
		return 0;

	case LWS_CALLBACK_HTTP:
		tc_handshake_end(&srv->handshakes, wsi);
		return tc__http_request(srv, wsi, pss, in);

	case LWS_CALLBACK_HTTP_BODY:
		return tc__http_body(srv, wsi, pss, in, len);

	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		return tc__http_body_complete(srv, wsi, pss);

	case LWS_CALLBACK_HTTP_WRITEABLE:
		c = pss ? pss->conn : NULL;
		return c ? c->ops->writeable(c) : 0;

	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		tc_handshake_end(&srv->handshakes, wsi);
		rc = tc__http_confirm_upgrade(srv, wsi, in, &srv->upgrade);
		srv->upgrade.deflate = srv->upgrade.deflate_alone = false;
		srv->upgrade_wsi = rc ? NULL : wsi;
		return rc;

	case LWS_CALLBACK_ADD_HEADERS:
		if (srv->upgrade_wsi == wsi)
			deflate_response(in, &srv->upgrade);
		return 0;

	case LWS_CALLBACK_ESTABLISHED:
		/*
		 * The token was checked once, at CONFIRM_UPGRADE; its grant
		 * cannot wait in the pss: lws (4.1.6, 4.3.5) has none for the request
		 * yet at CONFIRM_UPGRADE (user is NULL there), and allocates a
		 * new, zeroed one when lws_process_ws_upgrade() binds the
		 * connection to its protocol (lws_bind_protocol()). It calls
		 * ESTABLISHED within that same call, so the one upgrade the
		 * server holds is this connection's. (An upgrade that failed
		 * after CONFIRM_UPGRADE leaves a stale upgrade_wsi: it is only
		 * compared, never used, and the next CONFIRM_UPGRADE replaces it.)
		 */
		if (srv->upgrade_wsi != wsi)
			return -1;
		srv->upgrade_wsi = NULL;
		/* The client compresses each message on its own (client_no_context_takeover):
		 * lws' inflater can go after each, instead of keeping ~40 KiB per connection.
		 * (lws 4.1.6 and 4.3.5 free it at a message's end under this option's name.) */
		if (srv->upgrade.deflate_alone &&
		    lws_set_extension_option(wsi, "permessage-deflate", "server_no_context_takeover", NULL))
			return -1;
		return tc__ws_open(&srv->ws, wsi, pss, &srv->upgrade);

	case LWS_CALLBACK_RECEIVE:
		if (!(w = tc__ws_of(pss->conn)))
			return -1;
		tc__ws_heard_from(w);
		return tc__ws_receive(w, in, len);

	case LWS_CALLBACK_RECEIVE_PONG:
		if ((w = tc__ws_of(pss->conn)))
			tc__ws_heard_from(w);
		return 0;

	case LWS_CALLBACK_SERVER_WRITEABLE:
		c = pss->conn;
		return c ? c->ops->writeable(c) : 0;

	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		return tc__ws_peer_closed(tc__ws_of(pss->conn));

	case LWS_CALLBACK_CLOSED:
	case LWS_CALLBACK_CLOSED_HTTP:
		if (pss) {
			tc__http_closed(pss);
			if ((c = pss->conn)) {
				pss->conn = NULL;
				tc__conn_destroy(c);
			}
		}
		return 0;

	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

/*
 * permessage-deflate (RFC 7692). lws negotiates it and inflates what clients
 * send; what threadcast sends it compresses itself (wsdeflate.h, ws.c): lws'
 * own compressor would keep a 256 KiB zlib context per connection.
 */
static const struct lws_extension extensions[] = { { "permessage-deflate", lws_extension_callback_pm_deflate,
						     "permessage-deflate; client_no_context_takeover" },
						   { NULL, NULL, NULL } };

/*
 * The upgrade's response so far ends with its last header line and "\r\n"
 * (lws 4.1.6 and 4.3.5 write "Sec-WebSocket-Extensions: permessage-deflate" last, when
 * it accepted the offer, then calls ADD_HEADERS). Accepted: up->deflate, and
 * the line gets "; client_no_context_takeover" (RFC 7692 7.1.1.2 lets a
 * server ask it unasked), so that each client message can be inflated alone
 * (up->deflate_alone).
 */
static void deflate_response(struct lws_process_html_args *args, struct tc_upgrade *up)
{
	static const char ext[] = "Sec-WebSocket-Extensions: permessage-deflate";
	static const char nct[] = "; client_no_context_takeover";
	char *end = args->p - 2; /* the last line's "\r\n" */
	char *line = end;
	for (int i = 0; i < 512 && !(line[-1] == '\n' && line[-2] == '\r'); i++)
		line--;
	up->deflate = up->deflate_alone = false;
	if ((size_t)(end - line) < sizeof(ext) - 1 || memcmp(line, ext, sizeof(ext) - 1) || memcmp(end, "\r\n", 2))
		return;
	up->deflate = true;
	if (memmem(line, (size_t)(end - line), nct + 2, sizeof(nct) - 3)) {
		up->deflate_alone = true; /* the client offered it */
		return;
	}
	if (args->max_len < (int)sizeof(nct) + 2)
		return;
	memcpy(end, nct, sizeof(nct) - 1);
	end += sizeof(nct) - 1;
	memcpy(end, "\r\n", 2);
	args->p = end + 2;
	args->max_len -= (int)sizeof(nct) - 1;
	up->deflate_alone = true;
}

static const struct lws_protocols protocols[] = {
	/* Index 0 serves HTTP and every WebSocket that names no subprotocol.
	 * lws gives each WebSocket a receive buffer of rx_buffer_size that it
	 * keeps for the connection's life. Commands are small; longer messages
	 * arrive in pieces that tc__ws_receive joins; 256 bytes instead of lws'
	 * 4 KiB default saves 3.75 KiB of RSS per idle connection.
	 * tx_packet_size must be set with it: left 0, lws caps every send() at
	 * rx_buffer_size and drains the rest one such piece per POLLOUT, which
	 * would cut a coalesced 64 KiB write into 240 segments. */
	{ .name = "threadcast",
	  .callback = callback,
	  .per_session_data_size = sizeof(struct tc_pss),
	  .rx_buffer_size = 256,
	  .tx_packet_size = TC_WS_COALESCE_MAX },
	{ .name = NULL }
};

/* ==== lifecycle =========================================================================== */

static void conn_gone(void *arg);

/* Tokens expire on open connections too: closed with 1008 at their exp. */
static void on_expiry(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	int64_t now = tc_wall_ms() / 1000;
	for (struct tc_dlink *n = srv->conns.all.head; n; n = n->next) {
		struct tc_conn *c = TC_CONN_OF(n, link);
		if (c->auth_exp && c->auth_exp <= now && !c->close_code)
			/* 0.0.21's client must not come back with the same token: 4401. */
			tc__conn_close(c, TC_CONN_DROP,
				       c->session && tc_session_spelling(c->session) == TC_SPELL_021
					       ? TC_CLOSE_UNAUTHORIZED
					       : TC_CLOSE_POLICY,
				       "token expired; reconnect with a fresh one");
	}
}

/* Stops and closes every handle of the server and its components. */
static void close_handles(struct tc_server *srv)
{
	uv_timer_stop(&srv->drain_timer);
	uv_timer_stop(&srv->drain_tick);
	uv_timer_stop(&srv->expiry);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
	uv_close((uv_handle_t *)&srv->drain_tick, NULL);
	uv_close((uv_handle_t *)&srv->expiry, NULL);
	tc__conn_flush_close(&srv->conns);
	tc__ws_close_handles(&srv->ws);
	tc__streams_close_handles(&srv->streams);
	tc_handshakes_close(&srv->handshakes);
}

struct tc_server *tc_server_new(uv_loop_t *loop, const struct tc_session_env *env)
{
	const struct tc_config *cfg = env->cfg;
	struct tc_server *srv = tc_xcalloc(1, sizeof(*srv));
	struct lws_context_creation_info info;
	void *loops[1] = { loop };
	const char *host = cfg->host;

	srv->loop = loop;
	srv->cfg = cfg;
	srv->env = env;
	srv->redis = env->redis;
	uv_timer_init(loop, &srv->drain_timer);
	uv_timer_init(loop, &srv->drain_tick);
	uv_timer_init(loop, &srv->expiry);
	srv->drain_timer.data = srv->drain_tick.data = srv->expiry.data = srv;
	srv->conns = (struct tc_conn_set){ .loop = loop, .cfg = cfg, .env = env, .gone = conn_gone, .gone_arg = srv };
	tc__http_init(cfg);
	tc__conn_flush_init(&srv->conns);
	tc__ws_init(&srv->ws, &srv->conns);
	tc__streams_init(&srv->streams, &srv->conns);
	/* A run's units are kept for clients that join late, up to a few queues' worth. */
	srv->feeds = tc_run_feeds_new(env, 4 * (size_t)cfg->max_queue_bytes);
	tc_handshakes_init(&srv->handshakes, loop, (uint64_t)cfg->handshake_timeout_s * 1000,
			   (size_t)cfg->max_connections);

	memset(&info, 0, sizeof(info));
	info.options =
		LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_VALIDATE_UTF8 | LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN;
	info.foreign_loops = loops;
	/* threadcast listens and accepts itself (handshake.h): lws gets each
	 * connection by adoption. */
	info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
	info.protocols = protocols;
	if (cfg->deflate)
		info.extensions = extensions;
	info.user = srv;
	info.pcontext = &srv->ctx;
	info.timeout_secs = (unsigned)cfg->handshake_timeout_s;
	/* Handshake deadlines are ours (handshake.c); lws' own, set when the
	 * first header bytes arrive, is only a backstop and must fire later. */
	info.timeout_secs_ah_idle = (unsigned)cfg->handshake_timeout_s + 2;
	/* An all-zero policy keeps lws' own idle timers off (see ws.c's idle list). */
	static const lws_retry_bo_t no_idle_timers;
	info.retry_and_idle_policy = &no_idle_timers;
	info.vhost_name = "threadcast";
	info.server_string = "threadcast";

	srv->ctx = lws_create_context(&info);
	if (!srv->ctx) {
		tc_log(TC_LOG_ERROR, "cannot start the server (is the port in use?)", TC_LS("host", host),
		       TC_LI("port", cfg->port));
		close_handles(srv);
		uv_run(loop, UV_RUN_NOWAIT);
		tc__streams_free(&srv->streams);
		tc_run_feeds_free(srv->feeds);
		free(srv);
		return NULL;
	}
	srv->vhost = lws_get_vhost_by_name(srv->ctx, "threadcast");
	/* Every interface (IPv6 and IPv4) for 0.0.0.0, :: or *. */
	const char *iface = strcmp(host, "0.0.0.0") && strcmp(host, "::") && strcmp(host, "*") ? host : NULL;
	srv->port = srv->vhost ? tc_handshakes_listen(&srv->handshakes, srv->vhost, iface, (int)cfg->port) : -1;
	if (srv->port < 0) {
		tc_log(TC_LOG_ERROR, "cannot start the server (is the port in use?)", TC_LS("host", host),
		       TC_LI("port", cfg->port), TC_LS("error", strerror(errno)));
		/* lws' context ends over a few loop iterations (libuv handles close). */
		tc_server_stop(srv);
		for (int i = 0; i < 8; i++)
			uv_run(loop, UV_RUN_NOWAIT);
		tc_server_free(srv);
		return NULL;
	}
	tc__streams_start_timers(&srv->streams);
	if (env->auth)
		uv_timer_start(&srv->expiry, on_expiry, 1000, 1000);
	tc__ws_start_timers(&srv->ws);
	return srv;
}

int tc_server_port(const struct tc_server *s)
{
	return s->port;
}

size_t tc_server_connections(const struct tc_server *s)
{
	return s->conns.all.count;
}

/* ==== drain ============================================================================== */

static void drain_finish(struct tc_server *srv)
{
	void (*done)(void *) = srv->drain_done;
	srv->drain_done = NULL;
	uv_timer_stop(&srv->drain_timer);
	uv_timer_stop(&srv->drain_tick);
	if (done)
		done(srv->drain_arg);
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	if (srv->conns.all.count)
		tc_log(TC_LOG_WARN, "drain timeout: closing remaining connections",
		       TC_LI("connections", srv->conns.all.count));
	drain_finish(srv);
}

/*
 * The last connection of a drain is gone. The drain's end may tear the
 * server down (main.c: app_stop -> tc_server_stop -> lws_context_destroy),
 * which must not run here, inside lws' CLOSED callback: it runs from the
 * loop, on the drain timer at 0 ms. drain_done is NULL once the drain
 * ended or the server stopped (its timers closed), and then nothing waits.
 */
static void conn_gone(void *arg)
{
	struct tc_server *srv = arg;
	if (srv->conns.draining && srv->drain_done && srv->conns.all.count == 0)
		uv_timer_start(&srv->drain_timer, on_drain_timeout, 0, 0);
}

#define DRAIN_TICK_MS 50

/* Closes the next batch of connections; when all are told, waits for them. */
static void on_drain_tick(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	size_t n = 0;
	for (struct tc_dlink *l = srv->conns.all.head; l && n < srv->drain_per_tick; l = l->next) {
		struct tc_conn *c = TC_CONN_OF(l, link);
		if (c->ops->one_shot || c->close_code)
			continue;
		tc__conn_close(c, TC_CONN_FLUSH, TC_CLOSE_GOING_AWAY, tc_close_reason(TC_CLOSE_GOING_AWAY));
		n++;
	}
	if (n < srv->drain_per_tick) {
		/* Everyone has been told: give them drain_timeout_ms to finish. */
		uv_timer_stop(&srv->drain_tick);
		uv_timer_start(&srv->drain_timer, on_drain_timeout,
			       srv->conns.all.count ? (uint64_t)srv->cfg->drain_timeout_ms : 0, 0);
	}
}

/* The grace is over (or there was none): refuse new connections, close the open ones. */
static void on_grace_end(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	uint64_t ticks = (uint64_t)srv->cfg->drain_spread_ms / DRAIN_TICK_MS;
	srv->conns.draining = true;
	tc_log(TC_LOG_INFO, "draining: refusing new connections, closing the open ones",
	       TC_LI("connections", srv->conns.all.count));
	/* Spread the closes so clients do not all reconnect in the same instant. */
	srv->drain_per_tick = ticks ? (srv->conns.all.count + ticks - 1) / ticks : srv->conns.all.count;
	if (!srv->drain_per_tick)
		srv->drain_per_tick = 1;
	on_drain_tick(&srv->drain_tick);
	if (uv_is_active((uv_handle_t *)&srv->drain_timer) == 0)
		uv_timer_start(&srv->drain_tick, on_drain_tick, DRAIN_TICK_MS, DRAIN_TICK_MS);
}

void tc_server_drain(struct tc_server *srv, int grace_ms, void (*done)(void *), void *arg)
{
	srv->conns.leaving = true; /* /readyz fails from now on */
	srv->drain_done = done;
	srv->drain_arg = arg;
	if (grace_ms > 0)
		uv_timer_start(&srv->drain_timer, on_grace_end, (uint64_t)grace_ms, 0);
	else
		on_grace_end(&srv->drain_timer);
}

/* ==== stop =============================================================================== */

void tc_server_stop(struct tc_server *srv)
{
	srv->conns.leaving = srv->conns.draining = true;
	srv->drain_done = NULL;
	close_handles(srv);
	if (srv->ctx)
		lws_context_destroy(srv->ctx);
}

void tc_server_free(struct tc_server *srv)
{
	if (!srv)
		return;
	/* A context that needed a second pass (lws' two-stage destroy) gets it. */
	if (srv->ctx)
		lws_context_destroy(srv->ctx);
	tc__streams_free(&srv->streams);
	tc_run_feeds_free(srv->feeds);
	free(srv);
}
