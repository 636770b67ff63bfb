#include "redis.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "metrics.h"
#include "scratch.h"
#include "pslink.h"
#include "redis_uv.h"
#include "slot.h"
#include "store.h"
#include "util.h"

/* PING periods a reply may be late before a node's links are dropped. */
#define PING_DEAD_TICKS 5
/* A connection attempt not answered by then is abandoned and retried. */
#define CONNECT_TIMEOUT_MS 3000
#define NSLOTS TC_SLOTS
/* Slot map re-read: while everything is up, and while something is not. */
#define REFRESH_MS 5000
#define REFRESH_UNREADY_MS 250
/* Redirections and waits (TRYAGAIN, CLUSTERDOWN, a master not connected
 * yet) one command may go through before its caller is told it failed. */
#define MAX_TRIES 40
#define RETRY_MS 100

enum link_kind { LINK_CMD, LINK_SUB };

struct node;

/* One connection with its own reconnect schedule. */
struct link {
	struct node *node;
	enum link_kind kind;
	const char *name;
	redisAsyncContext *ac; /* LINK_CMD: NULL while disconnected */
	struct tc_pslink *ps;  /* LINK_SUB: NULL while disconnected */
	uv_timer_t retry;
	unsigned attempt;      /* failed attempts since the last success */
	bool up;               /* handshake answered on this connection */
	bool readonly;         /* a replica refused the function libraries */
};

/* A Redis server: the configured one, or a master of the Cluster. */
struct node {
	struct tc_redis *r;
	unsigned id;           /* never reused: tells a node's subscriptions apart */
	char *host;            /* NULL: the configured address (may be a unix socket) */
	int port;
	char addr[64];         /* "host:port" for logs */
	struct link cmd, sub;
	unsigned ping_missed;
	uint64_t ping_sent_ns;
	bool ping_outstanding;
	bool master;           /* serves slots in the current map (or the only node) */
	bool retired;          /* links closed; freed when its timers have closed */
	int timers_open;
	struct node *next;
};

/* A command on its way, kept whole so a redirection can send it again. */
struct cmd_ctx {
	struct tc_redis *r;
	tc_redis_cb *cb;
	void *privdata;
	unsigned slot;         /* NSLOTS: no key, any node */
	unsigned tries;
	unsigned ask_node;     /* ASK: the node to try once, with ASKING */
	struct cmd_ctx *next;  /* parked list */
	int argc;
	const char **argv;
	size_t *lens;
};

struct tc_redis {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	const char *fn_src;
	size_t fn_len;
	struct node *nodes;    /* every node object, retired ones until freed */
	struct node *seed;     /* the configured node */
	struct node *slots[NSLOTS];
	unsigned next_id;
	bool mode_known;       /* the seed answered CLUSTER SLOTS */
	bool cluster;
	bool refreshing, refresh_again;
	bool resubscribe;      /* a subscription was refused: sub_up after the next map */
	bool all_up;           /* commands could reach every slot at the last check */
	uv_timer_t ping;
	uv_timer_t kick;       /* runs ready waiters from the loop */
	uv_timer_t refresh;
	uv_timer_t park;       /* resends parked commands */
	struct cmd_ctx *parked;
	struct tc_dlist waiters;  /* of struct tc_redis_waiter, oldest first */
	struct {
		const struct tc_redis_listener *l;
		void *ctx;
		const char *prefix; /* the channels it owns; NULL: none */
		size_t prefix_len;
	} listeners[TC_REDIS_MAX_LISTENERS];
	int nlisteners;
	unsigned connects;
	bool stopping;
	bool pubsub;           /* pub/sub links are wanted */
	/* Sentinel mode: the master's address, as the Sentinels last gave it. */
	bool sentinel;
	bool master_known;     /* false: ask the Sentinels before connecting */
	char *master_host;
	int master_port;
	bool resolving;
	int res_idx;           /* the Sentinel being asked */
	unsigned res_gen;      /* tells a current answer from an abandoned one */
	redisAsyncContext *res_ac;
	uv_timer_t res_timer;
};

/* Handshake steps, passed as privdata (hiredis wants a non-const pointer). */
static char step_auth[] = "AUTH", step_select[] = "SELECT", step_multi[] = "MULTI",
	    step_load[] = "FUNCTION LOAD", step_exec[] = "EXEC", step_role[] = "ROLE", step_ping[] = "PING";

static void connect_now(struct link *l);
static void drop(struct link *l);
static void update_state(struct tc_redis *r);
static void want_refresh(struct tc_redis *r);
static void send_ctx(struct cmd_ctx *c);
static void resolve_start(struct tc_redis *r);

/* Calls a link event on every listener that handles it. */
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

/* The listener that owns channel (its hooks and ctx), or NULL. */
static const struct tc_redis_listener *owner_of(const struct tc_redis *r, const char *ch,
						size_t len, void **ctx)
{
	for (int i = 0; i < r->nlisteners; i++)
		if (r->listeners[i].prefix && len >= r->listeners[i].prefix_len &&
		    !memcmp(ch, r->listeners[i].prefix, r->listeners[i].prefix_len)) {
			*ctx = r->listeners[i].ctx;
			return r->listeners[i].l;
		}
	return NULL;
}


/* ---- waiters ------------------------------------------------------------------ */

