#include "redis_source.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* Handshake steps, passed as privdata (hiredis wants a non-const pointer). */
static char step_auth[] = "AUTH", step_select[] = "SELECT", step_ping[] = "PING";

/* PINGs that may go unanswered before the connection is dropped. */
#define PING_DEAD_TICKS 5

struct tc_redis {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	redisAsyncContext *ac; /* NULL while disconnected */
	uv_timer_t retry;      /* next reconnect attempt */
	uv_timer_t ping;       /* health check */
	unsigned attempt;      /* failed attempts since the last success */
	unsigned connects;
	unsigned ping_missed;  /* ticks with a PING outstanding */
	bool handshake_done;   /* AUTH/SELECT/PING answered on this connection */
	bool ping_outstanding;
	bool stopping;
};

static void connect_now(struct tc_redis *r);

static void on_retry_timer(uv_timer_t *t)
{
	connect_now(t->data);
}

static void schedule_retry(struct tc_redis *r)
{
	if (r->stopping)
		return;
	uint64_t delay = (uint64_t)r->cfg->redis_backoff_min_ms;
	for (unsigned i = 0; i < r->attempt && delay < (uint64_t)r->cfg->redis_backoff_max_ms; i++)
		delay *= 2;
	if (delay > (uint64_t)r->cfg->redis_backoff_max_ms)
		delay = (uint64_t)r->cfg->redis_backoff_max_ms;
	/* Jitter in [delay/2, delay] so a fleet does not reconnect in lockstep. */
	delay = delay / 2 + (uint64_t)rand() % (delay / 2 + 1);
	r->attempt++;
	uv_timer_start(&r->retry, on_retry_timer, delay, 0);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct tc_redis *r = ac->data;

	if (r->ac != ac)
		return;
	r->ac = NULL;
	if (r->handshake_done)
		tc_log(TC_LOG_WARN, "redis disconnected",
		       TC_LS("error", status == REDIS_OK ? NULL : ac->errstr));
	r->handshake_done = false;
	r->ping_outstanding = false;
	schedule_retry(r);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct tc_redis *r = ac->data;

	if (status == REDIS_OK || r->ac != ac)
		return;
	/* hiredis frees ac after this callback returns. */
	r->ac = NULL;
	tc_log(r->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed",
	       TC_LS("error", ac->errstr), TC_LI("attempt", r->attempt + 1));
	schedule_retry(r);
}

/* Drops the current connection; on_disconnect schedules the reconnect. */
static void drop(struct tc_redis *r)
{
	redisAsyncContext *ac = r->ac;
	if (!ac)
		return;
	/* Safe inside a hiredis callback too: hiredis defers the free. */
	redisAsyncFree(ac);
	if (r->ac == ac) {
		/* Never fully connected: no disconnect callback will come. */
		r->ac = NULL;
		r->handshake_done = false;
		schedule_retry(r);
	}
}

static void on_handshake_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc_redis *r = ac->data;
	redisReply *rep = reply;
	const char *step = privdata;

	if (!rep || r->ac != ac)
		return;
	if (rep->type == REDIS_REPLY_ERROR) {
		tc_log(TC_LOG_ERROR, "redis rejected the connection", TC_LS("step", step),
		       TC_LS("error", rep->str));
		drop(r);
		return;
	}
	if (step != step_ping)
		return;
	r->handshake_done = true;
	r->ping_outstanding = false;
	r->ping_missed = 0;
	r->connects++;
	tc_log(TC_LOG_INFO, "redis connected", TC_LI("after_attempts", r->attempt + 1),
	       TC_LS("host", r->cfg->redis.unix_path ? r->cfg->redis.unix_path : r->cfg->redis.host));
	r->attempt = 0;
}

static void connect_now(struct tc_redis *r)
{
	const struct tc_redis_addr *a = &r->cfg->redis;
	redisAsyncContext *ac = a->unix_path ? redisAsyncConnectUnix(a->unix_path) :
					       redisAsyncConnect(a->host, a->port);
	if (!ac || ac->err) {
		tc_log(r->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed",
		       TC_LS("error", ac ? ac->errstr : "out of memory"),
		       TC_LI("attempt", r->attempt + 1));
		if (ac)
			redisAsyncFree(ac);
		schedule_retry(r);
		return;
	}
	ac->data = r;
	if (redisLibuvAttach(ac, r->loop) != REDIS_OK) {
		redisAsyncFree(ac);
		schedule_retry(r);
		return;
	}
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	r->ac = ac;
	r->handshake_done = false;

	/* Queued now, sent once the socket connects; answered in order. */
	if (a->password && a->user)
		redisAsyncCommand(ac, on_handshake_reply, step_auth, "AUTH %s %s", a->user, a->password);
	else if (a->password)
		redisAsyncCommand(ac, on_handshake_reply, step_auth, "AUTH %s", a->password);
	if (a->db)
		redisAsyncCommand(ac, on_handshake_reply, step_select, "SELECT %d", a->db);
	redisAsyncCommand(ac, on_handshake_reply, step_ping, "PING");
}

static void on_ping_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc_redis *r = ac->data;
	if (reply && r->ac == ac) {
		r->ping_outstanding = false;
		r->ping_missed = 0;
	}
}

static void on_ping_tick(uv_timer_t *t)
{
	struct tc_redis *r = t->data;

	if (!r->ac || !r->handshake_done)
		return;
	if (r->ping_outstanding) {
		if (++r->ping_missed == 1)
			tc_log(TC_LOG_WARN, "redis is slow: PING unanswered",
			       TC_LI("interval_ms", r->cfg->redis_ping_ms));
		if (r->ping_missed >= PING_DEAD_TICKS) {
			tc_log(TC_LOG_WARN, "redis unresponsive: reconnecting",
			       TC_LI("waited_ms", r->cfg->redis_ping_ms * PING_DEAD_TICKS));
			drop(r);
		}
		return;
	}
	r->ping_outstanding = true;
	redisAsyncCommand(r->ac, on_ping_reply, NULL, "PING");
}

struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg)
{
	struct tc_redis *r = tc_xcalloc(1, sizeof(*r));
	r->loop = loop;
	r->cfg = cfg;
	uv_timer_init(loop, &r->retry);
	uv_timer_init(loop, &r->ping);
	r->retry.data = r;
	r->ping.data = r;
	uv_timer_start(&r->ping, on_ping_tick, (uint64_t)cfg->redis_ping_ms,
		       (uint64_t)cfg->redis_ping_ms);
	connect_now(r);
	return r;
}

bool tc_redis_ready(const struct tc_redis *r)
{
	return r->ac && r->handshake_done && r->ping_missed == 0;
}

const char *tc_redis_status(const struct tc_redis *r)
{
	if (!r->ac)
		return "down";
	if (!r->handshake_done)
		return "connecting";
	return r->ping_missed ? "slow" : "up";
}

unsigned tc_redis_connects(const struct tc_redis *r)
{
	return r->connects;
}

void tc_redis_stop(struct tc_redis *r)
{
	r->stopping = true;
	uv_timer_stop(&r->retry);
	uv_timer_stop(&r->ping);
	uv_close((uv_handle_t *)&r->retry, NULL);
	uv_close((uv_handle_t *)&r->ping, NULL);
	if (r->ac) {
		redisAsyncContext *ac = r->ac;
		r->ac = NULL;
		redisAsyncFree(ac);
	}
}

void tc_redis_free(struct tc_redis *r)
{
	free(r);
}
