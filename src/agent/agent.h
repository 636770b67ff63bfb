/*
 * agent.h — threadcast-agent, the reference agent worker: the one object
 * every part of it shares, and the few Redis and JSON helpers they all use.
 *
 * The parts, bottom up (none calls a part above it):
 *   agent.c     this header's helpers
 *   script.c    a run's events, built from its input (pure: cJSON only)
 *   run.c       running a script: one event after another into the thread
 *   request.c   a command read from tc:commands and its one answer
 *   state.c     state.get, state.listCheckpoints, input.inject
 *   commands.c  run.start, state.fork, input.respond, and the dispatch
 *   claim.c     the worker registry and commands a dead worker left
 *   main.c      the command loop, the Redis links, signals, start and stop
 *
 * Per-thread state lives in Redis (agent_state.lua), so whichever agent
 * takes the next command of a thread can answer state.* or resume its run.
 */
#ifndef TC_AGENT_H
#define TC_AGENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "redis.h"
#include "store.h"

struct tc_agent_run;

/** The agent process: one per program, on main()'s stack. */
struct tc_agent {
	uv_loop_t *loop;
	struct tc_config cfg;        /**< Redis settings, log level (the gateway's config code) */
	struct tc_redis *rd;         /**< blocking reads of tc:commands (main.c) */
	struct tc_redis *wr;         /**< everything else */
	char *name;                  /**< consumer name in the workers group; in run ids */
	long token_delay_ms;         /**< pause between streamed tokens of a run */
	long claim_idle_ms;          /**< unacknowledged this long, a command is for others */
	const char *stall;           /**< fault injection: a method never answered, else NULL */
	bool reading;                /**< a blocking read is in flight (main.c) */
	bool stopping;               /**< stop() began: callbacks do nothing more */
	bool registered;             /**< the registry took this agent once (claim.c) */
	uv_timer_t claim;            /**< the heartbeat: registry and claiming (claim.c) */
	uv_timer_t retry_read;       /**< the next read after a failed one (main.c) */
	uv_signal_t sigint, sigterm; /**< stop on either (main.c) */
	struct tc_agent_run *runs;   /**< the runs this agent is producing (run.c) */
	unsigned long run_counter;   /**< runs started, for run ids (commands.c) */
};

/**
 * Sends a command built by store.h on link r: 0 when queued (cb runs
 * once), -1 when the link is down (cb does not run).
 */
int tc_agent_send(struct tc_redis *r, tc_redis_cb *cb, void *priv, const struct tc_store_cmd *c);

/** A tc_redis_cb for replies nobody waits for: an error is logged. */
void tc_agent_ignore_reply(struct tc_redis *r, redisReply *reply, void *priv);

/**
 * EVAL of agent_state.lua for thread on the agent's write link; args (at
 * most 10) are its ARGV, the operation first. Returns as tc_agent_send().
 */
int tc_agent_state_op(struct tc_agent *a, const char *thread, tc_redis_cb *cb, void *priv, int argc, const char **args);

/** The string at index i of an array reply, else NULL (no array, too short, not a string). */
const char *tc_agent_str_at(const redisReply *r, size_t i);

/** o printed without whitespace (the caller frees it); o is deleted. */
char *tc_agent_print(cJSON *o);

/** A new object holding one string field k1: v1. */
cJSON *tc_agent_obj(const char *k1, const char *v1);

#endif