static void on_kick(uv_timer_t *t)
{
	struct tc_redis *r = t->data;
	/* Those who were waiting when the kick began; callbacks may add
	 * waiters (at the tail: they wait for the next kick) or cancel any. */
	size_t n = r->waiters.count;
	struct tc_dlink *l;

	while (n-- && tc_redis_cmd_up(r) && (l = r->waiters.head)) {
		struct tc_redis_waiter *w = TC_DLIST_ENTRY(l, struct tc_redis_waiter, link);
		tc_dlist_remove(&r->waiters, l);
		w->fn(w);
	}
	/* The link went down while callbacks ran: the rest wait on. */
}

void tc_redis_wait_ready(struct tc_redis *r, struct tc_redis_waiter *w)
{
	if (tc_dlist_linked(&r->waiters, &w->link))
		return;
	tc_dlist_push_tail(&r->waiters, &w->link);
	if (tc_redis_cmd_up(r) && !r->stopping)
		uv_timer_start(&r->kick, on_kick, 0, 0);
}

void tc_redis_wait_cancel(struct tc_redis *r, struct tc_redis_waiter *w)
{
	tc_dlist_remove(&r->waiters, &w->link);
}

/* ---- nodes and links ------------------------------------------------------------ */

static const struct tc_pslink_ops ps_ops;
static void on_retry_timer(uv_timer_t *t);

static struct node *node_by_id(struct tc_redis *r, unsigned id)
{
	for (struct node *n = r->nodes; n; n = n->next)
		if (n->id == id && !n->retired)
			return n;
	return NULL;
}

/* The node answering for a slot (NSLOTS: any master whose commands flow). */
static struct node *route(struct tc_redis *r, unsigned slot)
{
	if (!r->mode_known)
		return NULL;
	if (!r->cluster)
		return r->seed;
	if (slot < NSLOTS)
		return r->slots[slot];
	for (struct node *n = r->nodes; n; n = n->next)
		if (n->master && !n->retired && n->cmd.up)
			return n;
	return NULL;
}

static void link_init(struct node *n, struct link *l, enum link_kind kind, const char *name)
{
	l->node = n;
	l->kind = kind;
	l->name = name;
	uv_timer_init(n->r->loop, &l->retry);
	l->retry.data = l;
}

static struct node *node_new(struct tc_redis *r, const char *host, int port)
{
	struct node *n = tc_xcalloc(1, sizeof(*n));
	const struct tc_redis_addr *a = &r->cfg->redis;
	n->r = r;
	n->id = ++r->next_id;
	n->host = host ? tc_xstrdup(host) : NULL;
	n->port = host ? port : a->port;
	if (host || a->host)
		snprintf(n->addr, sizeof(n->addr), "%s:%d", host ? host : a->host, n->port);
	else
		snprintf(n->addr, sizeof(n->addr), "%s", a->unix_path);
	link_init(n, &n->cmd, LINK_CMD, "commands");
	link_init(n, &n->sub, LINK_SUB, "pubsub");
	n->next = r->nodes;
	r->nodes = n;
	uv_timer_start(&n->cmd.retry, on_retry_timer, 0, 0); /* connect from the loop */
	return n;
}

/* A Cluster node by address, created (and connected) when new. */
static struct node *node_at(struct tc_redis *r, const char *host, int port)
{
	for (struct node *n = r->nodes; n; n = n->next) {
		const char *h = n->host ? n->host : r->cfg->redis.host;
		if (!n->retired && h && n->port == port && !strcmp(h, host))
			return n;
	}
	return node_new(r, host, port);
}

static void node_start_sub(struct node *n)
{
	if (n->r->pubsub && !n->sub.ps && !n->sub.up && !uv_is_active((uv_handle_t *)&n->sub.retry))
		uv_timer_start(&n->sub.retry, on_retry_timer, 0, 0);
}

static void node_timer_closed(uv_handle_t *h)
{
	struct link *l = h->data;
	struct node *n = l->node;
	if (--n->timers_open)
		return;
	struct tc_redis *r = n->r;
	for (struct node **p = &r->nodes; *p; p = &(*p)->next)
		if (*p == n) {
			*p = n->next;
			break;
		}
	free(n->host);
	free(n);
}

/* Closes a link for good (no retry). */
static void link_close(struct link *l)
{
	struct tc_redis *r = l->node->r;
	bool was_up = l->up;

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
	if (l->kind == LINK_SUB && was_up && !r->stopping)
		NOTIFY(r, sub_down, l->node->id);
}

/* The node left the Cluster's masters: close it, free it once libuv is done. */
static void node_retire(struct node *n)
{
	struct tc_redis *r = n->r;
	if (n->retired)
		return;
	tc_log(TC_LOG_INFO, "redis node no longer serves slots", TC_LS("node", n->addr));
	n->retired = true;
	n->master = false;
	link_close(&n->cmd);
	link_close(&n->sub);
	n->timers_open = 2;
	uv_close((uv_handle_t *)&n->cmd.retry, node_timer_closed);
	uv_close((uv_handle_t *)&n->sub.retry, node_timer_closed);
	if (r->seed == n)
		r->seed = NULL;
}

/* ---- links ------------------------------------------------------------------------ */

/* The retry timer doubles as the connect timeout while an attempt is out. */
static void on_retry_timer(uv_timer_t *t)
{
	struct link *l = t->data;
	if (!l->ac && !l->ps) {
		connect_now(l);
		return;
	}
	if (!l->up) {
		tc_log(TC_LOG_WARN, "redis connect timed out", TC_LS("link", l->name),
		       TC_LS("node", l->node->addr), TC_LI("timeout_ms", CONNECT_TIMEOUT_MS));
		drop(l);
	}
}

