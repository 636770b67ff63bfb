/*
 * rest.c — the Agent Protocol's REST API (rest.h).
 */
#include "rest.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge.h"
#include "http.h"
#include "log.h"
#include "query.h"
#include "run/agent_events.h"
#include "run/feed.h"
#include "run/follow.h"
#include "run/modes.h"
#include "spell.h"
#include "sse.h"
#include "store.h"

#define QUERY_ARGS_MAX 64   /* query parameters kept of one request */
#define QUERY_ARG_MAX 2048  /* bytes of one "name=value" */

/* ==== what each route and method does ====================================================== */

enum rest_kind {
	K_LUA,        /* one FCALL; its answer is the response */
	K_CREATE,     /* runs.create, then the response, a stream or a wait (out) */
	K_JOIN,       /* an existing run: a stream or a wait (out) */
	K_CANCEL,     /* runs.cancel, then (wait=1) the run's end */
	K_WORKER,     /* threads.get, then a worker answers (method) */
	K_COPY,       /* threads.copy, then a worker copies the checkpoints */
	K_STATE,      /* threads.get, then a worker; a thread without a record: from its events */
	K_STATUS,     /* a run's record: seed 004's stream status */
	K_AGENT,      /* seed 002: a request becomes runs.create (threads.get first for a threadId) */
};

enum rest_out { OUT_JSON, OUT_STREAM, OUT_WAIT };

static const struct rest_op {
	int route;
	unsigned method;
	const char *op;       /* the function's op (K_WORKER: the worker's method) */
	enum rest_kind kind;
	enum rest_out out;
	bool store;           /* threadcast_store ({tc:store}) rather than threadcast_rest */
	bool writes;          /* needs the token's "commands" right */
	bool stateless;       /* a run on a new, temporary thread */
} ops[] = {
	{ TC_ROUTE_STATE, TC_HTTP_GET, "rest.state.get", K_STATE, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_THREADS, TC_HTTP_POST, "threads.create", K_LUA, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_THREADS_SEARCH, TC_HTTP_POST, "threads.search", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_THREAD, TC_HTTP_GET, "threads.get", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_THREAD, TC_HTTP_PATCH, "threads.patch", K_LUA, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_THREAD, TC_HTTP_DELETE, "threads.delete", K_LUA, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_THREAD_COPY, TC_HTTP_POST, "threads.copy", K_COPY, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_STATE_UPDATE, TC_HTTP_POST, "rest.state.update", K_WORKER, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_STATE_CKPT, TC_HTTP_POST, "rest.state.get", K_WORKER, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_STATE_AT, TC_HTTP_GET, "rest.state.get", K_WORKER, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_HISTORY, TC_HTTP_GET, "rest.history", K_WORKER, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_HISTORY, TC_HTTP_POST, "rest.history", K_WORKER, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_RUNS, TC_HTTP_GET, "runs.list", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_RUNS, TC_HTTP_POST, "runs.create", K_CREATE, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_RUNS_STREAM, TC_HTTP_POST, "runs.create", K_CREATE, OUT_STREAM, false, true, false },
	{ TC_ROUTE_R_RUNS_WAIT, TC_HTTP_POST, "runs.create", K_CREATE, OUT_WAIT, false, true, false },
	{ TC_ROUTE_R_RUN, TC_HTTP_GET, "runs.get", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_RUN, TC_HTTP_DELETE, "runs.delete", K_LUA, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_RUN_STREAM, TC_HTTP_GET, NULL, K_JOIN, OUT_STREAM, false, false, false },
	{ TC_ROUTE_R_RUN_JOIN, TC_HTTP_GET, NULL, K_JOIN, OUT_WAIT, false, false, false },
	{ TC_ROUTE_R_RUN_WAIT, TC_HTTP_GET, NULL, K_JOIN, OUT_WAIT, false, false, false },
	{ TC_ROUTE_R_RUN_CANCEL, TC_HTTP_POST, "runs.cancel", K_CANCEL, OUT_JSON, false, true, false },
	{ TC_ROUTE_R_RUN_CHUNKS, TC_HTTP_GET, NULL, K_JOIN, OUT_STREAM, false, false, false },
	{ TC_ROUTE_R_RUN_CHUNKS_STATUS, TC_HTTP_GET, NULL, K_STATUS, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_RUN_NDJSON, TC_HTTP_GET, NULL, K_JOIN, OUT_STREAM, false, false, false },
	{ TC_ROUTE_R_AGENT_STREAM, TC_HTTP_POST, "runs.create", K_AGENT, OUT_STREAM, false, true, false },
	{ TC_ROUTE_R_AGENT_RUN_STREAM, TC_HTTP_GET, NULL, K_JOIN, OUT_STREAM, false, false, false },
	{ TC_ROUTE_R_SL_RUNS, TC_HTTP_POST, "runs.create", K_CREATE, OUT_JSON, false, true, true },
	{ TC_ROUTE_R_SL_STREAM, TC_HTTP_POST, "runs.create", K_CREATE, OUT_STREAM, false, true, true },
	{ TC_ROUTE_R_SL_WAIT, TC_HTTP_POST, "runs.create", K_CREATE, OUT_WAIT, false, true, true },
	{ TC_ROUTE_R_STORE_ITEMS, TC_HTTP_PUT, "store.put", K_LUA, OUT_JSON, true, true, false },
	{ TC_ROUTE_R_STORE_ITEMS, TC_HTTP_GET, "store.get", K_LUA, OUT_JSON, true, false, false },
	{ TC_ROUTE_R_STORE_ITEMS, TC_HTTP_DELETE, "store.delete", K_LUA, OUT_JSON, true, true, false },
	{ TC_ROUTE_R_STORE_SEARCH, TC_HTTP_POST, "store.search", K_LUA, OUT_JSON, true, false, false },
	{ TC_ROUTE_R_STORE_NS, TC_HTTP_POST, "store.namespaces", K_LUA, OUT_JSON, true, false, false },
	{ TC_ROUTE_R_ASSISTANTS_SEARCH, TC_HTTP_POST, "assistants.search", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_ASSISTANT, TC_HTTP_GET, "assistants.get", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_ASSISTANT_GRAPH, TC_HTTP_GET, "assistants.graph", K_LUA, OUT_JSON, false, false, false },
	{ TC_ROUTE_R_ASSISTANT_SCHEMAS, TC_HTTP_GET, "assistants.schemas", K_LUA, OUT_JSON, false, false, false },
};

