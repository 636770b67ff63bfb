/*
 * commands.c — serving the runtime commands read from tc:commands
 * (commands.h): run.start, state.fork and input.respond here, the state
 * answers in state.c.
 */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "request.h"
#include "run.h"
#include "state.h"
#include "util.h"

/* A run's input as text: a string, the last message's content, or the JSON itself. */
static char *query_of(const cJSON *input)
{
	if (cJSON_IsString(input))
		return tc_xstrdup(input->valuestring);
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(input, "messages");
	const cJSON *last = cJSON_IsArray(msgs) ? cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1) : NULL;
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(last, "content");
	if (cJSON_IsString(content))
		return tc_xstrdup(content->valuestring);
	char *s = input ? cJSON_PrintUnformatted(input) : NULL;
	return s ? s : tc_xstrdup("");
}

/* The run asks for input: config.interrupt, or the word in its input. */
static bool wants_interrupt(const char *query, const cJSON *params)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(params, "config");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "interrupt")))
		return true;
	for (const char *p = query; *p; p++)
		if (!strncasecmp(p, "interrupt", 9))
			return true;
	return false;
}

/* Starts or resumes the run an agent_state.lua transition allowed. */
static void begin_from_reply(struct tc_agent_request *q, const redisReply *reply)
{
	const char *st = tc_agent_str_at(reply, 0), *run_id = tc_agent_str_at(reply, 1);
	if (!strcmp(st, "started")) {
		tc_agent_run_begin(q->a, q->thread, run_id, q->query, q->ask, NULL, 0);
	} else if (!strcmp(st, "resumed")) {
		/* resumed, run_id, query, ask, phase, response */
		const char *query = tc_agent_str_at(reply, 2), *ask = tc_agent_str_at(reply, 3);
		const char *phase = tc_agent_str_at(reply, 4);
		tc_agent_run_begin(q->a, q->thread, run_id, query ? query : "", ask && !strcmp(ask, "1"),
				   tc_agent_str_at(reply, 5), phase ? atoi(phase) : 0);
	}
}

static void on_start(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct tc_agent_request *q = priv;
	const char *st = tc_agent_str_at(reply, 0);

	if (!st) {
		tc_agent_answer(q, NULL, "unknown_error", "the agent's state store failed");
		return;
	}
	if (!strcmp(st, "no_checkpoint")) {
		tc_agent_answer(q, NULL, "no_such_checkpoint", "no checkpoint with that id on this thread");
		return;
	}
	if (!strcmp(st, "running") && !strcmp(q->method, "state.fork")) {
		tc_agent_answer(q, NULL, "invalid_argument", "the thread has an active run; fork when it ends");
		return;
	}
	cJSON *res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "run_id", tc_agent_str_at(reply, 1) ? tc_agent_str_at(reply, 1) : "");
	if (!strcmp(q->method, "state.fork"))
		cJSON_AddStringToObject(res, "thread_id", q->thread);
	if (!strcmp(st, "running")) {
		/* A run is active: the input joins it (CDDL 4a), it does not start another. */
		cJSON *root = cJSON_CreateArray();
		tc_agent_inject(q->a, q->thread, q->stream_id, root, "human", q->query);
		cJSON_Delete(root);
	} else {
		begin_from_reply(q, reply);
	}
	tc_agent_answer(q, res, NULL, NULL);
}

/* run.start, state.fork: agent_state.lua decides (start, resume, join the active run, refuse). */
static void start_run(struct tc_agent_request *q)
{
	struct tc_agent *a = q->a;
	char run_id[96];
	q->query = query_of(cJSON_GetObjectItemCaseSensitive(q->params, "input"));
	q->ask = wants_interrupt(q->query, q->params);
	snprintf(run_id, sizeof(run_id), "run-%s-%lu", a->name, ++a->run_counter);
	const char *ck = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q->params, "checkpoint_id"));
	const char *args[] = {
		strcmp(q->method, "state.fork") ? "start" : "fork", run_id, q->query, q->ask ? "1" : "0", a->name, ck
	};
	if (tc_agent_state_op(a, q->thread, on_start, q, ck ? 6 : 5, args))
		tc_agent_answer(q, NULL, "unknown_error", "the agent lost Redis");
}

static void on_resume(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct tc_agent_request *q = priv;
	const char *st = tc_agent_str_at(reply, 0);
	if (!st)
		tc_agent_answer(q, NULL, "unknown_error", "the agent's state store failed");
	else if (!strcmp(st, "none"))
		tc_agent_answer(q, NULL, "no_such_interrupt", "this thread has no interrupted run");
	else if (!strcmp(st, "mismatch"))
		tc_agent_answer(q, NULL, "no_such_interrupt", "the thread's run waits on another interrupt_id");
	else {
		begin_from_reply(q, reply);
		tc_agent_answer(q, cJSON_CreateObject(), NULL, NULL);
	}
}

/* input.respond: resumes the thread's interrupted run with the response. */
static void respond(struct tc_agent_request *q)
{
	/* One interrupt at a time in this agent: the first entry decides. */
	const cJSON *p = q->params, *many = cJSON_GetObjectItemCaseSensitive(p, "responses");
	const cJSON *e = cJSON_IsArray(many) ? cJSON_GetArrayItem(many, 0) : p;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "interrupt_id");
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(e, "response");
	char *text = cJSON_IsString(resp) ? tc_xstrdup(resp->valuestring)
					  : (resp ? cJSON_PrintUnformatted(resp) : tc_xstrdup(""));
	const char *args[] = { "resume", cJSON_IsString(id) ? id->valuestring : "", text, q->a->name };
	int rc = tc_agent_state_op(q->a, q->thread, on_resume, q, 4, args);
	free(text);
	if (rc)
		tc_agent_answer(q, NULL, "unknown_error", "the agent lost Redis");
}

/* Serves q: every method the agent knows is answered, once, now or when Redis replies. */
static void handle(struct tc_agent *a, struct tc_agent_request *q)
{
	tc_log(TC_LOG_DEBUG, "command", TC_LS("thread", q->thread), TC_LS("method", q->method), TC_LS("corr", q->corr));
	if (a->stall && !strcmp(q->method, a->stall)) {
		/* Fault injection: hold the command as a hung worker would. */
		tc_agent_request_free(q);
		return;
	}
	if (!strcmp(q->method, "run.start") || !strcmp(q->method, "state.fork")) {
		start_run(q);
	} else if (!strcmp(q->method, "input.respond")) {
		respond(q);
	} else if (!strcmp(q->method, "state.listCheckpoints")) {
		tc_agent_list_checkpoints(q);
	} else if (!strcmp(q->method, "state.get") || !strcmp(q->method, "input.inject")) {
		tc_agent_read_state(q);
	} else {
		tc_agent_answer(q, NULL, "not_supported", "threadcast-agent does not handle this method");
	}
}

void tc_agent_take(struct tc_agent *a, const redisReply *entry)
{
	struct tc_agent_request *q = tc_agent_request_parse(a, entry);
	if (q)
		handle(a, q);
}