static void schedule_retry(struct link *l)
{
	const struct tc_config *cfg = l->node->r->cfg;
	if (l->node->r->stopping || l->node->retired)
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

/* The link is gone (its connection already freed or being freed): tell, and retry. */
static void link_lost(struct link *l)
{
	struct node *n = l->node;
	struct tc_redis *r = n->r;
	bool was_up = l->up;

	l->ac = NULL;
	l->ps = NULL;
	l->up = false;
	if (r->sentinel && n == r->seed)
		r->master_known = false; /* maybe a failover: ask the Sentinels again */
	if (l->kind == LINK_CMD) {
		n->ping_outstanding = false;
		n->ping_missed = 0;
	} else if (was_up && !r->stopping) {
		NOTIFY(r, sub_down, n->id);
	}
	schedule_retry(l);
	want_refresh(r);
	update_state(r);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct link *l = ac->data;

	if (l->ac != ac)
		return;
	if (l->up && !l->node->r->stopping)
		tc_log(TC_LOG_WARN, "redis disconnected", TC_LS("link", l->name),
		       TC_LS("node", l->node->addr), TC_LS("error", status == REDIS_OK ? NULL : ac->errstr));
	link_lost(l);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct link *l = ac->data;

	if (status == REDIS_OK || l->ac != ac)
		return;
	/* hiredis frees ac after this callback returns. */
	tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed", TC_LS("link", l->name),
	       TC_LS("node", l->node->addr), TC_LS("error", ac->errstr), TC_LI("attempt", l->attempt + 1));
	link_lost(l);
}

/* Drops a link; it reconnects. */
static void drop(struct link *l)
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

static void on_slots(redisAsyncContext *ac, void *reply, void *privdata);

static void link_up(struct link *l)
{
	struct node *n = l->node;
	struct tc_redis *r = n->r;

	l->up = true;
	uv_timer_stop(&l->retry);
	tc_log(TC_LOG_INFO, "redis connected", TC_LS("link", l->name), TC_LS("node", n->addr),
	       TC_LI("after_attempts", l->attempt + 1));
	l->attempt = 0;
	if (l->kind == LINK_SUB) {
		update_state(r);
		NOTIFY0(r, sub_up);
		return;
	}
	tc_metrics.redis_reconnects++;
	n->ping_outstanding = false;
	n->ping_missed = 0;
	if (!r->mode_known && n == r->seed) {
		/* Standalone or Cluster? The answer decides everything else. */
		r->refreshing = true;
		redisAsyncCommand(l->ac, on_slots, r, "CLUSTER SLOTS");
		return;
	}
	if (r->cluster && !n->master)
		want_refresh(r);
	update_state(r);
}

/* ROLE's answer names "master" first. */
static bool is_master_role(const redisReply *rep)
{
	return rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
	       rep->element[0]->type == REDIS_REPLY_STRING && !strcmp(rep->element[0]->str, "master");
}

static void on_handshake_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct link *l = ac->data;
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
	if (step == step_role && !is_master_role(rep)) {
		tc_log(TC_LOG_WARN, "the node the sentinels named is not a master (yet); asking again",
		       TC_LS("node", l->node->addr));
		drop(l);
		return;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		/* LOADING is Redis starting up: routine, retried like a refusal. */
		tc_log(strncmp(rep->str, "LOADING", 7) ? TC_LOG_ERROR : TC_LOG_INFO,
		       "redis refused the connection setup", TC_LS("link", l->name),
		       TC_LS("node", l->node->addr), TC_LS("step", step), TC_LS("error", rep->str));
		drop(l);
		return;
	}
	if (step == step_ping)
		link_up(l);
}

/* ---- the pub/sub link's events ---- */

static void ps_up(void *ctx)
{
	link_up(ctx);
}

static void ps_down(void *ctx, const char *why)
{
	struct link *l = ctx;
	if (l->up && !l->node->r->stopping)
		tc_log(TC_LOG_WARN, "redis disconnected", TC_LS("link", l->name),
		       TC_LS("node", l->node->addr), TC_LS("error", why));
	else if (!l->up)
		tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed",
		       TC_LS("link", l->name), TC_LS("node", l->node->addr), TC_LS("error", why),
		       TC_LI("attempt", l->attempt + 1));
	tc_pslink_close(l->ps);
	link_lost(l);
}

static void ps_push(void *ctx, const char *kind, const char *ch, size_t clen, const char *data,
		    size_t dlen)
{
	struct link *l = ctx;
	struct tc_redis *r = l->node->r;
	const char *k = kind[0] == 's' ? kind + 1 : kind; /* sharded or not, the same to us */
	void *octx;
	const struct tc_redis_listener *o = owner_of(r, ch, clen, &octx);
	if (!o)
		return; /* nobody here asked for it */
	if (!strcmp(k, "message")) {
		if (o->message)
			o->message(octx, ch, clen, data, dlen);
	} else if (!strcmp(k, "subscribe")) {
		if (o->subscribed)
			o->subscribed(octx, ch, clen);
	} else if (!strcmp(k, "unsubscribe")) {
		if (o->unsubscribed)
			o->unsubscribed(octx, ch, clen);
	}
}

static void apply_redirect(struct tc_redis *r, const char *err);

