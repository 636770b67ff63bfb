/*
 * conn.c — the common part of a client connection (conn.h): initialization
 * and destruction, the bounded outbound queue and its backpressure, the
 * session transport hooks the kinds share, and the one close path.
 */
#include "conn.h"

#include <assert.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#include "log.h"
#include "lwsmem.h"
#include "metrics.h"

void tc__conn_request_write(struct tc_conn *c)
{
	if (!c->want_write) {
		c->want_write = true;
		lws_callback_on_writable(c->wsi);
	}
}

static void on_flush(uv_check_t *h);

void tc__conn_mark_dirty(struct tc_conn *c)
{
	struct tc_conn_set *set = c->set;

	if (!c->ops->flush || uv_is_closing((uv_handle_t *)&set->flush)) { /* (shutting down) */
		tc__conn_request_write(c);
		return;
	}
	if (tc_dlist_linked(&set->dirty, &c->dirty))
		return;
	if (!set->dirty.count)
		uv_check_start(&set->flush, on_flush);
	/* Written in the order they were marked: one event's fan-out reaches its connections in the
	 * order they joined (hub.c, run/feed.c), so a run's starter, the first, is not written last. */
	tc_dlist_push_tail(&set->dirty, &c->dirty);
}

void tc__conn_unmark_dirty(struct tc_conn *c)
{
	tc_dlist_remove(&c->set->dirty, &c->dirty);
}

/* The check handle: each connection that queued frames this iteration writes them now. */
static void on_flush(uv_check_t *h)
{
	struct tc_conn_set *set = h->data;
	struct tc_dlink *n;

	while ((n = set->dirty.head)) {
		struct tc_conn *c = TC_CONN_OF(n, dirty);
		tc_dlist_remove(&set->dirty, n);
		/* Closing, or WRITEABLE already on its way: that path writes. */
		if (c->close_code || c->want_write)
			continue;
		if (lws_partial_buffered(c->wsi)) {
			tc__conn_request_write(c);
			continue;
		}
		if (c->ops->flush(c) < 0)
			tc__conn_close(c, TC_CONN_KILL, 0, NULL);
	}
	uv_check_stop(h);
}

void tc__conn_flush_init(struct tc_conn_set *set)
{
	uv_check_init(set->loop, &set->flush);
	set->flush.data = set;
}

void tc__conn_flush_close(struct tc_conn_set *set)
{
	uv_check_stop(&set->flush);
	uv_close((uv_handle_t *)&set->flush, NULL);
}

void tc__conn_close(struct tc_conn *c, enum tc_conn_close_mode mode, enum tc_close code, const char *reason)
{
	if (mode == TC_CONN_KILL) {
		/* lws calls CLOSED before this returns, which destroys c. Not
		 * LWS_TO_KILL_ASYNC from our own handles: that waits for lws'
		 * next service pass, which an idle server may not have for a
		 * long time. */
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_SYNC);
		return;
	}
	if (c->close_code)
		return;
	assert(code && reason);
	c->close_code = (uint16_t)code;
	c->close_reason = reason;
	if (mode == TC_CONN_DROP) {
		tc_bufq_clear(&c->out);
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_SEND, 2);
	}
	tc__conn_request_write(c);
}

/*
 * Reading from a WebSocket client stops for either reason and resumes when
 * neither holds. Only flow-controlled kinds: an SSE or HTTP client has sent
 * all it will, and lws 4.1 stops serving writes on an HTTP connection whose
 * reading is off (kept on 4.3 too: lwsver.h), which would leave a full queue unwritten forever.
 */
void tc__conn_update_rx(struct tc_conn *c)
{
	if (!c->ops->flow_control)
		return;
	bool off = c->queue_full || c->session_busy;
	if (off != c->rx_off) {
		c->rx_off = off;
		lws_rx_flow_control(c->wsi, !off);
	}
}

const char *tc__conn_thread(const struct tc_conn *c)
{
	return c->session ? tc_session_thread(c->session) : NULL;
}

void tc__conn_send(struct tc_conn *c, struct tc_buf *b)
{
	const struct tc_config *cfg = c->set->cfg;

	assert(b->refs > 0);
	if (c->close_code) {
		tc_buf_unref(b);
		return;
	}
	bool big = b->len >= c->out.big_from;
	if (big ? c->out.big_bytes + b->len > TC_BUFQ_BIG_MAX
		: c->out.bytes - c->out.big_bytes + b->len > (size_t)cfg->max_queue_bytes) {
		tc_buf_unref(b);
		tc_metrics.slow_consumer_cuts++;
		tc_log(TC_LOG_WARN, "slow consumer cut off", TC_LS("thread", tc__conn_thread(c)),
		       TC_LS("transport", c->ops->transport), TC_LI("queued_bytes", c->out.bytes),
		       TC_LI("limit", big ? TC_BUFQ_BIG_MAX : cfg->max_queue_bytes));
		tc__conn_close(c, TC_CONN_DROP, TC_CLOSE_TRY_AGAIN, tc_close_reason(TC_CLOSE_TRY_AGAIN));
		return;
	}
	tc_bufq_push(&c->out, b);
	if (!c->queue_full && c->out.bytes > (size_t)cfg->max_queue_bytes / 2) {
		c->queue_full = true;
		tc__conn_update_rx(c);
	}
	tc__conn_mark_dirty(c);
}

