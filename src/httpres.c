/*
 * httpres.c — HTTP responses, admission, and what a request says (httpres.h).
 */
#include "httpres.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "util.h"

#define QUERY_ARGS_MAX 64  /* query parameters kept of one request */
#define QUERY_ARG_MAX 2048 /* bytes of one "name=value" */

/* ==== responses ========================================================================== */

/* The reason phrase of the statuses threadcast answers with. */
static const char *reason_of(unsigned status)
{
	switch (status) {
	case 200:
		return "OK";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 409:
		return "Conflict";
	case 422:
		return "Unprocessable Entity";
	case 500:
		return "Internal Server Error";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Payload Too Large";
	case 426:
		return "Upgrade Required";
	case 503:
		return "Service Unavailable";
	default:
		return "Error";
	}
}

/*
 * The status line and common headers. lws writes the status line with the
 * request's HTTP version, which it has not read yet when it asks whether to
 * upgrade: a refused upgrade would get "HTTP/1.0" in answer to an HTTP/1.1
 * request, and strict clients (Python's websockets) reject that response
 * unread. An upgrade is always HTTP/1.1, so its refusal says so itself.
 */
static int common_headers(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len,
			  unsigned char **p, unsigned char *end)
{
	char line[64];
	/*
	 * Chunked: no "connection: close", which lws adds to a response without
	 * a length, and which tells a client (undici does so) that the end of
	 * the connection ends the body: a cut would look like the stream's end.
	 * The connection still goes when the stream ends; "keep-alive: timeout=0"
	 * says so without that: undici then sends nothing more on it. Else the
	 * SDK's check of the run that it makes as the stream ends could go out on
	 * the socket the gateway is closing, fail as a network error, and cost a
	 * reconnect (its back-off, 1-2 s) before the app saw the run's end.
	 */
	if (content_len == TC_HTTP_CHUNKED)
		return lws_add_http_header_status(wsi, status, p, end) ||
		       lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, (const unsigned char *)type,
						    (int)strlen(type), p, end) ||
		       lws_add_http_header_by_name(wsi, (const unsigned char *)"transfer-encoding:",
						   (const unsigned char *)"chunked", 7, p, end) ||
		       lws_add_http_header_by_name(wsi, (const unsigned char *)"keep-alive:",
						   (const unsigned char *)"timeout=0", 9, p, end);
	if (!lws_hdr_total_length(wsi, WSI_TOKEN_UPGRADE))
		return lws_add_http_common_headers(wsi, status, type, content_len, p, end);
	int n = snprintf(line, sizeof(line), "HTTP/1.1 %u %s", status, reason_of(status));
	return lws_add_http_header_by_name(wsi, NULL, (const unsigned char *)line, n, p, end) ||
	       lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, (const unsigned char *)type,
					    (int)strlen(type), p, end) ||
	       lws_add_http_header_content_length(wsi, content_len, p, end) ||
	       lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:", (const unsigned char *)"close", 5,
					   p, end);
}

int tc__http_head(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len)
{
	return tc__http_head_x(wsi, status, type, content_len, NULL);
}

/* The configuration responses follow (--cors-origins); one per process. */
static const struct tc_config *config;

void tc__http_init(const struct tc_config *cfg)
{
	config = cfg;
}

bool tc__http_is_head(struct lws *wsi)
{
	return lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0;
}

bool tc__http_is_1_1(struct lws *wsi)
{
	char v[16];
	return lws_hdr_copy(wsi, v, sizeof(v), WSI_TOKEN_HTTP) >= 8 && !strcmp(v, "HTTP/1.1");
}

/* An "name:" header with a value, to the head being built. */
static int add_header(struct lws *wsi, const char *name, const char *value, unsigned char **p, unsigned char *end)
{
	return lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)value,
					   (int)strlen(value), p, end);
}

/*
 * CORS: a page of an origin --cors-origins allows may read the answer, and
 * the headers that say where a run is (the SDK follows Location to resume a
 * run's stream).
 */
