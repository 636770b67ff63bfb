#include "redis_link.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redis_uv.h"
#include "store.h"

/* Setup steps, passed as privdata (hiredis wants a non-const pointer). */
static char step_auth[] = "AUTH", step_select[] = "SELECT", step_multi[] = "MULTI", step_load[] = "FUNCTION LOAD",
	    step_exec[] = "EXEC", step_role[] = "ROLE", step_ping[] = "PING";

static void connect_now(struct tc__link *l);

void tc__link_init(struct tc__link *l, enum tc__link_kind kind, const char *name, const char *addr,
		   const struct tc__link_conf *conf, const struct tc__link_ops *ops, void *ctx)
{
	*l = (struct tc__link){ .ctx = ctx, .kind = kind, .name = name, .addr = addr, .conf = conf, .ops = ops };
	uv_timer_init(conf->loop, &l->retry);
	l->retry.data = l;
}

/* The retry timer doubles as the connect timeout while an attempt is out. */
static void on_retry_timer(uv_timer_t *t)
{
	struct tc__link *l = t->data;
	if (!l->ac && !l->ps) {
		connect_now(l);
		return;
	}
	if (!l->up) {
		tc_log(TC_LOG_WARN, "redis connect timed out", TC_LS("link", l->name), TC_LS("node", l->addr),
		       TC_LI("timeout_ms", TC__LINK_CONNECT_TIMEOUT_MS));
		tc__link_drop(l);
	}
}

void tc__link_start(struct tc__link *l, bool at_once)
{
	if (l->ac || l->ps || (!at_once && uv_is_active((uv_handle_t *)&l->retry)))
		return;
	uv_timer_start(&l->retry, on_retry_timer, 0, 0);
}

void tc__link_retry_later(struct tc__link *l)
{
	const struct tc_config *cfg = l->conf->cfg;
	if (l->closed)
		return;
	uint64_t delay = (uint64_t)cfg->redis_backoff_min_ms;
	for (unsigned i = 0; i < l->attempt && delay < (uint64_t)cfg->redis_backoff_max_ms; i++)
		delay *= 2;
	if (delay > (uint64_t)cfg->redis_backoff_max_ms)
		delay = (uint64_t)cfg->redis_backoff_max_ms;
	/* Jitter in [delay/2, delay] so a fleet does not reconnect in lockstep. */
	delay = delay / 2 + (uint64_t)rand() % (delay / 2 + 1);
	l->attempt++;
	uv_timer_start(&l->retry, on_retry_timer, delay, 0);
}

/* The connection is gone (already freed or being freed): retry, and tell. */
static void link_lost(struct tc__link *l)
{
	bool was_up = l->up;

	l->ac = NULL;
	l->ps = NULL;
	l->up = false;
	tc__link_retry_later(l);
	l->ops->lost(l->ctx, l, was_up);
}

/*
 * TLS refused before the link came up (the certificate, the handshake):
 * unlike a refused connect, no retry will mend it by itself, so every
 * attempt says so at error level.
 */
static void log_tls_failed(struct tc__link *l, const char *why)
{
	tc_log(TC_LOG_ERROR, "redis connect failed", TC_LS("link", l->name), TC_LS("node", l->addr),
	       TC_LS("error", why), TC_LI("attempt", l->attempt + 1));
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct tc__link *l = ac->data;

	if (l->ac != ac)
		return;
	/* Over TLS, hiredis only sees the pump close: the pump knows why. */
	const char *tls_err = tc_redis_uv_error(ac);
	if (l->up)
		tc_log(TC_LOG_WARN, "redis disconnected", TC_LS("link", l->name), TC_LS("node", l->addr),
		       TC_LS("error", tls_err              ? tls_err
				      : status == REDIS_OK ? NULL
							   : ac->errstr));
	else if (tls_err)
		log_tls_failed(l, tls_err);
	link_lost(l);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct tc__link *l = ac->data;

	if (status == REDIS_OK || l->ac != ac)
		return;
	/* hiredis frees ac after this callback returns. */
	tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed", TC_LS("link", l->name),
	       TC_LS("node", l->addr), TC_LS("error", ac->errstr), TC_LI("attempt", l->attempt + 1));
	link_lost(l);
}

