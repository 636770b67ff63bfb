#include "redis_source.h"

#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

/* PING periods a reply may be late before both links are dropped. */
#define PING_DEAD_TICKS 5
/* A connection attempt not answered by then is abandoned and retried. */
#define CONNECT_TIMEOUT_MS 3000

enum link_kind { LINK_CMD, LINK_SUB };

/* One hiredis connection with its own reconnect schedule. */
struct link {
	struct tc_redis *r;
	enum link_kind kind;
	const char *name;
	redisAsyncContext *ac; /* NULL while disconnected */
	uv_timer_t retry;
	unsigned attempt;      /* failed attempts since the last success */
	bool up;               /* handshake answered on this connection */
};

struct tc_redis {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	const char *fn_src;
	size_t fn_len;
	struct link cmd, sub;
	uv_timer_t ping;
	uv_timer_t kick;       /* runs ready waiters from the loop */
	struct tc_redis_waiter *waiters;
	struct {
		const struct tc_redis_listener *l;
		void *ctx;
	} listeners[TC_REDIS_MAX_LISTENERS];
	int nlisteners;
	unsigned connects;
	unsigned ping_missed;
	uint64_t ping_sent_ns;
	bool ping_outstanding;
	bool stopping;
	bool pubsub;           /* the pub/sub link is wanted */
};

/* Handshake steps, passed as privdata (hiredis wants a non-const pointer). */
static char step_auth[] = "AUTH", step_select[] = "SELECT", step_load[] = "FUNCTION LOAD",
	    step_ping[] = "PING";

static void connect_now(struct link *l);
static void drop(struct link *l);

/* Calls one event on every listener that handles it. */
#define NOTIFY(r, ev, ...)                                                              \
	do {                                                                            \
		for (int i_ = 0; i_ < (r)->nlisteners; i_++)                             \
			if ((r)->listeners[i_].l->ev)                                    \
				(r)->listeners[i_].l->ev((r)->listeners[i_].ctx, __VA_ARGS__); \
	} while (0)
#define NOTIFY0(r, ev)                                                                  \
	do {                                                                            \
		for (int i_ = 0; i_ < (r)->nlisteners; i_++)                             \
			if ((r)->listeners[i_].l->ev)                                    \
				(r)->listeners[i_].l->ev((r)->listeners[i_].ctx);        \
	} while (0)

/* ==== libuv adapter ====================================================================
 *
 * Our own instead of hiredis 0.14's adapters/libuv.h, which ignores a poll
 * error: a connect refused while Redis restarts then never completes and
 * the link hangs for good. On error we let hiredis read/write, so it sees
 * the socket error and reports it (hiredis 1.x adapters do the same).
 */
struct uv_events {
	redisAsyncContext *ac; /* NULL once hiredis cleaned up */
	uv_poll_t poll;
	int events;
};

static void ev_poll_cb(uv_poll_t *h, int status, int events)
{
	struct uv_events *p = h->data;
	int ev = status ? p->events : events;
	if (p->ac && (ev & UV_READABLE))
		redisAsyncHandleRead(p->ac);
	if (p->ac && (ev & UV_WRITABLE))
		redisAsyncHandleWrite(p->ac);
}

static void ev_update(struct uv_events *p, int add, int del)
{
	p->events = (p->events | add) & ~del;
	if (p->events)
		uv_poll_start(&p->poll, p->events, ev_poll_cb);
	else
		uv_poll_stop(&p->poll);
}

static void ev_add_read(void *d) { ev_update(d, UV_READABLE, 0); }
static void ev_del_read(void *d) { ev_update(d, 0, UV_READABLE); }
static void ev_add_write(void *d) { ev_update(d, UV_WRITABLE, 0); }
static void ev_del_write(void *d) { ev_update(d, 0, UV_WRITABLE); }

static void ev_closed(uv_handle_t *h)
{
	free(h->data);
}

static void ev_cleanup(void *d)
{
	struct uv_events *p = d;
	p->ac = NULL;
	uv_close((uv_handle_t *)&p->poll, ev_closed);
}

static int ev_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
	struct uv_events *p = tc_xcalloc(1, sizeof(*p));
	if (uv_poll_init(loop, &p->poll, ac->c.fd)) {
		free(p);
		return -1;
	}
	p->ac = ac;
	p->poll.data = p;
	ac->ev.data = p;
	ac->ev.addRead = ev_add_read;
	ac->ev.delRead = ev_del_read;
	ac->ev.addWrite = ev_add_write;
	ac->ev.delWrite = ev_del_write;
	ac->ev.cleanup = ev_cleanup;
	return 0;
}

