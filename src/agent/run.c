/*
 * run.c — the runs this agent produces, one event after another (run.h).
 */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "script.h"
#include "util.h"

struct tc_agent_run {
	struct tc_agent *a;
	struct tc_agent_run *next; /* on a->runs */
	char *thread, *run_id;
	struct tc_agent_script script;
	int k;               /* the step to append next */
	bool pause_recorded; /* agent_state.lua has the pause: append the request */
	uv_timer_t timer;    /* the wait before the next step; the run goes in its close_cb */
};

/* ==== running ============================================================================= */

static void run_closed(uv_handle_t *h)
{
	struct tc_agent_run *r = h->data;
	tc_agent_script_free(&r->script);
	free(r->thread);
	free(r->run_id);
	free(r);
}

static void run_end(struct tc_agent_run *r)
{
	struct tc_agent_run **p = &r->a->runs;
	while (*p != r)
		p = &(*p)->next;
	*p = r->next;
	uv_close((uv_handle_t *)&r->timer, run_closed);
}

static void emit(struct tc_agent_run *r);

static void on_timer(uv_timer_t *t)
{
	emit(t->data);
}

static void next_step(struct tc_agent_run *r, long delay)
{
	uv_timer_start(&r->timer, on_timer, (uint64_t)(delay > 0 ? delay : 0), 0);
}

static void on_appended(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct tc_agent_run *r = priv;
	if (r->a->stopping)
		return; /* the run is being closed; its memory goes in run_closed */
	if (!reply) {
		next_step(r, 200); /* Redis away: the same event again, later */
		return;
	}
	if (reply->type == REDIS_REPLY_ERROR)
		tc_log(TC_LOG_ERROR, "event refused", TC_LS("thread", r->thread), TC_LS("error", reply->str));
	struct tc_agent_step *s = &r->script.steps[r->k];
	if ((s->kind == TC_AGENT_STEP_VALUES || s->kind == TC_AGENT_STEP_CHECKPOINT) &&
	    reply->type == REDIS_REPLY_INTEGER) {
		/* Remember state for state.get / state.listCheckpoints / state.fork. */
		cJSON *ev = cJSON_Parse(s->json);
		cJSON *data = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "params"), "data");
		char *vals = NULL, *ck = NULL;
		if (s->kind == TC_AGENT_STEP_VALUES) {
			vals = cJSON_PrintUnformatted(data);
		} else {
			cJSON *sum = cJSON_CreateObject();
			char ts[32];
			time_t now = time(NULL);
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
			cJSON_AddItemToObject(sum, "id", cJSON_Duplicate(cJSON_GetObjectItem(data, "id"), 1));
			cJSON_AddStringToObject(sum, "timestamp", ts);
			cJSON *step = cJSON_GetObjectItem(data, "step");
			cJSON_AddNumberToObject(sum, "step", step && step->valuedouble >= 0 ? step->valuedouble : 0);
			cJSON_AddStringToObject(sum, "node_name", "agent");
			ck = tc_agent_print(sum);
		}
		const char *args[] = { "record", vals ? vals : "", ck ? ck : "" };
		tc_agent_state_op(r->a, r->thread, tc_agent_ignore_reply, NULL, 3, args);
		free(vals);
		free(ck);
		cJSON_Delete(ev);
	}
	r->k++;
	next_step(r, r->k < r->script.nsteps ? r->script.steps[r->k].delay_ms : 0);
}

static void on_paused(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct tc_agent_run *r = priv;
	if (r->a->stopping)
		return;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		next_step(r, 200); /* try recording again */
		return;
	}
	r->pause_recorded = true;
	emit(r);
}

