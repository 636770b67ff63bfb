/*
 * rest/rest.h — the Agent Protocol's REST API, as @langchain/langgraph-sdk's
 * Client calls it (threads, runs, store, assistants; router.h's
 * TC_REST_ROUTE_MAP): what the routes (http.c) hand it.
 *
 * The records and their rules live in Redis (the REST records' Redis
 * functions, threadcast_rest and threadcast_store): one FCALL per request,
 * whose {status, body} is the answer. The gateway adds what only it can do:
 * fresh ids, the thread's seq before a run (so the run's events can be
 * found), run streams and waits made from the thread's protocol events
 * (run/feed.h: the same replay and fan-out as every other stream, so they
 * resume on any instance), and the requests only a worker can answer (a
 * thread's state at a checkpoint, its history, state updates, copies)
 * through the command bridge.
 *
 * The files: exchange.c (an exchange, its connection and its answers, Redis
 * calls), runs.c (runs created, joined, cancelled, streamed and waited
 * for), worker.c (what a worker answers), agents.c (seed 002's agent
 * endpoint), routes.c (what each route and method does; this API).
 */
#ifndef TC_REST_REST_H
#define TC_REST_REST_H

#include <stdbool.h>
#include <stddef.h>

#include "router.h"
#include "srv.h"

struct tc_rest;

/**
 * LWS_CALLBACK_HTTP for a REST route (access already checked, thread routes
 * for their thread, the others for every thread): captures what the request
 * says (path parameters, query, Last-Event-ID) and either starts at once or,
 * for a method with a body, returns the exchange for tc__rest_body(). Returns
 * what the callback returns; *pending is set when a body is expected.
 */
int tc__rest_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, int route, unsigned method,
		     const struct tc_route_match *m, struct tc_rest **pending);

/** The body of a pending exchange is complete: starts it (taking it over). */
int tc__rest_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, struct tc_rest *r, const char *data,
		  size_t len);

/** A pending exchange whose body never completed. */
void tc__rest_drop(struct tc_rest *r);

/** Whether the route and method change something (they need the token's "commands" right). */
bool tc__rest_writes(int route, unsigned method);

#endif