static void ps_refused(void *ctx, const char *verb, const char *channel, const char *err)
{
	struct link *l = ctx;
	struct tc_redis *r = l->node->r;
	tc_log(TC_LOG_INFO, "redis refused a subscription", TC_LS("node", l->node->addr),
	       TC_LS("verb", verb), TC_LS("channel", channel), TC_LS("error", err));
	apply_redirect(r, err);
	r->resubscribe = true;
	want_refresh(r);
	void *octx;
	const struct tc_redis_listener *o = owner_of(r, channel, strlen(channel), &octx);
	if (o && o->refused)
		o->refused(octx, channel, strlen(channel));
}

static const struct tc_pslink_ops ps_ops = {
	.up = ps_up,
	.down = ps_down,
	.push = ps_push,
	.refused = ps_refused,
};

static void connect_now(struct link *l)
{
	struct node *n = l->node;
	struct tc_redis *r = n->r;
	const struct tc_redis_addr *a = &r->cfg->redis;
	const char *host = n->host ? n->host : r->sentinel ? r->master_host : a->host;
	const char *unix_path = n->host || r->sentinel ? NULL : a->unix_path;
	int port = n->host ? n->port : r->sentinel ? r->master_port : a->port;
	int db = n->host ? 0 : a->db; /* Cluster nodes have database 0 only */

	if (r->sentinel && n == r->seed && !r->master_known) {
		resolve_start(r); /* connects both links once the Sentinels answer */
		return;
	}

	l->up = false;
	l->readonly = false;
	uv_timer_start(&l->retry, on_retry_timer, CONNECT_TIMEOUT_MS, 0);
	if (l->kind == LINK_SUB) {
		struct tc_pslink_addr pa = { .host = host, .port = port, .unix_path = unix_path,
					     .user = a->user, .password = a->password, .db = db };
		l->ps = tc_pslink_open(r->loop, &pa, &ps_ops, l);
		return;
	}
	redisAsyncContext *ac = unix_path ? redisAsyncConnectUnix(unix_path) :
					    redisAsyncConnect(host, port);
	if (!ac || ac->err) {
		tc_log(l->attempt ? TC_LOG_DEBUG : TC_LOG_WARN, "redis connect failed",
		       TC_LS("link", l->name), TC_LS("node", n->addr),
		       TC_LS("error", ac ? ac->errstr : "out of memory"), TC_LI("attempt", l->attempt + 1));
		if (ac)
			redisAsyncFree(ac);
		schedule_retry(l);
		return;
	}
	ac->data = l;
	if (tc_redis_uv_attach(ac, r->loop)) {
		redisAsyncFree(ac);
		schedule_retry(l);
		return;
	}
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	l->ac = ac;

	/* Queued now, sent once the socket connects, answered in order. */
	if (a->password && a->user)
		redisAsyncCommand(ac, on_handshake_reply, step_auth, "AUTH %s %s", a->user, a->password);
	else if (a->password)
		redisAsyncCommand(ac, on_handshake_reply, step_auth, "AUTH %s", a->password);
	if (db)
		redisAsyncCommand(ac, on_handshake_reply, step_select, "SELECT %d", db);
	if (r->sentinel)
		redisAsyncCommand(ac, on_handshake_reply, step_role, "ROLE");
	/* The function libraries, all in one transaction: replacing an older set
	 * (one library named threadcast holding every function) is atomic, and
	 * no client sees a function missing (protocol/README.md). */
	redisAsyncCommand(ac, on_handshake_reply, step_multi, "MULTI");
	const char *lib;
	size_t off = 0, len;
	while (tc_store_library_next(r->fn_src, r->fn_len, &off, &lib, &len))
		redisAsyncCommand(ac, on_handshake_reply, step_load, "FUNCTION LOAD REPLACE %b", lib, len);
	redisAsyncCommand(ac, on_handshake_reply, step_exec, "EXEC");
	redisAsyncCommand(ac, on_handshake_reply, step_ping, "PING");
}

/* ==== Sentinel ============================================================================== */

static void resolve_try(struct tc_redis *r);

/* The current Sentinel did not help: forget its connection, ask the next. */
static void resolve_next(struct tc_redis *r)
{
	uv_timer_stop(&r->res_timer);
	r->res_gen++;
	if (r->res_ac) {
		redisAsyncContext *ac = r->res_ac;
		r->res_ac = NULL;
		redisAsyncFree(ac); /* deferred by hiredis inside its callbacks */
	}
	r->res_idx++;
	resolve_try(r);
}

static void on_res_timeout(uv_timer_t *t)
{
	struct tc_redis *r = t->data;
	tc_log(TC_LOG_WARN, "sentinel did not answer", TC_LS("sentinel", r->cfg->sentinels[r->res_idx].host),
	       TC_LI("port", r->cfg->sentinels[r->res_idx].port));
	resolve_next(r);
}

static void on_res_connect(const redisAsyncContext *ac, int status)
{
	struct tc_redis *r = ac->data;
	if (status == REDIS_OK || ac != r->res_ac)
		return;
	tc_log(TC_LOG_WARN, "cannot reach a sentinel", TC_LS("sentinel", r->cfg->sentinels[r->res_idx].host),
	       TC_LI("port", r->cfg->sentinels[r->res_idx].port), TC_LS("error", ac->errstr));
	r->res_ac = NULL; /* hiredis frees it after this callback */
	resolve_next(r);
}

