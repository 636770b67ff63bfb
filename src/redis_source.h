/*
 * redis_source.h — threadcast's connections to Redis.
 *
 * Two hiredis async links on the process's libuv loop:
 *   - the command link: FUNCTION LOAD of the producer contract, XRANGE
 *     replays and gap fills, index reads; many commands in flight, answered
 *     in order;
 *   - the pub/sub link: SUBSCRIBE to the doorbell channel of every thread
 *     with local subscribers.
 * Each connects in the background, authenticates and selects the database
 * from the configured URL, and reconnects with exponential backoff and
 * jitter when it drops. A periodic PING on the command link tells a hung
 * Redis from a quiet one: one PING unanswered for a period makes Redis
 * "slow" (unready); five periods drop both links and reconnect.
 * Redis being down at start-up is not fatal; tc_redis_ready() says so.
 */
#ifndef TC_REDIS_SOURCE_H
#define TC_REDIS_SOURCE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"

struct tc_redis;

/**
 * Reply callback. reply is NULL when the command failed because the link
 * dropped (or is shutting down): retry after tc_redis_wait_ready(). The
 * reply is freed when the callback returns.
 */
typedef void tc_redis_cb(struct tc_redis *r, redisReply *reply, void *privdata);

/**
 * Events of the links, delivered to every listener (the hub, the command
 * bridge); each picks the channels it owns. Any hook may be NULL.
 */
struct tc_redis_listener {
	/** The pub/sub link is (again) usable: SUBSCRIBE what is wanted. */
	void (*sub_up)(void *ctx);
	/** The pub/sub link dropped: every subscription is gone. */
	void (*sub_down)(void *ctx);
	/** A SUBSCRIBE to channel was confirmed. */
	void (*subscribed)(void *ctx, const char *channel, size_t clen);
	/** An UNSUBSCRIBE from channel was confirmed. */
	void (*unsubscribed)(void *ctx, const char *channel, size_t clen);
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
	struct tc_redis_waiter *prev, *next;
	bool linked;
};

/** tc_redis_new() flag: no pub/sub link (a plain command connection). */
#define TC_REDIS_NO_PUBSUB 1u

/**
 * Starts connecting. function_source is the Redis function library loaded
 * with FUNCTION LOAD REPLACE on every (re)connect of the command link.
 * cfg, loop and function_source must outlive the object. Never NULL.
 */
struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg,
			      const char *function_source, size_t function_len, unsigned flags);

/** Listeners a process may register. */
#define TC_REDIS_MAX_LISTENERS 4

/** Adds a listener; l and ctx must outlive r. */
void tc_redis_add_listener(struct tc_redis *r, const struct tc_redis_listener *l, void *ctx);

/** True when both links are up, the function is loaded and PINGs are answered. */
bool tc_redis_ready(const struct tc_redis *r);

/** True when the command link can take commands (even if Redis is slow). */
bool tc_redis_cmd_up(const struct tc_redis *r);

/** "up", "slow", "connecting" or "down", for /readyz and logs. */
const char *tc_redis_status(const struct tc_redis *r);

/** Number of times the command link became ready. */
unsigned tc_redis_connects(const struct tc_redis *r);

/**
 * Sends a command on the command link (binary-safe arguments). Returns 0
 * when queued — cb will run exactly once — or -1 when the link is not up
 * (cb will not run).
 */
int tc_redis_command(struct tc_redis *r, tc_redis_cb *cb, void *privdata, int argc,
		     const char **argv, const size_t *argvlen);

/** SUBSCRIBE / UNSUBSCRIBE on the pub/sub link. -1 when the link is not up. */
int tc_redis_subscribe(struct tc_redis *r, const char *channel);
int tc_redis_unsubscribe(struct tc_redis *r, const char *channel);

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
