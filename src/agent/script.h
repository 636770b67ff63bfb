/*
 * script.h — the run the reference agent produces, as a list of steps.
 *
 * A run is deterministic in (run id, query, ask, response), so any agent
 * can build it again and resume it at a step index (the phase kept in
 * agent_state.lua). Its events: lifecycle, the human input, a streamed AI
 * message with a streamed tool call, tool events, a subgraph in namespace
 * ["researcher"] with custom:progress, updates/values/checkpoints per
 * step, and — when the run asks — an input.requested interrupt followed by
 * a pause that input.respond resumes. Building does no I/O (cJSON only);
 * run.c appends the steps.
 */
#ifndef TC_AGENT_SCRIPT_H
#define TC_AGENT_SCRIPT_H

#include <stdbool.h>

/** What appending a step involves besides the append. */
enum tc_agent_step_kind {
	TC_AGENT_STEP_EVENT,      /**< only the event */
	TC_AGENT_STEP_VALUES,     /**< values: once appended, recorded as the thread's state */
	TC_AGENT_STEP_CHECKPOINT, /**< checkpoints: once appended, recorded in the list */
	TC_AGENT_STEP_INTERRUPT,  /**< input.requested: recorded as interrupted, then appended */
};

/** One step of a run. */
struct tc_agent_step {
	char *json;    /**< the event to append, or NULL: the run stops until input.respond */
	long delay_ms; /**< wait before appending it (streamed tokens) */
	enum tc_agent_step_kind kind;
};

/** A run's steps, in order. */
struct tc_agent_script {
	struct tc_agent_step *steps;
	int nsteps;
	char interrupt_id[64]; /**< the interrupt's id when the run asks for input, else "" */
};

/**
 * Builds the run run_id answering query into s (overwritten); ask: it
 * interrupts for input; response: the input it got (NULL or "": none yet).
 * Streamed tokens are token_delay_ms apart. Free with tc_agent_script_free().
 */
void tc_agent_script_build(struct tc_agent_script *s, const char *run_id, const char *query, bool ask,
			   const char *response, long token_delay_ms);

/** Frees the steps of s. */
void tc_agent_script_free(struct tc_agent_script *s);

#endif
