/*
 * run/chunks.h — one run's protocol events as seed 004's resumable typed
 * chunks: SSE events, "id:" = sequence, data {"type":"chunk","chunk":{…},
 * "sequence":N}, then an end or fail sentinel. Pure: events in (follow.h),
 * complete SSE events out through a callback. Whatever the input, the
 * stream ends with exactly one sentinel: the run's own end, a cut (another
 * run's start), or the caller's tc_run_chunks_finish; after it nothing more
 * is emitted. The mapping is in protocol/README.md ("Other stream formats").
 */
#ifndef TC_RUN_CHUNKS_H
#define TC_RUN_CHUNKS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "run/translator.h"

struct tc_run_chunks;

/**
 * run_id: the run followed; agent_type: the agent's type (the graph), NULL
 * for none; in_run: the first event is inside the run; skip_through: the
 * last sequence the client has (0: none) — nothing up to it is emitted.
 * Sequences count the stream's units from the run's start (1, 2, …), so a
 * stream fed the run's events from its start again reproduces them.
 */
struct tc_run_chunks *tc_run_chunks_new(const char *run_id, const char *agent_type, bool in_run, uint64_t skip_through,
					tc_run_emit *emit, void *ctx);
/** Takes the thread's event seq; true once the stream has ended. */
bool tc_run_chunks_event(struct tc_run_chunks *f, uint64_t seq, const cJSON *event);
/** Ends the stream now if it has not ended: a fail sentinel with error. */
void tc_run_chunks_finish(struct tc_run_chunks *f, const char *error);
/** The stream's status: "active", "ended" or "failed". */
const char *tc_run_chunks_status(const struct tc_run_chunks *f);
/** The last sequence given out (emitted or skipped). */
uint64_t tc_run_chunks_sequence(const struct tc_run_chunks *f);
void tc_run_chunks_free(struct tc_run_chunks *f);
/** The translator's operations (translator.h). */
extern const struct tc_run_fmt_ops tc_run_chunks_ops;

#endif