static void on_res_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc_redis *r = ac->data;
	redisReply *rep = reply;

	if (!rep || ac != r->res_ac || (uintptr_t)privdata != r->res_gen || r->stopping)
		return;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_STRING || rep->element[1]->type != REDIS_REPLY_STRING) {
		tc_log(TC_LOG_WARN, "sentinel does not know the master",
		       TC_LS("sentinel", r->cfg->sentinels[r->res_idx].host),
		       TC_LS("master", r->cfg->redis_sentinel_master),
		       TC_LS("error", rep->type == REDIS_REPLY_ERROR ? rep->str : NULL));
		resolve_next(r);
		return;
	}
	int port = atoi(rep->element[1]->str);
	struct node *seed = r->seed;
	bool moved = r->master_host && (strcmp(r->master_host, rep->element[0]->str) || r->master_port != port);
	if (moved) {
		/* A failover: a link still on the old master goes too (it reconnects). */
		drop(&seed->cmd);
		drop(&seed->sub);
	}
	if (!r->master_host || moved) {
		free(r->master_host);
		r->master_host = tc_xstrdup(rep->element[0]->str);
		r->master_port = port;
		snprintf(seed->addr, sizeof(seed->addr), "%s:%d", r->master_host, port);
		tc_log(TC_LOG_INFO, "redis master named by sentinel", TC_LS("node", seed->addr),
		       TC_LS("master", r->cfg->redis_sentinel_master));
	}
	uv_timer_stop(&r->res_timer);
	r->res_gen++;
	r->res_ac = NULL;
	redisAsyncFree(ac); /* deferred until this callback returns */
	r->resolving = false;
	r->master_known = true;
	if (!seed->cmd.ac)
		uv_timer_start(&seed->cmd.retry, on_retry_timer, 0, 0);
	if (seed->master && r->pubsub && !seed->sub.ps)
		uv_timer_start(&seed->sub.retry, on_retry_timer, 0, 0);
}

static void resolve_try(struct tc_redis *r)
{
	const struct tc_config *cfg = r->cfg;
	if (r->stopping)
		return;
	if (r->res_idx >= cfg->nsentinels) {
		r->resolving = false;
		tc_log(TC_LOG_WARN, "no sentinel named the master; retrying",
		       TC_LS("master", cfg->redis_sentinel_master));
		schedule_retry(&r->seed->cmd); /* its timer asks again, with backoff */
		return;
	}
	const struct tc_hostport *s = &cfg->sentinels[r->res_idx];
	redisAsyncContext *ac = redisAsyncConnect(s->host, s->port);
	if (!ac || ac->err || tc_redis_uv_attach(ac, r->loop)) {
		if (ac)
			redisAsyncFree(ac);
		r->res_idx++;
		resolve_try(r);
		return;
	}
	ac->data = r;
	redisAsyncSetConnectCallback(ac, on_res_connect);
	r->res_ac = ac;
	uv_timer_start(&r->res_timer, on_res_timeout, CONNECT_TIMEOUT_MS, 0);
	redisAsyncCommand(ac, on_res_reply, (void *)(uintptr_t)r->res_gen,
			  "SENTINEL get-master-addr-by-name %s", cfg->redis_sentinel_master);
}

static void resolve_start(struct tc_redis *r)
{
	if (r->resolving || r->stopping)
		return;
	r->resolving = true;
	r->res_idx = 0;
	resolve_try(r);
}

/* ==== readiness ========================================================================== */

static bool compute_all_up(const struct tc_redis *r)
{
	if (!r->mode_known || r->stopping)
		return false;
	if (!r->cluster)
		return r->seed && r->seed->cmd.up;
	for (unsigned s = 0; s < NSLOTS; s++)
		if (!r->slots[s] || !r->slots[s]->cmd.up)
			return false;
	return true;
}

static void on_kick(uv_timer_t *t);
static void on_park_timer(uv_timer_t *t);

/* Re-evaluates whether commands reach every slot; tells listeners when they do again. */
static void update_state(struct tc_redis *r)
{
	bool up = compute_all_up(r);
	if (up == r->all_up)
		return;
	r->all_up = up;
	if (!up)
		return;
	r->connects++;
	NOTIFY0(r, cmd_up);
	if (r->waiters.count)
		uv_timer_start(&r->kick, on_kick, 0, 0);
	if (r->parked)
		uv_timer_start(&r->park, on_park_timer, 0, 0);
}

/* ==== the slot map ========================================================================= */

static void on_refresh_timer(uv_timer_t *t);

static void schedule_refresh(struct tc_redis *r, uint64_t ms)
{
	if (!r->stopping && r->cluster)
		uv_timer_start(&r->refresh, on_refresh_timer, ms, 0);
}

static void want_refresh(struct tc_redis *r)
{
	if (!r->cluster || r->stopping)
		return;
	if (r->refreshing)
		r->refresh_again = true;
	else if (uv_timer_get_due_in(&r->refresh) > 20 || !uv_is_active((uv_handle_t *)&r->refresh))
		schedule_refresh(r, 20);
}

