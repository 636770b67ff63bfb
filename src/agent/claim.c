/*
 * claim.c — the worker registry and the commands a dead worker left (claim.h).
 */
#include "claim.h"

#include "commands.h"
#include "log.h"

/* Commands read by a worker that died before acknowledging them. */
static void on_claim(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_agent *a = priv;
	if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || a->stopping)
		return;
	const redisReply *entries = reply->element[1];
	for (size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i < entries->elements; i++) {
		tc_log(TC_LOG_INFO, "claimed a command another worker left", TC_LS("agent", a->name));
		tc_agent_take(a, entries->element[i]);
	}
}

static void on_registered(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_agent *a = priv;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		tc_log(TC_LOG_WARN, "cannot register as a worker", TC_LS("error", reply ? reply->str : "no reply"));
		return;
	}
	if (!a->registered)
		tc_log(TC_LOG_INFO, "registered", TC_LS("agent", a->name), TC_LS("assistant", "*"));
	a->registered = true;
}

void tc_agent_register(struct tc_agent *a)
{
	struct tc_store_cmd c;
	/* Live for three heartbeats: a missed one is no outage. */
	tc_store_register(&c, "*", a->name, 3 * (a->claim_idle_ms / 2 + 1));
	tc_agent_send(a->wr, on_registered, a, &c);
}

/* The heartbeat: register again, and claim what a dead worker left. */
static void on_claim_tick(uv_timer_t *t)
{
	struct tc_agent *a = t->data;
	struct tc_store_cmd c;
	tc_agent_register(a);
	tc_store_worker_claim(&c, a->name, a->claim_idle_ms, 32);
	tc_agent_send(a->wr, on_claim, a, &c);
}

void tc_agent_claim_start(struct tc_agent *a)
{
	uint64_t every = (uint64_t)a->claim_idle_ms / 2 + 1;
	uv_timer_init(a->loop, &a->claim);
	a->claim.data = a;
	uv_timer_start(&a->claim, on_claim_tick, every, every);
}

void tc_agent_claim_stop(struct tc_agent *a)
{
	uv_timer_stop(&a->claim);
	uv_close((uv_handle_t *)&a->claim, NULL);
}
