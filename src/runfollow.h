/*
 * runfollow.h — what every translator of a run's events shares: following
 * one run through a thread's event frames (the WebSocket frames of protocol
 * 0.0.21, in seq order), an LRU table of what is open per namespace (the
 * messages being streamed), and one SSE event's text. Pure.
 *
 * The run's events run from the root lifecycle "started" whose run_id is the
 * run's to the root "completed", "failed" or "interrupted" — or to another
 * run's "started", which cuts it. Only namespaces with lifecycle events are
 * subgraphs: the node task an event came from inside a graph ("model:<task>")
 * is dropped from its namespace and named as its node. runfmt.h (the SDK's
 * run streams) and seedfmt.h (the other seeds' formats) are built on it.
 */
#ifndef TC_RUNFOLLOW_H
#define TC_RUNFOLLOW_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_RUN_SUBGRAPHS 256 /* subgraph namespaces a follower knows */

/** Following one run through a thread's events. */
struct tc_run_follow {
	char *run_id;
	bool in_run, ended;
	char *subgraphs[TC_RUN_SUBGRAPHS]; /* joined namespaces with lifecycle events */
	size_t nsubgraphs;
};

/** What one frame is to the run. */
enum tc_run_step {
	TC_RUN_SKIP,  /**< not the run's, or not an event: nothing to do */
	TC_RUN_EVENT, /**< one of the run's events (ev filled) */
	TC_RUN_END,   /**< the run's root completed / failed / interrupted (ev filled) */
	TC_RUN_CUT,   /**< another run started before the run's end */
};

/** One of the run's events, parsed. */
struct tc_run_ev {
	cJSON *frame;
	const char *method;
	const cJSON *params, *data;
	double seq;         /**< the frame's seq, -1 when absent or not a safe integer */
	double timestamp;   /**< params.timestamp (ms), 0 when absent */
	char *ns;           /**< the graph namespace: real subgraphs only, joined with "|"; "" the root */
	char node[128];     /**< params.node, or the name of the node task the event came from */
	const char *status; /**< a lifecycle event's status */
};

/**
 * What a stream needs of a run's translator, whichever its format (runfmt.h,
 * seedfmt.h: each has one of these, tc_<format>_ops).
 */
struct tc_run_fmt_ops {
	/** Takes one event frame; true once the stream has ended. */
	bool (*event)(void *f, const char *frame, size_t len);
	/** The history before the first event is gone: the events are taken as the run's. */
	void (*assume_in_run)(void *f);
	void (*free)(void *f);
};

/**
 * Defines tc_<name>_ops for a translator struct tc_<name> with a follower
 * member fw and functions tc_<name>_event and tc_<name>_free.
 */
#define TC_RUN_FMT_OPS(name)                                                                 \
	static bool name##_ops_event(void *f, const char *frame, size_t len)                  \
	{                                                                                     \
		return tc_##name##_event(f, frame, len);                                      \
	}                                                                                     \
	static void name##_ops_assume_in_run(void *f)                                         \
	{                                                                                     \
		((struct tc_##name *)f)->fw.in_run = true;                                    \
	}                                                                                     \
	static void name##_ops_free(void *f)                                                  \
	{                                                                                     \
		tc_##name##_free(f);                                                          \
	}                                                                                     \
	const struct tc_run_fmt_ops tc_##name##_ops = { name##_ops_event, name##_ops_assume_in_run, name##_ops_free }

/** in_run: the first frame is inside the run (a stream resumed after one of its events). */
void tc_run_follow_init(struct tc_run_follow *fw, const char *run_id, bool in_run);
void tc_run_follow_clear(struct tc_run_follow *fw);
/** Classifies a frame; for EVENT and END, ev is filled (tc_run_ev_clear it). */
enum tc_run_step tc_run_follow_step(struct tc_run_follow *fw, const char *frame, size_t len, struct tc_run_ev *ev);
void tc_run_ev_clear(struct tc_run_ev *ev);

/** A member by its protocol name, in either spelling (NULL: absent, or o not an object). */
const cJSON *tc_run_get(const cJSON *o, const char *name);
/** The same, when it is a string. */
const char *tc_run_str(const cJSON *o, const char *name);

/** One SSE event (new text, *len bytes): "id:" and "event:" lines when given, one "data:" line. */
char *tc_sse_event(const char *id, const char *event, const cJSON *data, size_t *len);

/**
 * A slot of a table of what is open per key (embed it first in the entry).
 * tc_slot_find() returns key's entry, or with create the least recently used
 * one (or a free one) re-keyed — *fresh then says its other members are the
 * previous owner's, to be cleared by the caller. NULL when absent and not
 * create.
 */
struct tc_slot {
	char *key;
	uint64_t used;
};
void *tc_slot_find(void *entries, size_t n, size_t size, uint64_t *clock, const char *key, bool create,
		   bool *fresh);
/** Frees the slot's key and zeroes it (the caller frees the entry's other members first). */
void tc_slot_clear(struct tc_slot *s);

#endif