/* ---- waiters ------------------------------------------------------------------ */

static void on_kick(uv_timer_t *t)
{
	struct tc_redis *r = t->data;
	/* Callbacks may add waiters (which then wait for the next kick) or
	 * cancel others, so take the list first and pop one at a time. */
	struct tc_redis_waiter *list = r->waiters;
	r->waiters = NULL;
	while (list && tc_redis_cmd_up(r)) {
		struct tc_redis_waiter *w = list;
		list = w->next;
		if (list)
			list->prev = NULL;
		w->linked = false;
		w->prev = w->next = NULL;
		w->fn(w);
	}
	/* Link went down while running callbacks: put the rest back. */
	while (list) {
		struct tc_redis_waiter *w = list;
		list = w->next;
		w->linked = false;
		tc_redis_wait_ready(r, w);
	}
}

void tc_redis_wait_ready(struct tc_redis *r, struct tc_redis_waiter *w)
{
	if (w->linked)
		return;
	w->prev = NULL;
	w->next = r->waiters;
	if (w->next)
		w->next->prev = w;
	r->waiters = w;
	w->linked = true;
	if (tc_redis_cmd_up(r) && !r->stopping)
		uv_timer_start(&r->kick, on_kick, 0, 0);
}

void tc_redis_wait_cancel(struct tc_redis *r, struct tc_redis_waiter *w)
{
	if (!w->linked)
		return;
	if (w->prev)
		w->prev->next = w->next;
	else
		r->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
	w->linked = false;
}

/* ---- links ------------------------------------------------------------------------ */

/* The retry timer doubles as the connect timeout while an attempt is out. */
static void on_retry_timer(uv_timer_t *t)
{
	struct link *l = t->data;
	if (!l->ac) {
		connect_now(l);
		return;
	}
	if (!l->up) {
		tc_log(TC_LOG_WARN, "redis connect timed out", TC_LS("link", l->name),
		       TC_LI("timeout_ms", CONNECT_TIMEOUT_MS));
		drop(l);
	}
}

static void schedule_retry(struct link *l)
{
	const struct tc_config *cfg = l->r->cfg;
	if (l->r->stopping)
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

/* The link is gone (ac already freed or being freed): tell, and retry. */
static void link_lost(struct link *l)
{
	struct tc_redis *r = l->r;
	bool was_up = l->up;

	l->ac = NULL;
	l->up = false;
	if (l->kind == LINK_CMD) {
		r->ping_outstanding = false;
		r->ping_missed = 0;
	} else if (was_up && !r->stopping) {
		NOTIFY0(r, sub_down);
	}
	schedule_retry(l);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct link *l = ac->data;

	if (l->ac != ac)
		return;
	if (l->up && !l->r->stopping)
		tc_log(TC_LOG_WARN, "redis disconnected", TC_LS("link", l->name),
		       TC_LS("error", status == REDIS_OK ? NULL : ac->errstr));
	link_lost(l);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct link *l = ac->data;

	if (status == REDIS_OK || l->ac != ac)
		return;
	/* hiredis frees ac after this callback returns. */
	tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed",
	       TC_LS("link", l->name), TC_LS("error", ac->errstr), TC_LI("attempt", l->attempt + 1));
	link_lost(l);
}

/* Drops a link; its disconnect callback (or we) schedule the reconnect. */
static void drop(struct link *l)
{
	redisAsyncContext *ac = l->ac;
	if (!ac)
		return;
	/* Safe inside a hiredis callback too: hiredis defers the free. */
	redisAsyncFree(ac);
	if (l->ac == ac)
		link_lost(l); /* never fully connected: no disconnect callback comes */
}

static void link_up(struct link *l)
{
	struct tc_redis *r = l->r;

	l->up = true;
	uv_timer_stop(&l->retry);
	tc_log(TC_LOG_INFO, "redis connected", TC_LS("link", l->name),
	       TC_LI("after_attempts", l->attempt + 1));
	l->attempt = 0;
	if (l->kind == LINK_CMD) {
		r->connects++;
		tc_metrics.redis_reconnects++;
		r->ping_outstanding = false;
		r->ping_missed = 0;
		NOTIFY0(r, cmd_up);
		if (r->waiters)
			uv_timer_start(&r->kick, on_kick, 0, 0);
	} else {
		NOTIFY0(r, sub_up);
	}
}

