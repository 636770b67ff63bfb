/*
 * query.h — one-shot reads of a thread for the gateway's own answers.
 *
 * agent.getTree is answered from the thread's meta (the current run) and
 * its tree index (tree.h builds the answer). A query reads one, then the
 * other, and reports once through its callback, from the loop. Its owner may cancel it at any time; a reply still in flight is then
 * dropped without a call.
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
typedef void tc_query_cb(void *ctx, enum tc_err code, const char *message, cJSON *result,
			 uint64_t head);

/**
 * agent.getTree of thread: {"tree": AgentTreeNode}. want_run (NULL: the
 * current run) must be the current run's id, else no_such_run. Returns NULL
 * when Redis cannot take commands now (the callback will not run).
 */
struct tc_query *tc_query_tree(struct tc_redis *r, const char *thread, const char *want_run,
			       tc_query_cb *cb, void *ctx);

/** Cancels a query that has not reported yet. */
void tc_query_cancel(struct tc_query *q);

#endif
