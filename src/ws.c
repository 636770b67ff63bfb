/*
 * ws.c — the WebSocket kind of connection (ws.h): receiving, coalesced
 * writing, our close frame, and the O(1) idle list.
 */
#include "ws.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lwsver.h"
#include "metrics.h"
#include "util.h"
#include "wsdeflate.h"

_Static_assert(TC_BUF_HEADROOM >= LWS_PRE, "tc_buf headroom must fit the lws frame header");

/* The close opcode lws uses internally (roles/ws/private-lib-roles-ws.h). */
#define WRITE_CLOSE ((enum lws_write_protocol)4)

/* Frames written per WRITEABLE callback before yielding to other clients. */
#define WRITE_BATCH 64

/* ==== idle WebSockets ==================================================================== */

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

void tc__ws_heard_from(struct tc_ws *w)
{
	struct tc_ws_set *set = w->set;
	uint64_t now = uv_now(set->conns->loop);

	w->pinged = false;
	if (set->quiet.tail == &w->quiet && w->heard == now)
		return;
	tc_dlist_remove(&set->quiet, &w->quiet);
	w->heard = now;
	tc_dlist_push_tail(&set->quiet, &w->quiet);
}

/* A compressor unused this long is freed; the next frame starts a new one. */
#define DEFLATER_IDLE_MS 5000

static void drop_deflater(struct tc_ws *w)
{
	if (!w->dz.dz)
		return;
	tc_dzref_release(&w->dz);
	tc_dlist_remove(&w->set->deflating, &w->deflating);
}

#define WS_OF(n, member) TC_DLIST_ENTRY(n, struct tc_ws, member)

static void on_idle(uv_timer_t *t)
{
	struct tc_ws_set *set = t->data;
	const struct tc_config *cfg = set->conns->cfg;
	uint64_t now = uv_now(set->conns->loop);
	struct tc_dlink *n, *next;

	tc__conn_trim_heap(set->conns, now);

	/* compressors of connections that stopped receiving, oldest use first */
	while ((n = set->deflating.head) && now - WS_OF(n, deflating)->deflated_at >= DEFLATER_IDLE_MS)
		drop_deflater(WS_OF(n, deflating));

	for (n = set->quiet.head; n; n = next) {
		struct tc_ws *w = WS_OF(n, quiet);
		struct tc_conn *c = &w->c;
		next = n->next;
		uint64_t silent = now - w->heard;
		if (silent < (uint64_t)cfg->ping_interval_s * 1000)
			break; /* and so is everyone after it */
		if (c->rx_off) {
			tc__ws_heard_from(w); /* we are not reading it: its PONG may be waiting */
		} else if (silent >= (uint64_t)cfg->idle_timeout_s * 1000) {
			tc_log(TC_LOG_INFO, "idle websocket dropped", TC_LS("thread", tc__conn_thread(c)),
			       TC_LI("silent_ms", (long long)silent));
			tc__conn_close(c, TC_CONN_KILL, 0, NULL); /* destroys w, and unlinks it */
		} else if (!w->pinged && !c->close_code) {
			w->pinged = true;
			w->ping_due = true;
			tc__conn_mark_dirty(c);
		}
	}
}

/* ==== writing ============================================================================ */

/*
 * Writes the close frame ourselves and waits (up to 3 s) for the peer's
 * close frame before the socket goes: dropping it at once would make the
 * kernel answer a client that is still sending with a reset, and the reset
 * can destroy our close frame in the client's receive buffer. The usual
 * lws_close_reason() + return -1 does not work from WRITEABLE with Debian's
 * lws 4.1.6 on libuv: its service loop closes the wsi a second time at
 * once, before the close frame leaves. (Kept on 4.3 too, where the wait for
 * the peer's close is as wanted: lwsver.h.)
 */
