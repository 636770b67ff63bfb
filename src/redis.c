/*
 * redis.c — Redis as threadcast sees it: nodes, readiness, listeners.
 *
 * The whole of redis.h, on four lower layers that know nothing of this
 * file and reach it only through the ops it gives them: redis_link.c (one
 * connection kept up, its setup), redis_sentinel.c (where the master is),
 * redis_cluster.c (which node serves a slot) and redis_cmd.c (commands
 * followed through redirections and waits). Here: the nodes (the
 * configured one, or the Cluster's masters) and their two links, the
 * Sentinel master's address, what a new slot map means for the nodes,
 * health PINGs, whether commands reach every slot, the waiters, and the
 * listeners pub/sub messages and link events go to.
 */
#include "redis.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "pslink.h"
#include "redis_cluster.h"
#include "redis_cmd.h"
#include "redis_link.h"
#include "redis_sentinel.h"
#include "slot.h"
#include "util.h"

/* PING periods a reply may be late before a node's links are dropped. */
#define PING_DEAD_TICKS 5
#define NSLOTS TC_SLOTS

/* A Redis server: the configured one, or a master of the Cluster. */
struct node {
	struct tc_redis *r;
	unsigned id; /* never reused: tells a node's subscriptions apart */
	char *host;  /* NULL: the configured address (may be a unix socket) */
	int port;
	char addr[64];            /* "host:port" for logs */
	struct tc__link cmd, sub; /* their ctx is the node */
	unsigned ping_missed;
	uint64_t ping_sent_ns;
	bool ping_outstanding;
	bool master;  /* serves slots in the current map (or the only node) */
	bool retired; /* links closed; freed when its timers have closed */
	int timers_open;
	struct node *next;
};

struct tc_redis {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	struct tc__link_conf link_conf; /* every node's links share it */
	struct node *nodes;             /* every node object, retired ones until freed */
	struct node *seed;              /* the configured node */
	struct tc__cluster map;         /* which node serves each slot (their struct node) */
	struct tc__cmds cmds;           /* commands on their way */
	unsigned next_id;
	bool mode_known; /* the seed answered CLUSTER SLOTS */
	bool cluster;
	bool resubscribe; /* a subscription was refused: sub_up after the next map */
	bool all_up;      /* commands could reach every slot at the last check */
	uv_timer_t ping;
	uv_timer_t kick;         /* runs ready waiters from the loop */
	struct tc_dlist waiters; /* of struct tc_redis_waiter, oldest first */
	struct {
		const struct tc_redis_listener *l;
		void *ctx;
		const char *prefix; /* the channels it owns; NULL: none */
		size_t prefix_len;
	} listeners[TC_REDIS_MAX_LISTENERS];
	int nlisteners;
	unsigned connects;
	bool stopping;
	bool pubsub; /* pub/sub links are wanted */
	/* Sentinel mode: the master's address, as the Sentinels last gave it. */
	bool sentinel;
	bool master_known; /* false: ask the Sentinels before connecting */
	char *master_host;
	int master_port;
	struct tc__sentinel sentinels;
};

static void update_state(struct tc_redis *r);

/* Calls a link event on every listener that handles it. */
#define NOTIFY(r, ev, ...)                                                                                             \
	do {                                                                                                           \
		for (int i_ = 0; i_ < (r)->nlisteners; i_++)                                                           \
			if ((r)->listeners[i_].l->ev)                                                                  \
				(r)->listeners[i_].l->ev((r)->listeners[i_].ctx, __VA_ARGS__);                         \
	} while (0)
#define NOTIFY0(r, ev)                                                                                                 \
	do {                                                                                                           \
		for (int i_ = 0; i_ < (r)->nlisteners; i_++)                                                           \
			if ((r)->listeners[i_].l->ev)                                                                  \
				(r)->listeners[i_].l->ev((r)->listeners[i_].ctx);                                      \
	} while (0)

/* The listener that owns channel (its hooks and ctx), or NULL. */
static const struct tc_redis_listener *owner_of(const struct tc_redis *r, const char *ch, size_t len, void **ctx)
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

/* ---- nodes ---------------------------------------------------------------------------- */