static const struct rest_op *op_of(int route, unsigned method)
{
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].route == route && ops[i].method == method)
			return &ops[i];
	return NULL;
}

bool tc__rest_writes(int route, unsigned method)
{
	const struct rest_op *o = op_of(route, method);
	return o && o->writes;
}

/* How a run's stream is written: the SDK's stream modes, or one of the other seeds' formats. */
enum fmt { FMT_SDK, FMT_CHUNKS, FMT_NDJSON, FMT_AEP };

static enum fmt fmt_of(int route)
{
	switch (route) {
	case TC_ROUTE_R_RUN_CHUNKS:
		return FMT_CHUNKS;
	case TC_ROUTE_R_RUN_NDJSON:
		return FMT_NDJSON;
	case TC_ROUTE_R_AGENT_STREAM:
	case TC_ROUTE_R_AGENT_RUN_STREAM:
		return FMT_AEP;
	default:
		return FMT_SDK;
	}
}

/* ==== the exchange ============================================================================ */

struct tc_rest {
	struct tc_server *srv;
	struct tc_conn *conn;        /* NULL once the client is gone */
	int refs;                    /* the conn (or the pending body) and each answer awaited */
	const struct rest_op *op;
	char thread[TC_THREAD_ID_MAX + 1];
	char run_id[TC_ROUTE_VALUE_MAX + 1];
	cJSON *path;                 /* {"thread_id":…, …}: the path's parameters */
	cJSON *query;
	cJSON *body;
	char leid[128];              /* Last-Event-ID, "" when none */
	char fresh_run[40], fresh_thread[40];
	uint64_t after_seq;
	/* a join: its run's kwargs, and where it starts */
	char *kwargs;
	uint64_t join_from;          /* a join from now: the id up to which nothing is sent */
	/* the response */
	enum rest_out out;
	unsigned status;
	char location[320], content_location[320];
	struct tc_buf *saved;        /* K_CANCEL / K_COPY: the body to answer once the rest is done */
	unsigned saved_status;
	enum fmt fk;                 /* how a run's stream is written */
	struct tc_run_view view;     /* a run's stream or wait: its place in the run's feed (run/feed.h) */
	char assistant[TC_ROUTE_VALUE_MAX + 1]; /* a joined run's graph */
	cJSON *actions;              /* seed 002: the action ids the request answers */
	struct tc_bridge_caller caller;
};

static void unref(struct tc_rest *r)
{
	if (--r->refs > 0)
		return;
	cJSON_Delete(r->path);
	cJSON_Delete(r->query);
	cJSON_Delete(r->body);
	free(r->kwargs);
	tc_buf_unref(r->saved);
	cJSON_Delete(r->actions);
	assert(!r->view.feed); /* detached with the conn */
	free(r);
}

static void cancel_on_disconnect(struct tc_rest *r);

void tc__rest_conn_gone(struct tc_rest *r)
{
	if (!r)
		return;
	r->conn = NULL;
	cancel_on_disconnect(r);
	tc_run_feed_detach(&r->view);
	unref(r);
}

void tc__rest_drop(struct tc_rest *r)
{
	if (r)
		unref(r);
}

/* ==== answering ================================================================================== */

/* Queues the whole JSON answer (the writeable callback sends it). */
static void answer(struct tc_rest *r, unsigned status, const char *body, size_t len)
{
	struct tc_conn *c = r->conn;
	if (!c)
		return;
	r->status = status;
	r->out = OUT_JSON;
	/* One whole answer, however large (a search's page): not subject to the stream queue's bound. */
	tc_bufq_push(&c->out, tc_buf_copy(body, len));
	tc__conn_request_write(c);
}

static void answer_detail(struct tc_rest *r, unsigned status, const char *detail)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "detail", detail);
	char *s = cJSON_PrintUnformatted(o);
	answer(r, status, s, strlen(s));
	free(s);
	cJSON_Delete(o);
}

static void answer_json(struct tc_rest *r, unsigned status, const cJSON *body)
{
	char *s = cJSON_PrintUnformatted(body);
	answer(r, status, s, strlen(s));
	free(s);
}

/* A flag given as true, "true" or "1". */
static bool truthy(const cJSON *v)
{
	return cJSON_IsTrue(v) ||
	       (cJSON_IsString(v) && (!strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "1")));
}

int tc__rest_writeable(struct tc_conn *c)
{
	struct tc_rest *r = c->rest;
	const char *extra[] = { "location:", r->location[0] ? r->location : NULL, "content-location:",
				r->content_location[0] ? r->content_location : NULL, NULL };

	if (r->out == OUT_STREAM) {
		if (!c->headers_sent) {
			const char *type = r->fk == FMT_NDJSON ? "application/x-ndjson" : "text/event-stream";
			if (tc__http_head_x(c->wsi, 200, type, LWS_ILLEGAL_HTTP_CONTENT_LEN, extra))
				return -1;
			c->headers_sent = true;
		}
		return tc__sse_writeable(c);
	}
	c->want_write = false;
	struct tc_buf *b = tc_bufq_pop(&c->out);
	if (!b)
		return c->close_code ? -1 : 0;
	int rc = -1;
	bool empty = r->status == 204;
	if (!tc__http_head_x(c->wsi, r->status, "application/json", empty ? 0 : b->len, extra) &&
	    (empty || lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP_FINAL) == (int)b->len))
		rc = 0;
	tc_buf_unref(b);
	return tc__http_exchange_over(c, rc);
}

/* ==== Redis calls ============================================================================ */

typedef void reply_fn(struct tc_rest *r, redisReply *reply);

struct call {
	struct tc_rest *r;
	reply_fn *fn;
};

static void on_reply(struct tc_redis *redis, redisReply *reply, void *priv)
{
	struct call *k = priv;
	struct tc_rest *r = k->r;
	reply_fn *fn = k->fn;
	free(k);
	if (r->conn && fn)
		fn(r, reply);
	unref(r);
}

/* Sends argv; fn (NULL: none) gets the reply if the client is still there. 0, or -1 having answered 503. */
static int call(struct tc_rest *r, reply_fn *fn, const char *const *argv)
{
	struct call *k = tc_xmalloc(sizeof(*k));
	*k = (struct call){ .r = r, .fn = fn };
	r->refs++;
	if (tc_redis_cmd(r->srv->redis, on_reply, k, argv)) {
		free(k);
		r->refs--;
		answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return -1;
	}
	return 0;
}

