#include "server.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <libwebsockets.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "auth.h"
#include "buf.h"
#include "dlist.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "util.h"

_Static_assert(TC_BUF_HEADROOM >= LWS_PRE, "tc_buf headroom must fit the lws frame header");

/* The close opcode lws uses internally (roles/ws/private-lib-roles-ws.h). */
#define WRITE_CLOSE ((enum lws_write_protocol)4)

/* Frames written per WRITEABLE callback before yielding to other clients. */
#define WRITE_BATCH 64

/* SSE writes coalesce queued events into one write of at most this size. */
#define SSE_WRITE_MAX (64 * 1024)
/* WebSocket frames queued together leave in one write of up to this many bytes. */
#define WS_COALESCE_MAX (64 * 1024)

/* ==== connections ==================================================================== */

/*
 * What a connection carries. WebSockets and SSE streams hold a session that
 * lives as long as the connection; a POST /commands holds one for a single
 * command and its reply.
 */
enum conn_kind { CONN_WS, CONN_SSE, CONN_COMMAND };

/*
 * One client connection. Allocated when the request is accepted
 * (LWS_CALLBACK_ESTABLISHED for WebSockets, the end of the request for
 * HTTP) and freed in LWS_CALLBACK_CLOSED / CLOSED_HTTP or when an HTTP
 * exchange completes — the one close path, conn_free(). Sessions and the
 * bridge never hold the conn: they hold the session, which outlives it.
 */
struct tc_conn {
	struct tc_server *srv;
	struct lws *wsi;
	enum conn_kind kind;
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
	bool headers_sent;       /* HTTP kinds: the response head is out */
	bool close_sent;         /* our close frame is out; waiting for the peer's */
	bool pinged;             /* WebSocket: a PING went out since we last heard from it */
	bool ping_due;           /* WebSocket: write a PING with the next flush */
	uint64_t heard;          /* WebSocket: loop time (ms) of its last frame, see on_idle */
	unsigned status;         /* CONN_COMMAND: HTTP status of the reply */
	int64_t auth_exp;        /* the token's exp (Unix s); 0 when auth is off */
	struct tc_dlink link;    /* on the server's conns */
	struct tc_dlink dirty;   /* on the server's flush list */
	struct tc_dlink quiet;   /* WebSocket: on the server's idle list */
};

#define CONN_OF(n, member) TC_DLIST_ENTRY(n, struct tc_conn, member)

/* A request body being read (POST /stream, POST /commands), and what it is for. */
struct body {
	enum body_kind { REQ_SSE, REQ_COMMAND } kind;
	char thread[TC_THREAD_ID_MAX + 1];
	char *data;
	size_t len;
};

/*
 * lws' per-session data, one per connection of any kind, so it is kept
 * small: an idle WebSocket uses only `conn`. For HTTP requests with a body,
 * `body` collects it until it is complete; then a conn takes over.
 */
struct pss {
	struct tc_conn *conn;
	struct body *body;
	struct tc_grant grant;   /* what the request's token allows */
};

static void body_free(struct body *b)
{
	if (b) {
		free(b->data);
		free(b);
	}
}

struct tc_server {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	const struct tc_session_env *env;
	struct tc_redis *redis;
	struct lws_context *ctx;   /* NULL once lws finished destroying it */
	struct lws_vhost *vhost;
	int port;
	struct tc_dlist conns;     /* every open connection */
	size_t nws, nsse;
	bool draining;
	uv_timer_t drain_timer, heartbeat, drain_tick, expiry, idle;
	struct tc_dlist quiet;     /* every WebSocket, least recently heard first */
	uv_check_t flush;          /* writes what this loop iteration queued */
	struct tc_dlist dirty;     /* WebSockets with frames queued since the last flush */
	size_t drain_per_tick;       /* connections to close per tick while draining */
	char too_big[64];            /* close reason naming --max-frame-bytes */
	struct tc_buf *heartbeat_frame;
	void (*drain_done)(void *);
	void *drain_arg;
};

static void on_flush(uv_check_t *h);

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
 * reading never will). SSE and HTTP connections just close.
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

/*
 * WebSocket frames are not written as they are queued but once per loop
 * iteration, from a check handle: every frame an iteration produced for a
 * connection (a batch of doorbells read from Redis, a replay step, a reply)
 * leaves in one send, and the common case needs no POLLOUT round trip
 * through epoll at all.
 */
static void mark_dirty(struct tc_conn *c)
{
	struct tc_server *srv = c->srv;
	if (tc_dlist_linked(&srv->dirty, &c->dirty))
		return;
	if (uv_is_closing((uv_handle_t *)&srv->flush)) { /* shutting down */
		request_write(c);
		return;
	}
	if (!srv->dirty.count)
		uv_check_start(&srv->flush, on_flush);
	tc_dlist_push_head(&srv->dirty, &c->dirty);
}

/*
 * Closes c's socket now, without a close frame; lws calls CLOSED, which
 * frees c. Not LWS_TO_KILL_ASYNC from our own handles: that waits for lws'
 * next service pass, which an idle server may not have for a long time.
 */
static void conn_kill(struct tc_conn *c)
{
	lws_set_timeout(c->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_SYNC);
}

/*
 * Idle WebSockets. One silent for --ping-interval gets a PING; one silent for
 * --idle-timeout (PONGs and any other frame count) is dropped. lws could do
 * this (retry_and_idle_policy), but it files every connection's deadline in
 * one sorted list and walks that list on each insertion, once per PONG and
 * once per accepted connection: with 10,000 WebSockets that was 100 us per
 * PONG. Here the list is kept in the order connections were last heard
 * from, which is also the order of their deadlines: a frame moves its
 * connection to the tail, and a timer reads from the head until it meets
 * one heard from recently.
 */
#define IDLE_TICK_MS 250

