/*
 * sse.c — Server-Sent Events streams (sse.h): start, writes, heartbeat and
 * the resync event.
 */
#include "sse.h"

#include <stdio.h>
#include <string.h>

#include "http.h"
#include "log.h"
#include "metrics.h"

/* SSE writes coalesce queued events into one write of at most this size. */
#define SSE_WRITE_MAX (64 * 1024)

/* A stream whose history is gone starts with a "resync" event. */
static void sse_started(void *ctx, bool restored, bool has_missed, uint64_t missed)
{
	struct tc_conn *c = ctx;
	char msg[160];
	if (restored)
		return;
	int n = has_missed ?
		snprintf(msg, sizeof(msg), "event: resync\ndata: {\"restored\":false,\"%s\":%llu}\n\n",
			 tc_spell("missedEvents", tc_session_spelling(c->session)), (unsigned long long)missed) :
		snprintf(msg, sizeof(msg), "event: resync\ndata: {\"restored\":false}\n\n");
	tc__conn_send(ctx, tc_buf_copy(msg, (size_t)n));
}

static const struct tc_session_io sse_io = {
	.kind = TC_FRAME_SSE,
	.send = tc__conn_io_send,
	.queued = tc__conn_io_queued,
	.set_reading = tc__conn_io_set_reading,
	.close = tc__conn_io_close,
	.stream_started = sse_started,
};

const char *tc__sse_last_event_id(struct lws *wsi, char *buf, int len)
{
	static const char *const names[] = { "last-event-id:", "Last-Event-ID:", "Last-Event-Id:" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (lws_hdr_custom_copy(wsi, buf, len, names[i], (int)strlen(names[i])) > 0)
			return buf;
	return NULL;
}

int tc__sse_start_stream(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
			 const cJSON *request, const struct tc_grant *g, enum tc_spelling sp)
{
	char leid[128];
	struct tc_error err;

	int admitted = tc__http_refuse_if_full(srv, wsi);
	if (admitted != 1)
		return admitted;
	/* Refused before the head is sent, while the client can still be told
	 * plainly; a WebSocket is told in the reply to its subscribe instead. */
	if (!tc_redis_cmd_up(srv->redis))
		return tc__http_error(wsi, 503, "unavailable", TC_MSG_REDIS_DOWN);
	struct tc_conn *c = tc__conn_new(srv, wsi, TC_CONN_SSE, thread, &sse_io, sp);
	c->auth_exp = g->exp;
	/* Browsers resend the last id on reconnect; it wins over `since`. */
	const char *last = tc__sse_last_event_id(wsi, leid, sizeof(leid));
	if (tc_session_open_stream(c->session, request, last, &err)) {
		tc__conn_destroy(c); /* the exchange ends here, with the 400 */
		return tc__http_error(wsi, 400, "invalid_argument", err.message);
	}
	pss->conn = c;
	if (tc__http_head(wsi, 200, "text/event-stream", LWS_ILLEGAL_HTTP_CONTENT_LEN))
		return -1;
	c->headers_sent = true;
	lws_http_mark_sse(wsi);
	tc_log(TC_LOG_DEBUG, "sse open", TC_LS("thread", thread), TC_LI("connections", srv->conns.count));
	return 0;
}

int tc__sse_from_query(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
		       const struct tc_grant *g, enum tc_spelling sp)
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
		return tc__http_error(wsi, 400, "invalid_argument", err.message);
	int rc = tc__sse_start_stream(srv, wsi, pss, thread, req, g, sp);
	cJSON_Delete(req);
	return rc;
}

/* Events are plain bytes, so queued ones leave together in one write. */
int tc__sse_writeable(struct tc_conn *c)
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
	/* Everything written and closing: an HTTP stream just ends. */
	return tc__conn_after_write(c) ? -1 : 0;
}

static void on_heartbeat(uv_timer_t *t)
{
	struct tc_server *srv = t->data;
	/* One shared buffer for every stream; proxies see traffic and keep them. */
	for (struct tc_dlink *n = srv->conns.head; n; n = n->next) {
		struct tc_conn *c = TC_CONN_OF(n, link);
		if (c->kind == TC_CONN_SSE && c->headers_sent && !c->out.count && !c->no_heartbeat)
			tc__conn_send(c, tc_buf_ref(srv->heartbeat_frame));
	}
}

void tc__sse_init(struct tc_server *srv)
{
	uv_timer_init(srv->loop, &srv->heartbeat);
	srv->heartbeat.data = srv;
	srv->heartbeat_frame = tc_buf_copy(": heartbeat\n\n", 13);
}

void tc__sse_start_timers(struct tc_server *srv)
{
	uint64_t every = (uint64_t)srv->cfg->sse_heartbeat_ms;
	uv_timer_start(&srv->heartbeat, on_heartbeat, every, every);
}

void tc__sse_close_handles(struct tc_server *srv)
{
	uv_timer_stop(&srv->heartbeat);
	uv_close((uv_handle_t *)&srv->heartbeat, NULL);
}

void tc__sse_free(struct tc_server *srv)
{
	tc_buf_unref(srv->heartbeat_frame);
	srv->heartbeat_frame = NULL;
}
