/*
 * run/modes.h — one run's protocol events as the Agent Protocol's run
 * stream: the Server-Sent Events @langchain/langgraph-sdk's runs.stream and
 * runs.joinStream parse, in the stream modes the client asked for, as the
 * Agent Server (@langchain/langgraph-api) sends them. Pure: events in
 * (follow.h), SSE text out through a callback, with the little state a
 * stream needs.
 *
 * The modes: values (the values events; LangGraph's {"__interrupt__": …}
 * at an interrupt), updates ({node: values}), messages-tuple ([message
 * chunk, metadata] pairs assembled from the messages channel's content
 * blocks, assemble.h, and the messages a node returns that were not
 * streamed, from its update), messages (messages/metadata and
 * messages/partial as a model streams, messages/complete for the root
 * values' new messages), custom (the chunk as the graph wrote it), tasks,
 * tools (LangGraph's on_tool_* events), and, from what the LangGraph
 * worker adds beside the protocol's channels (its side events,
 * TC_RUN_MODES_SIDE), debug, checkpoints ({values, metadata, next}) and
 * events (LangChain's callback events). Subgraph events (a non-empty
 * namespace) only with subgraphs, named "<mode>|<ns1>|<ns2>". A failed run
 * ends with an "error" event {error: the exception's class, message}.
 *
 * Ids. Every event has one: 1, 2, 3, … in the order they are made (0 is
 * the stream's metadata, which the caller sends). A stream resumed from
 * one (Last-Event-ID) reads the run from its start again and sends only
 * what comes after that id: what a stream makes from the same events with
 * the same options is the same every time, on any gateway.
 *
 * Rendered runs. A run whose root lifecycle "started" says "rendered": true
 * is rendered by its worker (the Python worker: LangGraph's Python server
 * writes its streams otherwise than the JavaScript one). Nothing is
 * translated then: each of the run's side events {mode: "sse", data:
 * {event, data}} is one event of the stream, "<event>" with <data> as its
 * JSON text was stored (numbers as written), ids as above; the run's other
 * events, and side events of other modes, make nothing, and its end adds no
 * error (the worker rendered it). Which of them a stream gets is what the
 * Python server's run streams and joins get: all, when the stream was given
 * no stream modes (tc_run_modes_given: a run's own stream, a join without
 * stream_mode); else those named as one of the modes, those whose name
 * starts with "messages" when "messages" or "messages-tuple" is one, and
 * those whose name up to its first "|" is one. Subgraphs do not filter them.
 * The wait's result is the data of the last "values" event, or {"__error__":
 * the data of the last "error" event} when there was one.
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
	TC_MODE_MESSAGES_TUPLE = 1 << 2,
	TC_MODE_CUSTOM = 1 << 3,
	TC_MODE_TASKS = 1 << 4,
	TC_MODE_CHECKPOINTS = 1 << 5,
	TC_MODE_DEBUG = 1 << 6,
	TC_MODE_MESSAGES = 1 << 7,
	TC_MODE_EVENTS = 1 << 8,
	TC_MODE_TOOLS = 1 << 9,
};

/**
 * The method of the LangGraph worker's side events ({mode, data}: what the
 * stream modes need beyond the protocol's channels; protocol/README.md,
 * "Run streams"). A named custom channel: only who asks for it by name gets it.
 */
#define TC_RUN_MODES_SIDE "custom:threadcast.modes"

struct tc_run_modes;

/**
 * A run's formatter. emit NULL: nothing is emitted, the run is only followed
 * (a wait: tc_run_modes_result). in_run: the first event is inside the run.
 * resume_id: the last id the client has (0: none but the metadata): nothing
 * up to it is emitted.
 */
struct tc_run_modes *tc_run_modes_new(const char *run_id, const char *thread_id, unsigned modes, bool subgraphs,
				      bool in_run, uint64_t resume_id, tc_run_emit *emit, void *ctx);
void tc_run_modes_free(struct tc_run_modes *f);

/** stream_mode (a string, an array of them, or NULL: values) as mode bits. */
unsigned tc_run_modes_parse(const cJSON *stream_mode);

/**
 * The stream modes a stream was given, for a rendered run, as the Python
 * server reads a join's stream_mode: a string (one mode; one that starts with
 * "[" and parses as a JSON array: those), or an array of them (a query
 * parameter given more than once). A new JSON array text, or NULL when none
 * were given (NULL, "", []).
 */
char *tc_run_modes_given(const cJSON *stream_mode);

/** The stream's given modes (tc_run_modes_given's text; NULL: none), used if the run is rendered. */
void tc_run_modes_set_given(struct tc_run_modes *f, const char *given);

/**
 * Takes the thread's event seq (json, len: its text as stored, NULL when not
 * at hand: a rendered event's data is then printed from the parse); true once
 * the run has ended (later events are ignored).
 */
bool tc_run_modes_event(struct tc_run_modes *f, uint64_t seq, const cJSON *event, const char *json, size_t len);

/** The translator's operations (translator.h). */
extern const struct tc_run_fmt_ops tc_run_modes_ops;

/** Whether the run has ended. */
bool tc_run_modes_ended(const struct tc_run_modes *f);

/** Whether the run is rendered by its worker (its started said so). */
bool tc_run_modes_rendered(const struct tc_run_modes *f);

/**
 * What a wait answers (new item): the data of the run's last root values
 * event ({"__interrupt__": …} when it stopped at interrupts), or
 * {"__error__": {error, message}} when it failed. A rendered run's (see
 * above) is its data as stored (a cJSON raw item, any JSON), or
 * {"__error__": raw}.
 */
cJSON *tc_run_modes_result(const struct tc_run_modes *f);

#endif