static int write_close_frame(struct tc_ws *w)
{
	struct tc_conn *c = &w->c;
	if (w->close_sent)
		return 0;
	w->close_sent = true;
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

/* A frame ws_flush coalesces is below 64 KiB: its header (tc_ws_frame_header) takes at most 4 bytes. */
#define WS_HEADER_MAX 4

/* The PING on_idle asked for, when nothing is half written. */
static int write_ping(struct tc_ws *w)
{
	unsigned char buf[LWS_PRE + 1];
	if (!w->ping_due || lws_partial_buffered(w->c.wsi))
		return 0;
	/* With a payload: lws does not report empty PONGs (4.1.6 and 4.3.5: lwsver.h). */
	w->ping_due = false;
	buf[LWS_PRE] = 't';
	return lws_write(w->c.wsi, buf + LWS_PRE, 1, LWS_WRITE_PING) < 0 ? -1 : 0;
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
static int ws_flush(struct tc_ws *w)
{
	static unsigned char buf[LWS_PRE + TC_WS_COALESCE_MAX];
	struct tc_conn *c = &w->c;
	struct tc_buf *b;
	int writes = 0;

	if (write_ping(w) < 0)
		return -1;
	while ((b = tc_bufq_peek(&c->out)) && writes++ < WRITE_BATCH && !lws_partial_buffered(c->wsi)) {
		if (c->out.count == 1 || WS_HEADER_MAX + b->len > TC_WS_COALESCE_MAX) {
			if (lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_TEXT) < 0)
				return -1;
			tc_metrics.bytes_out += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
			continue;
		}
		size_t n = 0;
		while ((b = tc_bufq_peek(&c->out)) && n + WS_HEADER_MAX + b->len <= TC_WS_COALESCE_MAX) {
			n += tc_ws_frame_header(buf + LWS_PRE + n, b->len, false);
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

/* Whether a queued frame is an event: only events are compressed. */
static bool is_event(struct tc_buf *b)
{
	return b->len > 15 && !memcmp(tc_buf_data(b), "{\"type\":\"event\"", 15);
}

static size_t frame_max(struct tc_buf *b)
{
	return is_event(b) ? tc_deflate_frame_max(b->len) : TC_WS_FRAME_HEADER_MAX + b->len;
}

/*
 * One queued frame into out (frame_max(b) bytes of room): an event
 * compressed in the connection's running context (RSV1), anything else as
 * it is. Returns its length, 0 when zlib failed.
 */
static size_t put_frame(struct tc_ws *w, struct tc_buf *b, unsigned char *out, bool *touched)
{
	if (!is_event(b)) {
		size_t h = tc_ws_frame_header(out, b->len, false);
		memcpy(out + h, tc_buf_data(b), b->len);
		tc_metrics.bytes_out += b->len;
		return h + b->len;
	}
	struct tc_ws_set *set = w->set;
	bool had = w->dz.dz != NULL; /* (on set->deflating exactly when it has one) */
	size_t m = 0;
	const unsigned char *f = tc_dz_frame(&w->dz, b, (int)set->conns->cfg->deflate, &m);
	if (had && (!f || !*touched))
		tc_dlist_remove(&set->deflating, &w->deflating);
	if (!f)
		return 0;
	memcpy(out, f, m);
	if (!had || !*touched) { /* used now (noted once a flush): to the list's tail */
		w->deflated_at = uv_now(set->conns->loop);
		tc_dlist_push_tail(&set->deflating, &w->deflating);
	}
	*touched = true;
	tc_metrics.deflate_in += b->len;
	tc_metrics.deflate_out += m;
	tc_metrics.bytes_out += m;
	return m;
}

/*
 * ws_flush for a connection with permessage-deflate: its frames are framed
 * here, events compressed (put_frame), and coalesced like the others; a
 * frame too big for the buffer gets one of its own. Nothing goes through
 * lws' own compressor, whose messages would enter the client's window
 * behind ours.
 */
static int ws_flush_deflated(struct tc_ws *w)
{
	static unsigned char buf[LWS_PRE + TC_WS_COALESCE_MAX];
	struct tc_conn *c = &w->c;
	struct tc_buf *b;
	int writes = 0;
	bool touched = false;

	if (write_ping(w) < 0)
		return -1;
	while ((b = tc_bufq_peek(&c->out)) && writes++ < WRITE_BATCH && !lws_partial_buffered(c->wsi)) {
		size_t n = 0, max = frame_max(b);
		unsigned char *big = NULL, *out = buf + LWS_PRE;
		if (max > TC_WS_COALESCE_MAX)
			out = (big = tc_xmalloc(LWS_PRE + max)) + LWS_PRE;
		do {
			size_t m = put_frame(w, b, out + n, &touched);
			if (!m) {
				free(big);
				return -1; /* (zlib failed: the connection goes) */
			}
			n += m;
			tc_buf_unref(tc_bufq_pop(&c->out));
		} while (!big && (b = tc_bufq_peek(&c->out)) && n + frame_max(b) <= TC_WS_COALESCE_MAX);
		int rc = lws_write(c->wsi, out, n, LWS_WRITE_RAW);
		free(big);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int flush(struct tc_ws *w)
{
	return w->deflate ? ws_flush_deflated(w) : ws_flush(w);
}

static int ws_writeable(struct tc_conn *c)
{
	struct tc_ws *w = (struct tc_ws *)c;
	c->want_write = false;
	tc__conn_unmark_dirty(c);
	if (flush(w) < 0)
		return -1;
	return tc__conn_after_write(c, w->ping_due) ? write_close_frame(w) : 0;
}

/*
 * The end of a loop iteration (conn.c): what the iteration queued leaves in
 * one send — a batch of doorbells read from Redis, a replay step, a reply.
 */
static int ws_flush_now(struct tc_conn *c)
{
	struct tc_ws *w = (struct tc_ws *)c;
	if (flush(w) < 0)
		return -1;
	/* close_code is 0 (conn.c flushes no closing connection): this never asks for a close frame. */
	int closing = tc__conn_after_write(c, w->ping_due);
	assert(!closing);
	(void)closing;
	return 0;
}

int tc__ws_peer_closed(struct tc_ws *w)
{
	/* After our own close frame, the peer's is the ack: just close
	 * (nonzero); otherwise lws echoes it, as the protocol wants. */
	return w && w->close_sent ? -1 : 0;
}

/* ==== receiving ========================================================================== */

int tc__ws_receive(struct tc_ws *w, const char *in, size_t len)
{
	struct tc_conn *c = &w->c;
	const size_t max = (size_t)c->set->cfg->max_frame_bytes;

	if (c->close_code)
		return 0; /* closing: what still arrives is read and dropped */
	if (lws_frame_is_binary(c->wsi)) {
		tc__conn_close(c, TC_CONN_DROP, TC_CLOSE_UNSUPPORTED_DATA, tc_close_reason(TC_CLOSE_UNSUPPORTED_DATA));
		return 0;
	}
	if (w->rx_len + len > max) {
		tc_log(TC_LOG_INFO, "oversized message refused", TC_LS("thread", tc__conn_thread(c)),
		       TC_LI("limit", max));
		free(w->rx);
		w->rx = NULL;
		w->rx_len = w->rx_cap = 0;
		tc__conn_close(c, TC_CONN_DROP, TC_CLOSE_TOO_BIG, w->set->too_big);
		return 0;
	}
	bool final = lws_is_final_fragment(c->wsi);
#if TC_LWS_IDLE_STOPS_EARLY
	/*
	 * A compressed message inflates to more than one piece: lws keeps the
	 * rest and services it from its libuv idle handle, which 4.1.6 stops
	 * after one round, so without more bytes from the socket the rest would
	 * wait for ever. Waking its loop (a write to its cancel pipe) starts
	 * another round: one per piece. (4.3 keeps the idle handle going while
	 * anything is pending: lwsver.h.)
	 */
	if (w->deflate && !final)
		lws_cancel_service(lws_get_context(c->wsi));
#endif
	if (final && !w->rx_len) {
		tc_session_on_frame(c->session, in, len); /* the common case: no copy */
		return 0;
	}
	if (w->rx_len + len > w->rx_cap) {
		size_t cap = w->rx_cap ? w->rx_cap : 1024;
		while (cap < w->rx_len + len)
			cap *= 2;
		w->rx_cap = cap < max ? cap : max;
		w->rx = tc_xrealloc(w->rx, w->rx_cap);
	}
	memcpy(w->rx + w->rx_len, in, len);
	w->rx_len += len;
	if (final) {
		tc_session_on_frame(c->session, w->rx, w->rx_len);
		/* Idle connections keep no reassembly buffer. */
		free(w->rx);
		w->rx = NULL;
		w->rx_len = w->rx_cap = 0;
	}
	return 0;
}

/* ==== opening, closing, and the handles ======================================================= */

static void ws_destroy(struct tc_conn *c)
{
	struct tc_ws *w = (struct tc_ws *)c;
	struct tc_ws_set *set = w->set;
	assert(set->count > 0);
	set->count--;
	tc_dlist_remove(&set->quiet, &w->quiet);
	drop_deflater(w);
	free(w->rx);
	free(w);
}

static const struct tc_conn_ops ws_ops = {
	.transport = "websocket",
	.flow_control = true,
	.flush = ws_flush_now,
	.writeable = ws_writeable,
	.destroy = ws_destroy,
};

struct tc_ws *tc__ws_of(struct tc_conn *c)
{
	return c && c->ops == &ws_ops ? (struct tc_ws *)c : NULL;
}

int tc__ws_open(struct tc_ws_set *set, struct lws *wsi, struct tc_pss *pss, const struct tc_upgrade *up)
{
	struct tc_ws *w = tc_xcalloc(1, sizeof(*w));
	struct tc_conn *c = &w->c;
	w->set = set;
	tc__conn_init(c, set->conns, &ws_ops, wsi, up->thread, &tc__conn_json_io, up->sp);
	set->count++;
	pss->conn = c;
	c->auth_exp = up->grant.exp;
	w->deflate = up->deflate;
	tc__ws_heard_from(w);
	if (up->refuse) {
		/* Refused on a 0.0.21 route: the close code tells the client why. */
		tc_log(TC_LOG_INFO, "websocket refused", TC_LS("thread", up->thread), TC_LI("code", up->refuse));
		tc__conn_close(c, TC_CONN_FLUSH, up->refuse, tc_close_reason(up->refuse));
		return 0;
	}
	tc_session_allow_commands(c->session, up->grant.commands);
	tc_log(TC_LOG_DEBUG, "websocket open", TC_LS("thread", up->thread),
	       TC_LI("connections", set->conns->all.count));
	return 0;
}

void tc__ws_init(struct tc_ws_set *set, struct tc_conn_set *conns)
{
	set->conns = conns;
	uv_timer_init(conns->loop, &set->idle);
	set->idle.data = set;
	snprintf(set->too_big, sizeof(set->too_big), "message larger than %lld bytes", conns->cfg->max_frame_bytes);
}

void tc__ws_start_timers(struct tc_ws_set *set)
{
	uv_timer_start(&set->idle, on_idle, IDLE_TICK_MS, IDLE_TICK_MS);
}

void tc__ws_close_handles(struct tc_ws_set *set)
{
	uv_timer_stop(&set->idle);
	uv_close((uv_handle_t *)&set->idle, NULL);
}