static const struct tc__link_ops link_ops;

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
		return r->map.slots[slot];
	for (struct node *n = r->nodes; n; n = n->next)
		if (n->master && !n->retired && n->cmd.up)
			return n;
	return NULL;
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
	tc__link_init(&n->cmd, TC__LINK_CMD, "commands", n->addr, &r->link_conf, &link_ops, n);
	tc__link_init(&n->sub, TC__LINK_SUB, "pubsub", n->addr, &r->link_conf, &link_ops, n);
	n->next = r->nodes;
	r->nodes = n;
	tc__link_start(&n->cmd, true); /* connect from the loop */
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
	if (n->r->pubsub && !n->sub.up)
		tc__link_start(&n->sub, false);
}

static void node_timer_closed(uv_handle_t *h)
{
	struct tc__link *l = h->data;
	struct node *n = l->ctx;
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

/* The node left the Cluster's masters: close it, free it once libuv is done. */
static void node_retire(struct node *n)
{
	struct tc_redis *r = n->r;
	if (n->retired)
		return;
	tc_log(TC_LOG_INFO, "redis node no longer serves slots", TC_LS("node", n->addr));
	n->retired = true;
	n->master = false;
	n->timers_open = 2;
	tc__link_close(&n->cmd, node_timer_closed);
	if (tc__link_close(&n->sub, node_timer_closed) && !r->stopping)
		NOTIFY(r, sub_down, n->id);
	if (r->seed == n)
		r->seed = NULL;
}

/* ---- what a node's links tell (redis_link.h) ------------------------------------------ */

/* Where a node's links connect: a Cluster node's address, the master the
 * Sentinels named (asking them first), or the configured address. */
static bool link_address(void *ctx, struct tc__link *l, struct tc__link_addr *a)
{
	struct node *n = ctx;
	struct tc_redis *r = n->r;
	const struct tc_redis_addr *c = &r->cfg->redis;

	if (r->sentinel && n == r->seed && !r->master_known) {
		tc__sentinel_resolve(&r->sentinels); /* starts both links once they answer */
		return false;
	}
	a->host = n->host ? n->host : r->sentinel ? r->master_host : c->host;
	a->unix_path = n->host || r->sentinel ? NULL : c->unix_path;
	a->port = n->host ? n->port : r->sentinel ? r->master_port : c->port;
	a->db = n->host ? 0 : c->db; /* Cluster nodes have database 0 only */
	return true;
}

static void on_slots(redisAsyncContext *ac, void *reply, void *privdata);

static void link_up(void *ctx, struct tc__link *l)
{
	struct node *n = ctx;
	struct tc_redis *r = n->r;

	if (l == &n->sub) {
		update_state(r);
		NOTIFY0(r, sub_up);
		return;
	}
	tc_metrics.redis_reconnects++;
	n->ping_outstanding = false;
	n->ping_missed = 0;
	if (!r->mode_known && n == r->seed) {
		/* Standalone or Cluster? The answer decides everything else. */
		tc__cluster_asking(&r->map);
		redisAsyncCommand(l->ac, on_slots, r, "CLUSTER SLOTS");
		return;
	}
	if (r->cluster && !n->master)
		tc__cluster_want(&r->map);
	update_state(r);
}

static void link_lost(void *ctx, struct tc__link *l, bool was_up)
{
	struct node *n = ctx;
	struct tc_redis *r = n->r;

	if (r->sentinel && n == r->seed)
		r->master_known = false; /* maybe a failover: ask the Sentinels again */
	if (l == &n->cmd) {
		n->ping_outstanding = false;
		n->ping_missed = 0;
	} else if (was_up && !r->stopping) {
		NOTIFY(r, sub_down, n->id);
	}
	tc__cluster_want(&r->map);
	update_state(r);
}

static void link_push(void *ctx, const char *kind, const char *ch, size_t clen, const char *data, size_t dlen)
{
	struct node *n = ctx;
	struct tc_redis *r = n->r;
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

static void link_refused(void *ctx, const char *verb, const char *channel, const char *err)
{
	struct node *n = ctx;
	struct tc_redis *r = n->r;
	tc_log(TC_LOG_INFO, "redis refused a subscription", TC_LS("node", n->addr), TC_LS("verb", verb),
	       TC_LS("channel", channel), TC_LS("error", err));
	apply_redirect(r, err);
	r->resubscribe = true;
	tc__cluster_want(&r->map);
	void *octx;
	const struct tc_redis_listener *o = owner_of(r, channel, strlen(channel), &octx);
	if (o && o->refused)
		o->refused(octx, channel, strlen(channel));
}

static const struct tc__link_ops link_ops = {
	.address = link_address,
	.up = link_up,
	.lost = link_lost,
	.push = link_push,
	.refused = link_refused,
};

/* ==== Sentinel: what the Sentinels tell (redis_sentinel.h) ======================================== */

static void sentinel_master(void *ctx, const char *host, int port)
{
	struct tc_redis *r = ctx;
	struct node *seed = r->seed;
	bool moved = r->master_host && (strcmp(r->master_host, host) || r->master_port != port);

	if (moved) {
		/* A failover: a link still on the old master goes too (it reconnects). */
		tc__link_drop(&seed->cmd);
		tc__link_drop(&seed->sub);
	}
	if (!r->master_host || moved) {
		free(r->master_host);
		r->master_host = tc_xstrdup(host);
		r->master_port = port;
		snprintf(seed->addr, sizeof(seed->addr), "%s:%d", r->master_host, port);
		tc_log(TC_LOG_INFO, "redis master named by sentinel", TC_LS("node", seed->addr),
		       TC_LS("master", r->cfg->redis_sentinel_master));
	}
	r->master_known = true;
	tc__link_start(&seed->cmd, true);
	if (seed->master && r->pubsub)
		tc__link_start(&seed->sub, true);
}

static void sentinel_unknown(void *ctx)
{
	struct tc_redis *r = ctx;
	tc__link_retry_later(&r->seed->cmd); /* its timer asks again, with backoff */
}

static const struct tc__sentinel_ops sentinel_ops = {
	.master = sentinel_master,
	.unknown = sentinel_unknown,
};

/* ==== readiness ========================================================================== */

static bool compute_all_up(const struct tc_redis *r)
{
	if (!r->mode_known || r->stopping)
		return false;
	if (!r->cluster)
		return r->seed && r->seed->cmd.up;
	for (unsigned s = 0; s < NSLOTS; s++) {
		const struct node *n = r->map.slots[s];
		if (!n || !n->cmd.up)
			return false;
	}
	return true;
}

static void on_kick(uv_timer_t *t);

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
	tc__cmds_kick(&r->cmds);
}

/* ==== the slot map (redis_cluster.h) ====================================================== */

static void *cluster_node_at(void *ctx, const char *host, int port)
{
	return node_at(ctx, host, port);
}

/* Asks a master if one answers, else any node that does. */
static bool cluster_ask(void *ctx)
{
	struct tc_redis *r = ctx;
	struct node *via = NULL;
	for (struct node *n = r->nodes; n; n = n->next)
		if (!n->retired && n->cmd.up && (!via || (n->master && !via->master)))
			via = n;
	return via && redisAsyncCommand(via->cmd.ac, on_slots, r, "CLUSTER SLOTS") == REDIS_OK;
}

static const struct tc__cluster_ops cluster_ops = {
	.node_at = cluster_node_at,
	.ask = cluster_ask,
};

/* MOVED: the slot has a new master; believe it until the next map says otherwise. */
static void apply_redirect(struct tc_redis *r, const char *err)
{
	unsigned slot;
	if (!r->cluster || strncmp(err, "MOVED ", 6))
		return;
	struct node *n = tc__cluster_redirect(&r->map, err, &slot);
	if (!n)
		return;
	if (!n->master) {
		n->master = true;
		node_start_sub(n);
	}
	r->map.slots[slot] = n;
	update_state(r); /* a new master not connected yet: commands wait for it */
}

static void on_slots(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc_redis *r = privdata;
	const struct tc__link *l = ac->data;
	const struct node *via = l->ctx;
	redisReply *rep = reply;
	bool changed;

	if (r->stopping)
		return;
	if (rep && !r->mode_known) {
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
		tc__cluster_start(&r->map);
	}
	if (!tc__cluster_read(&r->map, rep, via->host ? via->host : r->cfg->redis.host, &changed)) {
		if (rep && r->cluster)
			tc_log(TC_LOG_WARN, "cannot read the cluster slot map", TC_LS("node", via->addr),
			       TC_LS("error", rep->type == REDIS_REPLY_ERROR ? rep->str : "not an array"));
		return;
	}

	unsigned masters = 0;
	for (struct node *n = r->nodes; n; n = n->next)
		n->master = false;
	for (unsigned s = 0; s < NSLOTS; s++) {
		struct node *n = r->map.slots[s];
		if (n && !n->master) {
			n->master = true;
			masters++;
		}
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
	tc__cmds_kick(&r->cmds);
	tc__cluster_read_done(&r->map, r->all_up);
}

/* ==== health ================================================================================ */

static void on_ping_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc__link *l = ac->data;
	if (reply && l->ac == ac) {
		struct node *n = l->ctx;
		tc_hist_observe(&tc_metrics.redis_rtt, (double)(uv_hrtime() - n->ping_sent_ns) / 1e9);
		n->ping_outstanding = false;
		n->ping_missed = 0;
		if (n->r->sentinel && !tc__link_is_master(reply)) {
			/* Demoted by a failover while we stayed connected. */
			tc_log(TC_LOG_WARN, "redis master was demoted; asking the sentinels", TC_LS("node", n->addr));
			tc__link_drop(&n->cmd);
			tc__link_drop(&n->sub);
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
				tc__link_drop(&n->cmd);
				tc__link_drop(&n->sub);
			}
			continue;
		}
		n->ping_outstanding = true;
		n->ping_sent_ns = uv_hrtime();
		redisAsyncCommand(n->cmd.ac, on_ping_reply, NULL, r->sentinel ? "ROLE" : "PING");
	}
}

