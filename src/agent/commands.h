/*
 * commands.h — serving a runtime command read from tc:commands.
 *
 * run.start starts a run (or, on an interrupted thread, resumes it with the
 * input as the response; on a thread with an active run, the input joins
 * it as an injected message); state.fork starts a run from a checkpoint;
 * input.respond resumes an interrupted run; state.* and input.inject are
 * state.h's; any other method is answered not_supported. Each command is
 * answered exactly once (request.h), except a --stall method's, which is
 * dropped unanswered as a hung worker would.
 */
#ifndef TC_AGENT_COMMANDS_H
#define TC_AGENT_COMMANDS_H

#include "agent.h"

/** Serves one stream entry [id, [field, value, ...]] of tc:commands (read, or claimed). */
void tc_agent_take(struct tc_agent *a, const redisReply *entry);

#endif