/* We heard from c (or cannot blame it for silence): it goes to the tail. */
static void heard_from(struct tc_conn *c)
{
	struct tc_server *srv = c->srv;
	uint64_t now = uv_now(srv->loop);

	c->pinged = false;
	if (srv->quiet.tail == &c->quiet && c->heard == now)
		return;
	tc_dlist_remove(&srv->quiet, &c->quiet);
	c->heard = now;
	tc_dlist_push_tail(&srv->quiet, &c->quiet);
}

static void on_idle(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	const struct tc_config *cfg = srv->cfg;
	uint64_t now = uv_now(srv->loop);
	struct tc_dlink *n, *next;

	for (n = srv->quiet.head; n; n = next) {
		struct tc_conn *c = CONN_OF(n, quiet);
		next = n->next;
		uint64_t silent = now - c->heard;
		if (silent < (uint64_t)cfg->ping_interval_s * 1000)
			break; /* and so is everyone after it */
		if (c->rx_off) {
			heard_from(c); /* we are not reading it: its PONG may be waiting */
		} else if (silent >= (uint64_t)cfg->idle_timeout_s * 1000) {
			tc_log(TC_LOG_INFO, "idle websocket dropped", TC_LS("thread", tc_session_thread(c->session)),
			       TC_LI("silent_ms", (long long)silent));
			conn_kill(c); /* frees c, and unlinks it */
		} else if (!c->pinged && !c->close_code) {
			c->pinged = true;
			c->ping_due = true;
			mark_dirty(c);
		}
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
		tc_metrics.slow_consumer_cuts++;
		tc_log(TC_LOG_WARN, "slow consumer cut off", TC_LS("thread", tc_session_thread(c->session)),
		       TC_LS("transport", c->kind == CONN_SSE ? "sse" : "websocket"),
		       TC_LI("queued_bytes", c->out.bytes), TC_LI("limit", cfg->max_queue_bytes));
		conn_close(c, TC_CLOSE_TRY_AGAIN, tc_close_reason(TC_CLOSE_TRY_AGAIN), false);
		return;
	}
	tc_bufq_push(&c->out, b);
	if (!c->queue_full && c->out.bytes > (size_t)cfg->max_queue_bytes / 2) {
		c->queue_full = true;
		update_rx(c);
	}
	if (c->kind == CONN_WS)
		mark_dirty(c);
	else
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
	if (c->kind == CONN_WS)
		update_rx(c);
}

static void conn_session_close(void *ctx, int code, const char *reason)
{
	conn_close(ctx, (uint16_t)code, reason, false);
}

/* SSE: a stream whose history is gone starts with a "resync" event. */
static void sse_started(void *ctx, bool restored, bool has_missed, uint64_t missed)
{
	char msg[160];
	if (restored)
		return;
	int n = has_missed ?
		snprintf(msg, sizeof(msg), "event: resync\ndata: {\"restored\":false,\"missedEvents\":%llu}\n\n",
			 (unsigned long long)missed) :
		snprintf(msg, sizeof(msg), "event: resync\ndata: {\"restored\":false}\n\n");
	conn_send(ctx, tc_buf_copy(msg, (size_t)n));
}

static void no_stream(void *ctx, bool restored, bool has_missed, uint64_t missed)
{
}

static const struct tc_session_io ws_io = {
	.kind = TC_FRAME_WS,
	.send = conn_send,
	.queued = conn_queued,
	.set_reading = conn_set_reading,
	.close = conn_session_close,
	.stream_started = no_stream,
};

static const struct tc_session_io sse_io = {
	.kind = TC_FRAME_SSE,
	.send = conn_send,
	.queued = conn_queued,
	.set_reading = conn_set_reading,
	.close = conn_session_close,
	.stream_started = sse_started,
};

static struct tc_conn *conn_new(struct tc_server *srv, struct lws *wsi, enum conn_kind kind,
				const char *thread)
{
	struct tc_conn *c = tc_xcalloc(1, sizeof(*c));
	c->srv = srv;
	c->wsi = wsi;
	c->kind = kind;
	c->session = tc_session_new(srv->env, thread, kind == CONN_SSE ? &sse_io : &ws_io, c);
	tc_dlist_push_head(&srv->conns, &c->link);
	srv->nws += kind == CONN_WS;
	srv->nsse += kind == CONN_SSE;
	return c;
}

static void drain_finish(struct tc_server *srv);

static void conn_free(struct tc_conn *c)
{
	struct tc_server *srv = c->srv;

	tc_dlist_remove(&srv->conns, &c->link);
	srv->nws -= c->kind == CONN_WS;
	srv->nsse -= c->kind == CONN_SSE;
	tc_dlist_remove(&srv->dirty, &c->dirty);
	tc_dlist_remove(&srv->quiet, &c->quiet);
	tc_session_close(c->session);
	tc_bufq_clear(&c->out);
	free(c->rx);
	free(c);
	if (srv->draining && srv->conns.count == 0)
		drain_finish(srv);
}

/*
 * Writes the close frame ourselves and waits (up to 3 s) for the peer's
 * close frame before the socket goes: dropping it at once would make the
 * kernel answer a client that is still sending with a reset, and the reset
 * can destroy our close frame in the client's receive buffer. The usual
 * lws_close_reason() + return -1 does not work from WRITEABLE with Debian's
 * lws 4.1.6 on libuv: its service loop closes the wsi a second time at
 * once, before the close frame leaves.
 */
static int send_close(struct tc_conn *c)
{
	if (c->close_sent)
		return 0;
	c->close_sent = true;
	unsigned char buf[LWS_PRE + 125];
	size_t rlen = strlen(c->close_reason);

	if (rlen > sizeof(buf) - LWS_PRE - 2)
		rlen = sizeof(buf) - LWS_PRE - 2;
	buf[LWS_PRE] = (unsigned char)(c->close_code >> 8);
	buf[LWS_PRE + 1] = (unsigned char)(c->close_code & 0xff);
	memcpy(buf + LWS_PRE + 2, c->close_reason, rlen);
	if (lws_write(c->wsi, buf + LWS_PRE, rlen + 2, WRITE_CLOSE) < 0)
		return -1;
	lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_ACK, 3);
	return 0;
}