/* ==== commands (redis_cmd.h) ================================================================== */

static redisAsyncContext *cmd_conn(void *ctx, unsigned slot, unsigned ask_node)
{
	struct tc_redis *r = ctx;
	struct node *n = ask_node ? node_by_id(r, ask_node) : route(r, slot);
	return n && n->cmd.up ? n->cmd.ac : NULL;
}

static bool cmd_cluster(void *ctx)
{
	return ((struct tc_redis *)ctx)->cluster;
}

static void cmd_moved(void *ctx, const char *err)
{
	struct tc_redis *r = ctx;
	apply_redirect(r, err);
	tc__cluster_want(&r->map);
}

static unsigned cmd_ask(void *ctx, const char *err)
{
	struct tc_redis *r = ctx;
	unsigned slot;
	struct node *n = tc__cluster_redirect(&r->map, err, &slot);
	return n ? n->id : 0;
}

static void cmd_wait(void *ctx)
{
	tc__cluster_want(&((struct tc_redis *)ctx)->map);
}

static const struct tc__cmd_ops cmd_ops = {
	.conn = cmd_conn,
	.cluster = cmd_cluster,
	.moved = cmd_moved,
	.ask = cmd_ask,
	.wait = cmd_wait,
};

int tc_redis_command(struct tc_redis *r, tc_redis_cb *cb, void *privdata, int argc, const char **argv,
		     const size_t *argvlen)
{
	if (r->stopping || argc < 1)
		return -1;
	unsigned slot = tc_slot_of_command(argc, argv, argvlen);
	struct node *n = route(r, slot);
	if (!n || !n->cmd.up)
		return -1;
	return tc__cmds_send(&r->cmds, n->cmd.ac, slot, cb, privdata, argc, argv, argvlen);
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

struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg, const char *function_source,
			      size_t function_len, unsigned flags)
{
	struct tc_redis *r = tc_xcalloc(1, sizeof(*r));
	r->loop = loop;
	r->cfg = cfg;
	r->pubsub = !(flags & TC_REDIS_NO_PUBSUB);
	r->sentinel = cfg->nsentinels > 0;
	r->link_conf = (struct tc__link_conf){
		.loop = loop, .cfg = cfg, .fn_src = function_source, .fn_len = function_len, .check_role = r->sentinel
	};
	uv_timer_init(loop, &r->ping);
	uv_timer_init(loop, &r->kick);
	r->ping.data = r->kick.data = r;
	tc__cluster_init(&r->map, loop, &cluster_ops, r);
	tc__cmds_init(&r->cmds, loop, r, &cmd_ops, r);
	tc__sentinel_init(&r->sentinels, loop, cfg, TC__LINK_CONNECT_TIMEOUT_MS, &sentinel_ops, r);
	uv_timer_start(&r->ping, on_ping_tick, (uint64_t)cfg->redis_ping_ms, (uint64_t)cfg->redis_ping_ms);
	r->seed = node_new(r, NULL, 0);
	return r;
}

void tc_redis_add_listener(struct tc_redis *r, const char *prefix, const struct tc_redis_listener *l, void *ctx)
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
	uv_timer_t *timers[] = { &r->ping, &r->kick };
	tc__sentinel_stop(&r->sentinels);
	tc__cluster_stop(&r->map);
	for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
		uv_timer_stop(timers[i]);
		uv_close((uv_handle_t *)timers[i], NULL);
	}
	tc__cmds_stop(&r->cmds);
	for (struct node *n = r->nodes; n; n = n->next) {
		if (n->retired)
			continue; /* already closing; freed by its timers */
		tc__link_close(&n->cmd, NULL);
		tc__link_close(&n->sub, NULL);
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
