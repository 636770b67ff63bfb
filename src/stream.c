/*
 * stream.c — streamed HTTP response bodies and their heartbeat (stream.h).
 */
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpres.h"
#include "metrics.h"
#include "util.h"

/* Units coalesce into one write of at most this size. */
#define STREAM_WRITE_MAX (64 * 1024)
/* A chunk's size line ("<hex>\r\n") and its end ("\r\n"). */
#define CHUNK_HEAD_MAX 10
#define CHUNK_TAIL 2

int tc__stream_start(struct tc_stream_set *set, struct tc_stream *st, unsigned status, const char *type,
		     const char *const *extra, bool chunk)
{
	const char *headers[9];
	size_t n = 0;
	struct lws *wsi = st->c->wsi;
	st->head_only = tc__http_is_head(wsi);
	st->chunked = chunk && !st->head_only && tc__http_is_1_1(wsi);
	for (; extra && extra[0] && n < 8; extra += 2) {
		headers[n++] = extra[0];
		headers[n++] = extra[1];
	}
	headers[n] = NULL;
	if (tc__http_head_x(wsi, status, type, st->chunked ? TC_HTTP_CHUNKED : LWS_ILLEGAL_HTTP_CONTENT_LEN, headers))
		return -1;
	st->started = true;
	set->count++;
	tc_dlist_push_tail(&set->streams, &st->link);
	return 0;
}

void tc__stream_end(struct tc_stream_set *set, struct tc_stream *st)
{
	if (!st->started)
		return;
	st->started = false;
	set->count--;
	tc_dlist_remove(&set->streams, &st->link);
}

/*
 * Writes data[0..n) (at least CHUNK_HEAD_MAX bytes of room before it, and
 * CHUNK_TAIL after) as one write: a chunk of it when the stream is chunked.
 */
static int write_body(struct tc_stream *st, unsigned char *data, size_t n)
{
	unsigned char *start = data;
	size_t len = n;
	if (st->chunked) {
		char head[CHUNK_HEAD_MAX + 1];
		int h = snprintf(head, sizeof(head), "%zx\r\n", n);
		start = data - h;
		memcpy(start, head, (size_t)h);
		memcpy(data + n, "\r\n", CHUNK_TAIL);
		len = (size_t)h + n + CHUNK_TAIL;
	}
	if (lws_write(st->c->wsi, start, len, LWS_WRITE_HTTP) < 0)
		return -1;
	tc_metrics.bytes_out += n;
	return 0;
}

/* Units are plain bytes, so queued ones leave together in one write. -1 on a write error. */
static int write_queue(struct tc_stream *st)
{
	static unsigned char buf[LWS_PRE + CHUNK_HEAD_MAX + STREAM_WRITE_MAX + CHUNK_TAIL];
	unsigned char *data = buf + LWS_PRE + CHUNK_HEAD_MAX;
	struct tc_conn *c = st->c;
	struct tc_buf *b;

	while ((b = tc_bufq_peek(&c->out)) && !lws_partial_buffered(c->wsi)) {
		size_t n = 0;
		if (b->len >= STREAM_WRITE_MAX) {
			/* A big unit goes on its own: from its buffer, or as one chunk of its own. */
			unsigned char *big =
				st->chunked ? tc_xmalloc(LWS_PRE + CHUNK_HEAD_MAX + b->len + CHUNK_TAIL) : NULL;
			int rc;
			if (big) {
				memcpy(big + LWS_PRE + CHUNK_HEAD_MAX, tc_buf_data(b), b->len);
				rc = write_body(st, big + LWS_PRE + CHUNK_HEAD_MAX, b->len);
				free(big);
			} else {
				rc = write_body(st, tc_buf_data(b), b->len);
			}
			if (rc)
				return -1;
			tc_buf_unref(tc_bufq_pop(&c->out));
			continue;
		}
		while ((b = tc_bufq_peek(&c->out)) && n + b->len <= STREAM_WRITE_MAX) {
			memcpy(data + n, tc_buf_data(b), b->len);
			n += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
		}
		if (write_body(st, data, n))
			return -1;
	}
	return 0;
}

int tc__stream_flush(struct tc_stream *st)
{
	if (write_queue(st))
		return -1;
	tc__conn_after_write(st->c, false); /* (not closing: conn.c flushes no closing connection) */
	return 0;
}

int tc__stream_write(struct tc_stream *st)
{
	struct tc_conn *c = st->c;

	c->want_write = false;
	tc__conn_unmark_dirty(c);
	if (st->head_only)
		return tc__http_exchange_over(c, 0);
	if (write_queue(st))
		return -1;
	if (!tc__conn_after_write(c, false))
		return 0;
	/* Everything written and closing: a finished stream ends with the last chunk; else it is cut. */
	if (st->chunked && st->finished && lws_partial_buffered(c->wsi)) {
		tc__conn_request_write(c); /* the rest first */
		return 0;
	}
	if (st->chunked && st->finished) {
		static unsigned char last[LWS_PRE + 5];
		memcpy(last + LWS_PRE, "0\r\n\r\n", 5);
		if (lws_write(c->wsi, last + LWS_PRE, 5, LWS_WRITE_HTTP) < 0)
			return -1;
	}
	return -1;
}

static void on_heartbeat(uv_timer_t *t)
{
	struct tc_stream_set *set = t->data;
	/* One shared buffer for every stream; proxies see traffic and keep them. */
	for (struct tc_dlink *n = set->streams.head; n; n = n->next) {
		struct tc_stream *st = TC_DLIST_ENTRY(n, struct tc_stream, link);
		if (!st->c->out.count && !st->no_heartbeat)
			tc__conn_send(st->c, tc_buf_ref(set->frame));
	}
}

void tc__streams_init(struct tc_stream_set *set, struct tc_conn_set *conns)
{
	set->conns = conns;
	uv_timer_init(conns->loop, &set->heartbeat);
	set->heartbeat.data = set;
	set->frame = tc_buf_copy(": heartbeat\n\n", 13);
}

void tc__streams_start_timers(struct tc_stream_set *set)
{
	uint64_t every = (uint64_t)set->conns->cfg->sse_heartbeat_ms;
	uv_timer_start(&set->heartbeat, on_heartbeat, every, every);
}

void tc__streams_close_handles(struct tc_stream_set *set)
{
	uv_timer_stop(&set->heartbeat);
	uv_close((uv_handle_t *)&set->heartbeat, NULL);
}

void tc__streams_free(struct tc_stream_set *set)
{
	tc_buf_unref(set->frame);
	set->frame = NULL;
}