/* After writing: resume reading, let a paced replay go on, or close. */
static int after_write(struct tc_conn *c)
{
	if (c->out.bytes <= (size_t)c->srv->cfg->max_queue_bytes / 4) {
		if (c->queue_full) {
			c->queue_full = false;
			if (c->kind == CONN_WS)
				update_rx(c);
		}
		tc_session_on_drained(c->session); /* a paced replay may go on */
	}
	if (c->out.count || c->ping_due) {
		request_write(c);
		return 0;
	}
	if (c->close_code)
		return c->kind == CONN_WS ? send_close(c) : -1;
	return 0;
}

/* A server-to-client text frame header (FIN, unmasked) for a payload below
 * 64 KiB — the only ones ws_flush frames itself. */
#define WS_HEADER_MAX 4
static size_t ws_header(unsigned char *h, size_t len)
{
	h[0] = 0x81;
	if (len < 126) {
		h[1] = (unsigned char)len;
		return 2;
	}
	h[1] = 126;
	h[2] = (unsigned char)(len >> 8);
	h[3] = (unsigned char)len;
	return 4;
}

/*
 * Writes queued WebSocket frames. A frame alone goes through lws_write from
 * its own buffer (it has LWS_PRE headroom for the header); several are framed
 * here into one buffer and leave in one raw write, so the client's side pays
 * per segment less too. Stops when lws had to keep part of a write
 * (lws_partial_buffered(): a flag, where lws_send_pipe_choked() costs a
 * poll()); lws finishes that part before it calls WRITEABLE again.
 * Returns -1 on a write error.
 */
static int ws_flush(struct tc_conn *c)
{
	static unsigned char buf[LWS_PRE + WS_COALESCE_MAX];
	struct tc_buf *b;
	int writes = 0;

	if (c->ping_due && !lws_partial_buffered(c->wsi)) {
		/* With a payload: lws does not report empty PONGs (4.1.6). */
		c->ping_due = false;
		buf[LWS_PRE] = 't';
		if (lws_write(c->wsi, buf + LWS_PRE, 1, LWS_WRITE_PING) < 0)
			return -1;
	}
	while ((b = tc_bufq_peek(&c->out)) && writes++ < WRITE_BATCH && !lws_partial_buffered(c->wsi)) {
		if (c->out.count == 1 || WS_HEADER_MAX + b->len > WS_COALESCE_MAX) {
			if (lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_TEXT) < 0)
				return -1;
			tc_metrics.bytes_out += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
			continue;
		}
		size_t n = 0;
		while ((b = tc_bufq_peek(&c->out)) && n + WS_HEADER_MAX + b->len <= WS_COALESCE_MAX) {
			n += ws_header(buf + LWS_PRE + n, b->len);
			memcpy(buf + LWS_PRE + n, tc_buf_data(b), b->len);
			n += b->len;
			tc_metrics.bytes_out += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
		}
		if (lws_write(c->wsi, buf + LWS_PRE, n, LWS_WRITE_RAW) < 0)
			return -1;
	}
	return 0;
}

/* LWS_CALLBACK_SERVER_WRITEABLE. Returns -1 when lws should close. */
static int ws_writeable(struct tc_conn *c)
{
	c->want_write = false;
	tc_dlist_remove(&c->srv->dirty, &c->dirty);
	if (ws_flush(c) < 0)
		return -1;
	return after_write(c);
}

/* The check handle: each connection that queued frames this iteration writes them now. */
static void on_flush(uv_check_t *h)
{
	struct tc_server *srv = h->data;
	struct tc_dlink *n;

	while ((n = srv->dirty.head)) {
		struct tc_conn *c = CONN_OF(n, dirty);
		tc_dlist_remove(&srv->dirty, n);
		/* Closing, or WRITEABLE already on its way: that path writes. */
		if (c->close_code || c->want_write)
			continue;
		if (lws_partial_buffered(c->wsi)) {
			request_write(c);
			continue;
		}
		if (ws_flush(c) < 0) {
			conn_kill(c);
			continue;
		}
		after_write(c); /* close_code is 0: this never writes a close frame */
	}
	uv_check_stop(h);
}

/* SSE: events are plain bytes, so queued ones leave together in one write. */
static int sse_writeable(struct tc_conn *c)
{
	static unsigned char buf[LWS_PRE + SSE_WRITE_MAX];
	struct tc_buf *b;

	c->want_write = false;
	while ((b = tc_bufq_peek(&c->out)) && !lws_partial_buffered(c->wsi)) {
		size_t n = 0;
		if (b->len >= SSE_WRITE_MAX) {
			/* A big event goes on its own, straight from its buffer. */
			if (lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP) < 0)
				return -1;
			tc_metrics.bytes_out += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
			continue;
		}
		while ((b = tc_bufq_peek(&c->out)) && n + b->len <= SSE_WRITE_MAX) {
			memcpy(buf + LWS_PRE + n, tc_buf_data(b), b->len);
			n += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
		}
		if (lws_write(c->wsi, buf + LWS_PRE, n, LWS_WRITE_HTTP) < 0)
			return -1;
		tc_metrics.bytes_out += n;
	}
	return after_write(c);
}

