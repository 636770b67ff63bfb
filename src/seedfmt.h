/*
 * seedfmt.h — one run's protocol events in the wire formats of the other
 * agent event protocols the project was made from (issue 18): seed 004's
 * resumable typed chunks (SSE, "id:" = sequence, then an end or fail
 * sentinel), seed 002's agent event protocol (SSE, the start/delta/stop
 * stage pattern, exactly one terminal event), seed 003's streaming output
 * (NDJSON lines with an envelope, then a reply line).
 *
 * Pure, like runfmt.h: event frames in (the WebSocket frames of protocol
 * 0.0.21, in seq order), complete wire units out through a callback (an SSE
 * event with its blank line; one NDJSON line with its "\n"), with the small
 * state a stream needs. The run is followed as runfmt follows it
 * (runfollow.h): another run's "started" cuts the stream. Whatever the input, each stream ends
 * with exactly one terminal frame: the run's own end, a cut, or the
 * caller's tc_seed*_finish (a gateway giving up, a client cancelling).
 * After it nothing more is emitted.
 *
 * The mapping of each format is in protocol/README.md ("Other stream
 * formats (issue 18): the translators").
 */
#ifndef TC_SEEDFMT_H
#define TC_SEEDFMT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runfollow.h"

/** Receives one complete wire unit (an SSE event, an NDJSON line). */
typedef void tc_seedfmt_emit(void *ctx, const char *text, size_t len);

/* ---- seed 004: typed chunks with a sequence, an end or fail sentinel ---- */

struct tc_seed004;

/**
 * run_id: the run followed; agent_type: the agent's type (the graph), NULL
 * for none; in_run: the first event is inside the run; skip_through: the
 * last sequence the client has (0: none) — nothing up to it is emitted.
 * Sequences count the stream's units from the run's start (1, 2, …), so a
 * stream fed the run's events from its start again reproduces them.
 */
struct tc_seed004 *tc_seed004_new(const char *run_id, const char *agent_type, bool in_run, uint64_t skip_through,
				  tc_seedfmt_emit *emit, void *ctx);
/** Takes one event frame; true once the stream has ended. */
bool tc_seed004_event(struct tc_seed004 *f, const char *frame, size_t len);
/** Ends the stream now if it has not ended: a fail sentinel with error. */
void tc_seed004_finish(struct tc_seed004 *f, const char *error);
/** The stream's status: "active", "ended" or "failed". */
const char *tc_seed004_status(const struct tc_seed004 *f);
extern const struct tc_run_fmt_ops tc_seed004_ops;
/** The last sequence given out (emitted or skipped). */
uint64_t tc_seed004_sequence(const struct tc_seed004 *f);
void tc_seed004_free(struct tc_seed004 *f);

/* ---- seed 002: agent event protocol (stage pattern, one terminal) ---- */

struct tc_seed002;

/**
 * request_id, thread_id, agent_id: the metadata event's fields (and
 * requestId on every event). in_run as above. Each event has an "id:", its
 * number in the stream from 1 (metadata), counted as seed 004's sequences
 * are, so skip_through (the last id the client has, 0: none) resumes.
 */
struct tc_seed002 *tc_seed002_new(const char *run_id, const char *request_id, const char *thread_id,
				  const char *agent_id, bool in_run, uint64_t skip_through, tc_seedfmt_emit *emit,
				  void *ctx);
extern const struct tc_run_fmt_ops tc_seed002_ops;
bool tc_seed002_event(struct tc_seed002 *f, const char *frame, size_t len);
/**
 * Ends the stream now if it has not ended: code NULL: "aborted" (the client
 * cancelled); else an "error" event with that code (seed 002's codes).
 */
void tc_seed002_finish(struct tc_seed002 *f, const char *code, const char *message);
void tc_seed002_free(struct tc_seed002 *f);
/** Seed 002's HTTP status for an error code (500 for codes it does not list). */
int tc_seed002_http_status(const char *code);
/** Whether a client may retry after an error with that code. */
bool tc_seed002_retryable(const char *code);
/** An error event (new object) for a request refused before its stream: the response's body; ms its time. */
cJSON *tc_seed002_error_event(const char *request_id, const char *code, const char *message, double ms);

/* ---- seed 003: NDJSON lines with an envelope, then one reply line ---- */

struct tc_seed003;

/**
 * session_id: the thread id; agent: the graph name (NULL: none); message:
 * the user's message text of the run (NULL: none); in_run as above;
 * skip_through: the last event_id the client has (0: none) — nothing up to
 * it is emitted. event_ids count the lines from the run's start (1, 2, …),
 * so a stream fed the run's events from its start again reproduces them.
 */
struct tc_seed003 *tc_seed003_new(const char *run_id, const char *session_id, const char *agent,
				  const char *message, bool in_run, uint64_t skip_through,
				  tc_seedfmt_emit *emit, void *ctx);
/** Takes one event frame; true once the stream has ended. */
bool tc_seed003_event(struct tc_seed003 *f, const char *frame, size_t len);
/** Ends the stream now if it has not ended: a reply line with status "failed" and error. */
void tc_seed003_finish(struct tc_seed003 *f, const char *error);
extern const struct tc_run_fmt_ops tc_seed003_ops;
/** The last event_id given out (emitted or skipped). */
uint64_t tc_seed003_event_id(const struct tc_seed003 *f);
void tc_seed003_free(struct tc_seed003 *f);

/* ---- shared by the translators (seedfmt.c; the run follower is runfollow.h's) ---- */

/** Appends s to a bounded text (*text grows, at most max bytes kept). */
void tc_seed_append(char **text, size_t *len, const char *s, size_t max);

#endif
