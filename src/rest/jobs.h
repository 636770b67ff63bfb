/*
 * rest/jobs.h — internal to rest/: what each kind of route does, started by
 * routes.c on an exchange whose connection is there (exchange.h).
 */
#ifndef TC_REST_JOBS_H
#define TC_REST_JOBS_H

#include "rest/exchange.h"

/* runs.c */
/** K_CREATE (and seed 002's run): the thread's head, runs.create, then the answer, stream or wait. */
void tc__rest_run_create(struct tc_rest *r);
/** K_JOIN, K_STATUS: the run's record, then its stream, wait or status. */
void tc__rest_run_read(struct tc_rest *r);
/** K_CANCEL: runs.cancel, then (wait) the run's end. */
void tc__rest_run_cancel(struct tc_rest *r);

/* worker.c */
/**
 * K_WORKER, K_COPY, K_STATE, K_BULK: the thread's record, then a worker's
 * answer (or the thread's events).
 */
void tc__rest_worker_begin(struct tc_rest *r);

/* agents.c */
/** K_AGENT: seed 002's request as a run of the agent, streamed as agent events. */
void tc__rest_agent_begin(struct tc_rest *r);

#endif
