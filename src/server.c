#include "server.h"

#include <cjson/cJSON.h>
#include <libwebsockets.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "session.h"
#include "util.h"

_Static_assert(TC_BUF_HEADROOM >= LWS_PRE, "tc_buf headroom must fit the lws frame header");

/* RFC 6455 "try again later"; lws 4.1 has no name for it. */
#define CLOSE_TRY_AGAIN_LATER ((enum lws_close_status)1013)

/* The close opcode lws uses internally (roles/ws/private-lib-roles-ws.h). */
#define WRITE_CLOSE ((enum lws_write_protocol)4)

/* Frames written per WRITEABLE callback before yielding to other clients. */
#define WRITE_BATCH 64

/* ==== connections ==================================================================== */

/*
 * One WebSocket client. Allocated at LWS_CALLBACK_ESTABLISHED and freed at
 * LWS_CALLBACK_CLOSED (the one close path); nothing else holds a pointer to
 * it across callbacks, so no deferred free is needed yet.
 */
struct tc_conn {
	struct tc_server *srv;
	struct lws *wsi;
	struct tc_session *session;
	struct tc_bufq out;      /* frames not yet handed to lws */
	char *rx;                /* reassembly of a fragmented message, else NULL */
	size_t rx_len, rx_cap;
	const char *close_reason; /* static string */
	uint16_t close_code;     /* nonzero: close once `out` is flushed */
	bool want_write;         /* lws_callback_on_writable() pending */
	bool queue_full;         /* reading stopped until `out` drains */
	bool session_busy;       /* reading stopped while the session serves a command */
	bool rx_off;             /* what lws was last told */
	struct tc_conn *prev, *next;
};

/* lws' per-session data: only a pointer, so lws' allocation stays tiny. */
struct pss {
	struct tc_conn *conn;
};

struct tc_server {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	const struct tc_session_env *env;
	struct tc_redis *redis;
	struct lws_context *ctx;   /* NULL once lws finished destroying it */
	struct lws_vhost *vhost;
	int port;
	struct tc_conn *conns;     /* every open WebSocket */
	size_t nconns;
	bool draining;
	uv_timer_t drain_timer;
	void (*drain_done)(void *);
	void *drain_arg;
};

static void request_write(struct tc_conn *c)
{
	if (!c->want_write) {
		c->want_write = true;
		lws_callback_on_writable(c->wsi);
	}
}

/*
 * Asks for the connection to close with code/reason. With flush, queued
 * frames are written first; without, they are dropped now and the socket is
 * killed if it does not become writable within 2 s (a client that stopped
 * reading never will).
 */
static void conn_close(struct tc_conn *c, uint16_t code, const char *reason, bool flush)
{
	if (c->close_code)
		return;
	c->close_code = code;
	c->close_reason = reason;
	if (!flush) {
		tc_bufq_clear(&c->out);
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_SEND, 2);
	}
	request_write(c);
}

/* Reading from the client stops for either reason and resumes when neither holds. */
static void update_rx(struct tc_conn *c)
{
	bool off = c->queue_full || c->session_busy;
	if (off != c->rx_off) {
		c->rx_off = off;
		lws_rx_flow_control(c->wsi, !off);
	}
}

/* Transport hook for the session: queue one frame, bounded. */
static void conn_send(void *ctx, struct tc_buf *b)
{
	struct tc_conn *c = ctx;
	const struct tc_config *cfg = c->srv->cfg;

	if (c->close_code) {
		tc_buf_unref(b);
		return;
	}
	if (c->out.bytes + b->len > (size_t)cfg->max_queue_bytes) {
		tc_buf_unref(b);
		tc_log(TC_LOG_WARN, "slow consumer cut off", TC_LS("thread", tc_session_thread(c->session)),
		       TC_LI("queued_bytes", c->out.bytes), TC_LI("limit", cfg->max_queue_bytes));
		conn_close(c, 1013,
			   "too slow: outbound queue limit exceeded; reconnect and resume", false);
		return;
	}
	tc_bufq_push(&c->out, b);
	if (!c->queue_full && c->out.bytes > (size_t)cfg->max_queue_bytes / 2) {
		c->queue_full = true;
		update_rx(c);
	}
	request_write(c);
}

static size_t conn_queued(void *ctx)
{
	struct tc_conn *c = ctx;
	return c->out.bytes;
}

static void conn_set_reading(void *ctx, bool reading)
{
	struct tc_conn *c = ctx;
	c->session_busy = !reading;
	update_rx(c);
}

static void conn_session_close(void *ctx, int code, const char *reason)
{
	conn_close(ctx, (uint16_t)code, reason, false);
}

static const struct tc_session_io conn_io = {
	.send = conn_send,
	.queued = conn_queued,
	.set_reading = conn_set_reading,
	.close = conn_session_close,
};

