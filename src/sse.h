/*
 * sse.h — the SSE stream kind of connection (conn.h): the protocol's events
 * as Server-Sent Events (GET with a query, for EventSource; POST with an
 * EventStreamRequest body), one connection-scoped subscription served by a
 * session in stream mode, and the "resync" event that starts a stream
 * whose history is gone. Written and kept alive by stream.h.
 */
#ifndef TC_SSE_H
#define TC_SSE_H

#include <cjson/cJSON.h>

#include "srv.h"

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

#endif