/* The function's arguments: path, query, body, fresh ids, after_seq. */
static char *args_json(struct tc_rest *r)
{
	cJSON *a = cJSON_CreateObject();
	cJSON *path = cJSON_Duplicate(r->path, true);
	if (r->op->stateless)
		cJSON_AddStringToObject(path, "thread_id", r->fresh_thread);
	cJSON_AddItemToObject(a, "path", path);
	cJSON_AddItemReferenceToObject(a, "query", r->query);
	if (r->body)
		cJSON_AddItemReferenceToObject(a, "body", r->body);
	else
		cJSON_AddNullToObject(a, "body");
	cJSON *ids = cJSON_AddObjectToObject(a, "ids");
	cJSON_AddStringToObject(ids, "run_id", r->fresh_run);
	cJSON_AddStringToObject(ids, "thread_id", r->fresh_thread);
	cJSON_AddNumberToObject(a, "after_seq", (double)r->after_seq);
	if (r->op->stateless)
		cJSON_AddTrueToObject(a, "stateless");
	char *s = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return s;
}

static void fcall(struct tc_rest *r, const char *op, reply_fn *fn)
{
	struct tc_store_cmd c;
	char *args = args_json(r);
	tc_store_rest_call(&c, r->op->store, op, args);
	call(r, fn, c.argv);
	free(args);
}

/*
 * A run's stream or wait whose client went away before the run ended, with
 * on_disconnect "cancel" (or a join's cancel_on_disconnect): the run is
 * cancelled (interrupt), as the client asked; nobody is told.
 */
static void cancel_on_disconnect(struct tc_rest *r)
{
	if (!r->view.feed || tc_run_view_over(&r->view) || !r->run_id[0])
		return;
	const char *how = tc_run_str(r->body, "on_disconnect");
	bool cancel = (how && !strcmp(how, "cancel")) ||
		      truthy(cJSON_GetObjectItemCaseSensitive(r->query, "cancel_on_disconnect"));
	if (!cancel || r->saved) /* (a cancel's own wait is not a run's client) */
		return;
	cJSON *a = cJSON_CreateObject();
	cJSON *path = cJSON_AddObjectToObject(a, "path");
	cJSON_AddStringToObject(path, "thread_id", r->thread);
	cJSON_AddStringToObject(path, "run_id", r->run_id);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(a, "query"), "action", "interrupt");
	cJSON_AddNullToObject(a, "body");
	char *args = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	struct tc_store_cmd c;
	tc_store_rest_call(&c, false, "runs.cancel", args);
	if (!call(r, NULL, c.argv))
		tc_log(TC_LOG_INFO, "run cancelled: its client went away", TC_LS("thread", r->thread),
		       TC_LS("run", r->run_id));
	free(args);
}

/* The function's {status, body[, extra]}: 0, or -1 having answered 500. */
static int parse_answer(struct tc_rest *r, redisReply *reply, unsigned *status, const char **body,
			size_t *len)
{
	if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
	    reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_STRING) {
		char msg[300];
		snprintf(msg, sizeof(msg), "the REST function failed: %.250s",
			 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no answer");
		if (!reply || reply->type != REDIS_REPLY_ERROR)
			answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		else
			answer_detail(r, 500, msg);
		return -1;
	}
	*status = (unsigned)reply->element[0]->integer;
	*body = reply->element[1]->str;
	*len = reply->element[1]->len;
	return 0;
}

static void lua_answered(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (!parse_answer(r, reply, &status, &body, &len))
		answer(r, status, body, len);
}

/* The body kept for later (a cancel's, a copy's) is the answer now. */
static void answer_saved(struct tc_rest *r)
{
	struct tc_buf *b = r->saved;
	r->saved = NULL;
	r->status = r->saved_status;
	r->out = OUT_JSON;
	tc_bufq_push(&r->conn->out, b);
	tc__conn_request_write(r->conn);
}

/* The run is over: a stream ends, a wait answers. */
static void run_ended(struct tc_rest *r)
{
	struct tc_conn *c = r->conn;
	if (!c)
		return;
	if (r->out == OUT_STREAM) {
		tc__conn_close(c, TC_CONN_FLUSH, TC_CLOSE_GOING_AWAY, "the run ended");
		return;
	}
	/* A wait: the run's last values (or its error), unless a cancel waits to answer its own.
	 * (The session stays until the conn goes: this runs inside its fan-out.) */
	if (r->saved) {
		answer_saved(r);
		return;
	}
	cJSON *body = tc_run_feed_result(&r->view);
	answer_json(r, 200, body);
	cJSON_Delete(body);
}

/* An SSE event for the stream's client. */
static void stream_emit(void *ctx, const char *text, size_t len)
{
	struct tc_rest *r = ctx;
	if (r->conn)
		tc__conn_send(r->conn, tc_buf_copy(text, len));
}

/* ---- what the run's feed tells the exchange (run/feed.h) ---- */

#define REST_OF_VIEW(v) TC_DLIST_ENTRY(v, struct tc_rest, view)

static void view_unit(struct tc_run_view *v, struct tc_buf *unit)
{
	struct tc_rest *r = REST_OF_VIEW(v);
	if (r->conn)
		tc__conn_send(r->conn, unit);
	else
		tc_buf_unref(unit);
}

static size_t view_queued(struct tc_run_view *v)
{
	struct tc_rest *r = REST_OF_VIEW(v);
	return r->conn ? r->conn->out.bytes : 0;
}

static void view_end(struct tc_run_view *v)
{
	run_ended(REST_OF_VIEW(v));
}

/*
 * The feed gave up (the thread's history was reset under it, Redis failed),
 * or this client fell behind it: a stream just ends, and the SDK, seeing no
 * end of the run, reconnects with its Last-Event-ID and resumes (so do seed
 * 004 and 003 clients, from their last sequence; seed 002's stream got its
 * terminal error event from the feed); a wait cannot, and says why.
 */
static void view_fail(struct tc_run_view *v, int code, const char *reason)
{
	struct tc_rest *r = REST_OF_VIEW(v);
	if (!r->conn)
		return;
	if (r->out != OUT_STREAM)
		answer_detail(r, 503, reason);
	else
		tc__conn_close(r->conn, TC_CONN_FLUSH, (enum tc_close)code, reason);
}

static const struct tc_run_view_ops view_ops = {
	.unit = view_unit, .queued = view_queued, .end = view_end, .fail = view_fail,
};

void tc__rest_drained(struct tc_rest *r)
{
	tc_run_view_drained(&r->view);
}