static void conn_free(struct tc_conn *c)
{
	struct tc_server *srv = c->srv;

	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->nconns--;
	tc_session_close(c->session);
	tc_bufq_clear(&c->out);
	free(c->rx);
	free(c);
}

/*
 * Writes the close frame ourselves, then has lws drop the connection. The
 * usual lws_close_reason() + return -1 does not work from WRITEABLE with
 * Debian's lws 4.1.6 on libuv: its service loop closes the wsi a second time
 * at once, which kills the socket before the close frame leaves.
 */
static int send_close(struct tc_conn *c)
{
	unsigned char buf[LWS_PRE + 125];
	size_t rlen = strlen(c->close_reason);

	if (rlen > sizeof(buf) - LWS_PRE - 2)
		rlen = sizeof(buf) - LWS_PRE - 2;
	buf[LWS_PRE] = (unsigned char)(c->close_code >> 8);
	buf[LWS_PRE + 1] = (unsigned char)(c->close_code & 0xff);
	memcpy(buf + LWS_PRE + 2, c->close_reason, rlen);
	lws_write(c->wsi, buf + LWS_PRE, rlen + 2, WRITE_CLOSE);
	return -1;
}

/* Writes queued frames; returns -1 when lws should close the connection. */
static int conn_writeable(struct tc_conn *c)
{
	const size_t low = (size_t)c->srv->cfg->max_queue_bytes / 4;
	struct tc_buf *b;
	int n = 0;

	c->want_write = false;
	while ((b = tc_bufq_peek(&c->out))) {
		if (lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_TEXT) < 0)
			return -1;
		tc_buf_unref(tc_bufq_pop(&c->out));
		if (++n == WRITE_BATCH || lws_send_pipe_choked(c->wsi))
			break;
	}
	if (c->out.bytes <= low) {
		if (c->queue_full) {
			c->queue_full = false;
			update_rx(c);
		}
		tc_session_on_drained(c->session); /* a paced replay may go on */
	}
	if (c->out.count) {
		request_write(c);
		return 0;
	}
	if (c->close_code)
		return send_close(c);
	return 0;
}

/* Closes from inside a RECEIVE callback: the caller returns -1 next. */
static int close_now(struct lws *wsi, enum lws_close_status code, const char *reason)
{
	lws_close_reason(wsi, code, (unsigned char *)(uintptr_t)reason, strlen(reason));
	return -1;
}

static int conn_receive(struct tc_conn *c, const char *in, size_t len)
{
	const size_t max = (size_t)c->srv->cfg->max_frame_bytes;

	if (c->close_code)
		return 0; /* closing: further commands would not be answered */
	if (lws_frame_is_binary(c->wsi))
		return close_now(c->wsi, LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE,
				 "binary messages are not supported: send commands as JSON text");
	if (c->rx_len + len > max) {
		char reason[100];
		snprintf(reason, sizeof(reason), "message larger than %zu bytes", max);
		tc_log(TC_LOG_INFO, "oversized message refused",
		       TC_LS("thread", tc_session_thread(c->session)), TC_LI("limit", max));
		return close_now(c->wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, reason);
	}
	bool final = lws_is_final_fragment(c->wsi);
	if (final && !c->rx_len) {
		tc_session_on_frame(c->session, in, len); /* the common case: no copy */
		return 0;
	}
	if (c->rx_len + len > c->rx_cap) {
		size_t cap = c->rx_cap ? c->rx_cap : 1024;
		while (cap < c->rx_len + len)
			cap *= 2;
		c->rx_cap = cap < max ? cap : max;
		c->rx = tc_xrealloc(c->rx, c->rx_cap);
	}
	memcpy(c->rx + c->rx_len, in, len);
	c->rx_len += len;
	if (final) {
		tc_session_on_frame(c->session, c->rx, c->rx_len);
		/* Idle connections keep no reassembly buffer. */
		free(c->rx);
		c->rx = NULL;
		c->rx_len = c->rx_cap = 0;
	}
	return 0;
}

/* ==== HTTP ============================================================================ */

enum route { ROUTE_NOT_FOUND, ROUTE_HEALTHZ, ROUTE_READYZ, ROUTE_STREAM, ROUTE_BAD_THREAD };

/* Maps a request path to a route; for streams, copies the thread id. */
static enum route route_of(const char *path, char thread[TC_THREAD_ID_MAX + 1])
{
	static const char pre[] = "/threads/", suf[] = "/stream";
	size_t len = strlen(path);

