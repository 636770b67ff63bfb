/*
 * sse.c — the SSE stream kind of connection (sse.h): its start and the
 * resync event.
 */
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpres.h"
#include "log.h"

/* An SSE stream: the common part, and its stream. */
struct sse {
	struct tc_conn c;
	struct tc_stream st;
	struct tc_stream_set *set;
};

/* A stream whose history is gone starts with a "resync" event. */
static void sse_started(void *ctx, bool restored, bool has_missed, uint64_t missed)
{
	struct tc_conn *c = ctx;
	char msg[160];
	if (restored)
		return;
	int n = has_missed ? snprintf(msg, sizeof(msg), "event: resync\ndata: {\"restored\":false,\"%s\":%llu}\n\n",
				      tc_spell("missedEvents", tc_session_spelling(c->session)),
				      (unsigned long long)missed)
			   : snprintf(msg, sizeof(msg), "event: resync\ndata: {\"restored\":false}\n\n");
	tc__conn_send(ctx, tc_buf_copy(msg, (size_t)n));
}

static int sse_writeable(struct tc_conn *c)
{
	return tc__stream_write(&((struct sse *)c)->st);
}

static int sse_flush(struct tc_conn *c)
{
	return tc__stream_flush(&((struct sse *)c)->st);
}

static void sse_destroy(struct tc_conn *c)
{
	struct sse *e = (struct sse *)c;
	tc__stream_end(e->set, &e->st);
	free(e);
}

static const struct tc_conn_ops sse_ops = {
	.transport = "sse",
	.writeable = sse_writeable,
	.flush = sse_flush,
	.destroy = sse_destroy,
};

static const struct tc_session_io sse_io = {
	.kind = TC_FRAME_SSE,
	.send = tc__conn_io_send,
	.queued = tc__conn_io_queued,
	.set_reading = tc__conn_io_set_reading,
	.close = tc__conn_io_close,
	.stream_started = sse_started,
};

int tc__sse_start_stream(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
			 const cJSON *request, const struct tc_grant *g, enum tc_spelling sp)
{
	char leid[128];
	struct tc_error err;

	int admitted = tc__http_refuse_if_full(&srv->conns, wsi);
	if (admitted != 1)
		return admitted;
	/* Refused before the head is sent, while the client can still be told
	 * plainly; a WebSocket is told in the reply to its subscribe instead. */
	if (!tc_redis_cmd_up(srv->redis))
		return tc__http_error(wsi, 503, "unavailable", TC_MSG_REDIS_DOWN);
	struct sse *e = tc_xcalloc(1, sizeof(*e));
	struct tc_conn *c = &e->c;
	e->set = &srv->streams;
	e->st.c = c;
	tc__conn_init(c, &srv->conns, &sse_ops, wsi, thread, &sse_io, sp);
	c->auth_exp = g->exp;
	/* Browsers resend the last id on reconnect; it wins over `since`. */
	const char *last = tc__http_last_event_id(wsi, leid, sizeof(leid));
	if (tc_session_open_stream(c->session, request, last, &err)) {
		tc__conn_destroy(c); /* the exchange ends here, with the 400 */
		return tc__http_error(wsi, 400, "invalid_argument", err.message);
	}
	pss->conn = c;
	if (tc__stream_start(&srv->streams, &e->st, 200, "text/event-stream", NULL, false))
		return -1;
	if (e->st.head_only)
		return tc__http_exchange_over(c, 0);
	lws_http_mark_sse(wsi);
	tc_log(TC_LOG_DEBUG, "sse open", TC_LS("thread", thread), TC_LI("connections", srv->conns.all.count));
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