static int ws_receive(struct tc_conn *c, const char *in, size_t len)
{
	const size_t max = (size_t)c->srv->cfg->max_frame_bytes;

	if (c->close_code)
		return 0; /* closing: what still arrives is read and dropped */
	if (lws_frame_is_binary(c->wsi)) {
		conn_close(c, TC_CLOSE_UNSUPPORTED_DATA, tc_close_reason(TC_CLOSE_UNSUPPORTED_DATA), false);
		return 0;
	}
	if (c->rx_len + len > max) {
		tc_log(TC_LOG_INFO, "oversized message refused",
		       TC_LS("thread", tc_session_thread(c->session)), TC_LI("limit", max));
		free(c->rx);
		c->rx = NULL;
		c->rx_len = c->rx_cap = 0;
		conn_close(c, TC_CLOSE_TOO_BIG, c->srv->too_big, false);
		return 0;
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

enum route {
	ROUTE_NOT_FOUND, ROUTE_HEALTHZ, ROUTE_READYZ, ROUTE_METRICS, ROUTE_STREAM, ROUTE_COMMANDS,
	ROUTE_BAD_THREAD
};

/* Maps a request path to a route; for thread routes, copies the thread id. */
static enum route route_of(const char *path, char thread[TC_THREAD_ID_MAX + 1])
{
	static const char pre[] = "/threads/";
	static const struct { const char *suffix; enum route route; } tails[] = {
		{ "/stream", ROUTE_STREAM }, { "/commands", ROUTE_COMMANDS },
	};
	size_t len = strlen(path);

	if (!strcmp(path, "/healthz"))
		return ROUTE_HEALTHZ;
	if (!strcmp(path, "/readyz"))
		return ROUTE_READYZ;
	if (!strcmp(path, "/metrics"))
		return ROUTE_METRICS;
	if (strncmp(path, pre, sizeof(pre) - 1))
		return ROUTE_NOT_FOUND;
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		size_t sl = strlen(tails[i].suffix);
		if (len < sizeof(pre) - 1 + sl || strcmp(path + len - sl, tails[i].suffix))
			continue;
		const char *id = path + sizeof(pre) - 1;
		size_t idlen = len - (sizeof(pre) - 1) - sl;
		if (!tc_thread_id_valid(id, idlen))
			return ROUTE_BAD_THREAD;
		memcpy(thread, id, idlen);
		thread[idlen] = '\0';
		return tails[i].route;
	}
	return ROUTE_NOT_FOUND;
}

/* Writes a response head; content_len LWS_ILLEGAL_HTTP_CONTENT_LEN streams. */
static int http_head(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len)
{
	unsigned char buf[LWS_PRE + 512];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;

	if (lws_add_http_common_headers(wsi, status, type, content_len, &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
					(const unsigned char *)"no-store", 8, &p, end))
		return -1;
	/* Every 503 here is passing (draining, full, Redis away): say when to retry. */
	if (status == 503 &&
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"retry-after:",
					(const unsigned char *)"1", 1, &p, end))
		return -1;
	if (content_len == LWS_ILLEGAL_HTTP_CONTENT_LEN &&
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"x-accel-buffering:",
					(const unsigned char *)"no", 2, &p, end))
		return -1; /* proxies must pass events through at once */
	return lws_finalize_write_http_header(wsi, start, &p, end) ? -1 : 0;
}

/* Sends a complete response. Returns what the lws callback should return. */
static int http_send(struct lws *wsi, unsigned status, const char *type, const char *body)
{
	size_t len = strlen(body);
	unsigned char *buf = tc_xmalloc(LWS_PRE + len);
	int rc = -1;

	memcpy(buf + LWS_PRE, body, len);
	if (!http_head(wsi, status, type, len) &&
	    lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL) == (int)len)
		rc = lws_http_transaction_completed(wsi) ? -1 : 0;
	free(buf);
	return rc;
}