	if (!strcmp(path, "/healthz"))
		return ROUTE_HEALTHZ;
	if (!strcmp(path, "/readyz"))
		return ROUTE_READYZ;
	if (len < sizeof(pre) - 1 + sizeof(suf) - 1 || strncmp(path, pre, sizeof(pre) - 1) ||
	    strcmp(path + len - (sizeof(suf) - 1), suf))
		return ROUTE_NOT_FOUND;
	const char *id = path + sizeof(pre) - 1;
	size_t idlen = len - (sizeof(pre) - 1) - (sizeof(suf) - 1);
	if (!tc_thread_id_valid(id, idlen))
		return ROUTE_BAD_THREAD;
	memcpy(thread, id, idlen);
	thread[idlen] = '\0';
	return ROUTE_STREAM;
}

/* Sends a complete JSON response. Returns what the lws callback should return. */
static int http_json(struct lws *wsi, unsigned status, const char *body)
{
	unsigned char buf[LWS_PRE + 1024];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
	size_t len = strlen(body);

	if (lws_add_http_common_headers(wsi, status, "application/json", len, &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
					(const unsigned char *)"no-store", 8, &p, end) ||
	    lws_finalize_write_http_header(wsi, start, &p, end))
		return -1;
	if (len > sizeof(buf) - LWS_PRE)
		return -1;
	memcpy(buf + LWS_PRE, body, len);
	if (lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL) != (int)len)
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int http_error(struct lws *wsi, unsigned status, const char *code, const char *message)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "error", code);
	cJSON_AddStringToObject(o, "message", message);
	char *body = cJSON_PrintUnformatted(o);
	int rc = http_json(wsi, status, body);
	free(body);
	cJSON_Delete(o);
	return rc;
}

static int http_readyz(struct tc_server *srv, struct lws *wsi)
{
	bool ready = !srv->draining && tc_redis_ready(srv->redis);
	char body[256];
	snprintf(body, sizeof(body),
		 "{\"ready\":%s,\"redis\":\"%s\",\"draining\":%s,\"connections\":%zu}",
		 ready ? "true" : "false", tc_redis_status(srv->redis),
		 srv->draining ? "true" : "false", srv->nconns);
	return http_json(wsi, ready ? 200 : 503, body);
}

static int http_request(struct tc_server *srv, struct lws *wsi, const char *path)
{
	char thread[TC_THREAD_ID_MAX + 1];
	char *uri;
	int urilen;
	int method = lws_http_get_uri_and_method(wsi, &uri, &urilen);
	enum route r = route_of(path, thread);

	if (r == ROUTE_NOT_FOUND)
		return http_error(wsi, 404, "not_found", "no such route");
	if (method != LWSHUMETH_GET)
		return http_error(wsi, 405, "method_not_allowed", "only GET is served here");
	switch (r) {
	case ROUTE_HEALTHZ:
		return http_json(wsi, 200, "{\"status\":\"ok\",\"version\":\"" TC_VERSION "\"}");
	case ROUTE_READYZ:
		return http_readyz(srv, wsi);
	case ROUTE_BAD_THREAD:
		return http_error(wsi, 400, "invalid_thread_id",
				  "a thread id is 1 to 128 characters of A-Z a-z 0-9 . _ : -");
	default:
		return http_error(wsi, 426, "upgrade_required",
				  "this endpoint is a WebSocket: send an Upgrade: websocket request");
	}
}

/* Decides on an upgrade request. 0 = proceed, >0 = we answered, <0 = hang up. */
static int confirm_upgrade(struct tc_server *srv, struct lws *wsi, const char *proto)
{
	char path[256], thread[TC_THREAD_ID_MAX + 1];
	int rc;

	if (strcmp(proto, "websocket"))
		return -1; /* h2c and the like: not offered */
	if (lws_hdr_copy(wsi, path, sizeof(path), WSI_TOKEN_GET_URI) < 0)
		rc = http_error(wsi, 404, "not_found", "no such route");
	else switch (route_of(path, thread)) {
	case ROUTE_STREAM:
		if (srv->draining)
			rc = http_error(wsi, 503, "draining", "this instance is shutting down; reconnect");
		else if (srv->nconns >= (size_t)srv->cfg->max_connections)
			rc = http_error(wsi, 503, "too_many_connections",
					"this instance is at its connection limit; retry elsewhere");
		else
			return 0;
		break;
	case ROUTE_BAD_THREAD:
		rc = http_error(wsi, 400, "invalid_thread_id",
				"a thread id is 1 to 128 characters of A-Z a-z 0-9 . _ : -");
		break;
	default:
		rc = http_error(wsi, 404, "not_found", "no WebSocket endpoint at this path");
		break;
	}
	return rc < 0 ? -1 : 1;
}

/* ==== lws callback ===================================================================== */

static void drain_finish(struct tc_server *srv)
{
	void (*done)(void *) = srv->drain_done;
	srv->drain_done = NULL;
	uv_timer_stop(&srv->drain_timer);
	if (done)
		done(srv->drain_arg);
}