static int cors_headers(struct lws *wsi, unsigned char **p, unsigned char *end)
{
	char origin[256];
	if (!config || !tc__http_header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin)) ||
	    !tc_cors_allowed(config, origin))
		return 0;
	return add_header(wsi, "access-control-allow-origin:", origin, p, end) ||
	       add_header(wsi, "vary:", "Origin", p, end) ||
	       add_header(wsi, "access-control-expose-headers:", "Location, Content-Location, X-Pagination-Total", p,
			  end);
}

int tc__http_preflight(struct lws *wsi, int *rc)
{
	char origin[256], method[32], headers[512];
	if (!tc__http_header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin)) ||
	    lws_hdr_custom_copy(wsi, method, sizeof(method), "access-control-request-method:", 30) <= 0)
		return 0;
	if (!config || !tc_cors_allowed(config, origin)) {
		char why[320];
		snprintf(why, sizeof(why), "origin %.200s may not call this API (--cors-origins)", origin);
		*rc = tc__http_error(wsi, 403, "forbidden", why);
		return 1;
	}
	unsigned char buf[LWS_PRE + 1536];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
	/* lws knows this header by name when built with its uncommon headers (Debian's 4.1.6 and 4.3.5 are). */
#if defined(LWS_WITH_HTTP_UNCOMMON_HEADERS) || defined(LWS_HTTP_HEADERS_ALL)
	bool some = lws_hdr_copy(wsi, headers, sizeof(headers), WSI_TOKEN_HTTP_AC_REQUEST_HEADERS) > 0;
#else
	bool some = lws_hdr_custom_copy(wsi, headers, sizeof(headers), "access-control-request-headers:", 31) > 0;
#endif
	if (lws_add_http_common_headers(wsi, 204, NULL, 0, &p, end) || cors_headers(wsi, &p, end) ||
	    add_header(wsi, "access-control-allow-methods:", "GET, HEAD, PUT, POST, DELETE, PATCH", &p, end) ||
	    (some && add_header(wsi, "access-control-allow-headers:", headers, &p, end)) ||
	    add_header(wsi, "access-control-max-age:", "600", &p, end) ||
	    lws_finalize_write_http_header(wsi, start, &p, end))
		*rc = -1;
	else
		*rc = tc__http_done(wsi);
	return 1;
}

int tc__http_head_x(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len,
		    const char *const *extra)
{
	unsigned char buf[LWS_PRE + 1536];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;

	if (common_headers(wsi, status, type, content_len, &p, end) || cors_headers(wsi, &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:", (const unsigned char *)"no-store",
					8, &p, end))
		return -1;
	struct tc_pss *pss = lws_wsi_user(wsi);
	if (pss && pss->close_after && content_len != LWS_ILLEGAL_HTTP_CONTENT_LEN &&
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:", (const unsigned char *)"close", 5,
					&p, end))
		return -1;
	for (; extra && extra[0]; extra += 2)
		if (extra[1] &&
		    lws_add_http_header_by_name(wsi, (const unsigned char *)extra[0], (const unsigned char *)extra[1],
						(int)strlen(extra[1]), &p, end))
			return -1;
	/* Every 503 here is passing (draining, full, Redis away): say when to retry. */
	if (status == 503 && lws_add_http_header_by_name(wsi, (const unsigned char *)"retry-after:",
							 (const unsigned char *)"1", 1, &p, end))
		return -1;
	if ((content_len == LWS_ILLEGAL_HTTP_CONTENT_LEN || content_len == TC_HTTP_CHUNKED) &&
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"x-accel-buffering:", (const unsigned char *)"no",
					2, &p, end))
		return -1; /* proxies must pass events through at once */
	return lws_finalize_write_http_header(wsi, start, &p, end) ? -1 : 0;
}

