/*
 * state.c — the commands answered from the thread's agent state (state.h).
 */
#include "state.h"

#include <string.h>

#include "run.h"

/* The namespaces the reference agent's graph has: the root and its researcher. */
static bool known_namespace(const cJSON *ns)
{
	int n = cJSON_GetArraySize(ns);
	const cJSON *seg = cJSON_GetArrayItem(ns, 0);
	return n == 0 || (n == 1 && cJSON_IsString(seg) && !strcmp(seg->valuestring, "researcher"));
}

/* The thread's state is read: state.get's answer, or input.inject's when a run is active. */
static void on_state(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct tc_agent_request *q = priv;
	const char *st = tc_agent_str_at(reply, 0);
	if (!st) {
		tc_agent_answer(q, NULL, "unknown_error", "the agent's state store failed");
		return;
	}
	if (!strcmp(q->method, "input.inject")) {
		if (strcmp(st, "running")) {
			tc_agent_answer(q, NULL, "no_such_run", "there is no active run to inject into");
			return;
		}
		/* The injected message shows up on the thread's stream, whole. */
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(q->params, "message");
		const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
		tc_agent_inject(q->a, q->thread, q->stream_id, cJSON_GetObjectItemCaseSensitive(q->params, "namespace"),
				role && !strcmp(role, "system") ? "system" : "human",
				cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")));
		tc_agent_answer(q, cJSON_CreateObject(), NULL, NULL);
		return;
	}
	if (!known_namespace(cJSON_GetObjectItemCaseSensitive(q->params, "namespace"))) {
		tc_agent_answer(q, NULL, "no_such_namespace",
				"this thread's graph has no such namespace "
				"(it has [] and [\"researcher\"])");
		return;
	}
	cJSON *values = cJSON_Parse(tc_agent_str_at(reply, 1));
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(q->params, "keys");
	if (!cJSON_IsObject(values)) {
		cJSON_Delete(values);
		values = cJSON_CreateObject();
	}
	if (cJSON_IsArray(keys)) {
		cJSON *picked = cJSON_CreateObject(), *k;
		cJSON_ArrayForEach(k, keys)
		{
			cJSON *v = cJSON_IsString(k) ? cJSON_GetObjectItemCaseSensitive(values, k->valuestring) : NULL;
			if (v)
				cJSON_AddItemToObject(picked, k->valuestring, cJSON_Duplicate(v, 1));
		}
		cJSON_Delete(values);
		values = picked;
	}
	cJSON *res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "values", values);
	cJSON *last = cJSON_Parse(tc_agent_str_at(reply, 2));
	cJSON *lid = cJSON_GetObjectItemCaseSensitive(last, "id");
	if (cJSON_IsString(lid)) {
		cJSON *ref = cJSON_AddObjectToObject(res, "checkpoint");
		cJSON_AddStringToObject(ref, "id", lid->valuestring);
	}
	cJSON_Delete(last);
	tc_agent_answer(q, res, NULL, NULL);
}

/* The checkpoint list is read (oldest first): one page of it, newest first. */
static void on_checkpoints(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct tc_agent_request *q = priv;
	if (!reply || reply->type != REDIS_REPLY_ARRAY) {
		tc_agent_answer(q, NULL, "unknown_error", "the agent's state store failed");
		return;
	}
	const cJSON *limit = cJSON_GetObjectItemCaseSensitive(q->params, "limit");
	const char *before = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q->params, "before"));
	double max = cJSON_IsNumber(limit) ? limit->valuedouble : 1e18;
	bool skipping = before != NULL;
	cJSON *res = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(res, "checkpoints");
	/* Newest first; `before` is the id the previous page ended with. */
	for (size_t i = reply->elements; i-- > 0 && cJSON_GetArraySize(list) < max;) {
		cJSON *c = cJSON_Parse(reply->element[i]->str);
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "id"));
		if (skipping) {
			if (id && !strcmp(id, before))
				skipping = false;
			cJSON_Delete(c);
			continue;
		}
		cJSON_AddItemToArray(list, c);
	}
	tc_agent_answer(q, res, NULL, NULL);
}

void tc_agent_read_state(struct tc_agent_request *q)
{
	const char *args[] = { "state" };
	if (tc_agent_state_op(q->a, q->thread, on_state, q, 1, args))
		tc_agent_answer(q, NULL, "unknown_error", "the agent lost Redis");
}

void tc_agent_list_checkpoints(struct tc_agent_request *q)
{
	char ck[TC_STORE_KEY_MAX];
	const char *argv[] = { "LRANGE", tc_store_key(ck, q->thread, TC_KEY_AGENT_CKPTS), "0", "-1", NULL };
	if (tc_redis_cmd(q->a->wr, on_checkpoints, q, argv))
		tc_agent_answer(q, NULL, "unknown_error", "the agent lost Redis");
}