/* Last-Event-ID as one of runfmt.h's ids or a seed's sequence; 0 when absent, "-1" (from the start) or not one. */
static uint64_t resume_id(const char *leid)
{
	char *end;
	if (!leid[0] || leid[0] == '-')
		return 0;
	unsigned long long v = strtoull(leid, &end, 10);
	return *end ? 0 : (uint64_t)v;
}

/* The text of the last message of a run's input (its kwargs): seed 003's run_start message. */
static char *input_text(const cJSON *kwargs)
{
	const cJSON *msgs = tc_run_get(tc_run_get(kwargs, "input"), "messages");
	const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
	const cJSON *content = tc_run_get(last, "content");
	if (cJSON_IsString(content))
		return tc_xstrdup(content->valuestring);
	const char *text = tc_run_str(cJSON_GetArrayItem(content, 0), "text");
	return text ? tc_xstrdup(text) : NULL;
}

/* The run's feed for this exchange: its format, and the options that change what it makes. */
static void run_spec(struct tc_rest *r, enum rest_out out, const cJSON *modes, bool subgraphs,
		     struct tc_run_spec *spec, char **message)
{
	const char *agent = tc_run_str(r->path, "agent_name");
	*message = NULL;
	*spec = (struct tc_run_spec){ .thread = r->thread, .run_id = r->run_id, .after_seq = r->after_seq };
	switch (r->fk) {
	case FMT_SDK:
		spec->format = TC_RUN_MODES;
		spec->modes = tc_run_modes_parse(modes);
		spec->subgraphs = subgraphs;
		spec->result_only = out != OUT_STREAM;
		break;
	case FMT_CHUNKS:
		spec->format = TC_RUN_CHUNKS;
		spec->agent = r->assistant[0] ? r->assistant : NULL;
		break;
	case FMT_NDJSON: {
		cJSON *kwargs = r->kwargs ? cJSON_Parse(r->kwargs) : NULL;
		*message = input_text(kwargs);
		cJSON_Delete(kwargs);
		spec->format = TC_RUN_NDJSON;
		spec->agent = r->assistant[0] ? r->assistant : NULL;
		spec->message = *message;
		break;
	}
	case FMT_AEP:
		spec->format = TC_RUN_AGENT_EVENTS;
		spec->agent = agent ? agent : r->assistant;
		break;
	}
}

/*
 * Follows run r->run_id of r->thread from the event after after_seq (or
 * from where Last-Event-ID says) through the run's feed (run/feed.h),
 * shared with every other client of the run in the same format. A stream
 * that starts at the beginning starts with "metadata", whose id comes
 * before the run's first event's. Without follow, only the stream's head
 * is made (a finished run joined from now).
 */
static void follow_run(struct tc_rest *r, enum rest_out out, const cJSON *modes, bool subgraphs, bool follow)
{
	struct tc_conn *c = r->conn;
	struct tc_server *srv = r->srv;
	struct tc_error err;
	struct tc_run_spec spec;
	char *message;

	r->out = out;
	uint64_t from = resume_id(r->leid), meta_id = r->after_seq * TC_RUN_MODES_IDS + TC_RUN_MODES_IDS - 1;
	if (r->fk == FMT_SDK && from <= meta_id)
		from = 0;
	bool metadata = r->fk == FMT_SDK && !from && !r->join_from;
	snprintf(r->content_location, sizeof(r->content_location), "/threads/%s/runs/%s", r->thread, r->run_id);
	if (out == OUT_STREAM) {
		c->kind = TC_CONN_SSE;
		c->no_heartbeat = r->fk == FMT_NDJSON; /* a line that is not JSON would break it */
		srv->nsse++;
		const char *agent = tc_run_str(r->path, "agent_name");
		if (r->fk == FMT_SDK)
			snprintf(r->location, sizeof(r->location), "/threads/%s/runs/%s/stream", r->thread, r->run_id);
		else if (r->fk == FMT_AEP && agent)
			snprintf(r->location, sizeof(r->location), "/v1/agents/%s/threads/%s/runs/%s/stream", agent,
				 r->thread, r->run_id);
	}
	if (metadata && out == OUT_STREAM) {
		cJSON *meta = cJSON_CreateObject();
		cJSON_AddStringToObject(meta, "run_id", r->run_id);
		cJSON_AddStringToObject(meta, "thread_id", r->thread);
		char id[32];
		size_t len;
		snprintf(id, sizeof(id), "%llu", (unsigned long long)meta_id);
		char *text = tc_sse_event(id, "metadata", meta, &len);
		stream_emit(r, text, len);
		free(text);
		cJSON_Delete(meta);
	}
	if (!follow)
		return;
	/*
	 * The run's feed reads it from its beginning, so that what a resumed or
	 * joined stream sends is what the whole stream would have (a message's
	 * id, the values an interrupt adds to); what the client has, or a join
	 * from now skips, is made but not sent to it.
	 */
	run_spec(r, out, modes, subgraphs, &spec, &message);
	r->view = (struct tc_run_view){ .ops = &view_ops,
					.after = r->fk == FMT_SDK && !from ? r->join_from : from };
	int refused = tc_run_feed_attach(srv->feeds, &spec, &r->view, &err);
	free(message);
	if (refused) {
		tc_bufq_clear(&c->out);
		if (out == OUT_STREAM) {
			c->kind = TC_CONN_QUERY;
			srv->nsse--;
		}
		r->out = OUT_JSON;
		answer_detail(r, 422, err.message);
	}
}

/* ==== the flows ===================================================================================== */

static void begin(struct tc_rest *r);
static void agent_refused(struct tc_rest *r, unsigned status, const char *body, size_t len);

/* runs.create answered: the response, or the run's stream or wait. */
static void created(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (parse_answer(r, reply, &status, &body, &len))
		return;
	cJSON *run = status == 200 ? cJSON_ParseWithLength(body, len) : NULL;
	const char *rid = tc_run_str(run, "run_id"), *tid = tc_run_str(run, "thread_id");
	if (!rid || !tid || strlen(rid) >= sizeof(r->run_id) || strlen(tid) >= sizeof(r->thread)) {
		cJSON_Delete(run);
		if (r->fk == FMT_AEP)
			agent_refused(r, status, body, len);
		else
			answer(r, status, body, len);
		return;
	}
	snprintf(r->run_id, sizeof(r->run_id), "%s", rid);
	snprintf(r->thread, sizeof(r->thread), "%s", tid);
	cJSON_Delete(run);
	if (r->op->out == OUT_JSON) {
		snprintf(r->content_location, sizeof(r->content_location), "/threads/%s/runs/%s", r->thread,
			 r->run_id);
		answer(r, status, body, len);
		return;
	}
	const cJSON *b = r->body;
	follow_run(r, r->op->out, r->op->out == OUT_STREAM ? tc_run_get(b, "stream_mode") : NULL,
		   truthy(tc_run_get(b, "stream_subgraphs")), true);
}