void tc__link_drop(struct tc__link *l)
{
	if (l->ps) {
		tc_pslink_close(l->ps);
		link_lost(l);
		return;
	}
	redisAsyncContext *ac = l->ac;
	if (!ac)
		return;
	/* Safe inside a hiredis callback too: hiredis defers the free. */
	redisAsyncFree(ac);
	if (l->ac == ac)
		link_lost(l); /* never fully connected: no disconnect callback comes */
}

bool tc__link_close(struct tc__link *l, uv_close_cb timer_closed)
{
	bool was_up = l->up;

	l->closed = true;
	tc_reply_arena_close(&l->arena);
	uv_timer_stop(&l->retry);
	l->up = false;
	if (l->ac) {
		redisAsyncContext *ac = l->ac;
		l->ac = NULL;
		redisAsyncFree(ac); /* pending callbacks get NULL */
	}
	if (l->ps) {
		tc_pslink_close(l->ps);
		l->ps = NULL;
	}
	uv_close((uv_handle_t *)&l->retry, timer_closed);
	return was_up;
}

static void link_up(struct tc__link *l)
{
	l->up = true;
	uv_timer_stop(&l->retry);
	tc_log(TC_LOG_INFO, "redis connected", TC_LS("link", l->name), TC_LS("node", l->addr),
	       TC_LI("after_attempts", l->attempt + 1));
	l->attempt = 0;
	l->ops->up(l->ctx, l);
}

bool tc__link_is_master(const redisReply *rep)
{
	return rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 && rep->element[0]->type == REDIS_REPLY_STRING &&
	       !strcmp(rep->element[0]->str, "master");
}

static void on_setup_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc__link *l = ac->data;
	redisReply *rep = reply;
	const char *step = privdata;

	if (!rep || l->ac != ac)
		return;
	/* A replica (a seed that is one) cannot load the functions; its master
	 * has them. It refuses each load, and then the transaction. */
	if (rep->type == REDIS_REPLY_ERROR && step == step_load && !strncmp(rep->str, "READONLY", 8)) {
		l->readonly = true;
		return;
	}
	if (rep->type == REDIS_REPLY_ERROR && step == step_exec && l->readonly)
		return;
	/* EXEC answers each load: a library Redis refused fails the setup. */
	for (size_t i = 0; step == step_exec && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
		if (rep->element[i]->type == REDIS_REPLY_ERROR) {
			rep = rep->element[i];
			break;
		}
	if (step == step_role && !tc__link_is_master(rep)) {
		tc_log(TC_LOG_WARN, "the node the sentinels named is not a master (yet); asking again",
		       TC_LS("node", l->addr));
		tc__link_drop(l);
		return;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		/* LOADING is Redis starting up: routine, retried like a refusal. */
		tc_log(strncmp(rep->str, "LOADING", 7) ? TC_LOG_ERROR : TC_LOG_INFO,
		       "redis refused the connection setup", TC_LS("link", l->name), TC_LS("node", l->addr),
		       TC_LS("step", step), TC_LS("error", rep->str));
		tc__link_drop(l);
		return;
	}
	if (step == step_ping)
		link_up(l);
}

/* ---- the pub/sub connection's events ---- */

static void ps_up(void *ctx)
{
	link_up(ctx);
}

static void ps_down(void *ctx, const char *why)
{
	struct tc__link *l = ctx;
	if (l->up)
		tc_log(TC_LOG_WARN, "redis disconnected", TC_LS("link", l->name), TC_LS("node", l->addr),
		       TC_LS("error", why));
	else if (!strncmp(why, "TLS ", 4))
		log_tls_failed(l, why);
	else
		tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed", TC_LS("link", l->name),
		       TC_LS("node", l->addr), TC_LS("error", why), TC_LI("attempt", l->attempt + 1));
	tc_pslink_close(l->ps);
	link_lost(l);
}