static void emit(struct tc_agent_run *r)
{
	if (r->a->stopping)
		return;
	if (r->k >= r->script.nsteps) {
		const char *args[] = { "finish" };
		tc_agent_state_op(r->a, r->thread, tc_agent_ignore_reply, NULL, 1, args);
		tc_log(TC_LOG_INFO, "run completed", TC_LS("thread", r->thread), TC_LS("run", r->run_id));
		run_end(r);
		return;
	}
	struct tc_agent_step *s = &r->script.steps[r->k];
	if (!s->json) {
		tc_log(TC_LOG_INFO, "run interrupted", TC_LS("thread", r->thread), TC_LS("run", r->run_id));
		run_end(r);
		return;
	}
	if (s->kind == TC_AGENT_STEP_INTERRUPT && !r->pause_recorded) {
		char phase[16];
		snprintf(phase, sizeof(phase), "%d", r->k + 2); /* after the request and the pause */
		const char *args[] = { "pause", phase, r->script.interrupt_id };
		if (tc_agent_state_op(r->a, r->thread, on_paused, r, 3, args))
			next_step(r, 200);
		return;
	}
	struct tc_store_cmd c;
	/* The run's first event names it. */
	tc_store_append(&c, r->thread, s->json, &(struct tc_store_append_opts){ .run = r->k == 0 ? r->run_id : NULL });
	if (tc_agent_send(r->a->wr, on_appended, r, &c))
		next_step(r, 200);
}

void tc_agent_run_begin(struct tc_agent *a, const char *thread, const char *run_id, const char *query, bool ask,
			const char *response, int phase)
{
	struct tc_agent_run *r = tc_xcalloc(1, sizeof(*r));
	r->a = a;
	r->thread = tc_xstrdup(thread);
	r->run_id = tc_xstrdup(run_id);
	tc_agent_script_build(&r->script, r->run_id, query, ask, response, a->token_delay_ms);
	r->k = phase < r->script.nsteps ? phase : r->script.nsteps;
	uv_timer_init(a->loop, &r->timer);
	r->timer.data = r;
	r->next = a->runs;
	a->runs = r;
	next_step(r, 0);
}

void tc_agent_runs_stop(struct tc_agent *a)
{
	while (a->runs)
		run_end(a->runs);
}

/* ==== injected messages =================================================================== */

/* Appends one event of thread now (pipelined: the events of one call keep their order). */
static void append_now(struct tc_agent *a, const char *thread, cJSON *ns, const char *node, const char *method,
		       cJSON *data)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "method", method);
	cJSON *params = cJSON_AddObjectToObject(ev, "params");
	cJSON_AddItemToObject(params, "namespace", cJSON_Duplicate(ns, 1));
	if (node)
		cJSON_AddStringToObject(params, "node", node);
	cJSON_AddItemToObject(params, "data", data);
	char *json = tc_agent_print(ev);
	struct tc_store_cmd c;
	tc_store_append(&c, thread, json, NULL);
	tc_agent_send(a->wr, tc_agent_ignore_reply, NULL, &c);
	free(json);
}

/*
 * A message injected into a running run (input.inject, or run.start while a
 * run is active): a whole message — start, one text block, finish — so that
 * every message assembler sees it begin and end. It arrives while the run
 * may be streaming a message of its own in the same namespace; blocks of one
 * (namespace, node) never interleave, so the injected one has a node of its
 * own, "input".
 */
void tc_agent_inject(struct tc_agent *a, const char *thread, const char *stream_id, const cJSON *ns, const char *role,
		     const char *text)
{
	char id[96];
	snprintf(id, sizeof(id), "inject-%s", stream_id);
	cJSON *d = tc_agent_obj("event", "message-start");
	cJSON_AddStringToObject(d, "role", role);
	cJSON_AddStringToObject(d, "id", id);
	append_now(a, thread, (cJSON *)ns, "input", "messages", d);
	/* One text block: start (empty), the text as one delta, finish. */
	static const char *const phases[][2] = { { "content-block-start", "content" },
						 { "content-block-delta", "delta" },
						 { "content-block-finish", "content" } };
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		d = tc_agent_obj("event", phases[i][0]);
		cJSON_AddNumberToObject(d, "index", 0);
		cJSON *b = cJSON_AddObjectToObject(d, phases[i][1]);
		cJSON_AddStringToObject(b, "type", i == 1 ? "text-delta" : "text");
		cJSON_AddStringToObject(b, "text", i == 0 ? "" : text);
		append_now(a, thread, (cJSON *)ns, "input", "messages", d);
	}
	d = tc_agent_obj("event", "message-finish");
	cJSON_AddStringToObject(d, "reason", "stop");
	append_now(a, thread, (cJSON *)ns, "input", "messages", d);
}