/* The thread's seq before the run: its events come after. */
static void head_read(struct tc_rest *r, redisReply *reply)
{
	struct tc_store_meta m;
	if (!reply || reply->type == REDIS_REPLY_ERROR || tc_store_meta_parse(reply, &m)) {
		answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	r->after_seq = m.seq;
	fcall(r, "runs.create", created);
}

/* Follows the run read by run_read() (r->kwargs); without follow, only the stream's head. */
static void join(struct tc_rest *r, bool follow)
{
	cJSON *kwargs = r->kwargs ? cJSON_Parse(r->kwargs) : NULL;
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(r->query, "stream_mode");
	bool subgraphs = truthy(tc_run_get(kwargs, "stream_subgraphs")) ||
			 truthy(cJSON_GetObjectItemCaseSensitive(r->query, "stream_subgraphs"));
	enum rest_out out = r->saved ? OUT_WAIT : r->op->out;
	follow_run(r, out, q ? q : tc_run_get(kwargs, "stream_mode"), subgraphs, follow);
	cJSON_Delete(kwargs);
}

/* A running run joined from now: the thread's head, and whether the run's events began. */
static void head_for_join(struct tc_rest *r, redisReply *reply)
{
	struct tc_store_meta m;
	if (!reply || reply->type == REDIS_REPLY_ERROR || tc_store_meta_parse(reply, &m)) {
		answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	r->join_from = m.seq * TC_RUN_MODES_IDS + TC_RUN_MODES_IDS - 1;
	join(r, true);
}

/* The run's record (thread_id, after_seq, kwargs, status): a stream or a wait of it. */
static void run_read(struct tc_rest *r, redisReply *reply)
{
	if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 5) {
		answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	redisReply **e = reply->element;
	if (e[0]->type != REDIS_REPLY_STRING || strcmp(e[0]->str, r->thread)) {
		if (r->saved) { /* a cancel whose run is gone already (rolled back) */
			run_ended(r);
			return;
		}
		answer_detail(r, 404, "Run not found");
		return;
	}
	r->after_seq = e[1]->type == REDIS_REPLY_STRING ? strtoull(e[1]->str, NULL, 10) : 0;
	free(r->kwargs);
	r->kwargs = e[2]->type == REDIS_REPLY_STRING ? tc_xstrdup(e[2]->str) : NULL;
	const char *status = e[3]->type == REDIS_REPLY_STRING ? e[3]->str : "";
	bool live = !strcmp(status, "pending") || !strcmp(status, "running");
	if (e[4]->type == REDIS_REPLY_STRING)
		snprintf(r->assistant, sizeof(r->assistant), "%s", e[4]->str);
	if (r->op->kind == K_STATUS) {
		/* seed 004's stream status, from the run's */
		bool failed = !strcmp(status, "error") || !strcmp(status, "timeout");
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "run_id", r->run_id);
		cJSON_AddStringToObject(o, "status", live ? "active" : failed ? "failed" : "ended");
		answer_json(r, 200, o);
		cJSON_Delete(o);
		return;
	}
	/*
	 * A join without Last-Event-ID streams from now on: a pending run from
	 * the seq it was created after (it has not started: nothing of it is
	 * missed), a running one from the thread's head, a finished one nothing.
	 * A wait, and a stream in a seed's format, always follows the whole run.
	 */
	if (!r->saved && r->op->out == OUT_STREAM && !r->leid[0] && r->fk == FMT_SDK) {
		if (!live) { /* over: the stream is only its metadata */
			join(r, false);
			run_ended(r);
			return;
		}
		if (!strcmp(status, "running")) {
			struct tc_store_cmd head;
			tc_store_read_head(&head, r->thread);
			call(r, head_for_join, head.argv);
			return;
		}
	}
	join(r, true);
}

static void read_run(struct tc_rest *r)
{
	struct tc_store_cmd c;
	tc_store_read_rest_run(&c, r->run_id);
	call(r, run_read, c.argv);
}

/* runs.cancel answered; with wait, the answer waits for the run's end. */
static void cancelled(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (parse_answer(r, reply, &status, &body, &len))
		return;
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(r->query, "wait");
	if (status >= 300 || !truthy(w)) {
		answer(r, status, body, len);
		return;
	}
	r->saved = tc_buf_copy("", 0); /* 204 once the run has ended, as the reference server answers */
	r->saved_status = 204;
	read_run(r);
}

/* ---- answers from workers ---- */

static void worker_answer(struct tc_bridge_caller *caller, struct tc_buf *frame)
{
	struct tc_rest *r = TC_DLIST_ENTRY(caller, struct tc_rest, caller);
	cJSON *f = cJSON_ParseWithLength((const char *)tc_buf_data(frame), frame->len);
	tc_buf_unref(frame);
	if (!r->conn) {
		cJSON_Delete(f);
		return;
	}
	const char *type = tc_run_str(f, "type");
	if (type && !strcmp(type, "success")) {
		if (r->saved) { /* a copy: the new thread's record */
			answer_saved(r);
		} else {
			const cJSON *res = cJSON_GetObjectItemCaseSensitive(f, "result");
			if (res)
				answer_json(r, 200, res);
			else
				answer(r, 200, "null", 4);
		}
	} else {
		const char *code = tc_run_str(f, "error"), *msg = tc_run_str(f, "message");
		unsigned status = 503;
		if (code && (!strncmp(code, "no_such", 7) || !strcmp(code, "not_found")))
			status = 404;
		else if (code && !strcmp(code, "invalid_argument"))
			status = 422;
		else if (code && !strcmp(code, "not_supported"))
			status = 501;
		answer_detail(r, status, msg ? msg : "the worker could not answer");
	}
	cJSON_Delete(f);
}

static void worker_release(struct tc_bridge_caller *caller)
{
	unref(TC_DLIST_ENTRY(caller, struct tc_rest, caller));
}

/* What a worker method is asked, from the path, query and body. */
static cJSON *worker_params(struct tc_rest *r, const char *method)
{
	cJSON *p = r->body && cJSON_IsObject(r->body) ? cJSON_Duplicate(r->body, true) : cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, r->query)
		if (!cJSON_GetObjectItemCaseSensitive(p, it->string))
			cJSON_AddItemToObject(p, it->string, cJSON_Duplicate(it, true));
	const char *ck = tc_run_str(r->path, "checkpoint_id");
	if (ck)
		cJSON_AddStringToObject(p, "checkpoint_id", ck);
	if (!strcmp(method, "rest.copy"))
		cJSON_AddStringToObject(p, "new_thread_id", r->fresh_thread);
	cJSON_AddStringToObject(p, "thread_id", r->thread);
	return p;
}

