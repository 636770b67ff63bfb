/*
 * state.h — the commands the agent answers from a thread's agent state
 * (agent_state.lua's hash and checkpoint list): state.get,
 * state.listCheckpoints, and input.inject, which needs an active run.
 */
#ifndef TC_AGENT_STATE_H
#define TC_AGENT_STATE_H

#include "request.h"

/**
 * state.get (the latest values, params.keys picks some, and the latest
 * checkpoint's id; only the graph's namespaces [] and ["researcher"]) or
 * input.inject (the message appended whole to the active run, else
 * no_such_run): reads the thread's state, then answers q.
 */
void tc_agent_read_state(struct tc_agent_request *q);

/** state.listCheckpoints: newest first, at most params.limit, after params.before; answers q. */
void tc_agent_list_checkpoints(struct tc_agent_request *q);

#endif
