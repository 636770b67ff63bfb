/*
 * http.c — plain HTTP (http.h): responses, the route handlers, access
 * checks, request bodies, POST /commands and the upgrade decision.
 */
#include "http.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bridge.h"
#include "hub.h"
#include "log.h"
#include "metrics.h"
#include "query.h"
#include "rest.h"
#include "wsdeflate.h"
#include "router.h"
#include "run/feed.h"
#include "sse.h"

/* ==== responses ========================================================================== */

/* The reason phrase of the statuses threadcast answers with. */
static const char *reason_of(unsigned status)
{
	switch (status) {
	case 200: return "OK";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 409: return "Conflict";
	case 422: return "Unprocessable Entity";
	case 500: return "Internal Server Error";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 413: return "Payload Too Large";
	case 426: return "Upgrade Required";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

/*
 * The status line and common headers. lws writes the status line with the
 * request's HTTP version, which it has not read yet when it asks whether to
 * upgrade: a refused upgrade would get "HTTP/1.0" in answer to an HTTP/1.1
 * request, and strict clients (Python's websockets) reject that response
 * unread. An upgrade is always HTTP/1.1, so its refusal says so itself.
 */
static int common_headers(struct lws *wsi, unsigned status, const char *type,
			  lws_filepos_t content_len, unsigned char **p, unsigned char *end)
{
	char line[64];
	if (!lws_hdr_total_length(wsi, WSI_TOKEN_UPGRADE))
		return lws_add_http_common_headers(wsi, status, type, content_len, p, end);
	int n = snprintf(line, sizeof(line), "HTTP/1.1 %u %s", status, reason_of(status));
	return lws_add_http_header_by_name(wsi, NULL, (const unsigned char *)line, n, p, end) ||
	       lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE,
					    (const unsigned char *)type, (int)strlen(type), p, end) ||
	       lws_add_http_header_content_length(wsi, content_len, p, end) ||
	       lws_add_http_header_by_name(wsi, (const unsigned char *)"connection:",
					   (const unsigned char *)"close", 5, p, end);
}

int tc__http_head(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len)
{
	return tc__http_head_x(wsi, status, type, content_len, NULL);
}

int tc__http_head_x(struct lws *wsi, unsigned status, const char *type, lws_filepos_t content_len,
		    const char *const *extra)
{
	unsigned char buf[LWS_PRE + 1024];
	unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;

	if (common_headers(wsi, status, type, content_len, &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
					(const unsigned char *)"no-store", 8, &p, end))
		return -1;
	for (; extra && extra[0]; extra += 2)
		if (extra[1] && lws_add_http_header_by_name(wsi, (const unsigned char *)extra[0],
							    (const unsigned char *)extra[1],
							    (int)strlen(extra[1]), &p, end))
			return -1;
	/* Every 503 here is passing (draining, full, Redis away): say when to retry. */
	if (status == 503 &&
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"retry-after:",
					(const unsigned char *)"1", 1, &p, end))
		return -1;
	if (content_len == LWS_ILLEGAL_HTTP_CONTENT_LEN &&
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"x-accel-buffering:",
					(const unsigned char *)"no", 2, &p, end))
		return -1; /* proxies must pass events through at once */
	return lws_finalize_write_http_header(wsi, start, &p, end) ? -1 : 0;
}

/* Sends a complete response. Returns what the lws callback should return. */
static int http_send(struct lws *wsi, unsigned status, const char *type, const char *body)
{
	size_t len = strlen(body);
	unsigned char *buf = tc_xmalloc(LWS_PRE + len);
	int rc = -1;

	memcpy(buf + LWS_PRE, body, len);
	if (!tc__http_head(wsi, status, type, len) &&
	    lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL) == (int)len)
		rc = lws_http_transaction_completed(wsi) ? -1 : 0;
	free(buf);
	return rc;
}

static int http_json(struct lws *wsi, unsigned status, const char *body)
{
	return http_send(wsi, status, "application/json", body);
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
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "detail", message);
	char *body = cJSON_PrintUnformatted(o);
	int rc = http_json(wsi, status, body);
	free(body);
	cJSON_Delete(o);
	return rc;
}

