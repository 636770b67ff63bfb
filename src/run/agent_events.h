/*
 * run/agent_events.h — one run's protocol events as seed 002's agent event
 * protocol: SSE "event: <type>" + data {"event":<type>,"requestId",…,
 * "timestamp"}: metadata, then text / thinking / tool_call / tool_result
 * blocks in the start / delta / stop stages, continuation for an interrupt,
 * and exactly one terminal event: done, error or aborted. Pure: events in
 * (follow.h), complete SSE events out through a callback; after the
 * terminal event nothing more is emitted. The mapping is in
 * protocol/README.md ("Other stream formats").
 */
#ifndef TC_RUN_AGENT_EVENTS_H
#define TC_RUN_AGENT_EVENTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "run/translator.h"

struct tc_run_agent_events;

/**
 * request_id, thread_id, agent_id: the metadata event's fields (and
 * requestId on every event). in_run: the first event is inside the run.
 * Each event has an "id:", its number in the stream from 1 (metadata), so
 * skip_through (the last id the client has, 0: none) resumes: a stream fed
 * the run's events from its start again reproduces them.
 */
struct tc_run_agent_events *tc_run_agent_events_new(const char *run_id, const char *request_id, const char *thread_id,
						    const char *agent_id, bool in_run, uint64_t skip_through,
						    tc_run_emit *emit, void *ctx);
/** Takes the thread's event seq; true once the stream has ended. */
bool tc_run_agent_events_event(struct tc_run_agent_events *f, uint64_t seq, const cJSON *event);
/**
 * Ends the stream now if it has not ended: code NULL: "aborted" (the client
 * cancelled); else an "error" event with that code (seed 002's codes).
 */
void tc_run_agent_events_finish(struct tc_run_agent_events *f, const char *code, const char *message);
void tc_run_agent_events_free(struct tc_run_agent_events *f);
/** The translator's operations (translator.h); finish ends with an error event. */
extern const struct tc_run_fmt_ops tc_run_agent_events_ops;

/** Seed 002's HTTP status for an error code (500 for codes it does not list). */
int tc_agent_events_http_status(const char *code);
/** Whether a client may retry after an error with that code. */
bool tc_agent_events_retryable(const char *code);
/** An error event (new object) for a request refused before its stream: the response's body; ms its time. */
cJSON *tc_agent_events_error_event(const char *request_id, const char *code, const char *message, double ms);

#endif
