/*
 * request.h — a runtime command the agent read from tc:commands (consumer
 * group `workers`), and its answer.
 *
 * Every request gets exactly one answer: published on the gateway's reply
 * channel under the command's corr, and the entry acknowledged (XACK) at
 * the same time, so no other worker claims it later. A command read but
 * never answered (a dead worker, or --stall) stays pending in the group
 * until another agent claims it (claim.h).
 */
#ifndef TC_AGENT_REQUEST_H
#define TC_AGENT_REQUEST_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "agent.h"

/** A command being served; owned by whoever serves it until tc_agent_answer(). */
struct tc_agent_request {
	struct tc_agent *a;
	char *stream_id; /**< its entry id in tc:commands (acknowledged with the answer) */
	char *thread;    /**< the thread it is for */
	char *method;    /**< run.start, input.respond, state.get, … */
	char *corr;      /**< the gateway's id for it, echoed in the answer */
	char *reply;     /**< the gateway's reply channel */
	cJSON *params;   /**< its params (an empty object when absent or not JSON), never NULL */
	char *query;     /**< run.start / state.fork: the input as text, else NULL */
	bool ask;        /**< run.start / state.fork: the run interrupts for input */
};

/**
 * One stream entry [id, [field, value, ...]] as a new request, or NULL:
 * an entry of another shape is skipped; one missing a field, or past its
 * deadline (nobody waits for it any more), is acknowledged and dropped.
 */
struct tc_agent_request *tc_agent_request_parse(struct tc_agent *a, const redisReply *entry);

/**
 * Answers q and frees it: success with result (NULL: an empty object), or
 * when error is set, that error code with message (result is freed).
 * Acknowledges the command's entry.
 */
void tc_agent_answer(struct tc_agent_request *q, cJSON *result, const char *error, const char *message);

/** Frees q without answering (a stalled command: fault injection). */
void tc_agent_request_free(struct tc_agent_request *q);

#endif
