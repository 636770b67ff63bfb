/*
 * http.h — internal to the server: plain HTTP. Response helpers, the route
 * handlers (GET /healthz, /readyz, /metrics, --static-dir files,
 * /threads/:thread_id/stream for SSE, POST /threads/:thread_id/commands),
 * access checks (Origin, JWT), request bodies, and the decision on a
 * WebSocket upgrade. Which route a path is comes from router.h.
 */
#ifndef TC_HTTP_H
#define TC_HTTP_H

#include "conn.h"

/** Writes a response head; content_len LWS_ILLEGAL_HTTP_CONTENT_LEN streams. 0 or -1. */
int tc__http_head(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len);
/** tc__http_head() with more headers: extra is NULL-terminated "name:", value pairs (a NULL value is skipped). */
int tc__http_head_x(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len,
		    const char *const *extra);

/**
 * Answers {"error":code,"message":message} with status and completes the
 * exchange. Returns what the lws callback should return.
 */
int tc__http_error(struct lws *wsi, unsigned status, const char *code, const char *message);

/** Answers {"detail": message} (the REST API's errors) with status and completes the exchange. */
int tc__http_detail(struct lws *wsi, unsigned status, const char *message);

/**
 * The admission check every kind of client connection passes: answers 503
 * while draining or at --max-connections and returns what the callback
 * should return; returns 1 when admitted (nothing written).
 */
int tc__http_refuse_if_full(struct tc_server *srv, struct lws *wsi);

/** LWS_CALLBACK_HTTP: routes and answers the request for path (or expects its body). */
int tc__http_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *path);

/** LWS_CALLBACK_HTTP_BODY: a piece of the body, kept up to --max-frame-bytes (else 413). */
int tc__http_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *in, size_t len);

/** LWS_CALLBACK_HTTP_BODY_COMPLETION: runs the command or starts the SSE stream. */
int tc__http_body_complete(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss);

/** LWS_CALLBACK_HTTP_WRITEABLE for a POST /commands: writes the reply and ends the exchange. */
int tc__http_command_writeable(struct tc_conn *c);

/** Ends a one-response exchange once its answer is written (rc 0) or failed (rc -1): destroys c. */
int tc__http_exchange_over(struct tc_conn *c, int rc);

/** The request is gone (CLOSED / CLOSED_HTTP): drops a body still being read. */
void tc__http_closed(struct tc_pss *pss);

/**
 * LWS_CALLBACK_HTTP_CONFIRM_UPGRADE for proto ("websocket", "h2c", …).
 * Returns 0 to proceed, with up filled (the route's thread and the token's
 * grant, checked here once); >0 when it answered (404, 400, 401, 403, 503);
 * <0 to hang up.
 */
int tc__http_confirm_upgrade(struct tc_server *srv, struct lws *wsi, const char *proto,
			     struct tc_upgrade *up);

#endif
