/*
 * run/modes.h — one run's protocol events as the Agent Protocol's run
 * stream: the Server-Sent Events @langchain/langgraph-sdk's runs.stream and
 * runs.joinStream parse, in the stream modes the client asked for. Pure:
 * events in (follow.h), SSE text out through a callback, with the little
 * state a stream needs.
 *
 * The modes: values (the root's values events; "__interrupt__" added at an
 * interrupt), updates ({node: values}; {"__interrupt__": […]} at an
 * interrupt), messages / messages-tuple ([message chunk, metadata] pairs
 * assembled from the messages channel's content blocks, assemble.h: text
 * deltas and tool call chunks), custom (the payload), tasks, checkpoints
 * (the data as it is). Subgraph events (a non-empty namespace) only with
 * subgraphs, named "<mode>|<ns1>|<ns2>". A failed run ends with an "error"
 * event. debug and events are not produced.
 *
 * Ids. Every event has one, an integer: the seq of the protocol event it
 * came from times TC_RUN_MODES_IDS, plus its place among the events that one
 * made. They increase, one per event. A stream resumed from one
 * (Last-Event-ID) reads the run from its start again and sends only what
 * comes after that id: the state a stream keeps (open messages, values,
 * interrupts) is the same as the first time.
 */
#ifndef TC_RUN_MODES_H
#define TC_RUN_MODES_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run/translator.h"

/** Stream mode bits (tc_run_modes_parse). */
enum {
	TC_MODE_VALUES = 1 << 0,
	TC_MODE_UPDATES = 1 << 1,
	TC_MODE_MESSAGES = 1 << 2,
	TC_MODE_CUSTOM = 1 << 3,
	TC_MODE_TASKS = 1 << 4,
	TC_MODE_CHECKPOINTS = 1 << 5,
	TC_MODE_DEBUG = 1 << 6,
};

/** Ids per protocol event (see above). */
#define TC_RUN_MODES_IDS 8

struct tc_run_modes;

/**
 * A run's formatter. emit NULL: nothing is emitted, the run is only followed
 * (a wait: tc_run_modes_result). in_run: the first event is inside the run.
 * resume_id: the last id the client has (0: none): nothing up to it is emitted.
 */
struct tc_run_modes *tc_run_modes_new(const char *run_id, const char *thread_id, unsigned modes, bool subgraphs,
				      bool in_run, uint64_t resume_id, tc_run_emit *emit, void *ctx);
void tc_run_modes_free(struct tc_run_modes *f);

/** stream_mode (a string, an array of them, or NULL: values) as mode bits. */
unsigned tc_run_modes_parse(const cJSON *stream_mode);

/** Takes the thread's event seq; true once the run has ended (later events are ignored). */
bool tc_run_modes_event(struct tc_run_modes *f, uint64_t seq, const cJSON *event);

/** The translator's operations (translator.h). */
extern const struct tc_run_fmt_ops tc_run_modes_ops;

/** Whether the run has ended. */
bool tc_run_modes_ended(const struct tc_run_modes *f);

/**
 * What a wait answers (new object): the run's last root values, with
 * "__interrupt__" when it stopped at interrupts, or {"__error__": {error,
 * message}} when it failed.
 */
cJSON *tc_run_modes_result(const struct tc_run_modes *f);

#endif
