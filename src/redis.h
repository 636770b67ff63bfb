/*
 * redis.h — threadcast's connections to Redis: one node, or a Cluster.
 *
 * Per Redis node, two links on the process's libuv loop:
 *   - the command link (hiredis async): FUNCTION LOAD of the function
 *     libraries, XRANGE replays and gap fills, index reads; many commands in
 *     flight, answered in order;
 *   - the pub/sub link (pslink.c): SSUBSCRIBE to the doorbell channel of
 *     every thread with local subscribers. Doorbells are sharded pub/sub
 *     (SPUBLISH), so in a Cluster each one travels only inside its shard.
 * The configured URL names one node. Once its command link is up, CLUSTER
 * SLOTS tells whether it belongs to a Cluster: if not, that node is all
 * there is; if so, threadcast connects to every master, sends each command
 * to the master of its key's slot (the `{thread_id}` hash tag keeps a
 * thread's keys and channel in one slot), follows MOVED and ASK, waits out
 * TRYAGAIN and CLUSTERDOWN, and re-reads the slot map when a node drops,
 * when Redis redirects, and periodically — which is how it follows a
 * failover.
 * Each link connects in the background, authenticates (and selects the
 * database, outside a Cluster), and reconnects with exponential backoff
 * and jitter when it drops. A periodic PING on each command link tells a
 * hung Redis from a quiet one: one PING unanswered for a period makes Redis
 * "slow" (unready); five periods drop the node's links and reconnect.
 * Redis being down at start-up is not fatal; tc_redis_ready() says so.
 *
 * redis.c implements this on layers of its own (each header says what it
 * does): redis_link.h, one connection kept up and its setup (the function
 * libraries loaded); redis_sentinel.h, asking the Sentinels for the master;
 * redis_cluster.h, the slot map; redis_cmd.h, commands followed through
 * redirections and waits.
 */
#ifndef TC_REDIS_H
#define TC_REDIS_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "dlist.h"

struct tc_redis;

/**
 * Reply callback. reply is NULL when the command failed because the link
 * dropped (or is shutting down): retry after tc_redis_wait_ready(). The
 * reply is freed when the callback returns.
 */
typedef void tc_redis_cb(struct tc_redis *r, redisReply *reply, void *privdata);

/**
 * Events of the links. Link events (sub_up, sub_down, cmd_up) go to every
 * listener; channel events (subscribed, unsubscribed, refused, message) only
 * to the listener that owns the channel's prefix (the hub "tc:{", the
 * command bridge "tc:reply:"). Any hook may be NULL.
 */
struct tc_redis_listener {
	/** A pub/sub link is (again) usable, or the slot map changed: subscribe
	 *  whatever is not subscribed. */
	void (*sub_up)(void *ctx);
	/** The pub/sub link of node dropped: every subscription made there
	 *  (tc_redis_subscribe() returned node) is gone. */
	void (*sub_down)(void *ctx, unsigned node);
	/** A subscription to channel was confirmed. */
	void (*subscribed)(void *ctx, const char *channel, size_t clen);
	/** channel is no longer subscribed: an unsubscribe was confirmed, or
	 *  Redis dropped it unasked (its slot moved to another node). */
	void (*unsubscribed)(void *ctx, const char *channel, size_t clen);
	/** Redis refused to subscribe channel (or to unsubscribe it): it is not
	 *  subscribed; try again after the next sub_up (the slot map is re-read). */
	void (*refused)(void *ctx, const char *channel, size_t clen);
	/** A message arrived on channel. */
	void (*message)(void *ctx, const char *channel, size_t clen, const char *data, size_t dlen);
	/** The command link became ready (connected, function loaded). */
	void (*cmd_up)(void *ctx);
};

/**
 * Someone waiting for the command link to be ready. Embed it; the callback
 * runs once, from the loop, after which the waiter is unlinked.
 */
struct tc_redis_waiter {
	void (*fn)(struct tc_redis_waiter *w);
	struct tc_dlink link;
};

/** tc_redis_new() flag: no pub/sub link (a plain command connection). */
#define TC_REDIS_NO_PUBSUB 1u

/**
 * Starts connecting. function_source is the Redis function libraries, one or
 * more one after another (store.h's tc_store_library_next() tells them
 * apart), loaded with FUNCTION LOAD REPLACE, all in one MULTI, on every
 * (re)connect of the command link.
 * cfg, loop and function_source must outlive the object. Never NULL.
 */
struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg, const char *function_source,
			      size_t function_len, unsigned flags);

/** Listeners a process may register. */
#define TC_REDIS_MAX_LISTENERS 4

/**
 * Adds a listener owning the channels that start with prefix (NULL: none,
 * link events only); l, ctx and prefix must outlive r. Prefixes of two
 * listeners must not overlap.
 */
void tc_redis_add_listener(struct tc_redis *r, const char *prefix, const struct tc_redis_listener *l, void *ctx);

/** True when every link is up, the function is loaded and PINGs are answered. */
bool tc_redis_ready(const struct tc_redis *r);

/** True when commands can go to every slot (even if Redis is slow). */
bool tc_redis_cmd_up(const struct tc_redis *r);

/** "up", "slow", "connecting" or "down", for /readyz and logs. */
const char *tc_redis_status(const struct tc_redis *r);

/** Number of times commands became possible (after start-up or an outage). */
unsigned tc_redis_connects(const struct tc_redis *r);

/** True once Redis turned out to be a Cluster. */
bool tc_redis_is_cluster(const struct tc_redis *r);

/** Masters known (1 outside a Cluster). */
unsigned tc_redis_nodes(const struct tc_redis *r);

/**
 * Sends a command (binary-safe arguments) to the node serving its key: the
 * first key of EVAL/FCALL, the stream of XREADGROUP, XGROUP's key, or else
 * argv[1]. Returns 0 when queued — cb will run exactly once — or -1 when
 * that node's link is not up (cb will not run). Cluster redirections are
 * followed before cb runs.
 */
int tc_redis_command(struct tc_redis *r, tc_redis_cb *cb, void *privdata, int argc, const char **argv,
		     const size_t *argvlen);

/**
 * tc_redis_command() with NUL-terminated arguments: argv ends with NULL.
 * The usual way to send a command built by store.h.
 */
int tc_redis_cmd(struct tc_redis *r, tc_redis_cb *cb, void *privdata, const char *const *argv);

/**
 * SSUBSCRIBE to channel on the pub/sub link of the node serving its slot.
 * Returns that node's number (> 0, never reused; see sub_down), or 0 when
 * that link is not up.
 */
unsigned tc_redis_subscribe(struct tc_redis *r, const char *channel);
/** SUNSUBSCRIBE channel on node (as returned by tc_redis_subscribe). -1 when that link is gone. */
int tc_redis_unsubscribe(struct tc_redis *r, unsigned node, const char *channel);

/** Calls w->fn once the command link is ready (at once, from the loop, if it is). */
void tc_redis_wait_ready(struct tc_redis *r, struct tc_redis_waiter *w);
/** Forgets a waiter; safe if it is not waiting. */
void tc_redis_wait_cancel(struct tc_redis *r, struct tc_redis_waiter *w);

/**
 * Begins shutdown: drops both links (pending callbacks get NULL) and closes
 * the timers. Run the loop until it has no handles left, then tc_redis_free().
 */
void tc_redis_stop(struct tc_redis *r);

/** Frees r once tc_redis_stop() ran and the loop has drained. */
void tc_redis_free(struct tc_redis *r);

#endif
