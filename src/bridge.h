/*
 * bridge.h — the command bridge: runtime commands to agent workers.
 *
 * run.start, input.respond, input.inject, state.get, state.listCheckpoints
 * and state.fork are answered by agent workers, not by the gateway. The
 * bridge XADDs each (validated) command to the `tc:commands` stream, read by
 * workers through the consumer group `workers`, with a gateway-unique
 * correlation id and this instance's reply channel. The worker SPUBLISHes its
 * answer there; the bridge relays it to the client under the client's own
 * command id. A command nobody answers within --command-timeout gets
 * unknown_error. Workers get the params spelled as protocol 0.0.21 and may
 * answer in either spelling; each client reads its own, with
 * meta.appliedThroughSeq. protocol/README.md has the worker-side contract.
 */
#ifndef TC_BRIDGE_H
#define TC_BRIDGE_H

#include <stdint.h>
#include <uv.h>

#include "buf.h"
#include "config.h"
#include "protocol.h"
#include "redis.h"

struct tc_bridge;

/**
 * Who sent a command (the session). The bridge calls answer() at most once
 * and then release() exactly once, whatever happens (answer, timeout,
 * shutdown); the caller keeps itself alive until release().
 */
struct tc_bridge_caller {
	/** How the caller spells the protocol: its answers are respelled so. */
	enum tc_spelling sp;
	/** Delivers the reply frame (taking over the reference). */
	void (*answer)(struct tc_bridge_caller *c, struct tc_buf *frame);
	/** The bridge is done with this command. */
	void (*release)(struct tc_bridge_caller *c);
};

/** Creates the bridge and registers it as a Redis listener. */
struct tc_bridge *tc_bridge_new(uv_loop_t *loop, const struct tc_config *cfg, struct tc_redis *redis);

/**
 * Forwards a runtime command of thread (params already validated). On
 * TC_OK the reply comes later through caller; otherwise err says why and the
 * caller is not used.
 */
enum tc_err tc_bridge_submit(struct tc_bridge *b, struct tc_bridge_caller *caller, const char *thread,
			     const struct tc_command *cmd, struct tc_error *err);

/**
 * Forwards method (a name that outlives the command, e.g. a literal) with
 * params (may be NULL: {}) to the workers of assistant (NULL: the thread's),
 * unvalidated: the REST API's requests that only a worker can answer
 * (rest.c). The answer frame has id 0 and the worker's result as it is (any
 * JSON value, not respelled).
 */
enum tc_err tc_bridge_submit_method(struct tc_bridge *b, struct tc_bridge_caller *caller, const char *thread,
				    const char *assistant, const char *method, const cJSON *params,
				    struct tc_error *err);

/** Commands waiting for an answer. */
size_t tc_bridge_pending(const struct tc_bridge *b);

/** This instance's reply channel ("tc:reply:<instance>"). */
const char *tc_bridge_reply_channel(const struct tc_bridge *b);

/**
 * Begins shutdown: every waiting command is released without an answer and
 * the timer closed. Run the loop dry, then tc_bridge_free().
 */
void tc_bridge_stop(struct tc_bridge *b);
void tc_bridge_free(struct tc_bridge *b);

#endif
