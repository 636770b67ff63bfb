/*
 * stream.c — streamed HTTP response bodies and their heartbeat (stream.h).
 */
#include "stream.h"

#include <string.h>

#include "httpres.h"
#include "metrics.h"

/* Units coalesce into one write of at most this size. */
#define STREAM_WRITE_MAX (64 * 1024)

int tc__stream_start(struct tc_stream_set *set, struct tc_stream *st, unsigned status, const char *type,
		     const char *const *extra)
{
	if (tc__http_head_x(st->c->wsi, status, type, LWS_ILLEGAL_HTTP_CONTENT_LEN, extra))
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

/* Units are plain bytes, so queued ones leave together in one write. */
int tc__stream_write(struct tc_stream *st)
{
	static unsigned char buf[LWS_PRE + STREAM_WRITE_MAX];
	struct tc_conn *c = st->c;
	struct tc_buf *b;

	c->want_write = false;
	while ((b = tc_bufq_peek(&c->out)) && !lws_partial_buffered(c->wsi)) {
		size_t n = 0;
		if (b->len >= STREAM_WRITE_MAX) {
			/* A big unit goes on its own, straight from its buffer. */
			if (lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP) < 0)
				return -1;
			tc_metrics.bytes_out += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
			continue;
		}
		while ((b = tc_bufq_peek(&c->out)) && n + b->len <= STREAM_WRITE_MAX) {
			memcpy(buf + LWS_PRE + n, tc_buf_data(b), b->len);
			n += b->len;
			tc_buf_unref(tc_bufq_pop(&c->out));
		}
		if (lws_write(c->wsi, buf + LWS_PRE, n, LWS_WRITE_HTTP) < 0)
			return -1;
		tc_metrics.bytes_out += n;
	}
	/* Everything written and closing: an HTTP stream just ends. */
	return tc__conn_after_write(c, false) ? -1 : 0;
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
