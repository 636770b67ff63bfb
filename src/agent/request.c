/*
 * request.c — a command read from tc:commands, and its one answer (request.h).
 */
#include "request.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void tc_agent_request_free(struct tc_agent_request *q)
{
	free(q->stream_id);
	free(q->thread);
	free(q->method);
	free(q->corr);
	free(q->reply);
	free(q->query);
	cJSON_Delete(q->params);
	free(q);
}

void tc_agent_answer(struct tc_agent_request *q, cJSON *result, const char *error, const char *message)
{
	cJSON *m = tc_agent_obj("corr", q->corr);
	if (error) {
		cJSON_AddStringToObject(m, "type", "error");
		cJSON_AddStringToObject(m, "error", error);
		cJSON_AddStringToObject(m, "message", message);
		cJSON_Delete(result);
	} else {
		cJSON_AddStringToObject(m, "type", "success");
		cJSON_AddItemToObject(m, "result", result ? result : cJSON_CreateObject());
	}
	char *payload = tc_agent_print(m);
	struct tc_store_cmd c;
	tc_store_worker_answer(&c, q->reply, payload);
	tc_agent_send(q->a->wr, tc_agent_ignore_reply, NULL, &c);
	free(payload);
	tc_store_worker_ack(&c, q->stream_id);
	tc_agent_send(q->a->wr, tc_agent_ignore_reply, NULL, &c);
	tc_agent_request_free(q);
}

/* The value of field name in an entry's [field, value, ...], else NULL. */
static const char *field(const redisReply *fields, const char *name)
{
	for (size_t i = 0; i + 1 < fields->elements; i += 2)
		if (fields->element[i]->type == REDIS_REPLY_STRING && !strcmp(fields->element[i]->str, name) &&
		    fields->element[i + 1]->type == REDIS_REPLY_STRING)
			return fields->element[i + 1]->str;
	return NULL;
}

struct tc_agent_request *tc_agent_request_parse(struct tc_agent *a, const redisReply *e)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_ARRAY)
		return NULL;
	const redisReply *f = e->element[1];
	const char *thread = field(f, "thread"), *method = field(f, "method"), *params = field(f, "params");
	const char *corr = field(f, "corr"), *reply = field(f, "reply"), *deadline = field(f, "deadline");
	bool late = deadline && atoll(deadline) < tc_wall_ms();
	if (!thread || !method || !corr || !reply || late) {
		/* Malformed, or nobody waits for it any more: acknowledge and move on. */
		struct tc_store_cmd c;
		tc_store_worker_ack(&c, e->element[0]->str);
		tc_agent_send(a->wr, tc_agent_ignore_reply, NULL, &c);
		return NULL;
	}
	struct tc_agent_request *q = tc_xcalloc(1, sizeof(*q));
	q->a = a;
	q->stream_id = tc_xstrdup(e->element[0]->str);
	q->thread = tc_xstrdup(thread);
	q->method = tc_xstrdup(method);
	q->corr = tc_xstrdup(corr);
	q->reply = tc_xstrdup(reply);
	q->params = cJSON_Parse(params ? params : "{}");
	if (!q->params)
		q->params = cJSON_CreateObject();
	return q;
}
