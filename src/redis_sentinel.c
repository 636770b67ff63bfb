#include "redis_sentinel.h"

#include <stdint.h>
#include <stdlib.h>

#include "log.h"
#include "redis_uv.h"

static void ask(struct tc__sentinel *s);

void tc__sentinel_init(struct tc__sentinel *s, uv_loop_t *loop, const struct tc_config *cfg, unsigned timeout_ms,
		       const struct tc__sentinel_ops *ops, void *ctx)
{
	*s = (struct tc__sentinel){ .cfg = cfg, .loop = loop, .timeout_ms = timeout_ms, .ops = ops, .ctx = ctx };
	uv_timer_init(loop, &s->timer);
	s->timer.data = s;
}

/* Forgets the current Sentinel's connection; an answer on it is ignored. */
static void forget(struct tc__sentinel *s)
{
	uv_timer_stop(&s->timer);
	s->gen++;
	if (s->ac) {
		redisAsyncContext *ac = s->ac;
		s->ac = NULL;
		redisAsyncFree(ac); /* deferred by hiredis inside its callbacks */
	}
}

/* The current Sentinel did not help: ask the next. */
static void ask_next(struct tc__sentinel *s)
{
	forget(s);
	s->idx++;
	ask(s);
}

static void on_timeout(uv_timer_t *t)
{
	struct tc__sentinel *s = t->data;
	tc_log(TC_LOG_WARN, "sentinel did not answer", TC_LS("sentinel", s->cfg->sentinels[s->idx].host),
	       TC_LI("port", s->cfg->sentinels[s->idx].port));
	ask_next(s);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct tc__sentinel *s = ac->data;
	if (status == REDIS_OK || ac != s->ac)
		return;
	tc_log(TC_LOG_WARN, "cannot reach a sentinel", TC_LS("sentinel", s->cfg->sentinels[s->idx].host),
	       TC_LI("port", s->cfg->sentinels[s->idx].port), TC_LS("error", ac->errstr));
	s->ac = NULL; /* hiredis frees it after this callback */
	ask_next(s);
}

/* The connection closed before an answer: over TLS, the pump knows why. */
static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct tc__sentinel *s = ac->data;
	if (ac != s->ac || s->stopped)
		return;
	const char *tls_err = tc_redis_uv_error(ac);
	tc_log(TC_LOG_WARN, "cannot reach a sentinel", TC_LS("sentinel", s->cfg->sentinels[s->idx].host),
	       TC_LI("port", s->cfg->sentinels[s->idx].port),
	       TC_LS("error", tls_err              ? tls_err
			      : status == REDIS_OK ? "connection closed"
						   : ac->errstr));
	s->ac = NULL; /* hiredis frees it after this callback */
	ask_next(s);
}

static void on_auth(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc__sentinel *s = ac->data;
	redisReply *rep = reply;

	if (!rep || ac != s->ac || (uintptr_t)privdata != s->gen || s->stopped || rep->type != REDIS_REPLY_ERROR)
		return;
	tc_log(TC_LOG_ERROR, "sentinel refused AUTH", TC_LS("sentinel", s->cfg->sentinels[s->idx].host),
	       TC_LI("port", s->cfg->sentinels[s->idx].port), TC_LS("error", rep->str));
	ask_next(s);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc__sentinel *s = ac->data;
	redisReply *rep = reply;

	if (!rep || ac != s->ac || (uintptr_t)privdata != s->gen || s->stopped)
		return;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_STRING) {
		tc_log(TC_LOG_WARN, "sentinel does not know the master",
		       TC_LS("sentinel", s->cfg->sentinels[s->idx].host),
		       TC_LS("master", s->cfg->redis_sentinel_master),
		       TC_LS("error", rep->type == REDIS_REPLY_ERROR ? rep->str : NULL));
		ask_next(s);
		return;
	}
	forget(s); /* the reply lives until this callback returns */
	s->resolving = false;
	s->ops->master(s->ctx, rep->element[0]->str, atoi(rep->element[1]->str));
}

static void ask(struct tc__sentinel *s)
{
	const struct tc_config *cfg = s->cfg;
	if (s->stopped)
		return;
	if (s->idx >= cfg->nsentinels) {
		s->resolving = false;
		tc_log(TC_LOG_WARN, "no sentinel named the master; retrying",
		       TC_LS("master", cfg->redis_sentinel_master));
		s->ops->unknown(s->ctx);
		return;
	}
	const struct tc_hostport *h = &cfg->sentinels[s->idx];
	redisAsyncContext *ac = redisAsyncConnect(h->host, h->port);
	if (!ac || ac->err || tc_redis_uv_attach(ac, s->loop, on_connect, cfg->tls, h->host)) {
		if (ac)
			redisAsyncFree(ac);
		s->idx++;
		ask(s);
		return;
	}
	ac->data = s;
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	s->ac = ac;
	uv_timer_start(&s->timer, on_timeout, s->timeout_ms, 0);
	if (h->password && h->user)
		redisAsyncCommand(ac, on_auth, (void *)(uintptr_t)s->gen, "AUTH %s %s", h->user, h->password);
	else if (h->password)
		redisAsyncCommand(ac, on_auth, (void *)(uintptr_t)s->gen, "AUTH %s", h->password);
	redisAsyncCommand(ac, on_reply, (void *)(uintptr_t)s->gen, "SENTINEL get-master-addr-by-name %s",
			  cfg->redis_sentinel_master);
}

void tc__sentinel_resolve(struct tc__sentinel *s)
{
	if (s->resolving || s->stopped)
		return;
	s->resolving = true;
	s->idx = 0;
	ask(s);
}

void tc__sentinel_stop(struct tc__sentinel *s)
{
	s->stopped = true;
	forget(s);
	uv_close((uv_handle_t *)&s->timer, NULL);
}