int tc__http_send(struct lws *wsi, unsigned status, const char *type, const char *body)
{
	size_t len = strlen(body);
	unsigned char *buf = tc_xmalloc(LWS_PRE + len);
	int rc = -1;

	memcpy(buf + LWS_PRE, body, len);
	if (!tc__http_head(wsi, status, type, len) &&
	    (tc__http_is_head(wsi) || lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL) == (int)len))
		rc = tc__http_done(wsi);
	free(buf);
	return rc;
}

static int http_json(struct lws *wsi, unsigned status, const char *body)
{
	return tc__http_send(wsi, status, "application/json", body);
}

int tc__http_error(struct lws *wsi, unsigned status, const char *code, const char *message)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "error", code);
	cJSON_AddStringToObject(o, "message", message);
	char *body = cJSON_PrintUnformatted(o);
	int rc = http_json(wsi, status, body);
	free(body);
	cJSON_Delete(o);
	return rc;
}

int tc__http_detail(struct lws *wsi, unsigned status, const char *message)
{
	return tc__http_send(wsi, status, TC_HTTP_TEXT, message);
}

int tc__http_done(struct lws *wsi)
{
	struct tc_pss *pss = lws_wsi_user(wsi);
	if (pss && pss->close_after)
		return -1; /* (lws writes what it still holds before it closes) */
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

int tc__http_refuse_if_full(struct tc_conn_set *set, struct lws *wsi)
{
	if (set->draining)
		return tc__http_error(wsi, 503, "draining", "this instance is shutting down; reconnect");
	if (set->all.count >= (size_t)set->cfg->max_connections)
		return tc__http_error(wsi, 503, "too_many_connections",
				      "this instance is at its connection limit; retry elsewhere");
	return 1; /* admitted */
}

int tc__http_exchange_over(struct tc_conn *c, int rc)
{
	struct lws *wsi = c->wsi;
	struct tc_pss *pss = lws_wsi_user(wsi);
	assert(pss->conn == c);
	pss->conn = NULL;
	tc__conn_destroy(c); /* the exchange is over; the connection may carry another */
	return rc ? -1 : tc__http_done(wsi);
}

/* ==== what a request says ================================================================ */

const char *tc__http_header(struct lws *wsi, enum lws_token_indexes tok, char *buf, int len)
{
	return lws_hdr_copy(wsi, buf, len, tok) > 0 ? buf : NULL;
}

const char *tc__http_last_event_id(struct lws *wsi, char *buf, int len)
{
	static const char *const names[] = { "last-event-id:", "Last-Event-ID:", "Last-Event-Id:" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (lws_hdr_custom_copy(wsi, buf, len, names[i], (int)strlen(names[i])) > 0)
			return buf;
	return NULL;
}

cJSON *tc__http_query(struct lws *wsi)
{
	cJSON *q = cJSON_CreateObject();
	char buf[QUERY_ARG_MAX];
	for (int i = 0; i < QUERY_ARGS_MAX; i++) {
		int n = lws_hdr_copy_fragment(wsi, buf, sizeof(buf), WSI_TOKEN_HTTP_URI_ARGS, i);
		if (n < 0)
			break;
		char *eq = strchr(buf, '=');
		const char *v = eq ? eq + 1 : "";
		if (eq)
			*eq = '\0';
		if (!*buf || !strcmp(buf, "access_token"))
			continue;
		cJSON *old = cJSON_GetObjectItemCaseSensitive(q, buf);
		if (!old) {
			cJSON_AddStringToObject(q, buf, v);
		} else if (cJSON_IsArray(old)) {
			cJSON_AddItemToArray(old, cJSON_CreateString(v));
		} else {
			cJSON *arr = cJSON_CreateArray();
			cJSON_AddItemToArray(arr, cJSON_CreateString(old->valuestring));
			cJSON_AddItemToArray(arr, cJSON_CreateString(v));
			cJSON_ReplaceItemInObjectCaseSensitive(q, buf, arr);
		}
	}
	return q;
}
