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
		else if (code && (!strcmp(code, "not_supported") || !strcmp(code, "unknown_command")))
			status = 501; /* (a worker of a version without the method) */
		else if (code && !strcmp(code, "unknown_error"))
			status = 500; /* the graph's code raised (a factory, a reducer) */
		/* The Python server answers what raised with Starlette's own words. */
		if (status == 500 && r->python)
			tc__rest_answer_text(r, 500, "Internal Server Error");
		else
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
	cJSON_DeleteItemFromObjectCaseSensitive(p, "thread_id"); /* (a new thread's body may name it) */
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

/* threads.get (K_WORKER, K_STATE) or threads.copy (K_COPY) answered: a worker goes on. */
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
	cJSON *t = cJSON_ParseWithLength(body, len);
	const char *tstatus = tc_run_str(t, "status");
	if (r->route == TC_ROUTE_R_STATE_UPDATE && tstatus && !strcmp(tstatus, "busy")) {
		/* A run is pending or in flight: the reference server's refusal. */
		tc__rest_answer_detail(r, 409, "Thread is busy");
		cJSON_Delete(t);
		return;
	}
	/* The graph the thread runs picks the workers (its assistant's, for threads of older runs). */
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	const char *assistant = tc_run_str(meta, "graph_id");
	if (!assistant)
		assistant = tc_run_str(meta, "assistant_id");
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

/* threads.create answered: a thread made from supersteps has a worker of its graph apply them. */
static void thread_created(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	cJSON *x = reply->elements > 2 && reply->element[2]->type == REDIS_REPLY_STRING
			   ? cJSON_ParseWithLength(reply->element[2]->str, reply->element[2]->len)
			   : NULL;
	cJSON *t = cJSON_ParseWithLength(body, len);
	const char *graph = tc_run_str(x, "graph_id"), *tid = tc_run_str(t, "thread_id");
	if (status != 200 || !graph || !tid || strlen(tid) >= sizeof(r->thread)) {
		tc__rest_answer(r, status, body, len);
	} else {
		snprintf(r->thread, sizeof(r->thread), "%s", tid);
		r->saved = tc_buf_copy(body, len); /* the thread, answered once its state is made */
		r->saved_status = status;
		ask_worker(r, "rest.state.bulk", graph);
	}
	cJSON_Delete(t);
	cJSON_Delete(x);
}

void tc__rest_thread_begin(struct tc_rest *r)
{
	tc__rest_fcall(r, r->op->op, thread_created);
}

void tc__rest_worker_begin(struct tc_rest *r)
{
	tc__rest_fcall(r, r->op->kind == K_COPY ? "threads.copy" : "threads.get", thread_checked);
}
