/*
 * redis_source.h — threadcast's connection to Redis.
 *
 * One hiredis async connection driven by the process's libuv loop. It
 * connects in the background, authenticates and selects the database from
 * the configured URL, and reconnects with exponential backoff and jitter
 * whenever the connection drops. A periodic PING tells a hung Redis from a
 * quiet one: a PING still unanswered at the next tick makes Redis "slow"
 * (unready); five ticks without an answer drop the connection and reconnect.
 * Redis being down at start-up is not fatal; tc_redis_ready() says so.
 */
#ifndef TC_REDIS_SOURCE_H
#define TC_REDIS_SOURCE_H

#include <stdbool.h>
#include <uv.h>

#include "config.h"

struct tc_redis;

/** Starts connecting. cfg and loop must outlive the object. Never NULL. */
struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg);

/** True when connected, authenticated and answering PINGs. */
bool tc_redis_ready(const struct tc_redis *r);

/** "up", "slow", "connecting" or "down", for /readyz and logs. */
const char *tc_redis_status(const struct tc_redis *r);

/** Number of successful (re)connections so far. */
unsigned tc_redis_connects(const struct tc_redis *r);

/**
 * Begins shutdown: drops the connection and closes the timers. The loop must
 * run until it has no handles left before tc_redis_free().
 */
void tc_redis_stop(struct tc_redis *r);

/** Frees r once tc_redis_stop() ran and the loop has drained. */
void tc_redis_free(struct tc_redis *r);

#endif
