/*
 * redis_cmd.h — commands on their way to Redis, followed until answered.
 *
 * Each command is copied once, whole (its context, argv, lengths and bytes
 * in one scratch block), so that it can be sent again: wherever a Cluster
 * redirects it (MOVED: the owner corrects its map and the command goes to
 * the slot's node again; ASK: once to the node named, after ASKING), and
 * after a wait when the owner has no connection for it or Redis asks it to
 * (TRYAGAIN, CLUSTERDOWN). Waiting commands are parked and sent again every
 * 100 ms, or as soon as the owner kicks them; after 40 redirections and
 * waits one gets NULL. Its callback runs exactly once. Which connection a
 * command goes on, and what a redirection means for the map, is the
 * owner's (redis.c), asked through the ops it gave. Nothing here calls
 * redis.c.
 */
#ifndef TC_REDIS_CMD_H
#define TC_REDIS_CMD_H

#include <hiredis/async.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "redis.h"

/** How the commands reach their owner. ctx is the one given to tc__cmds_init(). */
struct tc__cmd_ops {
	/**
	 * The connection for a command of slot (TC_SLOTS: any node), or, when
	 * ask_node is not 0, of the node with that id; NULL when that one is
	 * not up (the command waits).
	 */
	redisAsyncContext *(*conn)(void *ctx, unsigned slot, unsigned ask_node);
	/** Whether redirections are followed (Redis is a Cluster). */
	bool (*cluster)(void *ctx);
	/** MOVED err: the slot has another master (the command is sent again). */
	void (*moved)(void *ctx, const char *err);
	/** ASK err: the id of the node it names, 0 when none. */
	unsigned (*ask)(void *ctx, const char *err);
	/** TRYAGAIN or CLUSTERDOWN: the map may be stale (the command waits). */
	void (*wait)(void *ctx);
};

struct tc__cmd;

/** The commands of one owner; embedded by it. Fields are private. */
struct tc__cmds {
	struct tc_redis *r; /* what callbacks get */
	const struct tc__cmd_ops *ops;
	void *ctx;
	struct tc__cmd *parked; /* waiting to be sent again */
	uv_timer_t park;
	bool stopped;
};

/** Sets q up; callbacks will get r. ops and ctx must outlive q. */
void tc__cmds_init(struct tc__cmds *q, uv_loop_t *loop, struct tc_redis *r, const struct tc__cmd_ops *ops, void *ctx);

/**
 * Copies a command for slot and sends it on ac (the connection the owner
 * picked; it must be up). 0: cb will run exactly once; -1: not sent, cb
 * will not run.
 */
int tc__cmds_send(struct tc__cmds *q, redisAsyncContext *ac, unsigned slot, tc_redis_cb *cb, void *privdata, int argc,
		  const char **argv, const size_t *argvlen);

/** Sends the waiting commands again, from the loop, now (a connection came up, the map changed). */
void tc__cmds_kick(struct tc__cmds *q);

/** Stops for good: the waiting commands get NULL now, the timer is closed. */
void tc__cmds_stop(struct tc__cmds *q);

#endif
