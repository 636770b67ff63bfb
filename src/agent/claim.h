/*
 * claim.h — the worker registry and the commands a dead worker left.
 *
 * The registry: this agent serves any assistant ("*", the stream
 * tc:commands), for a while longer at every heartbeat (every
 * claim_idle_ms / 2 + 1 ms, live for three of them: a missed one is no
 * outage). Gateways refuse at once a command no live worker can take. At
 * the same heartbeat the agent claims (XAUTOCLAIM) commands another worker
 * read and left unacknowledged for claim_idle_ms, and serves them
 * (commands.h).
 */
#ifndef TC_AGENT_CLAIM_H
#define TC_AGENT_CLAIM_H

#include "agent.h"

/** Registers the agent in the registry now (the write link came up). */
void tc_agent_register(struct tc_agent *a);

/** Starts the heartbeat (a->claim): registry and claiming. */
void tc_agent_claim_start(struct tc_agent *a);

/** Stops the heartbeat and closes its timer (the agent is stopping). */
void tc_agent_claim_stop(struct tc_agent *a);

#endif