static int http_json(struct lws *wsi, unsigned status, const char *body)
{
	return http_send(wsi, status, "application/json", body);
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

static const char bad_thread_msg[] = "a thread id is 1 to 128 characters of A-Z a-z 0-9 . _ : -";

static int http_readyz(struct tc_server *srv, struct lws *wsi)
{
	bool ready = !srv->draining && tc_redis_ready(srv->redis);
	char body[384];
	snprintf(body, sizeof(body),
		 "{\"ready\":%s,\"redis\":\"%s\",\"redisCluster\":%s,\"redisMasters\":%u,"
		 "\"draining\":%s,\"connections\":%zu,\"websockets\":%zu,\"sse\":%zu}",
		 ready ? "true" : "false", tc_redis_status(srv->redis),
		 tc_redis_is_cluster(srv->redis) ? "true" : "false", tc_redis_nodes(srv->redis),
		 srv->draining ? "true" : "false", srv->conns.count, srv->nws, srv->nsse);
	return http_json(wsi, ready ? 200 : 503, body);
}

static int http_metrics(struct tc_server *srv, struct lws *wsi)
{
	struct tc_metrics_gauges g = {
		.websockets = srv->nws,
		.sse = srv->nsse,
		.http_commands = srv->conns.count - srv->nws - srv->nsse,
		.threads = tc_hub_threads(srv->env->hub),
		.pending_commands = srv->env->bridge ? tc_bridge_pending(srv->env->bridge) : 0,
		.redis_up = tc_redis_ready(srv->redis),
	};
	char *text = tc_metrics_render(&g);
	int rc = http_send(wsi, 200, "text/plain; version=0.0.4", text);
	free(text);
	return rc;
}

/* ---- --static-dir: the demo page and the client library ---------------------------------- */

static const struct { const char *ext, *mime; } mime_types[] = {
	{ ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
	{ ".mjs", "text/javascript; charset=utf-8" }, { ".css", "text/css; charset=utf-8" },
	{ ".json", "application/json" },           { ".svg", "image/svg+xml" },
	{ ".png", "image/png" },                   { ".ico", "image/x-icon" },
	{ ".txt", "text/plain; charset=utf-8" },   { ".ts", "text/plain; charset=utf-8" },
};

/* Plain relative names only: [A-Za-z0-9._-] segments, none starting with a dot
 * (no "..", no hidden files), no empty segment but a trailing one. */
static bool static_path_ok(const char *path)
{
	size_t len = strlen(path);
	if (path[0] != '/' || len > 200)
		return false;
	for (size_t i = 1; i < len; i++) {
		char ch = path[i];
		bool seg_start = path[i - 1] == '/';
		if ((seg_start && (ch == '.' || ch == '/')) ||
		    !(isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-' || ch == '/'))
			return false;
	}
	return true;
}

static int http_static(struct tc_server *srv, struct lws *wsi, const char *path)
{
	static const char headers[] = "cache-control: no-cache\x0d\x0a"
				      "x-content-type-options: nosniff\x0d\x0a";
	char file[512];
	struct stat st;
	size_t len = strlen(path);
	const char *mime = NULL;

	if (!static_path_ok(path))
		return http_error(wsi, 404, "not_found", "no such route or file");
	snprintf(file, sizeof(file), "%s%s%s", srv->cfg->static_dir, path,
		 path[len - 1] == '/' ? "index.html" : "");
	if (stat(file, &st))
		return http_error(wsi, 404, "not_found", "no such route or file");
	if (S_ISDIR(st.st_mode)) {
		/* A directory without its slash: send the browser to it, so that the
		 * page's relative URLs resolve inside it. */
		unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start,
			      *end = buf + sizeof(buf) - 1;
		char loc[256];
		int n = snprintf(loc, sizeof(loc), "%s/", path);
		if (lws_http_redirect(wsi, HTTP_STATUS_MOVED_PERMANENTLY, (unsigned char *)loc, n, &p, end) < 0)
			return -1;
		return lws_http_transaction_completed(wsi) ? -1 : 0;
	}
	for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++) {
		size_t el = strlen(mime_types[i].ext);
		if (strlen(file) > el && !strcmp(file + strlen(file) - el, mime_types[i].ext))
			mime = mime_types[i].mime;
	}
	if (!S_ISREG(st.st_mode) || !mime)
		return http_error(wsi, 404, "not_found", "no such route or file");
	int n = lws_serve_http_file(wsi, file, mime, headers, (int)sizeof(headers) - 1);
	return n < 0 || (n > 0 && lws_http_transaction_completed(wsi)) ? -1 : 0;
}

/* An admission check shared by every kind of client connection. */
static int refuse_if_full(struct tc_server *srv, struct lws *wsi)
{
	if (srv->draining)
		return http_error(wsi, 503, "draining", "this instance is shutting down; reconnect");
	if (srv->conns.count >= (size_t)srv->cfg->max_connections)
		return http_error(wsi, 503, "too_many_connections",
				  "this instance is at its connection limit; retry elsewhere");
	return 1; /* admitted */
}

/* Value of header token, or NULL; buf holds it. */
static const char *header(struct lws *wsi, enum lws_token_indexes tok, char *buf, int len)
{
	return lws_hdr_copy(wsi, buf, len, tok) > 0 ? buf : NULL;
}

/*
 * May this request read thread? Finds the token (Authorization: Bearer, or
 * the access_token query parameter, which browsers need for WebSockets and
 * EventSource) and checks Origin. Returns 0 and fills g, or the HTTP status
 * to refuse with (401, 403) and a message in why.
 */
static unsigned check_access(struct tc_server *srv, struct lws *wsi, const char *thread,
			     struct tc_grant *g, char *why, size_t whylen)
{
	char origin[256], hdr[4096], arg[4096];
	const char *token = NULL;

	*g = (struct tc_grant){ .exp = 0, .commands = true };
	if (!tc_origin_allowed(srv->cfg, header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin)))) {
		snprintf(why, whylen, "origin %.150s is not allowed", origin);
		return 403;
	}
	if (!srv->env->auth)
		return 0;
	if (header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, hdr, sizeof(hdr)) && !strncasecmp(hdr, "Bearer ", 7))
		token = hdr + 7;
	else
		token = lws_get_urlarg_by_name(wsi, "access_token=", arg, sizeof(arg));
	switch (tc_auth_check(srv->env->auth, token, thread, tc_wall_ms() / 1000, g, why, whylen)) {
	case TC_AUTH_OK:
		return 0;
	case TC_AUTH_FORBIDDEN:
		return 403;
	default:
		return 401;
	}
}

static int refuse_access(struct lws *wsi, unsigned status, const char *why)
{
	return http_error(wsi, status, status == 401 ? "unauthorized" : "forbidden", why);
}

/* The Last-Event-ID header (not one lws knows by name), or NULL. */
static const char *last_event_id(struct lws *wsi, char *buf, int len)
{
	static const char *const names[] = { "last-event-id:", "Last-Event-ID:", "Last-Event-Id:" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (lws_hdr_custom_copy(wsi, buf, len, names[i], (int)strlen(names[i])) > 0)
			return buf;
	return NULL;
}

/* Starts an SSE stream for request (an EventStreamRequest object). */
static int sse_start(struct tc_server *srv, struct lws *wsi, struct pss *pss, const char *thread,
		     const cJSON *request)
{
	char leid[128];
	struct tc_error err;

	int admitted = refuse_if_full(srv, wsi);
	if (admitted != 1)
		return admitted;
	/* Refused before the head is sent, while the client can still be told
	 * plainly; a WebSocket is told in the reply to its subscribe instead. */
	if (!tc_redis_cmd_up(srv->redis))
		return http_error(wsi, 503, "unavailable", TC_MSG_REDIS_DOWN);
	struct tc_conn *c = conn_new(srv, wsi, CONN_SSE, thread);
	c->auth_exp = pss->grant.exp;
	/* Browsers resend the last id on reconnect; it wins over `since`. */
	const char *last = last_event_id(wsi, leid, sizeof(leid));
	if (tc_session_open_stream(c->session, request, last, &err)) {
		conn_free(c);
		return http_error(wsi, 400, "invalid_argument", err.message);
	}
	pss->conn = c;
	if (http_head(wsi, 200, "text/event-stream", LWS_ILLEGAL_HTTP_CONTENT_LEN))
		return -1;
	c->headers_sent = true;
	lws_http_mark_sse(wsi);
	tc_log(TC_LOG_DEBUG, "sse open", TC_LS("thread", thread), TC_LI("connections", srv->conns.count));
	return 0;
}

/*
 * GET /threads/:id/stream with Accept: text/event-stream, for EventSource:
 * channels=a,b  namespaces=<JSON array of arrays>  depth=N  since=N
 */
static int sse_from_query(struct tc_server *srv, struct lws *wsi, struct pss *pss, const char *thread)
{
	/* lws_get_urlarg_by_name() copies "name=value" and points past "name=". */
	static const char *const names[] = { "channels=", "namespaces=", "depth=", "since=" };
	char bufs[4][2048];
	const char *v[4];
	struct tc_error err;

	for (int i = 0; i < 4; i++)
		v[i] = lws_get_urlarg_by_name(wsi, names[i], bufs[i], sizeof(bufs[i]));
	cJSON *req = tc_stream_request_from_query(v[0], v[1], v[2], v[3], &err);
	if (!req)
		return http_error(wsi, 400, "invalid_argument", err.message);
	int rc = sse_start(srv, wsi, pss, thread, req);
	cJSON_Delete(req);
	return rc;
}

static bool accepts_event_stream(struct lws *wsi)
{
	char accept[256];
	return header(wsi, WSI_TOKEN_HTTP_ACCEPT, accept, sizeof(accept)) &&
	       strstr(accept, "text/event-stream");
}

/* Bodies are read for POST /stream and POST /commands, up to --max-frame-bytes. */
static int expect_body(struct tc_server *srv, struct lws *wsi, struct pss *pss, enum body_kind kind,
		       const char *thread)
{
	char cl[32];
	if (header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, cl, sizeof(cl)) &&
	    strtoull(cl, NULL, 10) > (unsigned long long)srv->cfg->max_frame_bytes)
		return http_error(wsi, 413, "payload_too_large", "the request body exceeds --max-frame-bytes");
	body_free(pss->body);
	pss->body = tc_xcalloc(1, sizeof(*pss->body));
	pss->body->kind = kind;
	snprintf(pss->body->thread, sizeof(pss->body->thread), "%s", thread);
	return 0; /* lws delivers the body next */
}