static void on_handshake_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct link *l = ac->data;
	redisReply *rep = reply;
	const char *step = privdata;

	if (!rep || l->ac != ac)
		return;
	if (rep->type == REDIS_REPLY_ERROR) {
		/* LOADING is Redis starting up: routine, retried like a refusal. */
		tc_log(strncmp(rep->str, "LOADING", 7) ? TC_LOG_ERROR : TC_LOG_INFO,
		       "redis refused the connection setup", TC_LS("link", l->name),
		       TC_LS("step", step), TC_LS("error", rep->str));
		drop(l);
		return;
	}
	if (step == step_ping)
		link_up(l);
}

/* One dispatcher for every pub/sub reply: subscribe confirmations and messages. */
static void on_pubsub(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct link *l = ac->data;
	struct tc_redis *r = l->r;
	redisReply *rep = reply;

	if (!rep || l->ac != ac || rep->type != REDIS_REPLY_ARRAY ||
	    rep->elements < 3 || rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_STRING)
		return;
	const char *kind = rep->element[0]->str;
	redisReply *ch = rep->element[1];
	if (!strcmp(kind, "message") && rep->element[2]->type == REDIS_REPLY_STRING)
		NOTIFY(r, message, ch->str, ch->len, rep->element[2]->str, rep->element[2]->len);
	else if (!strcmp(kind, "subscribe"))
		NOTIFY(r, subscribed, ch->str, ch->len);
	else if (!strcmp(kind, "unsubscribe"))
		NOTIFY(r, unsubscribed, ch->str, ch->len);
}

static void connect_now(struct link *l)
{
	struct tc_redis *r = l->r;
	const struct tc_redis_addr *a = &r->cfg->redis;
	redisAsyncContext *ac = a->unix_path ? redisAsyncConnectUnix(a->unix_path) :
					       redisAsyncConnect(a->host, a->port);
	if (!ac || ac->err) {
		tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed",
		       TC_LS("link", l->name), TC_LS("error", ac ? ac->errstr : "out of memory"),
		       TC_LI("attempt", l->attempt + 1));
		if (ac)
			redisAsyncFree(ac);
		schedule_retry(l);
		return;
	}
	ac->data = l;
	if (ev_attach(ac, r->loop)) {
		redisAsyncFree(ac);
		schedule_retry(l);
		return;
	}
	uv_timer_start(&l->retry, on_retry_timer, CONNECT_TIMEOUT_MS, 0);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	l->ac = ac;
	l->up = false;

	/* Queued now, sent once the socket connects, answered in order. */
	if (a->password && a->user)
		redisAsyncCommand(ac, on_handshake_reply, step_auth, "AUTH %s %s", a->user, a->password);
	else if (a->password)
		redisAsyncCommand(ac, on_handshake_reply, step_auth, "AUTH %s", a->password);
	if (a->db)
		redisAsyncCommand(ac, on_handshake_reply, step_select, "SELECT %d", a->db);
	if (l->kind == LINK_CMD)
		redisAsyncCommand(ac, on_handshake_reply, step_load, "FUNCTION LOAD REPLACE %b",
				  r->fn_src, r->fn_len);
	redisAsyncCommand(ac, on_handshake_reply, step_ping, "PING");
}

static void on_ping_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct link *l = ac->data;
	if (reply && l->ac == ac) {
		tc_hist_observe(&tc_metrics.redis_rtt, (double)(uv_hrtime() - l->r->ping_sent_ns) / 1e9);
		l->r->ping_outstanding = false;
		l->r->ping_missed = 0;
	}
}

static void on_ping_tick(uv_timer_t *t)
{
	struct tc_redis *r = t->data;

	if (!r->cmd.up)
		return;
	if (r->ping_outstanding) {
		if (++r->ping_missed == 1)
			tc_log(TC_LOG_WARN, "redis is slow: PING unanswered",
			       TC_LI("interval_ms", r->cfg->redis_ping_ms));
		if (r->ping_missed >= PING_DEAD_TICKS) {
			tc_log(TC_LOG_WARN, "redis unresponsive: reconnecting",
			       TC_LI("waited_ms", r->cfg->redis_ping_ms * PING_DEAD_TICKS));
			drop(&r->cmd);
			drop(&r->sub);
		}
		return;
	}
	r->ping_outstanding = true;
	r->ping_sent_ns = uv_hrtime();
	redisAsyncCommand(r->cmd.ac, on_ping_reply, NULL, "PING");
}