static int on_established(struct tc_server *srv, struct lws *wsi, struct pss *pss)
{
	char path[256], thread[TC_THREAD_ID_MAX + 1];

	/* confirm_upgrade already checked the route; the headers are still here. */
	if (lws_hdr_copy(wsi, path, sizeof(path), WSI_TOKEN_GET_URI) < 0 ||
	    route_of(path, thread) != ROUTE_STREAM)
		return -1;
	struct tc_conn *c = tc_xcalloc(1, sizeof(*c));
	c->srv = srv;
	c->wsi = wsi;
	c->session = tc_session_new(srv->env, thread, &conn_io, c);
	c->next = srv->conns;
	if (c->next)
		c->next->prev = c;
	srv->conns = c;
	srv->nconns++;
	pss->conn = c;
	tc_log(TC_LOG_DEBUG, "websocket open", TC_LS("thread", thread),
	       TC_LI("connections", srv->nconns));
	return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct tc_server *srv = lws_context_user(lws_get_context(wsi));
	struct pss *pss = user;
	/* `user` is only our pss in the WebSocket callbacks below. */
	struct tc_conn *c;

	switch (reason) {
	case LWS_CALLBACK_HTTP:
		return http_request(srv, wsi, in);

	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		return confirm_upgrade(srv, wsi, in);

	case LWS_CALLBACK_ESTABLISHED:
		return on_established(srv, wsi, pss);

	case LWS_CALLBACK_RECEIVE:
		c = pss->conn;
		return c ? conn_receive(c, in, len) : -1;

	case LWS_CALLBACK_SERVER_WRITEABLE:
		c = pss->conn;
		return c ? conn_writeable(c) : 0;

	case LWS_CALLBACK_CLOSED:
		c = pss->conn;
		if (c) {
			pss->conn = NULL;
			conn_free(c);
			if (srv->draining && srv->nconns == 0)
				drain_finish(srv);
		}
		return 0;

	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

static const struct lws_protocols protocols[] = {
	/* Index 0 serves HTTP and every WebSocket that names no subprotocol. */
	{ .name = "threadcast", .callback = callback, .per_session_data_size = sizeof(struct pss),
	  .rx_buffer_size = 4096 },
	{ .name = NULL }
};

/* ==== lifecycle =========================================================================== */

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
	srv->drain_timer.data = srv;

	memset(&info, 0, sizeof(info));
	info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_VALIDATE_UTF8 |
		       LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN;
	info.foreign_loops = loops;
	info.port = (int)cfg->port;
	/* lws binds every interface (IPv4 and IPv6) when iface is NULL. */
	info.iface = strcmp(host, "0.0.0.0") && strcmp(host, "::") && strcmp(host, "*") ? host : NULL;
	info.protocols = protocols;
	info.user = srv;
	info.pcontext = &srv->ctx;
	info.timeout_secs = (unsigned)cfg->handshake_timeout_s;
	info.vhost_name = "threadcast";
	info.server_string = "threadcast";

	srv->ctx = lws_create_context(&info);
	if (!srv->ctx) {
		tc_log(TC_LOG_ERROR, "cannot start the server (is the port in use?)",
		       TC_LS("host", host), TC_LI("port", cfg->port));
		uv_close((uv_handle_t *)&srv->drain_timer, NULL);
		uv_run(loop, UV_RUN_NOWAIT);
		free(srv);
		return NULL;
	}
	srv->vhost = lws_get_vhost_by_name(srv->ctx, "threadcast");
	srv->port = srv->vhost ? lws_get_vhost_listen_port(srv->vhost) : (int)cfg->port;
	return srv;
}

int tc_server_port(const struct tc_server *s)
{
	return s->port;
}

size_t tc_server_connections(const struct tc_server *s)
{
	return s->nconns;
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	if (srv->nconns)
		tc_log(TC_LOG_WARN, "drain timeout: closing remaining connections",
		       TC_LI("connections", srv->nconns));
	drain_finish(srv);
}

void tc_server_drain(struct tc_server *srv, void (*done)(void *), void *arg)
{
	srv->draining = true;
	srv->drain_done = done;
	srv->drain_arg = arg;
	for (struct tc_conn *c = srv->conns; c; c = c->next)
		conn_close(c, LWS_CLOSE_STATUS_GOINGAWAY, "server shutting down; reconnect", true);
	uv_timer_start(&srv->drain_timer, on_drain_timeout,
		       srv->nconns ? (uint64_t)srv->cfg->drain_timeout_ms : 0, 0);
}

void tc_server_stop(struct tc_server *srv)
{
	srv->draining = true;
	srv->drain_done = NULL;
	uv_timer_stop(&srv->drain_timer);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
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
	free(srv);
}