static void ask_worker(struct tc_rest *r, const char *method, const char *assistant)
{
	struct tc_error err;
	struct tc_bridge *b = r->srv->env->bridge;
	if (!b) {
		answer_detail(r, 501, "this gateway has no command bridge (--no-commands)");
		return;
	}
	cJSON *params = worker_params(r, method);
	r->caller = (struct tc_bridge_caller){ .sp = TC_SPELL_021, .answer = worker_answer,
					       .release = worker_release };
	r->refs++;
	if (tc_bridge_submit_method(b, &r->caller, r->thread, assistant, method, params, &err)) {
		r->refs--;
		answer_detail(r, 503, err.message);
	}
	cJSON_Delete(params);
}

/* A thread without a REST record (its runs came over the protocol): its state from its events (query.h). */
static void state_answered(void *ctx, enum tc_err code, const char *message, cJSON *result, uint64_t head)
{
	struct tc_rest *r = ctx; /* its conn is alive: a query is cancelled with its conn */
	r->conn->query = NULL;   /* over when it reports */
	if (code) {
		/* Both error shapes: the REST API's and the one this route had before it. */
		cJSON *e = cJSON_CreateObject();
		bool missing = code == TC_ERR_NO_SUCH_RUN;
		cJSON_AddStringToObject(e, "detail", message);
		cJSON_AddStringToObject(e, "error", missing ? "not_found" : "unavailable");
		cJSON_AddStringToObject(e, "message", message);
		answer_json(r, missing ? 404 : 503, e);
		cJSON_Delete(e);
	} else {
		answer_json(r, 200, result);
	}
	cJSON_Delete(result);
}

/* The ThreadState of a thread that has not run: nothing in it yet. */
static void answer_empty_state(struct tc_rest *r)
{
	static const char empty[] = "{\"values\":{},\"next\":[],\"tasks\":[],\"checkpoint\":null,"
				    "\"metadata\":null,\"created_at\":null,\"parent_checkpoint\":null,"
				    "\"interrupts\":[]}";
	answer(r, 200, empty, sizeof(empty) - 1);
}

/* threads.get (K_WORKER, K_STATE) or threads.copy (K_COPY) answered: a worker goes on. */
static void thread_checked(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (parse_answer(r, reply, &status, &body, &len))
		return;
	if (status == 404 && r->op->kind == K_STATE) {
		/* The conn's reference covers it: destroying the conn cancels the query,
		 * whose callback then never runs. */
		r->conn->query = tc_query_state(r->srv->redis, r->thread, state_answered, r);
		if (!r->conn->query)
			answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	if (status != 200) {
		answer(r, status, body, len);
		return;
	}
	cJSON *t = cJSON_ParseWithLength(body, len);
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	const char *assistant = tc_run_str(meta, "assistant_id");
	if (!assistant)
		assistant = tc_run_str(meta, "graph_id");
	if (r->op->kind == K_COPY) { /* the new thread (ids.thread_id), answered once its checkpoints are copied */
		r->saved = tc_buf_copy(body, len);
		r->saved_status = status;
	}
	/* No run yet: no graph has a checkpoint of it. */
	if (assistant)
		ask_worker(r, r->op->kind == K_COPY ? "rest.copy" : r->op->op, assistant);
	else if (r->op->kind == K_COPY)
		answer_saved(r);
	else if (r->op->kind == K_STATE)
		answer_empty_state(r);
	else if (r->op->route == TC_ROUTE_R_HISTORY)
		answer(r, 200, "[]", 2);
	else
		ask_worker(r, r->op->op, NULL);
	cJSON_Delete(t);
}

/* ---- seed 002: POST /v1/agents/:agent_name/stream ---------------------------------------------- */

#define AGENT_MESSAGES_MAX 256
#define AGENT_ACTIONS_MAX 64

/* Refused before the stream: the seed's status for code, its error event as the body. */
static void agent_error(struct tc_rest *r, const char *code, const char *message)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	cJSON *e = tc_agent_events_error_event(r->fresh_run, code, message, now.tv_sec * 1e3 + now.tv_nsec / 1e6);
	unsigned status = !strcmp(code, "agent_not_found") ? 404 : (unsigned)tc_agent_events_http_status(code);
	answer_json(r, status, e);
	cJSON_Delete(e);
}

/* runs.create refused the run: the REST API's answer as one of the seed's error codes. */
static void agent_refused(struct tc_rest *r, unsigned status, const char *body, size_t len)
{
	cJSON *b = cJSON_ParseWithLength(body, len);
	const char *detail = tc_run_str(b, "detail");
	char message[512];
	snprintf(message, sizeof(message), "%s", detail ? detail : "the run could not be started");
	cJSON_Delete(b);
	const char *code = "internal_error";
	if (status == 404) /* (the thread was read first, or is made if missing: the agent it is) */
		code = "agent_not_found";
	else if (status == 413)
		code = "message_too_large";
	else if (status == 409)
		code = "rate_limit_exceeded"; /* the thread's queue of runs is full */
	else if (status == 400 || status == 422)
		code = "invalid_message_format";
	agent_error(r, code, message);
}

/* One input message as the graph's: {role, content} with the text of its text blocks. */
static cJSON *agent_message(const cJSON *m, char *why, size_t cap)
{
	const char *role = tc_run_str(m, "role");
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
	if (!cJSON_IsObject(m) || !content) {
		snprintf(why, cap, "a message must be an object with content");
		return NULL;
	}
	if (cJSON_GetObjectItemCaseSensitive(m, "role") && !role) {
		snprintf(why, cap, "a message's role must be a string");
		return NULL;
	}
	if (role && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system")) {
		snprintf(why, cap, "a message's role must be \"user\", \"assistant\" or \"system\"");
		return NULL;
	}
	char *text = NULL;
	size_t len = 0;
	if (cJSON_IsString(content)) {
		text = tc_xstrdup(content->valuestring);
	} else if (cJSON_IsArray(content)) {
		const cJSON *block;
		text = tc_xstrdup("");
		cJSON_ArrayForEach(block, content) {
			const char *type = tc_run_str(block, "type"), *t = tc_run_str(block, "text");
			if (!type || strcmp(type, "text") || !t) {
				snprintf(why, cap, "a message's content blocks must be {\"type\": \"text\", \"text\": …}");
				free(text);
				return NULL;
			}
			tc_run_append(&text, &len, t, SIZE_MAX);
		}
	} else {
		snprintf(why, cap, "a message's content must be a string or an array of text blocks");
		return NULL;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "role", role ? role : "user");
	cJSON_AddStringToObject(o, "content", text);
	free(text);
	return o;
}

