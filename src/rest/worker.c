/*
 * rest/worker.c — what only a worker can answer (rest.h): a thread's state
 * at a checkpoint, its history, state updates, copies, a new thread's
 * supersteps, through the command bridge; a thread without a REST record
 * answers from its events.
 */
#include "rest/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query.h"
#include "run/follow.h"

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
			tc__rest_answer_saved(r);
		} else {
			const cJSON *res = cJSON_GetObjectItemCaseSensitive(f, "result");
			if (res)
				tc__rest_answer_json(r, 200, res);
			else
				tc__rest_answer(r, 200, "null", 4);
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
		tc__rest_answer_detail(r, status, msg ? msg : "the worker could not answer");
	}
	cJSON_Delete(f);
}

static void worker_release(struct tc_bridge_caller *caller)
{
	tc__rest_unref(TC_DLIST_ENTRY(caller, struct tc_rest, caller));
}

/* What a worker method is asked, from the path, query and body. */
static cJSON *worker_params(struct tc_rest *r, const char *method)
{
	cJSON *p = r->body && cJSON_IsObject(r->body) ? cJSON_Duplicate(r->body, true) : cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, r->query) if (!cJSON_GetObjectItemCaseSensitive(p, it->string))
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
		tc__rest_answer_detail(r, 501, "this gateway has no command bridge (--no-commands)");
		return;
	}
	cJSON *params = worker_params(r, method);
	r->caller = (struct tc_bridge_caller){ .sp = TC_SPELL_021, .answer = worker_answer, .release = worker_release };
	tc__rest_ref(r);
	if (tc_bridge_submit_method(b, &r->caller, r->thread, assistant, method, params, &err)) {
		tc__rest_unref(r); /* (not the last: the conn holds one) */
		tc__rest_answer_detail(r, 503, err.message);
	}
	cJSON_Delete(params);
}

/* A thread without a REST record (its runs came over the protocol): its state from its events (query.h). */
static void state_answered(void *ctx, enum tc_err code, const char *message, cJSON *result, uint64_t head)
{
	struct tc_rest *r = ctx; /* its conn is alive: a query is cancelled with its conn */
	r->query_read = NULL;    /* over when it reports */
	if (code) {
		/* Both error shapes: the REST API's and the one this route had before it. */
		cJSON *e = cJSON_CreateObject();
		bool missing = code == TC_ERR_NO_SUCH_RUN;
		cJSON_AddStringToObject(e, "detail", message);
		cJSON_AddStringToObject(e, "error", missing ? "not_found" : "unavailable");
		cJSON_AddStringToObject(e, "message", message);
		tc__rest_answer_json(r, missing ? 404 : 503, e);
		cJSON_Delete(e);
	} else {
		tc__rest_answer_json(r, 200, result);
	}
	cJSON_Delete(result);
}

/* The ThreadState of a thread that has not run: nothing in it yet. */
static void answer_empty_state(struct tc_rest *r)
{
	static const char empty[] = "{\"values\":{},\"next\":[],\"tasks\":[],\"checkpoint\":null,"
				    "\"metadata\":null,\"created_at\":null,\"parent_checkpoint\":null,"
				    "\"interrupts\":[]}";
	tc__rest_answer(r, 200, empty, sizeof(empty) - 1);
}

/*
 * threads.create (K_BULK) answered: with `supersteps`, the new thread's graph
 * (metadata graph_id) writes them as its state before the thread is answered,
 * as the reference's create does.
 */
static void bulk_created(struct tc_rest *r, const char *body, size_t len)
{
	const cJSON *steps = cJSON_GetObjectItemCaseSensitive(r->body, "supersteps");
	if (!cJSON_IsArray(steps) || !cJSON_GetArraySize(steps)) {
		tc__rest_answer(r, 200, body, len);
		return;
	}
	cJSON *t = cJSON_ParseWithLength(body, len);
	const char *tid = tc_run_str(t, "thread_id");
	const char *graph = tc_run_str(cJSON_GetObjectItemCaseSensitive(t, "metadata"), "graph_id");
	if (!tid || !graph) {
		tc__rest_answer_detail(
			r, 400,
			"supersteps need the thread's graph: create it with metadata.graph_id (the SDK's graphId)");
	} else {
		snprintf(r->thread, sizeof(r->thread), "%s", tid);
		r->saved = tc_buf_copy(body, len);
		r->saved_status = 200;
		ask_worker(r, "rest.state.bulk", graph);
	}
	cJSON_Delete(t);
}

/* threads.get (K_WORKER, K_STATE), threads.copy (K_COPY) or threads.create (K_BULK) answered: a worker goes on. */
static void thread_checked(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	if (status == 404 && r->op->kind == K_STATE) {
		/* The conn's reference covers it: destroying the conn cancels the query,
		 * whose callback then never runs. */
		r->query_read = tc_query_state(r->srv->redis, r->thread, state_answered, r);
		if (!r->query_read)
			tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	if (status != 200) {
		tc__rest_answer(r, status, body, len);
		return;
	}
	if (r->op->kind == K_BULK) {
		bulk_created(r, body, len);
		return;
	}
	cJSON *t = cJSON_ParseWithLength(body, len);
	/* The reference refuses a state update while a run of the thread is pending or running. */
	const char *st = tc_run_str(t, "status");
	if (r->op->op && !strcmp(r->op->op, "rest.state.update") && st && !strcmp(st, "busy")) {
		tc__rest_answer_detail(
			r, 409, "the thread is busy: a run is pending or running; update its state once it ends");
		cJSON_Delete(t);
		return;
	}
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
		tc__rest_answer_saved(r);
	else if (r->op->kind == K_STATE)
		answer_empty_state(r);
	else if (r->route == TC_ROUTE_R_HISTORY)
		tc__rest_answer(r, 200, "[]", 2);
	else
		ask_worker(r, r->op->op, NULL);
	cJSON_Delete(t);
}

void tc__rest_worker_begin(struct tc_rest *r)
{
	tc__rest_fcall(r, r->op->kind == K_COPY || r->op->kind == K_BULK ? r->op->op : "threads.get", thread_checked);
}