static void ps_push(void *ctx, const char *kind, const char *ch, size_t clen, const char *data, size_t dlen)
{
	struct tc__link *l = ctx;
	l->ops->push(l->ctx, kind, ch, clen, data, dlen);
}

static void ps_refused(void *ctx, const char *verb, const char *channel, const char *err)
{
	struct tc__link *l = ctx;
	l->ops->refused(l->ctx, verb, channel, err);
}

static const struct tc_pslink_ops ps_ops = {
	.up = ps_up,
	.down = ps_down,
	.push = ps_push,
	.refused = ps_refused,
};

static void connect_now(struct tc__link *l)
{
	const struct tc_redis_addr *cred = &l->conf->cfg->redis;
	struct tc__link_addr a = { 0 };

	if (!l->ops->address(l->ctx, l, &a))
		return; /* the owner starts it again once it knows where */

	l->up = false;
	l->readonly = false;
	uv_timer_start(&l->retry, on_retry_timer, TC__LINK_CONNECT_TIMEOUT_MS, 0);
	if (l->kind == TC__LINK_SUB) {
		struct tc_pslink_addr pa = { .host = a.host,
					     .port = a.port,
					     .unix_path = a.unix_path,
					     .user = cred->user,
					     .password = cred->password,
					     .db = a.db,
					     .tls = a.unix_path ? NULL : l->conf->cfg->tls };
		l->ps = tc_pslink_open(l->conf->loop, &pa, &ps_ops, l);
		return;
	}
	redisAsyncContext *ac = a.unix_path ? redisAsyncConnectUnix(a.unix_path) : redisAsyncConnect(a.host, a.port);
	if (!ac || ac->err) {
		tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed", TC_LS("link", l->name),
		       TC_LS("node", l->addr), TC_LS("error", ac ? ac->errstr : "out of memory"),
		       TC_LI("attempt", l->attempt + 1));
		if (ac)
			redisAsyncFree(ac);
		tc__link_retry_later(l);
		return;
	}
	ac->data = l;
	tc_reply_arena_use(ac->c.reader, &l->arena);
	if (tc_redis_uv_attach(ac, l->conf->loop, on_connect, a.unix_path ? NULL : l->conf->cfg->tls, a.host)) {
		redisAsyncFree(ac);
		tc__link_retry_later(l);
		return;
	}
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	l->ac = ac;

	/* Queued now, sent once the socket connects, answered in order. */
	if (cred->password && cred->user)
		redisAsyncCommand(ac, on_setup_reply, step_auth, "AUTH %s %s", cred->user, cred->password);
	else if (cred->password)
		redisAsyncCommand(ac, on_setup_reply, step_auth, "AUTH %s", cred->password);
	if (a.db)
		redisAsyncCommand(ac, on_setup_reply, step_select, "SELECT %d", a.db);
	if (l->conf->check_role)
		redisAsyncCommand(ac, on_setup_reply, step_role, "ROLE");
	/* The function libraries, all in one transaction: replacing an older set
	 * (one library named threadcast holding every function) is atomic, and
	 * no client sees a function missing (protocol/README.md). */
	redisAsyncCommand(ac, on_setup_reply, step_multi, "MULTI");
	const char *lib;
	size_t off = 0, len;
	while (tc_store_library_next(l->conf->fn_src, l->conf->fn_len, &off, &lib, &len))
		redisAsyncCommand(ac, on_setup_reply, step_load, "FUNCTION LOAD REPLACE %b", lib, len);
	redisAsyncCommand(ac, on_setup_reply, step_exec, "EXEC");
	redisAsyncCommand(ac, on_setup_reply, step_ping, "PING");
}