/* A too large body: the REST API says it its own way. */
static int too_large(struct tc_server *srv, struct lws *wsi, bool rest)
{
	char msg[128];
	if (!rest)
		return tc__http_error(wsi, 413, "payload_too_large", "the request body exceeds --max-frame-bytes");
	snprintf(msg, sizeof(msg), "the request body is too large: at most %lld bytes (--max-frame-bytes)",
		 (long long)srv->cfg->max_frame_bytes);
	return tc__http_detail(wsi, 413, msg);
}

int tc__http_refuse_if_full(struct tc_server *srv, struct lws *wsi)
{
	if (srv->draining)
		return tc__http_error(wsi, 503, "draining", "this instance is shutting down; reconnect");
	if (srv->conns.count >= (size_t)srv->cfg->max_connections)
		return tc__http_error(wsi, 503, "too_many_connections",
				      "this instance is at its connection limit; retry elsewhere");
	return 1; /* admitted */
}

/* ==== requests =========================================================================== */

/* Value of header token, or NULL; buf holds it. */
static const char *header(struct lws *wsi, enum lws_token_indexes tok, char *buf, int len)
{
	return lws_hdr_copy(wsi, buf, len, tok) > 0 ? buf : NULL;
}

/* The request's method as a router.h bit. */
static unsigned method_of(struct lws *wsi)
{
	char *uri;
	int urilen;

	switch (lws_http_get_uri_and_method(wsi, &uri, &urilen)) {
	case LWSHUMETH_GET:
		return TC_HTTP_GET;
	case LWSHUMETH_POST:
		return TC_HTTP_POST;
	case LWSHUMETH_PUT:
		return TC_HTTP_PUT;
	case LWSHUMETH_PATCH:
		return TC_HTTP_PATCH;
	case LWSHUMETH_DELETE:
		return TC_HTTP_DELETE;
	case LWSHUMETH_HEAD:
		return TC_HTTP_HEAD;
	case LWSHUMETH_OPTIONS:
		return TC_HTTP_OPTIONS;
	default:
		return TC_HTTP_OTHER;
	}
}

/*
 * May this request read thread? Finds the token (Authorization: Bearer, or
 * the access_token query parameter, which browsers need for WebSockets and
 * EventSource) and checks Origin. Returns 0 and fills g, or the HTTP status
 * to refuse with (401, 403) and a message in why.
 */
static unsigned check_access(struct tc_server *srv, struct lws *wsi, const char *thread,
			     struct tc_grant *g, char *why, size_t whylen)
{
	char origin[256], hdr[4096], arg[4096];
	const char *token = NULL;

	*g = (struct tc_grant){ .exp = 0, .commands = true };
	if (!tc_origin_allowed(srv->cfg, header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin)))) {
		snprintf(why, whylen, "origin %.150s is not allowed", origin);
		return 403;
	}
	if (!srv->env->auth)
		return 0;
	if (header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, hdr, sizeof(hdr)) && !strncasecmp(hdr, "Bearer ", 7))
		token = hdr + 7;
	else
		token = lws_get_urlarg_by_name(wsi, "access_token=", arg, sizeof(arg));
	switch (tc_auth_check(srv->env->auth, token, thread, tc_wall_ms() / 1000, g, why, whylen)) {
	case TC_AUTH_OK:
		return 0;
	case TC_AUTH_FORBIDDEN:
		return 403;
	default:
		return 401;
	}
}

/* check_access(), answering a refusal itself: 0 when allowed, else what the callback returns. */
static int check_access_or_reply(struct tc_server *srv, struct lws *wsi, const char *thread,
				 struct tc_grant *g, int *rc)
{
	char why[200];
	unsigned status = check_access(srv, wsi, thread, g, why, sizeof(why));
	if (!status)
		return 0;
	*rc = tc__http_error(wsi, status, status == 401 ? "unauthorized" : "forbidden", why);
	return 1;
}

