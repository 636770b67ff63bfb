/*
 * sse.h — internal to the server: Server-Sent Events streams. Starting one
 * (GET with a query, POST with an EventStreamRequest body), writing queued
 * events together, the heartbeat, and the "resync" event that starts a
 * stream whose history is gone.
 */
#ifndef TC_SSE_H
#define TC_SSE_H

#include <cjson/cJSON.h>

#include "conn.h"

/** Initializes sse.c's handles in srv (the heartbeat timer) and the heartbeat event. */
void tc__sse_init(struct tc_server *srv);

/** Starts the heartbeat (every --sse-heartbeat-ms). */
void tc__sse_start_timers(struct tc_server *srv);

/** Stops and closes sse.c's handles. */
void tc__sse_close_handles(struct tc_server *srv);

/** Frees what tc__sse_init() allocated; after the handles are closed. */
void tc__sse_free(struct tc_server *srv);

/**
 * Starts a stream on wsi for thread from request (an EventStreamRequest
 * object), or answers why not (503 when full, draining or Redis is down;
 * 400 for a bad request). g is the request's grant. Returns what the lws
 * callback returns.
 */
int tc__sse_start_stream(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
			 const cJSON *request, const struct tc_grant *g, enum tc_spelling sp);

/**
 * GET /threads/:id/stream with Accept: text/event-stream, for EventSource:
 * the request comes from the query (channels=a,b namespaces=<JSON> depth=N
 * since=N). Answers like tc__sse_start_stream().
 */
int tc__sse_from_query(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
		       const struct tc_grant *g, enum tc_spelling sp);

/** The Last-Event-ID header (not one lws knows by name) copied into buf, or NULL. */
const char *tc__sse_last_event_id(struct lws *wsi, char *buf, int len);

/** LWS_CALLBACK_HTTP_WRITEABLE for a stream: writes queued events. -1: close. */
int tc__sse_writeable(struct tc_conn *c);

#endif
