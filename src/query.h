/*
 * query.h — one-shot reads of a thread for the gateway's own answers.
 *
 * agent.getTree (from the thread's meta and tree index; tree.h builds the
 * answer) and GET /threads/:thread_id/state (from meta and the values,
 * tree and interrupts indexes). A query reads one key after another and
 * reports once through its callback, from the loop. Its owner may cancel
 * it at any time; the read still in flight then frees it without a call.
 */
#ifndef TC_QUERY_H
#define TC_QUERY_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "protocol.h"
#include "redis.h"

struct tc_query;

/**
 * The outcome: code TC_OK with result (the callee takes it) and the thread's
 * head seq, or an error code and a message. The query is over afterwards:
 * do not cancel it.
 */
typedef void tc_query_cb(void *ctx, enum tc_err code, const char *message, cJSON *result, uint64_t head);

/**
 * agent.getTree of thread: {"tree": AgentTreeNode}. want_run (NULL: the
 * current run) must be the current run's id, else no_such_run. Returns NULL
 * when Redis cannot take commands now (the callback will not run).
 */
struct tc_query *tc_query_tree(struct tc_redis *r, const char *thread, const char *want_run, tc_query_cb *cb,
			       void *ctx);

/**
 * GET /threads/:thread_id/state, the Agent Protocol's ThreadState, from the
 * thread's indexes: {values (the root namespace's latest values), next (the
 * root graph while a run is running or interrupted), tasks (one per
 * unanswered interrupt, with its payload), interrupts, checkpoint and
 * parent_checkpoint (the latest root checkpoints event), metadata.step,
 * created_at}, spelled as 0.0.21. A thread without history (never written,
 * or expired) reports TC_ERR_NO_SUCH_RUN. NULL when Redis cannot take
 * commands now.
 */
struct tc_query *tc_query_state(struct tc_redis *r, const char *thread, tc_query_cb *cb, void *ctx);

/** Cancels a query that has not reported yet. */
void tc_query_cancel(struct tc_query *q);

#endif
