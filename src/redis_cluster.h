/*
 * redis_cluster.h — a Redis Cluster's slot map, read and kept fresh.
 *
 * The map says which node serves each of the 16384 slots. It is read from
 * CLUSTER SLOTS (masters only), corrected by MOVED until the next read, and
 * read again when the owner asks (a node dropped, Redis redirected: within
 * 20 ms, or right after a read in flight) and periodically: every 5 s while
 * commands reach every slot, every 250 ms while they do not. Nodes are the
 * owner's objects, found or made through ops->node_at; what a new map means
 * for them (which are masters, which go) is the owner's business (redis.c).
 * Nothing here calls redis.c.
 */
#ifndef TC_REDIS_CLUSTER_H
#define TC_REDIS_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <uv.h>

#include "slot.h"

/** How the map reaches its owner. ctx is the one given to tc__cluster_init(). */
struct tc__cluster_ops {
	/** The node at host:port, made (and connected) when new. */
	void *(*node_at)(void *ctx, const char *host, int port);
	/**
	 * Sends CLUSTER SLOTS to a node that answers, its reply to go to
	 * tc__cluster_read(); false when no node can be asked now.
	 */
	bool (*ask)(void *ctx);
};

/** The map; embedded by its owner. */
struct tc__cluster {
	/** The node serving each slot (the owner's); NULL: none known. */
	void *slots[TC_SLOTS];
	/* private */
	bool on;          /* a Cluster, and not stopped: keep the map fresh */
	bool asking;      /* a CLUSTER SLOTS is out */
	bool again;       /* asked for a read while one was out */
	uv_timer_t timer; /* the next read */
	const struct tc__cluster_ops *ops;
	void *ctx;
};

/** Sets c up: no map, not refreshing. ops and ctx must outlive c. */
void tc__cluster_init(struct tc__cluster *c, uv_loop_t *loop, const struct tc__cluster_ops *ops, void *ctx);

/** Redis turned out to be a Cluster: the map is kept fresh from now on. */
void tc__cluster_start(struct tc__cluster *c);

/**
 * A CLUSTER SLOTS is out (sent by the owner itself, or by ops->ask): no
 * other is sent until tc__cluster_read() takes its answer.
 */
void tc__cluster_asking(struct tc__cluster *c);

/** The map may be stale: reads it again soon (see above). */
void tc__cluster_want(struct tc__cluster *c);

/**
 * Takes the answer to the CLUSTER SLOTS out (NULL: its link dropped). A map
 * replaces c->slots: returns 1, *changed telling whether it differs, and
 * the owner calls tc__cluster_read_done() once it has dealt with it.
 * Anything else: returns 0 and schedules another read. self_host names the
 * answering node where the map leaves its address out.
 */
int tc__cluster_read(struct tc__cluster *c, const redisReply *rep, const char *self_host, bool *changed);

/** Schedules the next read after a map was taken: all_up says whether commands reach every slot. */
void tc__cluster_read_done(struct tc__cluster *c, bool all_up);

/**
 * The node a "MOVED <slot> <host>:<port>" or "ASK …" error names (made
 * when new) and its slot; NULL when err names none.
 */
void *tc__cluster_redirect(struct tc__cluster *c, const char *err, unsigned *slot);

/** Stops refreshing for good and closes the timer (run the loop before freeing c). */
void tc__cluster_stop(struct tc__cluster *c);

#endif