int tc__conn_after_write(struct tc_conn *c, bool force)
{
	if (c->out.bytes <= (size_t)c->set->cfg->max_queue_bytes / 4) {
		if (c->queue_full) {
			c->queue_full = false;
			tc__conn_update_rx(c);
		}
		/* a paced replay, or a run's stream, may go on */
		if (c->ops->drained)
			c->ops->drained(c);
		else if (c->session)
			tc_session_on_drained(c->session);
	}
	if (c->out.count || force) {
		tc__conn_request_write(c);
		return 0;
	}
	return c->close_code ? 1 : 0;
}

/* ---- the session's transport hooks ------------------------------------------------------ */

void tc__conn_io_send(void *ctx, struct tc_buf *b)
{
	tc__conn_send(ctx, b);
}

size_t tc__conn_io_queued(void *ctx)
{
	struct tc_conn *c = ctx;
	return c->out.bytes;
}

void tc__conn_io_set_reading(void *ctx, bool reading)
{
	struct tc_conn *c = ctx;
	c->session_busy = !reading;
	tc__conn_update_rx(c);
}

void tc__conn_io_close(void *ctx, int code, const char *reason)
{
	tc__conn_close(ctx, TC_CONN_DROP, (enum tc_close)code, reason);
}

static void no_stream(void *ctx, bool restored, bool has_missed, uint64_t missed)
{
}

const struct tc_session_io tc__conn_json_io = {
	.kind = TC_FRAME_WS,
	.send = tc__conn_io_send,
	.queued = tc__conn_io_queued,
	.set_reading = tc__conn_io_set_reading,
	.close = tc__conn_io_close,
	.stream_started = no_stream,
};

/* ---- creation and destruction ------------------------------------------------------------ */

/* A connection opened or closed: tc__conn_trim_heap() waits for these to settle. */
static void note_churn(struct tc_conn_set *set)
{
	set->churn++;
	set->churn_at = uv_now(set->loop);
}

void tc__conn_init(struct tc_conn *c, struct tc_conn_set *set, const struct tc_conn_ops *ops, struct lws *wsi,
		   const char *thread, const struct tc_session_io *io, enum tc_spelling sp)
{
	c->set = set;
	c->ops = ops;
	c->wsi = wsi;
	c->out.big_from = (uint32_t)(set->cfg->max_queue_bytes / 4 + 1);
	if (io) {
		c->session = tc_session_new(set->env, thread, io, c);
		tc_session_set_spelling(c->session, sp);
	}
	tc_dlist_push_head(&set->all, &c->link);
	note_churn(set);
}

void tc__conn_destroy(struct tc_conn *c)
{
	struct tc_conn_set *set = c->set;

	assert(tc_dlist_linked(&set->all, &c->link));
	tc_dlist_remove(&set->all, &c->link);
	tc_dlist_remove(&set->dirty, &c->dirty);
	tc_session_close(c->session);
	tc_bufq_clear(&c->out);
	c->ops->destroy(c);
	note_churn(set);
	if (set->gone)
		set->gone(set->gone_arg);
}

/*
 * Connections come in storms (a reconnect after an instance died, a deploy),
 * and each leaves freed transients in the heap between the connections that
 * stay (those that are ours come from scratch.h instead; lws' and hiredis'
 * do not), and its header table's slot in lwsmem.c, kept resident for the
 * next handshake. Once the churn settles, the header tables' pages go back,
 * and malloc_trim() returns every whole free page of the heap to the kernel
 * (0.24 KiB per idle WebSocket after a 10,000-client storm). It walks the free
 * lists (1-2.5 ms at 10,000 connections), so it runs only after enough
 * churn, once no connection has come or gone for TRIM_SETTLE_MS.
 */
#define TRIM_MIN_CHURN 64
#define TRIM_SETTLE_MS 1000

void tc__conn_trim_heap(struct tc_conn_set *set, uint64_t now)
{
	if (set->churn < TRIM_MIN_CHURN || now - set->churn_at < TRIM_SETTLE_MS)
		return;
	set->churn = 0;
	uint64_t t0 = uv_hrtime();
	size_t slots = tc_lwsmem_trim();
#ifdef __GLIBC__
	malloc_trim(0);
#endif
	tc_log(TC_LOG_DEBUG, "heap trimmed", TC_LI("us", (long long)((uv_hrtime() - t0) / 1000)),
	       TC_LI("header_table_bytes", (long long)slots), TC_LI("connections", (long long)set->all.count));
}