/* What a route handler is given: the request, matched and (for thread routes) admitted. */
struct request {
	unsigned method;                   /* a tc_http_method bit */
	const struct tc_route_match *m;    /* the route and its parameters */
	const char *thread;                /* thread routes: the validated thread id */
	struct tc_grant grant;             /* thread routes: what the token allows */
	int sp;                            /* the spelling the request asked for (?protocol=), or -1 */
};

/*
 * The spelling a request asks for with ?protocol=0.0.21 or ?protocol=seed;
 * -1 when it does not say (the route decides).
 */
static int asked_spelling(struct lws *wsi)
{
	char buf[32];
	const char *v = lws_get_urlarg_by_name(wsi, "protocol=", buf, sizeof(buf));
	if (!v)
		return -1;
	if (!strcmp(v, "0.0.21"))
		return TC_SPELL_021;
	if (!strcmp(v, "seed"))
		return TC_SPELL_SEED;
	return -1;
}

/* The spelling of a stream route: /stream speaks the seed's, /stream/events 0.0.21's. */
static enum tc_spelling route_spelling(int route, int asked)
{
	if (asked >= 0)
		return (enum tc_spelling)asked;
	return route == TC_ROUTE_STREAM_EVENTS ? TC_SPELL_021 : TC_SPELL_SEED;
}

/* ---- GET /healthz, /readyz, /metrics ---------------------------------------------------- */

static int serve_healthz(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss,
			 const struct request *rq)
{
	return http_json(wsi, 200, "{\"status\":\"ok\",\"version\":\"" TC_VERSION "\"}");
}

static int serve_readyz(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss,
			const struct request *rq)
{
	bool ready = !srv->draining && tc_redis_ready(srv->redis);
	char body[384];
	snprintf(body, sizeof(body),
		 "{\"ready\":%s,\"redis\":\"%s\",\"redisCluster\":%s,\"redisMasters\":%u,"
		 "\"draining\":%s,\"connections\":%zu,\"websockets\":%zu,\"sse\":%zu}",
		 ready ? "true" : "false", tc_redis_status(srv->redis),
		 tc_redis_is_cluster(srv->redis) ? "true" : "false", tc_redis_nodes(srv->redis),
		 srv->draining ? "true" : "false", srv->conns.count, srv->nws, srv->nsse);
	return http_json(wsi, ready ? 200 : 503, body);
}

static int serve_metrics(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss,
			 const struct request *rq)
{
	struct tc_metrics_gauges g = {
		.websockets = srv->nws,
		.sse = srv->nsse,
		.http_commands = srv->conns.count - srv->nws - srv->nsse,
		.threads = tc_hub_threads(srv->env->hub),
		.pending_commands = srv->env->bridge ? tc_bridge_pending(srv->env->bridge) : 0,
		.redis_up = tc_redis_ready(srv->redis),
		.handshakes = tc_handshakes_pending(&srv->handshakes),
		.deflaters = tc_dz_count(),
		.deflate_memory = tc_deflate_memory(),
		.run_feeds = tc_run_feeds_count(srv->feeds),
	};
	char *text = tc_metrics_render(&g);
	int rc = http_send(wsi, 200, "text/plain; version=0.0.4", text);
	free(text);
	return rc;
}

/* ---- --static-dir: the demo page and the client library ---------------------------------- */

