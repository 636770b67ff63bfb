/*
 * rest/runs.c — runs created, joined, cancelled, streamed and waited for
 * (rest.h): a run's stream or wait is a view of the run's feed (run/feed.h),
 * shared with every other client of the run in the same format.
 */
#include "rest/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "run/follow.h"
#include "run/modes.h"
#include "store.h"

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
		      tc__rest_truthy(cJSON_GetObjectItemCaseSensitive(r->query, "cancel_on_disconnect"));
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
	if (!tc__rest_call(r, NULL, c.argv))
		tc_log(TC_LOG_INFO, "run cancelled: its client went away", TC_LS("thread", r->thread),
		       TC_LS("run", r->run_id));
	free(args);
}

/* The run is over: a stream ends, a wait answers. */
static void run_ended(struct tc_rest *r)
{
	struct tc_conn *c = r->conn;
	if (!c)
		return;
	if (r->out == OUT_STREAM) {
		tc__rest_stream_finish(r);
		tc__conn_close(c, TC_CONN_FLUSH, TC_CLOSE_GOING_AWAY, "the run ended");
		return;
	}
	/* A wait: the run's last values (or its error), unless a cancel waits to answer its own.
	 * (The session stays until the conn goes: this runs inside its fan-out.) */
	if (r->saved) {
		tc__rest_answer_saved(r);
		return;
	}
	cJSON *body = tc_run_feed_result(&r->view);
	tc__rest_answer_json(r, 200, body);
	cJSON_Delete(body);
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
		tc__rest_answer_detail(r, 503, reason);
	else
		tc__conn_close(r->conn, TC_CONN_FLUSH, (enum tc_close)code, reason);
}

static const struct tc_run_view_ops view_ops = {
	.unit = view_unit,
	.queued = view_queued,
	.end = view_end,
	.fail = view_fail,
};

/*
 * Last-Event-ID as the id of an event the client has (a run stream's, a
 * seed's sequence): false when absent, "-1" (from the start) or not one.
 */
