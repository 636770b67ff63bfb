/*
 * agent.c — the helpers every part of threadcast-agent uses (agent.h).
 */
#include "agent.h"

#include "log.h"

extern const char tc_agent_state_source[];
extern const size_t tc_agent_state_source_len;

int tc_agent_send(struct tc_redis *r, tc_redis_cb *cb, void *priv, const struct tc_store_cmd *c)
{
	return tc_redis_cmd(r, cb, priv, c->argv);
}

void tc_agent_ignore_reply(struct tc_redis *r, redisReply *reply, void *priv)
{
	if (reply && reply->type == REDIS_REPLY_ERROR)
		tc_log(TC_LOG_WARN, "redis error", TC_LS("error", reply->str));
}

char *tc_agent_print(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

cJSON *tc_agent_obj(const char *k1, const char *v1)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, k1, v1);
	return o;
}

int tc_agent_state_op(struct tc_agent *a, const char *thread, tc_redis_cb *cb, void *priv, int argc, const char **args)
{
	char h[TC_STORE_KEY_MAX], ck[TC_STORE_KEY_MAX];
	const char *argv[16] = { "EVAL", tc_agent_state_source, "2", tc_store_key(h, thread, TC_KEY_AGENT),
				 tc_store_key(ck, thread, TC_KEY_AGENT_CKPTS) };
	for (int i = 0; i < argc && i < 10; i++)
		argv[5 + i] = args[i];
	return tc_redis_cmd(a->wr, cb, priv, argv);
}

const char *tc_agent_str_at(const redisReply *r, size_t i)
{
	return r && r->type == REDIS_REPLY_ARRAY && i < r->elements && r->element[i]->type == REDIS_REPLY_STRING
		       ? r->element[i]->str
		       : NULL;
}
