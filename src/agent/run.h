/*
 * run.h — the runs this agent produces, and messages injected into a run.
 *
 * A run appends its script's steps (script.h) to the thread's stream one
 * after another (FCALL threadcast_append), each after its delay, and keeps
 * agent_state.lua up to date as it goes: the latest values and every
 * checkpoint once appended, the interrupt before its request is appended,
 * "finish" at the end. It stops at the script's pause (input.respond
 * begins it again at the step after) or at its end. A failed append is
 * tried again 200 ms later. Runs are on a->runs; each is freed in its
 * timer's close callback.
 */
#ifndef TC_AGENT_RUN_H
#define TC_AGENT_RUN_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "agent.h"

/**
 * Starts producing run run_id of thread at step phase (0: from its start;
 * a resumed run starts after its pause), the script built from query, ask
 * and response (script.h). The strings are copied.
 */
void tc_agent_run_begin(struct tc_agent *a, const char *thread, const char *run_id, const char *query, bool ask,
			const char *response, int phase);

/** Ends every run (the agent is stopping; a->stopping is set): nothing more is appended. */
void tc_agent_runs_stop(struct tc_agent *a);

/**
 * Appends a whole message (start, one text block, finish) of role with
 * text to thread in namespace ns, at once and in order, with node "input";
 * its id is made from stream_id, the command's entry in tc:commands. For
 * input.inject, and for run.start while a run is active.
 */
void tc_agent_inject(struct tc_agent *a, const char *thread, const char *stream_id, const cJSON *ns, const char *role,
		     const char *text);

#endif