static const struct { const char *ext, *mime; } mime_types[] = {
	{ ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
	{ ".mjs", "text/javascript; charset=utf-8" }, { ".css", "text/css; charset=utf-8" },
	{ ".json", "application/json" },           { ".svg", "image/svg+xml" },
	{ ".png", "image/png" },                   { ".ico", "image/x-icon" },
	{ ".txt", "text/plain; charset=utf-8" },   { ".ts", "text/plain; charset=utf-8" },
};

/* Plain relative names only: [A-Za-z0-9._-] segments, none starting with a dot
 * (no "..", no hidden files), no empty segment but a trailing one. */
static bool static_path_ok(const char *path)
{
	size_t len = strlen(path);
	if (path[0] != '/' || len > 200)
		return false;
	for (size_t i = 1; i < len; i++) {
		char ch = path[i];
		bool seg_start = path[i - 1] == '/';
		if ((seg_start && (ch == '.' || ch == '/')) ||
		    !(isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-' || ch == '/'))
			return false;
	}
	return true;
}

static int serve_static(struct tc_server *srv, struct lws *wsi, const char *path)
{
	static const char headers[] = "cache-control: no-cache\x0d\x0a"
				      "x-content-type-options: nosniff\x0d\x0a";
	char file[512];
	struct stat st;
	size_t len = strlen(path);
	const char *mime = NULL;

	if (!static_path_ok(path))
		return tc__http_error(wsi, 404, "not_found", "no such route or file");
	snprintf(file, sizeof(file), "%s%s%s", srv->cfg->static_dir, path,
		 path[len - 1] == '/' ? "index.html" : "");
	if (stat(file, &st))
		return tc__http_error(wsi, 404, "not_found", "no such route or file");
	if (S_ISDIR(st.st_mode)) {
		/* A directory without its slash: send the browser to it, so that the
		 * page's relative URLs resolve inside it. */
		unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start,
			      *end = buf + sizeof(buf) - 1;
		char loc[256];
		int n = snprintf(loc, sizeof(loc), "%s/", path);
		if (lws_http_redirect(wsi, HTTP_STATUS_MOVED_PERMANENTLY, (unsigned char *)loc, n, &p, end) < 0)
			return -1;
		return lws_http_transaction_completed(wsi) ? -1 : 0;
	}
	for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++) {
		size_t el = strlen(mime_types[i].ext);
		if (strlen(file) > el && !strcmp(file + strlen(file) - el, mime_types[i].ext))
			mime = mime_types[i].mime;
	}
	if (!S_ISREG(st.st_mode) || !mime)
		return tc__http_error(wsi, 404, "not_found", "no such route or file");
	int n = lws_serve_http_file(wsi, file, mime, headers, (int)sizeof(headers) - 1);
	return n < 0 || (n > 0 && lws_http_transaction_completed(wsi)) ? -1 : 0;
}

/* ---- request bodies: POST /threads/:thread_id/stream and /commands ------------------------ */

/* A request body being read, and what it is for. */
struct tc_http_body {
	enum body_kind { BODY_SSE, BODY_COMMAND, BODY_REST } kind;
	struct tc_rest *rest;  /* BODY_REST: the exchange waiting for it */
	char thread[TC_THREAD_ID_MAX + 1];
	struct tc_grant grant;
	int sp;           /* the stream's spelling; commands: what ?protocol= asked, or -1 */
	char *data;
	size_t len;
};

static void body_free(struct tc_http_body *b)
{
	if (b) {
		tc__rest_drop(b->rest);
		free(b->data);
		free(b);
	}
}

void tc__http_closed(struct tc_pss *pss)
{
	body_free(pss->body);
	pss->body = NULL;
}

/* Bodies are read up to --max-frame-bytes; lws delivers them next. */
static int expect_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, enum body_kind kind,
		       const struct request *rq)
{
	char cl[32];
	if (header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, cl, sizeof(cl)) &&
	    strtoull(cl, NULL, 10) > (unsigned long long)srv->cfg->max_frame_bytes)
		return too_large(srv, wsi, kind == BODY_REST);
	body_free(pss->body);
	pss->body = tc_xcalloc(1, sizeof(*pss->body));
	pss->body->kind = kind;
	pss->body->grant = rq->grant;
	pss->body->sp = rq->sp;
	snprintf(pss->body->thread, sizeof(pss->body->thread), "%s", rq->thread ? rq->thread : "");
	return 0;
}

int tc__http_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *in, size_t len)
{
	struct tc_http_body *b = pss->body;
	if (!b || !len)
		return 0; /* a body nobody asked for is ignored (and lws may hand an empty piece) */
	if (b->len + len > (size_t)srv->cfg->max_frame_bytes) {
		bool rest = b->kind == BODY_REST;
		body_free(b);
		pss->body = NULL;
		return too_large(srv, wsi, rest);
	}
	b->data = tc_xrealloc(b->data, b->len + len + 1);
	memcpy(b->data + b->len, in, len);
	b->len += len;
	return 0;
}

