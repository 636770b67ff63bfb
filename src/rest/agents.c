/*
 * rest/agents.c — seed 002's agent endpoint, POST /v1/agents/:agent_name/stream
 * (rest.h): a request becomes runs.create for the agent, streamed as agent
 * events (run/agent_events.h); continuations answer its interrupts.
 */
#include "rest/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run/agent_events.h"
#include "run/follow.h"

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
	tc__rest_answer_json(r, status, e);
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
		cJSON_ArrayForEach(block, content)
		{
			const char *type = tc_run_str(block, "type"), *t = tc_run_str(block, "text");
			if (!type || strcmp(type, "text") || !t) {
				snprintf(why, cap,
					 "a message's content blocks must be {\"type\": \"text\", \"text\": …}");
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
		snprintf(why, cap, "context.actionResults must be an array of 1 to %d action results",
			 AGENT_ACTIONS_MAX);
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
	cJSON_ArrayForEach(m, msgs)
	{
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
		cJSON_ArrayForEach(a, results)
		{
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
	cJSON_ArrayForEach(task, tc_run_get(thread, "interrupts"))
	{
		if (cJSON_IsArray(task)) {
			cJSON_ArrayForEach(i, task)
			{
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
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
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
	cJSON_ArrayForEach(a, r->actions)
	{
		if (!waits_for(t, a->valuestring)) {
			char msg[300];
			snprintf(msg, sizeof(msg), "the thread does not wait for action %.200s", a->valuestring);
			agent_error(r, "invalid_action_id", msg);
			cJSON_Delete(t);
			return;
		}
	}
	cJSON_Delete(t);
	tc__rest_run_create(r);
}

void tc__rest_agent_begin(struct tc_rest *r)
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
		agent_error(r, "invalid_message_format",
			    "threadId must be a thread id: 1 to 128 of A-Z a-z 0-9 . _ : -");
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
	r->refused = agent_refused;
	if (tid) {
		tc__rest_fcall(r, "threads.get", agent_thread_checked);
		return;
	}
	tc__rest_run_create(r);
}