static void on_refresh_timer(uv_timer_t *t)
{
	struct tc_redis *r = t->data;
	struct node *via = NULL;

	if (r->refreshing || r->stopping)
		return;
	/* Ask a master if one answers, else any node that does. */
	for (struct node *n = r->nodes; n; n = n->next)
		if (!n->retired && n->cmd.up && (!via || (n->master && !via->master)))
			via = n;
	if (!via) {
		schedule_refresh(r, REFRESH_UNREADY_MS);
		return;
	}
	r->refreshing = true;
	r->refresh_again = false;
	if (redisAsyncCommand(via->cmd.ac, on_slots, r, "CLUSTER SLOTS") != REDIS_OK) {
		r->refreshing = false;
		schedule_refresh(r, REFRESH_UNREADY_MS);
	}
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the node named, created if new. */
static struct node *redirect_target(struct tc_redis *r, const char *err, unsigned *slot)
{
	const char *sp = strchr(err, ' ');
	char host[256];
	unsigned s;
	int port;
	if (!sp || sscanf(sp + 1, "%u", &s) != 1 || s >= NSLOTS)
		return NULL;
	const char *addr = strchr(sp + 1, ' ');
	const char *colon = addr ? strrchr(addr, ':') : NULL;
	if (!colon || colon - addr - 1 <= 0 || (size_t)(colon - addr - 1) >= sizeof(host) ||
	    sscanf(colon + 1, "%d", &port) != 1)
		return NULL;
	memcpy(host, addr + 1, (size_t)(colon - addr - 1));
	host[colon - addr - 1] = '\0';
	if (!host[0]) /* "MOVED 1 :6380": the node did not know its own address */
		return NULL;
	*slot = s;
	return node_at(r, host, port);
}

/* MOVED: the slot has a new master; believe it until the next map says otherwise. */
static void apply_redirect(struct tc_redis *r, const char *err)
{
	unsigned slot;
	if (!r->cluster || strncmp(err, "MOVED ", 6))
		return;
	struct node *n = redirect_target(r, err, &slot);
	if (!n)
		return;
	if (!n->master) {
		n->master = true;
		node_start_sub(n);
	}
	r->slots[slot] = n;
	update_state(r); /* a new master not connected yet: commands wait for it */
}

static void on_slots(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc_redis *r = privdata;
	struct link *via = ac->data;
	redisReply *rep = reply;

	r->refreshing = false;
	if (r->stopping)
		return;
	if (!rep) {
		schedule_refresh(r, REFRESH_UNREADY_MS);
		return;
	}
	if (!r->mode_known) {
		if (rep->type != REDIS_REPLY_ARRAY) {
			/* "cluster support disabled" (or CLUSTER denied): one node. */
			r->mode_known = true;
			r->seed->master = true;
			tc_log(TC_LOG_INFO, "redis is a single node", TC_LS("node", r->seed->addr));
			node_start_sub(r->seed);
			update_state(r);
			return;
		}
		r->mode_known = true;
		r->cluster = true;
	}
	if (rep->type != REDIS_REPLY_ARRAY) {
		tc_log(TC_LOG_WARN, "cannot read the cluster slot map", TC_LS("node", via->node->addr),
		       TC_LS("error", rep->type == REDIS_REPLY_ERROR ? rep->str : "not an array"));
		schedule_refresh(r, REFRESH_UNREADY_MS);
		return;
	}

	/* [[start, end, [host, port, id, ...], replicas...], ...] */
	struct node **map = tc_xcalloc(NSLOTS, sizeof(*map));
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
		    e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		long long lo = e->element[0]->integer, hi = e->element[1]->integer;
		const char *host = e->element[2]->element[0]->str;
		int port = (int)e->element[2]->element[1]->integer;
		if (!host[0] || !strcmp(host, "?")) /* the answering node's own address */
			host = via->node->host ? via->node->host : r->cfg->redis.host;
		if (lo < 0 || hi >= NSLOTS || lo > hi || !host)
			continue;
		struct node *n = node_at(r, host, port);
		for (long long s = lo; s <= hi; s++)
			map[s] = n;
	}
	bool changed = memcmp(map, r->slots, NSLOTS * sizeof(*map)) != 0;
	memcpy(r->slots, map, NSLOTS * sizeof(*map));
	free(map);

	unsigned masters = 0;
	for (struct node *n = r->nodes; n; n = n->next)
		n->master = false;
	for (unsigned s = 0; s < NSLOTS; s++)
		if (r->slots[s] && !r->slots[s]->master) {
			r->slots[s]->master = true;
			masters++;
		}
	for (struct node *n = r->nodes, *next; n; n = next) {
		next = n->next;
		if (n->retired)
			continue;
		if (n->master)
			node_start_sub(n);
		else if (masters)
			node_retire(n); /* a replica, a demoted master, or a seed by another name */
	}
	if (changed) {
		tc_metrics.redis_slot_maps++;
		tc_log(TC_LOG_INFO, "redis cluster slot map", TC_LI("masters", masters));
	}
	update_state(r);
	if (changed || r->resubscribe) {
		/* Channels refused or dropped meanwhile: their master is known now. */
		r->resubscribe = false;
		NOTIFY0(r, sub_up);
	}
	if (r->parked)
		uv_timer_start(&r->park, on_park_timer, 0, 0);
	schedule_refresh(r, r->refresh_again ? 20 : r->all_up ? REFRESH_MS : REFRESH_UNREADY_MS);
}

/* ==== health ================================================================================ */

static void on_ping_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct link *l = ac->data;
	if (reply && l->ac == ac) {
		struct node *n = l->node;
		tc_hist_observe(&tc_metrics.redis_rtt, (double)(uv_hrtime() - n->ping_sent_ns) / 1e9);
		n->ping_outstanding = false;
		n->ping_missed = 0;
		if (n->r->sentinel && !is_master_role(reply)) {
			/* Demoted by a failover while we stayed connected. */
			tc_log(TC_LOG_WARN, "redis master was demoted; asking the sentinels",
			       TC_LS("node", n->addr));
			drop(&n->cmd);
			drop(&n->sub);
		}
	}
}

