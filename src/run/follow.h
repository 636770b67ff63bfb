/*
 * run/follow.h — the run wing's base: following one run through a thread's
 * events, what every translator of a run's events shares.
 *
 * The run wing (src/run/) turns a thread's protocol events into one run's
 * stream in another wire format: the SDK's stream modes (modes.h), seed
 * 004's typed chunks (chunks.h), seed 003's NDJSON lines (ndjson.h), seed
 * 002's agent events (agent_events.h). Each translator is pure: events in,
 * complete wire units out through a callback. An event comes in as its parts
 * — its seq and the stored event JSON ({"method", "params": {namespace,
 * timestamp, data, node?}}), parsed once by whoever reads it (feed.h) — never
 * as a client's frame parsed back. Field names are read in either spelling.
 *
 * A run's events run from the root lifecycle "started" whose run_id is the
 * run's to the root "completed", "failed" or "interrupted" — or to another
 * run's "started", which cuts it. Only namespaces with lifecycle events are
 * subgraphs: the node task an event came from inside a graph ("model:<task>")
 * is dropped from its namespace and named as its node.
 */
#ifndef TC_RUN_FOLLOW_H
#define TC_RUN_FOLLOW_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_RUN_SUBGRAPHS 256 /**< subgraph namespaces a follower knows */

/** Following one run through a thread's events. */
struct tc_run_follow {
	char *run_id;                      /**< the run followed */
	bool in_run;                       /**< its start was seen (or assumed) */
	bool ended;                        /**< its end (or a cut) was seen */
	char *subgraphs[TC_RUN_SUBGRAPHS]; /**< joined namespaces with lifecycle events */
	size_t nsubgraphs;                 /**< entries of subgraphs */
};

/** What one event is to the run. */
enum tc_run_step {
	TC_RUN_SKIP,  /**< not the run's, or not an event: nothing to do */
	TC_RUN_EVENT, /**< one of the run's events (ev filled) */
	TC_RUN_END,   /**< the run's root completed / failed / interrupted (ev filled) */
	TC_RUN_CUT,   /**< another run started before the run's end */
};

/** One of the run's events, read: pointers into the caller's parsed event. */
struct tc_run_ev {
	uint64_t seq;            /**< the event's seq in its thread */
	const char *method;      /**< "messages", "lifecycle", … */
	const cJSON *event;      /**< the whole stored event */
	const cJSON *params;     /**< its params */
	const cJSON *data;       /**< params.data */
	const cJSON *namespace_; /**< params.namespace as sent: node tasks included */
	double timestamp;        /**< params.timestamp (ms), 0 when absent */
	char *ns;                /**< the graph namespace: real subgraphs only, joined with "|"; "" the root */
	char node[128];          /**< params.node, or the name of the node task the event came from */
	const char *status;      /**< a lifecycle event's status, else NULL */
	const char *text;        /**< the stored event's JSON text, when the translator was given it (else NULL) */
	size_t text_len;         /**< of text */
};

/** in_run: the first event is inside the run (a stream resumed after one of its events). */
void tc_run_follow_init(struct tc_run_follow *fw, const char *run_id, bool in_run);
/** Frees what fw holds and zeroes it. */
void tc_run_follow_clear(struct tc_run_follow *fw);

/**
 * Classifies the thread's event seq (event: its parsed JSON, NULL when it
 * would not parse); for EVENT and END, ev is filled (tc_run_ev_clear it).
 * After END or CUT every event is SKIP.
 */
enum tc_run_step tc_run_follow_step(struct tc_run_follow *fw, uint64_t seq, const cJSON *event, struct tc_run_ev *ev);
/** Frees what ev holds (not the event it points into). */
void tc_run_ev_clear(struct tc_run_ev *ev);

/** A member by its protocol name, in either spelling (NULL: absent, or o not an object). */
const cJSON *tc_run_get(const cJSON *o, const char *name);
/** The same, when it is a string. */
const char *tc_run_str(const cJSON *o, const char *name);

/** One SSE event (new text, *len bytes): "id:" and "event:" lines when given, one "data:" line. */
char *tc_sse_event(const char *id, const char *event, const cJSON *data, size_t *len);
/** The same with data as JSON text (data_len bytes, no line break in it), written as it is. */
char *tc_sse_unit(const char *id, const char *event, const char *data, size_t data_len, size_t *len);

/**
 * Where the value at path (object keys, NULL-terminated) is in JSON text
 * (len bytes) that cJSON parsed: *at, *at_len bytes, exactly as written
 * (numbers as the producer wrote them, which cJSON would print anew). False
 * when it is not there, or when the way to it holds a key written with an
 * escape or a NUL (read otherwise by cJSON): the parsed value is then the
 * one to use. Each key is its first occurrence, as cJSON finds members.
 */
bool tc_run_json_at(const char *json, size_t len, const char *const *path, const char **at, size_t *at_len);

/** Appends s to a bounded text (*text grows, at most max bytes kept, never half a UTF-8 sequence). */
void tc_run_append(char **text, size_t *len, const char *s, size_t max);

/**
 * A slot of a table of what is open per key (embed it first in the entry).
 * tc_slot_find() returns key's entry, or with create the least recently used
 * one (or a free one) re-keyed — *fresh then says its other members are the
 * previous owner's, to be cleared by the caller. NULL when absent and not
 * create.
 */
struct tc_slot {
	char *key;     /**< NULL: free */
	uint64_t used; /**< the table's clock when last found */
};
void *tc_slot_find(void *entries, size_t n, size_t size, uint64_t *clock, const char *key, bool create, bool *fresh);
/** Frees the slot's key and zeroes it (the caller frees the entry's other members first). */
void tc_slot_clear(struct tc_slot *s);

#endif