static int http_request(struct tc_server *srv, struct lws *wsi, struct pss *pss, const char *path)
{
	char thread[TC_THREAD_ID_MAX + 1];
	char *uri;
	int urilen;
	int method = lws_http_get_uri_and_method(wsi, &uri, &urilen);
	enum route r = route_of(path, thread);

	switch (r) {
	case ROUTE_NOT_FOUND:
		if (*srv->cfg->static_dir && method == LWSHUMETH_GET)
			return http_static(srv, wsi, path);
		return http_error(wsi, 404, "not_found", "no such route");
	case ROUTE_BAD_THREAD:
		return http_error(wsi, 400, "invalid_thread_id", bad_thread_msg);
	case ROUTE_HEALTHZ:
	case ROUTE_READYZ:
	case ROUTE_METRICS:
		if (method != LWSHUMETH_GET)
			return http_error(wsi, 405, "method_not_allowed", "only GET is served here");
		if (r == ROUTE_READYZ)
			return http_readyz(srv, wsi);
		if (r == ROUTE_METRICS)
			return http_metrics(srv, wsi);
		return http_json(wsi, 200, "{\"status\":\"ok\",\"version\":\"" TC_VERSION "\"}");
	case ROUTE_STREAM:
	case ROUTE_COMMANDS: {
		char why[200];
		unsigned status = check_access(srv, wsi, thread, &pss->grant, why, sizeof(why));
		if (status)
			return refuse_access(wsi, status, why);
		break;
	}
	}
	switch (r) {
	case ROUTE_STREAM:
		if (method == LWSHUMETH_POST)
			return expect_body(srv, wsi, pss, REQ_SSE, thread);
		if (method != LWSHUMETH_GET)
			return http_error(wsi, 405, "method_not_allowed", "GET (WebSocket or SSE) or POST (SSE)");
		if (accepts_event_stream(wsi))
			return sse_from_query(srv, wsi, pss, thread);
		return http_error(wsi, 426, "upgrade_required",
				  "this endpoint is a WebSocket (send Upgrade: websocket) or an SSE stream "
				  "(send Accept: text/event-stream, or POST an EventStreamRequest)");
	case ROUTE_COMMANDS:
		if (method != LWSHUMETH_POST)
			return http_error(wsi, 405, "method_not_allowed", "POST one command as JSON");
		return expect_body(srv, wsi, pss, REQ_COMMAND, thread);
	default:
		return -1;
	}
}

static int on_body(struct tc_server *srv, struct lws *wsi, struct pss *pss, const char *in, size_t len)
{
	struct body *b = pss->body;
	if (!b)
		return 0; /* a body nobody asked for is ignored */
	if (b->len + len > (size_t)srv->cfg->max_frame_bytes) {
		body_free(b);
		pss->body = NULL;
		return http_error(wsi, 413, "payload_too_large", "the request body exceeds --max-frame-bytes");
	}
	b->data = tc_xrealloc(b->data, b->len + len + 1);
	memcpy(b->data + b->len, in, len);
	b->len += len;
	return 0;
}

/* The reply of a POST /commands: 200 with the response, 400 if no command. */
static int command_writeable(struct tc_conn *c)
{
	struct tc_buf *b = tc_bufq_pop(&c->out);
	c->want_write = false;
	if (!b)
		return 0;
	int rc = -1;
	if (!http_head(c->wsi, c->status, "application/json", b->len) &&
	    lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP_FINAL) == (int)b->len)
		rc = 0;
	tc_buf_unref(b);
	struct lws *wsi = c->wsi;
	struct pss *pss = lws_wsi_user(wsi);
	pss->conn = NULL;
	conn_free(c); /* the exchange is over; the connection may carry another */
	if (rc)
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int run_command(struct tc_server *srv, struct lws *wsi, struct pss *pss, const char *thread,
		       const char *body, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;

	if (tc_command_parse(body, len, &cmd, &err)) {
		struct tc_buf *b = tc_response_error(cmd.has_id, cmd.id, err.code, err.message);
		tc_command_free(&cmd);
		int rc = http_json(wsi, 400, (const char *)tc_buf_data(b));
		tc_buf_unref(b);
		return rc;
	}
	if (cmd.method == TC_METHOD_SUBSCRIBE || cmd.method == TC_METHOD_UNSUBSCRIBE ||
	    cmd.method == TC_METHOD_RECONNECT) {
		struct tc_buf *b = tc_response_error(true, cmd.id, TC_ERR_NOT_SUPPORTED,
			"subscriptions live on a connection: use the WebSocket, or POST "
			"/threads/:thread_id/stream for SSE");
		tc_command_free(&cmd);
		int rc = http_json(wsi, 200, (const char *)tc_buf_data(b));
		tc_buf_unref(b);
		return rc;
	}
	tc_command_free(&cmd);
	int admitted = refuse_if_full(srv, wsi);
	if (admitted != 1)
		return admitted;
	struct tc_conn *c = conn_new(srv, wsi, CONN_COMMAND, thread);
	c->status = 200;
	tc_session_allow_commands(c->session, pss->grant.commands);
	pss->conn = c;
	/* The session answers through conn_send; command_writeable sends it. */
	tc_session_on_frame(c->session, body, len);
	return 0;
}