static void link_init(struct tc_redis *r, struct link *l, enum link_kind kind, const char *name)
{
	l->r = r;
	l->kind = kind;
	l->name = name;
	uv_timer_init(r->loop, &l->retry);
	l->retry.data = l;
}

struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg,
			      const char *function_source, size_t function_len, unsigned flags)
{
	struct tc_redis *r = tc_xcalloc(1, sizeof(*r));
	r->loop = loop;
	r->cfg = cfg;
	r->fn_src = function_source;
	r->fn_len = function_len;
	link_init(r, &r->cmd, LINK_CMD, "commands");
	link_init(r, &r->sub, LINK_SUB, "pubsub");
	uv_timer_init(loop, &r->ping);
	uv_timer_init(loop, &r->kick);
	r->ping.data = r->kick.data = r;
	uv_timer_start(&r->ping, on_ping_tick, (uint64_t)cfg->redis_ping_ms,
		       (uint64_t)cfg->redis_ping_ms);
	/* Connect from the loop, after the listener is set. */
	r->pubsub = !(flags & TC_REDIS_NO_PUBSUB);
	uv_timer_start(&r->cmd.retry, on_retry_timer, 0, 0);
	if (r->pubsub)
		uv_timer_start(&r->sub.retry, on_retry_timer, 0, 0);
	return r;
}

void tc_redis_add_listener(struct tc_redis *r, const struct tc_redis_listener *l, void *ctx)
{
	if (r->nlisteners == TC_REDIS_MAX_LISTENERS)
		abort(); /* a fixed set of components registers; more is a bug */
	r->listeners[r->nlisteners].l = l;
	r->listeners[r->nlisteners].ctx = ctx;
	r->nlisteners++;
}

bool tc_redis_cmd_up(const struct tc_redis *r)
{
	return r->cmd.up && !r->stopping;
}

bool tc_redis_ready(const struct tc_redis *r)
{
	return r->cmd.up && (r->sub.up || !r->pubsub) && r->ping_missed == 0 && !r->stopping;
}

const char *tc_redis_status(const struct tc_redis *r)
{
	if (!r->cmd.ac && !r->sub.ac)
		return "down";
	if (!r->cmd.up || (r->pubsub && !r->sub.up))
		return "connecting";
	return r->ping_missed ? "slow" : "up";
}

unsigned tc_redis_connects(const struct tc_redis *r)
{
	return r->connects;
}

struct cmd_ctx {
	struct tc_redis *r;
	tc_redis_cb *cb;
	void *privdata;
};

static void on_command_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct cmd_ctx *c = privdata;
	c->cb(c->r, reply, c->privdata);
	free(c);
}

int tc_redis_command(struct tc_redis *r, tc_redis_cb *cb, void *privdata, int argc,
		     const char **argv, const size_t *argvlen)
{
	if (!tc_redis_cmd_up(r))
		return -1;
	struct cmd_ctx *c = tc_xmalloc(sizeof(*c));
	*c = (struct cmd_ctx){ .r = r, .cb = cb, .privdata = privdata };
	if (redisAsyncCommandArgv(r->cmd.ac, on_command_reply, c, argc, argv, argvlen) != REDIS_OK) {
		free(c);
		return -1;
	}
	return 0;
}

static int sub_command(struct tc_redis *r, const char *verb, const char *channel)
{
	if (!r->sub.up || r->stopping)
		return -1;
	return redisAsyncCommand(r->sub.ac, on_pubsub, NULL, "%s %s", verb, channel) == REDIS_OK ? 0 : -1;
}

int tc_redis_subscribe(struct tc_redis *r, const char *channel)
{
	return sub_command(r, "SUBSCRIBE", channel);
}

int tc_redis_unsubscribe(struct tc_redis *r, const char *channel)
{
	return sub_command(r, "UNSUBSCRIBE", channel);
}

static void stop_link(struct link *l)
{
	uv_timer_stop(&l->retry);
	uv_close((uv_handle_t *)&l->retry, NULL);
	if (l->ac) {
		redisAsyncContext *ac = l->ac;
		l->ac = NULL;
		l->up = false;
		redisAsyncFree(ac);
	}
}

void tc_redis_stop(struct tc_redis *r)
{
	r->stopping = true;
	uv_timer_stop(&r->ping);
	uv_timer_stop(&r->kick);
	uv_close((uv_handle_t *)&r->ping, NULL);
	uv_close((uv_handle_t *)&r->kick, NULL);
	stop_link(&r->cmd);
	stop_link(&r->sub);
}

void tc_redis_free(struct tc_redis *r)
{
	free(r);
}
