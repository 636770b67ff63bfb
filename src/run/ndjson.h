/*
 * run/ndjson.h — one run's protocol events as seed 003's streaming output:
 * NDJSON lines {"session_id","node_id"?,"event_id","type",…} — run_start,
 * node spans (node_enter … node_exit, from the root graph's tasks), message
 * and tool call chunks, usage, values, updates, custom, checkpoint, the
 * tools' events and tool approvals — then exactly one reply line
 * {"session_id","node_id"?,"event_id","reply","status","error"?}. Pure:
 * events in (follow.h), complete lines (with their "\n") out through a
 * callback. Whatever the input, the stream ends with exactly one reply line
 * (the run's end, a cut, or the caller's tc_run_ndjson_finish); after it
 * nothing more is emitted. The mapping is in protocol/README.md ("Other
 * stream formats").
 */
#ifndef TC_RUN_NDJSON_H
#define TC_RUN_NDJSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "run/translator.h"

struct tc_run_ndjson;

/**
 * session_id: the thread id; agent: the graph name (NULL: none); message:
 * the user's message text of the run (NULL: none); in_run as above;
 * skip_through: the last event_id the client has (0: none) — nothing up to
 * it is emitted. event_ids count the lines from the run's start (1, 2, …),
 * so a stream fed the run's events from its start again reproduces them.
 */
struct tc_run_ndjson *tc_run_ndjson_new(const char *run_id, const char *session_id, const char *agent,
					const char *message, bool in_run, uint64_t skip_through, tc_run_emit *emit,
					void *ctx);
/** Takes the thread's event seq; true once the stream has ended. */
bool tc_run_ndjson_event(struct tc_run_ndjson *f, uint64_t seq, const cJSON *event);
/** Ends the stream now if it has not ended: a reply line with status "failed" and error. */
void tc_run_ndjson_finish(struct tc_run_ndjson *f, const char *error);
/** The last event_id given out (emitted or skipped). */
uint64_t tc_run_ndjson_event_id(const struct tc_run_ndjson *f);
void tc_run_ndjson_free(struct tc_run_ndjson *f);
/** The translator's operations (translator.h). */
extern const struct tc_run_fmt_ops tc_run_ndjson_ops;

#endif