static void on_ping_tick(uv_timer_t *t)
{
	struct tc_redis *r = t->data;

	for (struct node *n = r->nodes; n; n = n->next) {
		if (n->retired || !n->cmd.up)
			continue;
		if (n->ping_outstanding) {
			if (++n->ping_missed == 1)
				tc_log(TC_LOG_WARN, "redis is slow: PING unanswered", TC_LS("node", n->addr),
				       TC_LI("interval_ms", r->cfg->redis_ping_ms));
			if (n->ping_missed >= PING_DEAD_TICKS) {
				tc_log(TC_LOG_WARN, "redis unresponsive: reconnecting", TC_LS("node", n->addr),
				       TC_LI("waited_ms", r->cfg->redis_ping_ms * PING_DEAD_TICKS));
				drop(&n->cmd);
				drop(&n->sub);
			}
			continue;
		}
		n->ping_outstanding = true;
		n->ping_sent_ns = uv_hrtime();
		redisAsyncCommand(n->cmd.ac, on_ping_reply, NULL, r->sentinel ? "ROLE" : "PING");
	}
}

/* ==== commands ================================================================================ */

static void finish(struct cmd_ctx *c, redisReply *reply)
{
	c->cb(c->r, reply, c->privdata);
	tc_scratch_free(c);
}

static void park(struct cmd_ctx *c)
{
	struct tc_redis *r = c->r;
	c->next = r->parked;
	r->parked = c;
	if (!uv_is_active((uv_handle_t *)&r->park))
		uv_timer_start(&r->park, on_park_timer, RETRY_MS, 0);
}

static void on_command_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct cmd_ctx *c = privdata;
	struct tc_redis *r = c->r;
	redisReply *rep = reply;

	if (rep && rep->type == REDIS_REPLY_ERROR && r->cluster && !r->stopping &&
	    c->tries < MAX_TRIES) {
		unsigned slot;
		struct node *n;
		c->ask_node = 0;
		if (!strncmp(rep->str, "MOVED ", 6)) {
			tc_metrics.redis_redirects++;
			apply_redirect(r, rep->str);
			want_refresh(r);
			c->tries++;
			send_ctx(c);
			return;
		}
		if (!strncmp(rep->str, "ASK ", 4) && (n = redirect_target(r, rep->str, &slot))) {
			tc_metrics.redis_redirects++;
			c->ask_node = n->id;
			c->tries++;
			send_ctx(c);
			return;
		}
		if (!strncmp(rep->str, "TRYAGAIN", 8) || !strncmp(rep->str, "CLUSTERDOWN", 11)) {
			want_refresh(r);
			park(c);
			return;
		}
	}
	finish(c, rep);
}

/* Sends c to its node, or parks it until that node is connected. */
static void send_ctx(struct cmd_ctx *c)
{
	struct tc_redis *r = c->r;
	struct node *n = c->ask_node ? node_by_id(r, c->ask_node) : route(r, c->slot);
	if (!n || !n->cmd.up) {
		park(c);
		return;
	}
	if (c->ask_node)
		redisAsyncCommand(n->cmd.ac, NULL, NULL, "ASKING");
	if (redisAsyncCommandArgv(n->cmd.ac, on_command_reply, c, c->argc, c->argv, c->lens) != REDIS_OK)
		park(c);
}

static void on_park_timer(uv_timer_t *t)
{
	struct tc_redis *r = t->data;
	struct cmd_ctx *list = r->parked;
	r->parked = NULL;
	while (list) {
		struct cmd_ctx *c = list;
		list = c->next;
		if (r->stopping || ++c->tries > MAX_TRIES)
			finish(c, NULL);
		else
			send_ctx(c);
	}
}

int tc_redis_command(struct tc_redis *r, tc_redis_cb *cb, void *privdata, int argc,
		     const char **argv, const size_t *argvlen)
{
	if (r->stopping || argc < 1)
		return -1;
	unsigned slot = tc_slot_of_command(argc, argv, argvlen);
	struct node *n = route(r, slot);
	if (!n || !n->cmd.up)
		return -1;

	/* One block: the context, then argv, lens and the bytes, for resending. */
	size_t bytes = 0;
	for (int i = 0; i < argc; i++)
		bytes += argvlen[i] + 1;
	size_t head = sizeof(struct cmd_ctx) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
	struct cmd_ctx *c = tc_scratch_alloc(head + bytes);
	*c = (struct cmd_ctx){ .r = r, .cb = cb, .privdata = privdata, .slot = slot, .argc = argc };
	c->argv = (const char **)(c + 1);
	c->lens = (size_t *)(c->argv + argc);
	char *p = (char *)(c->lens + argc);
	for (int i = 0; i < argc; i++) {
		memcpy(p, argv[i], argvlen[i]);
		p[argvlen[i]] = '\0';
		c->argv[i] = p;
		c->lens[i] = argvlen[i];
		p += argvlen[i] + 1;
	}
	if (redisAsyncCommandArgv(n->cmd.ac, on_command_reply, c, argc, c->argv, c->lens) != REDIS_OK) {
		tc_scratch_free(c);
		return -1;
	}
	return 0;
}

