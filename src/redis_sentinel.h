/*
 * redis_sentinel.h — asking Redis Sentinels where the master is.
 *
 * One question at a time: the configured Sentinels are asked in order
 * (SENTINEL get-master-addr-by-name <master>, each on a connection of its
 * own and given a timeout to answer), until one names the master. An
 * entry's credentials (--redis-sentinels user:password@host:port) are sent
 * with AUTH first; with a rediss:// Redis URL, the Sentinels are reached
 * over TLS too, with the same settings (cfg->tls).
 * The answer, or that none gave one, goes to the owner through the ops it
 * gave; what to do with it (connect, follow a failover) is the owner's
 * (redis.c). Nothing here calls redis.c.
 */
#ifndef TC_REDIS_SENTINEL_H
#define TC_REDIS_SENTINEL_H

#include <hiredis/async.h>
#include <stdbool.h>
#include <uv.h>

#include "config.h"

/** How the asking ends. ctx is the one given to tc__sentinel_init(). */
struct tc__sentinel_ops {
	/** A Sentinel named the master (host valid during the call only). */
	void (*master)(void *ctx, const char *host, int port);
	/** No Sentinel named it: ask again later (tc__sentinel_resolve()). */
	void (*unknown)(void *ctx);
};

/** The asking; embedded by its owner. Fields are private. */
struct tc__sentinel {
	const struct tc_config *cfg; /* the Sentinels and the master's name */
	uv_loop_t *loop;
	unsigned timeout_ms; /* one Sentinel's time to answer */
	const struct tc__sentinel_ops *ops;
	void *ctx;
	bool resolving; /* a question is out */
	bool stopped;
	int idx;      /* the Sentinel being asked */
	unsigned gen; /* tells a current answer from an abandoned one */
	redisAsyncContext *ac;
	uv_timer_t timer; /* the current Sentinel's deadline */
};

/**
 * Sets s up, asking nothing yet; each Sentinel gets timeout_ms to answer.
 * cfg, ops and ctx must outlive s.
 */
void tc__sentinel_init(struct tc__sentinel *s, uv_loop_t *loop, const struct tc_config *cfg, unsigned timeout_ms,
		       const struct tc__sentinel_ops *ops, void *ctx);

/** Asks the Sentinels, from the first, unless a question is out already. */
void tc__sentinel_resolve(struct tc__sentinel *s);

/**
 * Stops asking for good: the connection goes, no callback runs, and the
 * timer is closed (run the loop before freeing s's memory).
 */
void tc__sentinel_stop(struct tc__sentinel *s);

#endif