/* ---- POST /threads/:thread_id/commands ---------------------------------------------------- */

int tc__http_command_writeable(struct tc_conn *c)
{
	struct tc_buf *b = tc_bufq_pop(&c->out);
	c->want_write = false;
	if (!b)
		return 0;
	int rc = -1;
	if (!tc__http_head(c->wsi, c->status, "application/json", b->len) &&
	    lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP_FINAL) == (int)b->len)
		rc = 0;
	tc_buf_unref(b);
	return tc__http_exchange_over(c, rc);
}

int tc__http_exchange_over(struct tc_conn *c, int rc)
{
	struct lws *wsi = c->wsi;
	struct tc_pss *pss = lws_wsi_user(wsi);
	assert(pss->conn == c);
	pss->conn = NULL;
	tc__conn_destroy(c); /* the exchange is over; the connection may carry another */
	if (rc)
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Answers a frame the protocol layer built, as JSON with status. */
static int reply_frame(struct lws *wsi, unsigned status, struct tc_buf *b)
{
	int rc = http_json(wsi, status, (const char *)tc_buf_data(b));
	tc_buf_unref(b);
	return rc;
}

/*
 * POST /threads/:thread_id/commands answers in protocol 0.0.21 (the
 * official client's spelling), unless the request asks with ?protocol= or
 * its params name protocol fields in camelCase only (assistantId, …): a
 * client written against the seed gets the seed's spelling back.
 */
static int run_command(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
		       const struct tc_grant *g, int asked, const char *body, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;

	if (tc_command_parse(body, len, &cmd, &err)) {
		struct tc_buf *b = tc_response_error(cmd.has_id, cmd.id, err.code, err.message);
		tc_command_free(&cmd);
		return reply_frame(wsi, 400, b);
	}
	if (cmd.method == TC_METHOD_SUBSCRIBE || cmd.method == TC_METHOD_UNSUBSCRIBE ||
	    cmd.method == TC_METHOD_RECONNECT) {
		struct tc_buf *b = tc_response_error(true, cmd.id, TC_ERR_NOT_SUPPORTED,
			"subscriptions live on a connection: use the WebSocket, or POST "
			"/threads/:thread_id/stream for SSE");
		tc_command_free(&cmd);
		return reply_frame(wsi, 200, b);
	}
	enum tc_spelling sp = asked >= 0 ? (enum tc_spelling)asked :
			      tc_spell_guess(cmd.params) == TC_SPELL_SEED ? TC_SPELL_SEED : TC_SPELL_021;
	tc_command_free(&cmd);
	int admitted = tc__http_refuse_if_full(srv, wsi);
	if (admitted != 1)
		return admitted;
	struct tc_conn *c = tc__conn_new(srv, wsi, TC_CONN_COMMAND, thread, &tc__conn_json_io, sp);
	c->status = 200;
	tc_session_allow_commands(c->session, g->commands);
	pss->conn = c;
	/* The session answers through tc__conn_send; tc__http_command_writeable sends it. */
	tc_session_on_frame(c->session, body, len);
	return 0;
}

/*
 * The body is complete. Whatever answers the request may complete the HTTP
 * transaction, and lws then frees the pss: take what is needed out first.
 */
int tc__http_body_complete(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss)
{
	struct tc_http_body *b = pss->body;
	const char *data;
	int rc = 0;

	if (!b)
		return 0;
	pss->body = NULL;
	data = b->data ? b->data : "";
	if (b->kind == BODY_REST) {
		struct tc_rest *r = b->rest;
		b->rest = NULL;
		rc = tc__rest_body(srv, wsi, pss, r, data, b->len);
	} else if (b->kind == BODY_COMMAND) {
		rc = run_command(srv, wsi, pss, b->thread, &b->grant, b->sp, data, b->len);
	} else {
		cJSON *request = cJSON_ParseWithLength(data, b->len);
		if (!cJSON_IsObject(request))
			rc = tc__http_error(wsi, 400, "invalid_argument",
					    "the body must be an EventStreamRequest: {\"channels\":[…], "
					    "\"namespaces\"?, \"depth\"?, \"since\"?}");
		else
			rc = tc__sse_start_stream(srv, wsi, pss, b->thread, request, &b->grant,
						  (enum tc_spelling)b->sp);
		cJSON_Delete(request);
	}
	body_free(b);
	return rc;
}

static int serve_commands(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss,
			  const struct request *rq)
{
	return expect_body(srv, wsi, pss, BODY_COMMAND, rq);
}

/* ---- /threads/:thread_id/stream without an upgrade: SSE ----------------------------------- */

static bool accepts_event_stream(struct lws *wsi)
{
	char accept[256];
	return header(wsi, WSI_TOKEN_HTTP_ACCEPT, accept, sizeof(accept)) &&
	       strstr(accept, "text/event-stream");
}

static int serve_stream(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss,
			const struct request *rq)
{
	if (rq->method == TC_HTTP_POST)
		return expect_body(srv, wsi, pss, BODY_SSE, rq);
	if (accepts_event_stream(wsi))
		return tc__sse_from_query(srv, wsi, pss, rq->thread, &rq->grant, (enum tc_spelling)rq->sp);
	return tc__http_error(wsi, 426, "upgrade_required",
			      "this endpoint is a WebSocket (send Upgrade: websocket) or an SSE stream "
			      "(send Accept: text/event-stream, or POST an EventStreamRequest)");
}

/* ---- the Agent Protocol's REST API (rest.h) --------------------------------------------- */

/*
 * Thread routes were checked for their thread; the others (creating a thread
 * without an id, searches, stateless runs, the store, assistants) are about
 * no one thread and need a token for every thread ("threads": ["*"]). What
 * changes anything needs the token's "commands" right.
 */
static int serve_rest(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	struct tc_grant g = rq->grant;
	struct tc_rest *pending;
	int rc;

	if (!rq->thread && check_access_or_reply(srv, wsi, "*", &g, &rc))
		return rc;
	if (tc__rest_writes(rq->m->id, rq->method) && !g.commands)
		return tc__http_detail(wsi, 403, "this token may not change anything (its \"commands\" claim is not true)");
	rc = tc__rest_request(srv, wsi, pss, rq->m->id, rq->method, rq->m, &pending);
	if (pending) {
		rc = expect_body(srv, wsi, pss, BODY_REST, rq);
		if (pss->body)
			pss->body->rest = pending;
		else
			tc__rest_drop(pending);
	}
	return rc;
}

/* ==== routing ============================================================================ */

/* How each route of router.h is served. */
static const struct route_handler {
	int (*serve)(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq);
	const char *allowed;  /* the 405 message: what the route serves */
} handlers[TC_ROUTE_COUNT] = {
	[TC_ROUTE_HEALTHZ] = { serve_healthz, "only GET is served here" },
	[TC_ROUTE_READYZ] = { serve_readyz, "only GET is served here" },
	[TC_ROUTE_METRICS] = { serve_metrics, "only GET is served here" },
	[TC_ROUTE_STREAM] = { serve_stream, "GET (WebSocket or SSE) or POST (SSE)" },
	[TC_ROUTE_STREAM_EVENTS] = { serve_stream, "GET (WebSocket or SSE) or POST (SSE)" },
	[TC_ROUTE_COMMANDS] = { serve_commands, "POST one command as JSON" },
	[TC_ROUTE_STATE] = { serve_rest, "GET (the state) or POST (an update)" },
#define TC__REST_HANDLER(e, methods, pattern) \
	[TC_ROUTE_##e] = { serve_rest, "this method is not served here" },
	TC_REST_ROUTE_MAP(TC__REST_HANDLER)
};

int tc__http_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *path)
{
	struct tc_route_match m;
	struct request rq = { .method = method_of(wsi), .m = &m };
	enum tc_match found = tc_route_match(tc_routes, TC_ROUTE_COUNT, rq.method, path, &m);
	int rc;

	switch (found) {
	case TC_MATCH_NONE:
		if (*srv->cfg->static_dir && rq.method == TC_HTTP_GET)
			return serve_static(srv, wsi, path);
		return tc__http_error(wsi, 404, "not_found", "no such route");
	case TC_MATCH_BAD_PARAM:
		return tc__http_error(wsi, 400, m.error, m.message);
	case TC_MATCH_FOUND:
	case TC_MATCH_METHOD:
		break;
	}
	const struct route_handler *h = &handlers[m.id];
	assert(h->serve);
	rq.sp = asked_spelling(wsi);
	if (m.id == TC_ROUTE_STREAM || m.id == TC_ROUTE_STREAM_EVENTS)
		rq.sp = (int)route_spelling(m.id, rq.sp);
	/* A route about a thread checks Origin and token for it first, before a 405. */
	rq.thread = tc_route_param(&m, "thread_id");
	if (rq.thread && check_access_or_reply(srv, wsi, rq.thread, &rq.grant, &rc))
		return rc;
	if (found == TC_MATCH_METHOD)
		return tc__http_error(wsi, 405, "method_not_allowed", h->allowed);
	return h->serve(srv, wsi, pss, &rq);
}

/* CONFIRM_UPGRADE's answer once a response went out: >0, or <0 to hang up. */
static int answered(int rc)
{
	return rc < 0 ? -1 : 1;
}

int tc__http_confirm_upgrade(struct tc_server *srv, struct lws *wsi, const char *proto,
			     struct tc_upgrade *up)
{
	char path[256];
	struct tc_route_match m;
	int rc;

	if (strcmp(proto, "websocket"))
		return -1; /* h2c and the like: not offered */
	if (lws_hdr_copy(wsi, path, sizeof(path), WSI_TOKEN_GET_URI) < 0)
		return answered(tc__http_error(wsi, 404, "not_found", "no such route"));
	/* The path decides, whatever the method. */
	enum tc_match found = tc_route_match(tc_routes, TC_ROUTE_COUNT, method_of(wsi), path, &m);
	bool v021 = found != TC_MATCH_NONE && m.id == TC_ROUTE_STREAM_EVENTS;
	memset(up, 0, sizeof(*up));
	switch (found) {
	case TC_MATCH_FOUND:
	case TC_MATCH_METHOD:
		if (m.id != TC_ROUTE_STREAM && m.id != TC_ROUTE_STREAM_EVENTS)
			break;
		snprintf(up->thread, sizeof(up->thread), "%s", tc_route_param(&m, "thread_id"));
		up->sp = route_spelling(m.id, asked_spelling(wsi));
		if (v021) {
			/* 0.0.21's client gives up on a refused upgrade without telling
			 * why, but reads a close code: accept, then close. */
			char why[200];
			switch (check_access(srv, wsi, up->thread, &up->grant, why, sizeof(why))) {
			case 0:
				break;
			case 401:
				up->refuse = TC_CLOSE_UNAUTHORIZED;
				return 0;
			default:
				up->refuse = TC_CLOSE_FORBIDDEN;
				return 0;
			}
			if (srv->draining || srv->conns.count >= (size_t)srv->cfg->max_connections)
				up->refuse = TC_CLOSE_TRY_AGAIN; /* it reconnects, through the balancer */
			return 0;
		}
		if (check_access_or_reply(srv, wsi, up->thread, &up->grant, &rc))
			return answered(rc);
		rc = tc__http_refuse_if_full(srv, wsi);
		return rc == 1 ? 0 : answered(rc);
	case TC_MATCH_BAD_PARAM:
		if (m.id == TC_ROUTE_STREAM_EVENTS) {
			up->refuse = TC_CLOSE_BAD_REQUEST;
			return 0;
		}
		return answered(tc__http_error(wsi, 400, m.error, m.message));
	case TC_MATCH_NONE:
		break;
	}
	return answered(tc__http_error(wsi, 404, "not_found", "no WebSocket endpoint at this path"));
}
