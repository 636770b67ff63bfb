/*
 * run/feed.h — a run's stream translated once per instance, shared by
 * every viewer of it.
 *
 * A feed follows one run of one thread (the thread's events after the seq
 * the run was created after) through a session of its own in stream mode —
 * the same replay and fan-out as every other stream, so it resumes on any
 * instance — and translates each event once, in one format with one set of
 * options (struct tc_run_spec). The wire units it makes (an SSE event, an
 * NDJSON line, each with its id) go to every viewer whose client does not
 * have them yet, as shared buffers, the way fan-out shares event frames.
 *
 * The units stay in the feed's log while it has viewers, so a viewer that
 * joins late (a join, a resumed stream) catches up from it, paced by its
 * client's queue, and then shares the live units. The log is bounded
 * (bytes, struct tc_run_feeds); a viewer that needs units it no longer holds
 * gets a feed of its own, which translates the run from its start again,
 * as a stream did before feeds were shared.
 *
 * Viewers are told through their ops: units, then the end of the run or
 * the feed's failure (its history was reset, Redis failed), always after
 * every unit the feed made for them.
 */
#ifndef TC_RUN_FEED_H
#define TC_RUN_FEED_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "dlist.h"
#include "session.h"

/** The wire formats of a run's stream (the run wing's translators). */
enum tc_run_format {
	TC_RUN_MODES,        /**< the SDK's stream modes (modes.h) */
	TC_RUN_CHUNKS,       /**< seed 004's typed chunks (chunks.h) */
	TC_RUN_NDJSON,       /**< seed 003's NDJSON lines (ndjson.h) */
	TC_RUN_AGENT_EVENTS, /**< seed 002's agent events (agent_events.h) */
};

/** Which run, in which format with which options: a feed's identity. */
struct tc_run_spec {
	enum tc_run_format format;
	const char *thread; /**< the run's thread */
	const char *run_id; /**< the run */
	uint64_t after_seq; /**< the run's events come after this seq of its thread */
	unsigned modes;     /**< TC_RUN_MODES: stream mode bits (modes.h) */
	/**
	 * TC_RUN_MODES: the stream modes the stream was given, for a run its
	 * worker renders (tc_run_modes_given's text; NULL: none, every event).
	 */
	const char *given;
	bool subgraphs; /**< TC_RUN_MODES: subgraph events too */
	/**
	 * TC_RUN_MODES: a wait, which only needs the run's result
	 * (tc_run_feed_result): no unit is made.
	 */
	bool result_only;
	const char *agent;   /**< CHUNKS: the agent type; NDJSON: the agent; AGENT_EVENTS: the agent id (NULL: none) */
	const char *message; /**< NDJSON: the run's input message text (NULL: none) */
};

struct tc_run_feed;
struct tc_run_view;

/** What a feed tells its viewer; v is the viewer. */
struct tc_run_view_ops {
	/** Queue one unit for the client (taking over the reference). */
	void (*unit)(struct tc_run_view *v, struct tc_buf *unit);
	/** Bytes the client has queued and not yet read (units are paced by it). */
	size_t (*queued)(struct tc_run_view *v);
	/** The run ended: every unit went out. The viewer stays attached until it detaches. */
	void (*end)(struct tc_run_view *v);
	/**
	 * The feed gave up (code: an enum tc_close, reason: a static string)
	 * after every unit it made went out; or the client fell behind what
	 * the log still holds. The viewer stays attached until it detaches.
	 */
	void (*fail)(struct tc_run_view *v, int code, const char *reason);
};

/** A viewer of a feed: embed it in its owner; tc_run_feed_attach fills the rest. */
struct tc_run_view {
	const struct tc_run_view_ops *ops;
	struct tc_run_feed *feed; /**< set while attached */
	uint64_t after;           /**< the last id the client has: only later units go to it */
	uint64_t after_seq;       /**< and only units made from the thread's events after this seq (0: all) */
	uint64_t next;            /**< the log position (counted from the feed's start) of the next unit to consider */
	bool done;                /**< end or fail was told */
	struct tc_dlink link;     /**< on the feed's viewers */
};

/** Every feed of the process, found by their spec. */
struct tc_run_feeds;

/**
 * The process' feeds: their sessions come from env, and a feed's log keeps
 * at most log_max bytes of units (at least the last one).
 */
struct tc_run_feeds *tc_run_feeds_new(const struct tc_session_env *env, size_t log_max);
/** Frees the table; every viewer must have detached. NULL is a no-op. */
void tc_run_feeds_free(struct tc_run_feeds *feeds);
/** Feeds alive (for metrics and tests). */
size_t tc_run_feeds_count(const struct tc_run_feeds *feeds);

/**
 * Attaches v (ops set, after set) to the feed of spec, started if there is
 * none, or to a feed of its own when the shared one no longer holds what v
 * needs. What the feed's log already holds for v is delivered inside this
 * call (and, for a feed that is over, its end or failure): have everything
 * that goes before ready. A viewer's ops never detach it. Returns -1 with
 * err filled (nothing attached) when the spec cannot be followed.
 */
int tc_run_feed_attach(struct tc_run_feeds *feeds, const struct tc_run_spec *spec, struct tc_run_view *v,
		       struct tc_error *err);

/** Detaches v (the client went away, or it was told the end); the last viewer frees the feed. NULL feed: no-op. */
void tc_run_feed_detach(struct tc_run_view *v);

/** The client of v drained its queue: units it is owed go on. */
void tc_run_view_drained(struct tc_run_view *v);

/** Whether v's feed has seen the run's end (a client going away then cancels nothing). */
bool tc_run_view_over(const struct tc_run_view *v);

/**
 * TC_RUN_MODES: what a wait answers, once the run ended (new object; see
 * tc_run_modes_result). NULL for the other formats.
 */
cJSON *tc_run_feed_result(const struct tc_run_view *v);

#endif
