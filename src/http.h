/*
 * http.h — internal to the server: the routes. Which route a request is
 * (router.h) and who serves it — the process' own endpoints (GET /healthz,
 * /readyz, /metrics, --static-dir files) here, SSE streams (sse.h), POST
 * /commands (request.h), the REST API (rest/rest.h) — after the access
 * checks (Origin, JWT); request bodies; and the decision on a WebSocket
 * upgrade (ws.h opens it).
 */
#ifndef TC_HTTP_H
#define TC_HTTP_H

#include "srv.h"

/** LWS_CALLBACK_HTTP: routes and answers the request for path (or expects its body). */
int tc__http_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *path);

/** LWS_CALLBACK_HTTP_BODY: a piece of the body, kept up to --max-frame-bytes (else 413). */
int tc__http_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *in, size_t len);

/** LWS_CALLBACK_HTTP_BODY_COMPLETION: runs the command, starts the SSE stream or the REST exchange. */
int tc__http_body_complete(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss);

/** The request is gone (CLOSED / CLOSED_HTTP): drops a body still being read. */
void tc__http_closed(struct tc_pss *pss);

/**
 * LWS_CALLBACK_HTTP_CONFIRM_UPGRADE for proto ("websocket", "h2c", …).
 * Returns 0 to proceed, with up filled (the route's thread and the token's
 * grant, checked here once); >0 when it answered (404, 400, 401, 403, 503);
 * <0 to hang up.
 */
int tc__http_confirm_upgrade(struct tc_server *srv, struct lws *wsi, const char *proto, struct tc_upgrade *up);

#endif
