/*
 * httpres.h — HTTP requests and responses as every server file sees them:
 * response heads and whole responses (JSON errors in both shapes), the
 * admission check, ending a one-response exchange, and what a request says
 * beyond its route (Last-Event-ID, the query string). Below the kinds of
 * connection and the routes; above conn.h.
 */
#ifndef TC_HTTPRES_H
#define TC_HTTPRES_H

#include <cjson/cJSON.h>
#include <libwebsockets.h>
#include <stdbool.h>

#include "conn.h"

/** A response head's content length that says the body comes in chunks (HTTP/1.1). */
#define TC_HTTP_CHUNKED ((lws_filepos_t)-2ll)

/** The configuration responses follow (--cors-origins), from the server's start. */
void tc__http_init(const struct tc_config *cfg);

/** Whether the request is a HEAD: its response is its head alone. */
bool tc__http_is_head(struct lws *wsi);

/** Whether the request is HTTP/1.1 (a streamed response may be chunked). */
bool tc__http_is_1_1(struct lws *wsi);

/**
 * A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method):
 * answers it — 204 with what the origin may do, 403 for an origin
 * --cors-origins does not name — and returns 1 with *rc what the callback
 * returns; 0 when the request is no preflight.
 */
int tc__http_preflight(struct lws *wsi, int *rc);

/**
 * Writes a response head (with the CORS headers the request's origin is
 * allowed); content_len LWS_ILLEGAL_HTTP_CONTENT_LEN streams. 0 or -1.
 */
int tc__http_head(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len);
/** tc__http_head() with more headers: extra is NULL-terminated "name:", value pairs (a NULL value is skipped). */
int tc__http_head_x(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len,
		    const char *const *extra);

/**
 * Ends the HTTP transaction whose answer was written: the connection may
 * carry the next request, or (pss->close_after) hangs up. Returns what the
 * lws callback returns.
 */
int tc__http_done(struct lws *wsi);
/** Sends a whole response of body (a string) and completes the exchange. Returns what the lws callback returns. */
int tc__http_send(struct lws *wsi, unsigned status, const char *type, const char *body);

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
int tc__http_refuse_if_full(struct tc_conn_set *set, struct lws *wsi);

/** Ends a one-response exchange once its answer is written (rc 0) or failed (rc -1): destroys c. */
int tc__http_exchange_over(struct tc_conn *c, int rc);

/** The value of a header token, or NULL; buf holds it. */
const char *tc__http_header(struct lws *wsi, enum lws_token_indexes tok, char *buf, int len);

/** The Last-Event-ID header (not one lws knows by name) copied into buf, or NULL. */
const char *tc__http_last_event_id(struct lws *wsi, char *buf, int len);

/**
 * The query string as an object (new): name → value, or [values] when
 * repeated; access_token is left out. At most 64 parameters of 2 KiB each.
 */
cJSON *tc__http_query(struct lws *wsi);

#endif