int tc_redis_cmd(struct tc_redis *r, tc_redis_cb *cb, void *privdata, const char *const *argv)
{
	size_t lens[32];
	int argc = 0;
	for (; argv[argc]; argc++) {
		if (argc == 32)
			return -1; /* no command of ours is this long */
		lens[argc] = strlen(argv[argc]);
	}
	return tc_redis_command(r, cb, privdata, argc, (const char **)argv, lens);
}

/* ==== pub/sub ===================================================================================== */

unsigned tc_redis_subscribe(struct tc_redis *r, const char *channel)
{
	struct node *n = route(r, tc_slot_of(channel, strlen(channel)));
	if (!n || !n->sub.up || r->stopping || tc_pslink_send(n->sub.ps, "SSUBSCRIBE", channel))
		return 0;
	return n->id;
}

int tc_redis_unsubscribe(struct tc_redis *r, unsigned node, const char *channel)
{
	struct node *n = node_by_id(r, node);
	if (!n || !n->sub.up || r->stopping)
		return -1;
	return tc_pslink_send(n->sub.ps, "SUNSUBSCRIBE", channel);
}

/* ==== lifecycle ===================================================================================== */

struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg,
			      const char *function_source, size_t function_len, unsigned flags)
{
	struct tc_redis *r = tc_xcalloc(1, sizeof(*r));
	r->loop = loop;
	r->cfg = cfg;
	r->fn_src = function_source;
	r->fn_len = function_len;
	r->pubsub = !(flags & TC_REDIS_NO_PUBSUB);
	uv_timer_init(loop, &r->ping);
	uv_timer_init(loop, &r->kick);
	uv_timer_init(loop, &r->refresh);
	uv_timer_init(loop, &r->park);
	uv_timer_init(loop, &r->res_timer);
	r->ping.data = r->kick.data = r->refresh.data = r->park.data = r->res_timer.data = r;
	r->sentinel = cfg->nsentinels > 0;
	uv_timer_start(&r->ping, on_ping_tick, (uint64_t)cfg->redis_ping_ms,
		       (uint64_t)cfg->redis_ping_ms);
	r->seed = node_new(r, NULL, 0);
	return r;
}

void tc_redis_add_listener(struct tc_redis *r, const char *prefix,
			   const struct tc_redis_listener *l, void *ctx)
{
	if (r->nlisteners == TC_REDIS_MAX_LISTENERS)
		abort(); /* a fixed set of components registers; more is a bug */
	r->listeners[r->nlisteners].l = l;
	r->listeners[r->nlisteners].ctx = ctx;
	r->listeners[r->nlisteners].prefix = prefix;
	r->listeners[r->nlisteners].prefix_len = prefix ? strlen(prefix) : 0;
	r->nlisteners++;
}

bool tc_redis_cmd_up(const struct tc_redis *r)
{
	return r->all_up && !r->stopping;
}

bool tc_redis_ready(const struct tc_redis *r)
{
	if (!tc_redis_cmd_up(r))
		return false;
	for (const struct node *n = r->nodes; n; n = n->next)
		if (n->master && !n->retired && ((r->pubsub && !n->sub.up) || n->ping_missed))
			return false;
	return true;
}

const char *tc_redis_status(const struct tc_redis *r)
{
	bool any = false, subs = true, slow = false;
	for (const struct node *n = r->nodes; n; n = n->next) {
		if (n->retired)
			continue;
		any |= n->cmd.ac || n->sub.ps;
		if (n->master) {
			subs &= !r->pubsub || n->sub.up;
			slow |= n->ping_missed > 0;
		}
	}
	if (!tc_redis_cmd_up(r))
		return any ? "connecting" : "down";
	if (!subs)
		return "connecting";
	return slow ? "slow" : "up";
}

unsigned tc_redis_connects(const struct tc_redis *r)
{
	return r->connects;
}

bool tc_redis_is_cluster(const struct tc_redis *r)
{
	return r->cluster;
}

unsigned tc_redis_nodes(const struct tc_redis *r)
{
	unsigned n = 0;
	for (const struct node *x = r->nodes; x; x = x->next)
		n += x->master && !x->retired;
	return n;
}

void tc_redis_stop(struct tc_redis *r)
{
	r->stopping = true;
	r->all_up = false;
	uv_timer_t *timers[] = { &r->ping, &r->kick, &r->refresh, &r->park, &r->res_timer };
	if (r->res_ac) {
		redisAsyncContext *ac = r->res_ac;
		r->res_ac = NULL;
		r->res_gen++;
		redisAsyncFree(ac);
	}
	for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
		uv_timer_stop(timers[i]);
		uv_close((uv_handle_t *)timers[i], NULL);
	}
	while (r->parked) {
		struct cmd_ctx *c = r->parked;
		r->parked = c->next;
		finish(c, NULL);
	}
	for (struct node *n = r->nodes; n; n = n->next) {
		if (n->retired)
			continue; /* already closing; freed by its timers */
		link_close(&n->cmd);
		link_close(&n->sub);
		uv_close((uv_handle_t *)&n->cmd.retry, NULL);
		uv_close((uv_handle_t *)&n->sub.retry, NULL);
	}
}

void tc_redis_free(struct tc_redis *r)
{
	free(r->master_host);
	while (r->nodes) {
		struct node *n = r->nodes;
		r->nodes = n->next;
		free(n->host);
		free(n);
	}
	free(r);
}