/*
 * The request {messages, threadId?, context?} as runs.create's body for the
 * agent: the messages as the graph's input, or with context.actionResults
 * a Command resuming the interrupts it answers (one: its result; several: by
 * interrupt id); the rest of context as the run's. The run queues behind
 * one already running, and is cancelled when its client goes away. NULL
 * with why when the request is not the seed's.
 */
static cJSON *agent_run_body(struct tc_rest *r, const char *agent, char *why, size_t cap)
{
	const cJSON *b = r->body;
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(b, "messages");
	const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(b, "context");
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(ctx, "actionResults");
	if (!cJSON_IsObject(b) || !cJSON_IsArray(msgs)) {
		snprintf(why, cap, "the request must be an object with a messages array");
		return NULL;
	}
	if (cJSON_GetArraySize(msgs) > AGENT_MESSAGES_MAX) {
		snprintf(why, cap, "at most %d messages per request", AGENT_MESSAGES_MAX);
		return NULL;
	}
	if (ctx && !cJSON_IsObject(ctx)) {
		snprintf(why, cap, "context must be an object");
		return NULL;
	}
	if (results && (!cJSON_IsArray(results) || !cJSON_GetArraySize(results) ||
			cJSON_GetArraySize(results) > AGENT_ACTIONS_MAX)) {
		snprintf(why, cap, "context.actionResults must be an array of 1 to %d action results", AGENT_ACTIONS_MAX);
		return NULL;
	}
	if (!results && !cJSON_GetArraySize(msgs)) {
		snprintf(why, cap, "messages must not be empty (unless context.actionResults answers an action)");
		return NULL;
	}
	cJSON *run = cJSON_CreateObject();
	cJSON_AddStringToObject(run, "assistant_id", agent);
	cJSON *input = cJSON_CreateArray();
	const cJSON *m;
	cJSON_ArrayForEach(m, msgs) {
		cJSON *one = agent_message(m, why, cap);
		if (!one) {
			cJSON_Delete(input);
			cJSON_Delete(run);
			return NULL;
		}
		cJSON_AddItemToArray(input, one);
	}
	if (!results) {
		cJSON_AddItemToObject(cJSON_AddObjectToObject(run, "input"), "messages", input);
	} else {
		cJSON *cmd = cJSON_AddObjectToObject(run, "command");
		cJSON *byid = cJSON_CreateObject(), *one = NULL;
		r->actions = cJSON_CreateArray();
		const cJSON *a;
		cJSON_ArrayForEach(a, results) {
			const char *id = tc_run_str(a, "actionId");
			if (!id || !*id || cJSON_GetObjectItemCaseSensitive(byid, id)) {
				snprintf(why, cap, "each action result needs its own actionId (a string)");
				cJSON_Delete(byid);
				cJSON_Delete(input);
				cJSON_Delete(run);
				return NULL;
			}
			/* its result, or the whole action result without the id */
			const cJSON *res = cJSON_GetObjectItemCaseSensitive(a, "result");
			cJSON *v = res ? cJSON_Duplicate(res, true) : cJSON_Duplicate(a, true);
			if (!res)
				cJSON_DeleteItemFromObjectCaseSensitive(v, "actionId");
			one = v;
			cJSON_AddItemToObject(byid, id, v);
			cJSON_AddItemToArray(r->actions, cJSON_CreateString(id));
		}
		if (cJSON_GetArraySize(byid) == 1) {
			cJSON_AddItemToObject(cmd, "resume", cJSON_Duplicate(one, true));
			cJSON_Delete(byid);
		} else {
			cJSON_AddItemToObject(cmd, "resume", byid);
		}
		if (cJSON_GetArraySize(input))
			cJSON_AddItemToObject(cJSON_AddObjectToObject(cmd, "update"), "messages", input);
		else
			cJSON_Delete(input);
	}
	if (ctx) {
		cJSON *c = cJSON_Duplicate(ctx, true);
		cJSON_DeleteItemFromObjectCaseSensitive(c, "actionResults");
		if (cJSON_GetArraySize(c))
			cJSON_AddItemToObject(run, "context", c);
		else
			cJSON_Delete(c);
	}
	cJSON_AddStringToObject(run, "if_not_exists", "create");
	cJSON_AddStringToObject(run, "multitask_strategy", "enqueue");
	cJSON_AddStringToObject(run, "on_disconnect", "cancel");
	return run;
}

/* Whether the thread (its REST record) waits for the action id (an interrupt's). */
static bool waits_for(const cJSON *thread, const char *id)
{
	const cJSON *task, *i;
	cJSON_ArrayForEach(task, tc_run_get(thread, "interrupts")) {
		if (cJSON_IsArray(task)) {
			cJSON_ArrayForEach(i, task) {
				const char *iid = tc_run_str(i, "id");
				if (iid && !strcmp(iid, id))
					return true;
			}
		}
	}
	return false;
}

/* The request's threadId, read: it must exist, and wait for the actions the request answers. */
static void agent_thread_checked(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (parse_answer(r, reply, &status, &body, &len))
		return;
	if (status == 404) {
		agent_error(r, "thread_not_found", "no thread has this threadId");
		return;
	}
	if (status != 200) {
		agent_refused(r, status, body, len);
		return;
	}
	cJSON *t = cJSON_ParseWithLength(body, len);
	const cJSON *a;
	cJSON_ArrayForEach(a, r->actions) {
		if (!waits_for(t, a->valuestring)) {
			char msg[300];
			snprintf(msg, sizeof(msg), "the thread does not wait for action %.200s", a->valuestring);
			agent_error(r, "invalid_action_id", msg);
			cJSON_Delete(t);
			return;
		}
	}
	cJSON_Delete(t);
	struct tc_store_cmd head;
	tc_store_read_head(&head, r->thread);
	call(r, head_read, head.argv);
}