/*
 * The body is complete. Whatever answers the request may complete the HTTP
 * transaction, and lws then frees the pss: take what is needed out first.
 */
static int on_body_complete(struct tc_server *srv, struct lws *wsi, struct pss *pss)
{
	struct body *b = pss->body;
	const char *data;
	int rc = 0;

	if (!b)
		return 0;
	pss->body = NULL;
	data = b->data ? b->data : "";
	if (b->kind == REQ_COMMAND) {
		rc = run_command(srv, wsi, pss, b->thread, data, b->len);
	} else {
		cJSON *request = cJSON_ParseWithLength(data, b->len);
		if (!cJSON_IsObject(request))
			rc = http_error(wsi, 400, "invalid_argument",
					"the body must be an EventStreamRequest: {\"channels\":[…], "
					"\"namespaces\"?, \"depth\"?, \"since\"?}");
		else
			rc = sse_start(srv, wsi, pss, b->thread, request);
		cJSON_Delete(request);
	}
	body_free(b);
	return rc;
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
	case ROUTE_STREAM: {
		char why[200];
		struct tc_grant g;
		unsigned status = check_access(srv, wsi, thread, &g, why, sizeof(why));
		if (status) {
			rc = refuse_access(wsi, status, why);
			break;
		}
		rc = refuse_if_full(srv, wsi);
		if (rc == 1)
			return 0;
		break;
	}
	case ROUTE_BAD_THREAD:
		rc = http_error(wsi, 400, "invalid_thread_id", bad_thread_msg);
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
	uv_timer_stop(&srv->drain_tick);
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
	/* Checked at the upgrade already; this reads the grant for the conn. */
	char why[200];
	struct tc_grant g;
	if (check_access(srv, wsi, thread, &g, why, sizeof(why)))
		return -1;
	pss->conn = conn_new(srv, wsi, CONN_WS, thread);
	pss->conn->auth_exp = g.exp;
	heard_from(pss->conn);
	tc_session_allow_commands(pss->conn->session, g.commands);
	tc_log(TC_LOG_DEBUG, "websocket open", TC_LS("thread", thread),
	       TC_LI("connections", srv->conns.count));
	return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct tc_server *srv = lws_context_user(lws_get_context(wsi));
	/* `user` is only our pss in the callbacks below that use it. */
	struct pss *pss = user;
	struct tc_conn *c;

	switch (reason) {
	case LWS_CALLBACK_HTTP:
		return http_request(srv, wsi, pss, in);

	case LWS_CALLBACK_HTTP_BODY:
		return on_body(srv, wsi, pss, in, len);

	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		return on_body_complete(srv, wsi, pss);

	case LWS_CALLBACK_HTTP_WRITEABLE:
		c = pss ? pss->conn : NULL;
		if (!c)
			return 0;
		return c->kind == CONN_SSE ? sse_writeable(c) : command_writeable(c);

	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		return confirm_upgrade(srv, wsi, in);

	case LWS_CALLBACK_ESTABLISHED:
		return on_established(srv, wsi, pss);

	case LWS_CALLBACK_RECEIVE:
		c = pss->conn;
		if (!c)
			return -1;
		heard_from(c);
		return ws_receive(c, in, len);

	case LWS_CALLBACK_RECEIVE_PONG:
		if ((c = pss->conn))
			heard_from(c);
		return 0;

	case LWS_CALLBACK_SERVER_WRITEABLE:
		c = pss->conn;
		return c ? ws_writeable(c) : 0;

	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		/* After our own close frame, the peer's is the ack: just close
		 * (nonzero); otherwise lws echoes it, as the protocol wants. */
		c = pss->conn;
		return c && c->close_sent ? -1 : 0;

	case LWS_CALLBACK_CLOSED:
	case LWS_CALLBACK_CLOSED_HTTP:
		if (pss) {
			body_free(pss->body);
			pss->body = NULL;
			if ((c = pss->conn)) {
				pss->conn = NULL;
				conn_free(c);
			}
		}
		return 0;

	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

static const struct lws_protocols protocols[] = {
	/* Index 0 serves HTTP and every WebSocket that names no subprotocol.
	 * lws gives each WebSocket a receive buffer of rx_buffer_size that it
	 * keeps for the connection's life. Commands are small; longer messages
	 * arrive in pieces that ws_receive joins; 256 bytes instead of lws'
	 * 4 KiB default saves 3.75 KiB of RSS per idle connection.
	 * tx_packet_size must be set with it: left 0, lws caps every send() at
	 * rx_buffer_size and drains the rest one such piece per POLLOUT, which
	 * would cut a coalesced 64 KiB write into 240 segments. */
	{ .name = "threadcast", .callback = callback, .per_session_data_size = sizeof(struct pss),
	  .rx_buffer_size = 256, .tx_packet_size = WS_COALESCE_MAX },
	{ .name = NULL }
};

/* ==== lifecycle =========================================================================== */

/* Tokens expire on open connections too: closed with 1008 at their exp. */
static void on_expiry(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	int64_t now = tc_wall_ms() / 1000;
	for (struct tc_dlink *n = srv->conns.head; n; n = n->next) {
		struct tc_conn *c = CONN_OF(n, link);
		if (c->auth_exp && c->auth_exp <= now && !c->close_code)
			conn_close(c, TC_CLOSE_POLICY, "token expired; reconnect with a fresh one", false);
	}
}

static void on_heartbeat(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	/* One shared buffer for every stream; proxies see traffic and keep them. */
	for (struct tc_dlink *n = srv->conns.head; n; n = n->next) {
		struct tc_conn *c = CONN_OF(n, link);
		if (c->kind == CONN_SSE && c->headers_sent && !c->out.count)
			conn_send(c, tc_buf_ref(srv->heartbeat_frame));
	}
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
	uv_timer_init(loop, &srv->heartbeat);
	uv_timer_init(loop, &srv->drain_tick);
	uv_timer_init(loop, &srv->expiry);
	uv_check_init(loop, &srv->flush);
	srv->flush.data = srv;
	uv_timer_init(loop, &srv->idle);
	srv->drain_timer.data = srv->heartbeat.data = srv->drain_tick.data = srv->expiry.data = srv;
	srv->idle.data = srv;
	srv->heartbeat_frame = tc_buf_copy(": heartbeat\n\n", 13);
	snprintf(srv->too_big, sizeof(srv->too_big), "message larger than %lld bytes", cfg->max_frame_bytes);

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
	info.timeout_secs_ah_idle = (unsigned)cfg->handshake_timeout_s; /* silent sockets */
	/* An all-zero policy keeps lws' own idle timers off (see on_idle). */
	static const lws_retry_bo_t no_idle_timers;
	info.retry_and_idle_policy = &no_idle_timers;
	info.vhost_name = "threadcast";
	info.server_string = "threadcast";

	srv->ctx = lws_create_context(&info);
	if (!srv->ctx) {
		tc_log(TC_LOG_ERROR, "cannot start the server (is the port in use?)",
		       TC_LS("host", host), TC_LI("port", cfg->port));
		uv_close((uv_handle_t *)&srv->drain_timer, NULL);
		uv_close((uv_handle_t *)&srv->heartbeat, NULL);
		uv_close((uv_handle_t *)&srv->drain_tick, NULL);
		uv_close((uv_handle_t *)&srv->expiry, NULL);
		uv_close((uv_handle_t *)&srv->idle, NULL);
		uv_close((uv_handle_t *)&srv->flush, NULL);
		uv_run(loop, UV_RUN_NOWAIT);
		tc_buf_unref(srv->heartbeat_frame);
		free(srv);
		return NULL;
	}
	srv->vhost = lws_get_vhost_by_name(srv->ctx, "threadcast");
	srv->port = srv->vhost ? lws_get_vhost_listen_port(srv->vhost) : (int)cfg->port;
	uv_timer_start(&srv->heartbeat, on_heartbeat, (uint64_t)cfg->sse_heartbeat_ms,
		       (uint64_t)cfg->sse_heartbeat_ms);
	if (env->auth)
		uv_timer_start(&srv->expiry, on_expiry, 1000, 1000);
	uv_timer_start(&srv->idle, on_idle, IDLE_TICK_MS, IDLE_TICK_MS);
	return srv;
}

int tc_server_port(const struct tc_server *s)
{
	return s->port;
}

size_t tc_server_connections(const struct tc_server *s)
{
	return s->conns.count;
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	if (srv->conns.count)
		tc_log(TC_LOG_WARN, "drain timeout: closing remaining connections",
		       TC_LI("connections", srv->conns.count));
	drain_finish(srv);
}

#define DRAIN_TICK_MS 50

/* Closes the next batch of connections; when all are told, waits for them. */
static void on_drain_tick(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	size_t n = 0;
	for (struct tc_dlink *l = srv->conns.head; l && n < srv->drain_per_tick; l = l->next) {
		struct tc_conn *c = CONN_OF(l, link);
		if (c->kind == CONN_COMMAND || c->close_code)
			continue;
		conn_close(c, TC_CLOSE_GOING_AWAY, tc_close_reason(TC_CLOSE_GOING_AWAY), true);
		n++;
	}
	if (n < srv->drain_per_tick) {
		/* Everyone has been told: give them drain_timeout_ms to finish. */
		uv_timer_stop(&srv->drain_tick);
		uv_timer_start(&srv->drain_timer, on_drain_timeout,
			       srv->conns.count ? (uint64_t)srv->cfg->drain_timeout_ms : 0, 0);
	}
}

void tc_server_drain(struct tc_server *srv, void (*done)(void *), void *arg)
{
	uint64_t ticks = (uint64_t)srv->cfg->drain_spread_ms / DRAIN_TICK_MS;
	srv->draining = true;
	srv->drain_done = done;
	srv->drain_arg = arg;
	/* Spread the closes so clients do not all reconnect in the same instant. */
	srv->drain_per_tick = ticks ? (srv->conns.count + ticks - 1) / ticks : srv->conns.count;
	if (!srv->drain_per_tick)
		srv->drain_per_tick = 1;
	on_drain_tick(&srv->drain_tick);
	if (uv_is_active((uv_handle_t *)&srv->drain_timer) == 0)
		uv_timer_start(&srv->drain_tick, on_drain_tick, DRAIN_TICK_MS, DRAIN_TICK_MS);
}

void tc_server_stop(struct tc_server *srv)
{
	srv->draining = true;
	srv->drain_done = NULL;
	uv_timer_stop(&srv->drain_timer);
	uv_timer_stop(&srv->heartbeat);
	uv_timer_stop(&srv->drain_tick);
	uv_timer_stop(&srv->expiry);
	uv_close((uv_handle_t *)&srv->expiry, NULL);
	uv_timer_stop(&srv->idle);
	uv_close((uv_handle_t *)&srv->idle, NULL);
	uv_close((uv_handle_t *)&srv->drain_timer, NULL);
	uv_close((uv_handle_t *)&srv->heartbeat, NULL);
	uv_close((uv_handle_t *)&srv->drain_tick, NULL);
	uv_check_stop(&srv->flush);
	uv_close((uv_handle_t *)&srv->flush, NULL);
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
	tc_buf_unref(srv->heartbeat_frame);
	free(srv);
}
