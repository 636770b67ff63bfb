/*
 * run/translator.h — what the run wing's translators (modes.h, chunks.h,
 * ndjson.h, agent_events.h) have in common, for a caller that serves them
 * all (feed.h).
 */
#ifndef TC_RUN_TRANSLATOR_H
#define TC_RUN_TRANSLATOR_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Receives one complete wire unit (an SSE event with its blank line, an
 * NDJSON line with its "\n") and its id: the number a client resumes after
 * (Last-Event-ID), increasing from unit to unit.
 */
typedef void tc_run_emit(void *ctx, uint64_t id, const char *text, size_t len);

/** A translator's operations; f is the translator. */
struct tc_run_fmt_ops {
	/**
	 * Takes the thread's event seq (its parsed JSON; NULL when it would not
	 * parse; json, len: its text as stored, json NULL when not at hand);
	 * true once the stream has ended.
	 */
	bool (*event)(void *f, uint64_t seq, const cJSON *event, const char *json, size_t len);
	/** The history before the first event is gone: the events are taken as the run's. */
	void (*assume_in_run)(void *f);
	/**
	 * NULL, or: the gateway gives up on the stream before the run's end
	 * (its history was reset): the format's own terminal unit, once.
	 */
	void (*finish)(void *f, const char *code, const char *message);
	/** Frees the translator. */
	void (*free)(void *f);
};

/**
 * Defines tc_run_<name>_ops for a translator struct tc_run_<name> with a
 * follower member fw and functions tc_run_<name>_event (which does without
 * the event's text) and tc_run_<name>_free; finish is the ops' finish
 * (NULL: none).
 */
#define TC_RUN_FMT_OPS(name, finish_fn)                                                                                \
	static bool name##_ops_event(void *f, uint64_t seq, const cJSON *event, const char *json, size_t len)          \
	{                                                                                                              \
		return tc_run_##name##_event(f, seq, event);                                                           \
	}                                                                                                              \
	static void name##_ops_assume_in_run(void *f)                                                                  \
	{                                                                                                              \
		((struct tc_run_##name *)f)->fw.in_run = true;                                                         \
	}                                                                                                              \
	static void name##_ops_free(void *f)                                                                           \
	{                                                                                                              \
		tc_run_##name##_free(f);                                                                               \
	}                                                                                                              \
	const struct tc_run_fmt_ops tc_run_##name##_ops = { name##_ops_event, name##_ops_assume_in_run, finish_fn,     \
							    name##_ops_free }

#endif