static void agent_begin(struct tc_rest *r)
{
	char why[256];
	const char *agent = tc_run_str(r->path, "agent_name");
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(r->body, "threadId");
	cJSON *run = agent_run_body(r, agent, why, sizeof(why));
	if (!run) {
		agent_error(r, "invalid_message_format", why);
		return;
	}
	if (tid && (!cJSON_IsString(tid) || !tc_thread_id_valid(tid->valuestring, strlen(tid->valuestring)))) {
		cJSON_Delete(run);
		agent_error(r, "invalid_message_format", "threadId must be a thread id: 1 to 128 of A-Z a-z 0-9 . _ : -");
		return;
	}
	if (!tid && r->actions) {
		cJSON_Delete(run);
		agent_error(r, "invalid_action_id", "action results answer a thread's actions: threadId is required");
		return;
	}
	snprintf(r->thread, sizeof(r->thread), "%s", tid ? tid->valuestring : r->fresh_thread);
	cJSON_AddStringToObject(r->path, "thread_id", r->thread);
	cJSON_Delete(r->body);
	r->body = run;
	if (tid) {
		fcall(r, "threads.get", agent_thread_checked);
		return;
	}
	struct tc_store_cmd head;
	tc_store_read_head(&head, r->thread);
	call(r, head_read, head.argv);
}

static void begin(struct tc_rest *r)
{
	struct tc_store_cmd head;
	switch (r->op->kind) {
	case K_LUA:
		fcall(r, r->op->op, lua_answered);
		return;
	case K_CREATE:
		if (r->op->stateless) {
			snprintf(r->thread, sizeof(r->thread), "%s", r->fresh_thread);
			r->after_seq = 0;
			fcall(r, "runs.create", created);
			return;
		}
		tc_store_read_head(&head, r->thread);
		call(r, head_read, head.argv);
		return;
	case K_JOIN:
	case K_STATUS:
		read_run(r);
		return;
	case K_AGENT:
		agent_begin(r);
		return;
	case K_CANCEL:
		fcall(r, "runs.cancel", cancelled);
		return;
	case K_WORKER:
	case K_STATE:
		fcall(r, "threads.get", thread_checked);
		return;
	case K_COPY:
		fcall(r, "threads.copy", thread_checked);
		return;
	}
}

/* ==== the request ==================================================================================== */

/* The query string as an object: name → value, or [values] when repeated. */
static cJSON *query_of(struct lws *wsi)
{
	cJSON *q = cJSON_CreateObject();
	char buf[QUERY_ARG_MAX];
	for (int i = 0; i < QUERY_ARGS_MAX; i++) {
		int n = lws_hdr_copy_fragment(wsi, buf, sizeof(buf), WSI_TOKEN_HTTP_URI_ARGS, i);
		if (n < 0)
			break;
		char *eq = strchr(buf, '=');
		const char *v = eq ? eq + 1 : "";
		if (eq)
			*eq = '\0';
		if (!*buf || !strcmp(buf, "access_token"))
			continue;
		cJSON *old = cJSON_GetObjectItemCaseSensitive(q, buf);
		if (!old) {
			cJSON_AddStringToObject(q, buf, v);
		} else if (cJSON_IsArray(old)) {
			cJSON_AddItemToArray(old, cJSON_CreateString(v));
		} else {
			cJSON *arr = cJSON_CreateArray();
			cJSON_AddItemToArray(arr, cJSON_CreateString(old->valuestring));
			cJSON_AddItemToArray(arr, cJSON_CreateString(v));
			cJSON_ReplaceItemInObjectCaseSensitive(q, buf, arr);
		}
	}
	return q;
}


/* Takes the connection: the exchange's answer goes out through tc__rest_writeable. */
static int start(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, struct tc_rest *r)
{
	int admitted = tc__http_refuse_if_full(srv, wsi);
	if (admitted != 1) {
		unref(r);
		return admitted;
	}
	if (!tc_redis_cmd_up(srv->redis)) {
		unref(r);
		return tc__http_detail(wsi, 503, TC_MSG_REDIS_DOWN);
	}
	struct tc_conn *c = tc__conn_new(srv, wsi, TC_CONN_QUERY, r->thread, NULL, TC_SPELL_021);
	c->rest = r; /* the reference the request held */
	r->conn = c;
	pss->conn = c;
	begin(r);
	return 0;
}

int tc__rest_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, int route,
		     unsigned method, const struct tc_route_match *m, struct tc_rest **pending)
{
	const struct rest_op *op = op_of(route, method);
	*pending = NULL;
	if (!op)
		return tc__http_detail(wsi, 405, "this method is not served here");
	struct tc_rest *r = tc_xcalloc(1, sizeof(*r));
	r->srv = srv;
	r->refs = 1;
	r->op = op;
	r->path = cJSON_CreateObject();
	for (size_t i = 0; i < m->nparams; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%.*s", (int)m->params[i].name_len, m->params[i].name);
		cJSON_AddStringToObject(r->path, name, m->params[i].value);
		if (!strcmp(name, "thread_id"))
			snprintf(r->thread, sizeof(r->thread), "%s", m->params[i].value);
		else if (!strcmp(name, "run_id"))
			snprintf(r->run_id, sizeof(r->run_id), "%s", m->params[i].value);
	}
	r->query = query_of(wsi);
	char leid[128];
	const char *qleid = tc_run_str(r->query, "last_event_id"); /* an EventSource cannot set the header */
	if (tc__sse_last_event_id(wsi, leid, sizeof(leid)))
		snprintf(r->leid, sizeof(r->leid), "%s", leid);
	else if (qleid)
		snprintf(r->leid, sizeof(r->leid), "%s", qleid);
	r->fk = fmt_of(route);
	tc_uuid4(r->fresh_run);
	tc_uuid4(r->fresh_thread);
	if (method == TC_HTTP_POST || method == TC_HTTP_PUT || method == TC_HTTP_PATCH ||
	    (method == TC_HTTP_DELETE && op->store)) {
		*pending = r;
		return 0;
	}
	return start(srv, wsi, pss, r);
}

int tc__rest_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, struct tc_rest *r,
		  const char *data, size_t len)
{
	size_t i = 0;
	while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t'))
		i++;
	if (i < len) {
		r->body = cJSON_ParseWithLength(data, len);
		if (!r->body) {
			unref(r);
			return tc__http_detail(wsi, 422, "the body is not valid JSON");
		}
	}
	return start(srv, wsi, pss, r);
}