static bool resume_id(const char *leid, uint64_t *id)
{
	char *end;
	*id = 0;
	if (!leid[0] || leid[0] == '-')
		return false;
	unsigned long long v = strtoull(leid, &end, 10);
	if (*end)
		return false;
	*id = (uint64_t)v;
	return true;
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

/*
 * The run's feed for this exchange: its format, and the options that change
 * what it makes. modes: the stream modes that apply (a join's, else its
 * run's); given: those the stream itself was given (a join's stream_mode,
 * NULL for a run's own stream), which filter a run its worker renders.
 */
static void run_spec(struct tc_rest *r, enum tc_rest_out out, const cJSON *modes, const cJSON *given, bool subgraphs,
		     struct tc_run_spec *spec, char **message, char **given_text)
{
	const char *agent = tc_run_str(r->path, "agent_name");
	*message = NULL;
	*given_text = NULL;
	*spec = (struct tc_run_spec){ .thread = r->thread, .run_id = r->run_id, .after_seq = r->after_seq };
	switch (r->fk) {
	case FMT_SDK:
		spec->format = TC_RUN_MODES;
		spec->modes = tc_run_modes_parse(modes);
		spec->subgraphs = subgraphs;
		spec->result_only = out != OUT_STREAM;
		*given_text = spec->result_only ? NULL : tc_run_modes_given(given);
		spec->given = *given_text;
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
 * that starts at the beginning starts with "metadata" {run_id, attempt},
 * id 0, before the run's first event (id 1). Without follow, only the
 * stream's head is made (a finished run joined from now). modes and given:
 * run_spec's.
 */
static void follow_run(struct tc_rest *r, enum tc_rest_out out, const cJSON *modes, const cJSON *given, bool subgraphs,
		       bool follow)
{
	struct tc_conn *c = r->conn;
	struct tc_server *srv = r->srv;
	struct tc_error err;
	struct tc_run_spec spec;
	char *message, *given_text;

	r->out = out;
	uint64_t from;
	bool resumed = resume_id(r->leid, &from);
	bool metadata = r->fk == FMT_SDK && !resumed && !r->join_from;
	snprintf(r->content_location, sizeof(r->content_location), "/threads/%s/runs/%s", r->thread, r->run_id);
	if (out == OUT_STREAM) {
		tc__rest_stream(r, r->fk == FMT_NDJSON);
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
		cJSON_AddNumberToObject(meta, "attempt", 1);
		size_t len;
		char *text = tc_sse_event("0", "metadata", meta, &len);
		tc__rest_stream_unit(r, text, len);
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
	run_spec(r, out, modes, given, subgraphs, &spec, &message, &given_text);
	r->view = (struct tc_run_view){ .ops = &view_ops,
					.after = from,
					.after_seq = r->fk == FMT_SDK && !resumed ? r->join_from : 0 };
	int refused = tc_run_feed_attach(srv->feeds, &spec, &r->view, &err);
	free(message);
	free(given_text);
	if (refused) { /* (the feed could not start: answered in place of the stream) */
		tc_bufq_clear(&c->out);
		tc__rest_answer_detail(r, 422, err.message);
		return;
	}
	r->gone = cancel_on_disconnect;
}

/* ==== the flows ===================================================================================== */

/* runs.create answered: the response, or the run's stream or wait. */
static void created(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	cJSON *run = status == 200 ? cJSON_ParseWithLength(body, len) : NULL;
	const char *rid = tc_run_str(run, "run_id"), *tid = tc_run_str(run, "thread_id");
	if (!rid || !tid || strlen(rid) >= sizeof(r->run_id) || strlen(tid) >= sizeof(r->thread)) {
		cJSON_Delete(run);
		if (r->refused)
			r->refused(r, status, body, len);
		else
			tc__rest_answer(r, status, body, len);
		return;
	}
	snprintf(r->run_id, sizeof(r->run_id), "%s", rid);
	snprintf(r->thread, sizeof(r->thread), "%s", tid);
	cJSON_Delete(run);
	if (r->op->out == OUT_JSON) {
		snprintf(r->content_location, sizeof(r->content_location), "/threads/%s/runs/%s", r->thread, r->run_id);
		tc__rest_answer(r, status, body, len);
		return;
	}
	const cJSON *b = r->body;
	follow_run(r, r->op->out, r->op->out == OUT_STREAM ? tc_run_get(b, "stream_mode") : NULL, NULL,
		   tc__rest_truthy(tc_run_get(b, "stream_subgraphs")), true);
}

/* The thread's seq before the run: its events come after. */
static void head_read(struct tc_rest *r, redisReply *reply)
{
	struct tc_store_meta m;
	if (!reply || reply->type == REDIS_REPLY_ERROR || tc_store_meta_parse(reply, &m)) {
		tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	r->after_seq = m.seq;
	tc__rest_fcall(r, "runs.create", created);
}

/* Follows the run read by run_read() (r->kwargs); without follow, only the stream's head. */
static void join(struct tc_rest *r, bool follow)
{
	cJSON *kwargs = r->kwargs ? cJSON_Parse(r->kwargs) : NULL;
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(r->query, "stream_mode");
	bool subgraphs = tc__rest_truthy(tc_run_get(kwargs, "stream_subgraphs")) ||
			 tc__rest_truthy(cJSON_GetObjectItemCaseSensitive(r->query, "stream_subgraphs"));
	enum tc_rest_out out = r->saved ? OUT_WAIT : r->op->out;
	follow_run(r, out, q ? q : tc_run_get(kwargs, "stream_mode"), q, subgraphs, follow);
	cJSON_Delete(kwargs);
}

/* A running run joined from now: the thread's head, and whether the run's events began. */
static void head_for_join(struct tc_rest *r, redisReply *reply)
{
	struct tc_store_meta m;
	if (!reply || reply->type == REDIS_REPLY_ERROR || tc_store_meta_parse(reply, &m)) {
		tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	r->join_from = m.seq;
	join(r, true);
}

/*
 * The Python server's join of a run that is over: it listens from now on, hears nothing of
 * the run, and answers what the thread holds (its api/runs.py's fallback) — the thread's
 * error, else its interrupts, else its values ({} when none). So a run joined after a later
 * run ended answers that run's values.
 */
static void thread_result(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	if (status != 200) {
		tc__rest_answer(r, status, body, len);
		return;
	}
	cJSON *t = cJSON_ParseWithLength(body, len);
	const char *tstatus = tc_run_str(t, "status");
	const cJSON *values = cJSON_GetObjectItemCaseSensitive(t, "values");
	cJSON *out = NULL;
	if (tstatus && !strcmp(tstatus, "error")) {
		out = cJSON_CreateObject();
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(t, "error");
		cJSON_AddItemToObject(out, "__error__", e ? cJSON_Duplicate(e, true) : cJSON_CreateNull());
	} else if (tstatus && !strcmp(tstatus, "interrupted")) {
		cJSON *all = cJSON_CreateArray();
		const cJSON *list;
		cJSON_ArrayForEach(list, cJSON_GetObjectItemCaseSensitive(t, "interrupts"))
		{
			const cJSON *i;
			if (cJSON_IsArray(list))
				cJSON_ArrayForEach(i, list) cJSON_AddItemToArray(all, cJSON_Duplicate(i, true));
		}
		if (cJSON_GetArraySize(all) > 0) {
			out = cJSON_CreateObject();
			cJSON_AddItemToObject(out, "__interrupt__", all);
		} else {
			cJSON_Delete(all);
		}
	}
	if (!out)
		out = (cJSON_IsObject(values) || cJSON_IsArray(values)) && values->child ? cJSON_Duplicate(values, true)
											 : cJSON_CreateObject();
	tc__rest_answer_json(r, 200, out);
	cJSON_Delete(out);
	cJSON_Delete(t);
}

/* The run's record (thread_id, after_seq, kwargs, status): a stream or a wait of it. */
static void run_read(struct tc_rest *r, redisReply *reply)
{
	struct tc_store_rest_run run;
	if (!reply || tc_store_rest_run_parse(reply, &run)) {
		tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return;
	}
	if (!run.thread_id || run.thread_id_len != strlen(r->thread) ||
	    memcmp(run.thread_id, r->thread, run.thread_id_len)) {
		if (r->saved) { /* a cancel whose run is gone already (rolled back) */
			run_ended(r);
			return;
		}
		if (r->python && r->op->out == OUT_WAIT) { /* the Python server's join: the error its stream had */
			static const char gone[] =
				"{\"__error__\":{\"error\":\"HTTPException\",\"message\":\"404: Run not found\"}}";
			tc__rest_answer(r, 200, gone, sizeof(gone) - 1);
			return;
		}
		tc__rest_answer_detail(r, 404, "Run not found");
		return;
	}
	r->python = run.python;
	r->after_seq = run.after_seq;
	free(r->kwargs);
	r->kwargs = run.kwargs ? tc_xstrndup(run.kwargs, run.kwargs_len) : NULL;
	const char *status = run.status;
	bool live = run.active;
	if (run.graph_id)
		snprintf(r->assistant, sizeof(r->assistant), "%.*s", (int)run.graph_id_len, run.graph_id);
	else if (run.assistant_id)
		snprintf(r->assistant, sizeof(r->assistant), "%.*s", (int)run.assistant_id_len, run.assistant_id);
	if (r->op->kind == K_STATUS) {
		/* seed 004's stream status, from the run's */
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "run_id", r->run_id);
		cJSON_AddStringToObject(o, "status", live ? "active" : run.failed ? "failed" : "ended");
		tc__rest_answer_json(r, 200, o);
		cJSON_Delete(o);
		return;
	}
	if (r->python && !live && !r->saved && r->op->out == OUT_WAIT) {
		tc__rest_fcall(r, "threads.get", thread_result);
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
		if (run.status_len == 7 && !memcmp(status, "running", 7)) {
			struct tc_store_cmd head;
			tc_store_read_head(&head, r->thread);
			tc__rest_call(r, head_for_join, head.argv);
			return;
		}
	}
	join(r, true);
}

void tc__rest_run_read(struct tc_rest *r)
{
	struct tc_store_cmd c;
	tc_store_read_rest_run(&c, r->run_id);
	tc__rest_call(r, run_read, c.argv);
}

/* runs.cancel answered; with wait, the answer waits for the run's end. */
static void cancelled(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(r->query, "wait");
	if (status >= 300 || !tc__rest_truthy(w)) {
		tc__rest_answer(r, status, body, len);
		return;
	}
	/* Once the run has ended: the JavaScript server's 204; the Python server's {} (what its wait
	 * heard of the run from the cancel on: nothing). */
	r->saved = r->python ? tc_buf_copy("{}", 2) : tc_buf_copy("", 0);
	r->saved_status = r->python ? 200 : 204;
	tc__rest_run_read(r);
}

void tc__rest_run_cancel(struct tc_rest *r)
{
	tc__rest_fcall(r, "runs.cancel", cancelled);
}

void tc__rest_run_create(struct tc_rest *r)
{
	struct tc_store_cmd head;
	if (r->op->flags & TC_REST_SL) {
		snprintf(r->thread, sizeof(r->thread), "%s", r->fresh_thread);
		r->after_seq = 0;
		tc__rest_fcall(r, "runs.create", created);
		return;
	}
	tc_store_read_head(&head, r->thread);
	tc__rest_call(r, head_read, head.argv);
}
