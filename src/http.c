/*
 * http.c — the routes (http.h): which route a request is and who serves it,
 * access checks, request bodies, the process' own endpoints and the
 * decision on a WebSocket upgrade.
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
#include "chunked.h"
#include "httpres.h"
#include "hub.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "rest/rest.h"
#include "router.h"
#include "run/feed.h"
#include "sse.h"
#include "wsdeflate.h"

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

/* ==== requests =========================================================================== */

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
static unsigned check_access(struct tc_server *srv, struct lws *wsi, const char *thread, struct tc_grant *g, char *why,
			     size_t whylen)
{
	char origin[256], hdr[4096], arg[4096];
	const char *token = NULL;

	*g = (struct tc_grant){ .exp = 0, .commands = true };
	if (!tc_origin_allowed(srv->cfg, tc__http_header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin)))) {
		snprintf(why, whylen, "origin %.150s is not allowed", origin);
		return 403;
	}
	if (!srv->env->auth)
		return 0;
	if (tc__http_header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, hdr, sizeof(hdr)) && !strncasecmp(hdr, "Bearer ", 7))
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
static int check_access_or_reply(struct tc_server *srv, struct lws *wsi, const char *thread, struct tc_grant *g,
				 int *rc)
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
	unsigned method;                /* a tc_http_method bit */
	const struct tc_route_match *m; /* the route and its parameters */
	const char *thread;             /* thread routes: the validated thread id */
	struct tc_grant grant;          /* thread routes: what the token allows */
	int sp;                         /* the spelling the request asked for (?protocol=), or -1 */
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

static int serve_healthz(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	return tc__http_send(wsi, 200, "application/json", "{\"status\":\"ok\",\"version\":\"" TC_VERSION "\"}");
}

/* GET /info: what the Agent Server answers there, for clients that check it (LangChain's chat UI does). */
static int serve_info(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	return tc__http_send(wsi, 200, "application/json",
			     "{\"version\":\"" TC_VERSION "\",\"server\":\"threadcast\",\"context\":\"js\","
			     "\"flags\":{\"assistants\":true,\"crons\":false,\"langsmith\":false,"
			     "\"langsmith_tracing_replicas\":false}}");
}

static int serve_ok(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	return tc__http_send(wsi, 200, "application/json", "{\"ok\":true}");
}

static int serve_readyz(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	bool ready = !srv->conns.leaving && tc_redis_ready(srv->redis);
	char body[384];
	snprintf(body, sizeof(body),
		 "{\"ready\":%s,\"redis\":\"%s\",\"redisCluster\":%s,\"redisMasters\":%u,"
		 "\"draining\":%s,\"connections\":%zu,\"websockets\":%zu,\"sse\":%zu}",
		 ready ? "true" : "false", tc_redis_status(srv->redis),
		 tc_redis_is_cluster(srv->redis) ? "true" : "false", tc_redis_nodes(srv->redis),
		 srv->conns.leaving ? "true" : "false", srv->conns.all.count, srv->ws.count, srv->streams.count);
	return tc__http_send(wsi, ready ? 200 : 503, "application/json", body);
}

static int serve_metrics(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	struct tc_metrics_gauges g = {
		.websockets = srv->ws.count,
		.sse = srv->streams.count,
		.http_commands = srv->conns.all.count - srv->ws.count - srv->streams.count,
		.threads = tc_hub_threads(srv->env->hub),
		.pending_commands = srv->env->bridge ? tc_bridge_pending(srv->env->bridge) : 0,
		.redis_up = tc_redis_ready(srv->redis),
		.handshakes = tc_handshakes_pending(&srv->handshakes),
		.deflaters = tc_dz_count(),
		.deflate_memory = tc_deflate_memory(),
		.run_feeds = tc_run_feeds_count(srv->feeds),
	};
	char *text = tc_metrics_render(&g);
	int rc = tc__http_send(wsi, 200, "text/plain; version=0.0.4", text);
	free(text);
	return rc;
}

/* ---- --static-dir: the demo page and the client library ---------------------------------- */

static const struct {
	const char *ext, *mime;
} mime_types[] = {
	{ ".html", "text/html; charset=utf-8" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".mjs", "text/javascript; charset=utf-8" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".json", "application/json" },
	{ ".svg", "image/svg+xml" },
	{ ".png", "image/png" },
	{ ".ico", "image/x-icon" },
	{ ".txt", "text/plain; charset=utf-8" },
	{ ".ts", "text/plain; charset=utf-8" },
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
	snprintf(file, sizeof(file), "%s%s%s", srv->cfg->static_dir, path, path[len - 1] == '/' ? "index.html" : "");
	if (stat(file, &st))
		return tc__http_error(wsi, 404, "not_found", "no such route or file");
	if (S_ISDIR(st.st_mode)) {
		/* A directory without its slash: send the browser to it, so that the
		 * page's relative URLs resolve inside it. */
		unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
		char loc[256];
		int n = snprintf(loc, sizeof(loc), "%s/", path);
		if (lws_http_redirect(wsi, HTTP_STATUS_MOVED_PERMANENTLY, (unsigned char *)loc, n, &p, end) < 0)
			return -1;
		return tc__http_done(wsi);
	}
	for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++) {
		size_t el = strlen(mime_types[i].ext);
		if (strlen(file) > el && !strcmp(file + strlen(file) - el, mime_types[i].ext))
			mime = mime_types[i].mime;
	}
	if (!S_ISREG(st.st_mode) || !mime)
		return tc__http_error(wsi, 404, "not_found", "no such route or file");
	int n = lws_serve_http_file(wsi, file, mime, headers, (int)sizeof(headers) - 1);
	return n < 0 || (n > 0 && tc__http_done(wsi)) ? -1 : 0;
}

/* ---- request bodies: POST /threads/:thread_id/stream and /commands ------------------------ */

/* A request body being read, and what it is for. */
struct tc_http_body {
	enum body_kind { BODY_SSE, BODY_COMMAND, BODY_REST } kind;
	struct tc_rest *rest; /* BODY_REST: the exchange waiting for it */
	char thread[TC_THREAD_ID_MAX + 1];
	struct tc_grant grant;
	int sp; /* the stream's spelling; commands: what ?protocol= asked, or -1 */
	char *data;
	size_t len;
	bool chunked; /* Transfer-Encoding: chunked, undone by dechunk */
	struct tc_chunked dechunk;
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

/*
 * The body is refused (too large: status 413, or its framing): dropped,
 * with the exchange waiting for it, and said as its route says errors.
 */
static int refuse_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, unsigned status, const char *msg)
{
	bool rest = pss->body->kind == BODY_REST;
	body_free(pss->body);
	pss->body = NULL;
	if (status == 413)
		return too_large(srv, wsi, rest);
	return rest ? tc__http_detail(wsi, status, msg) : tc__http_error(wsi, status, "invalid_argument", msg);
}

/*
 * Bodies are read up to --max-frame-bytes; lws delivers them next. One
 * without Content-Length (chunked, or none: a POST with nothing) leaves lws
 * 4.1 and 4.3 waiting for 100 MiB: such a request is the connection's last
 * (pss->close_after). rest: the REST exchange waiting for it, or NULL.
 */
static int expect_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, enum body_kind kind,
		       const struct request *rq, struct tc_rest *rest)
{
	char cl[32], te[64];
	bool has_cl = tc__http_header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, cl, sizeof(cl)) != NULL;
	bool has_te = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0;
	body_free(pss->body);
	struct tc_http_body *b = pss->body = tc_xcalloc(1, sizeof(*pss->body));
	b->kind = kind;
	b->rest = rest;
	b->grant = rq->grant;
	b->sp = rq->sp;
	snprintf(b->thread, sizeof(b->thread), "%s", rq->thread ? rq->thread : "");
	b->chunked = has_te;
	if (has_te && has_cl) { /* which one ends the body? A proxy may think the other (smuggling) */
		pss->close_after = true;
		return refuse_body(srv, wsi, pss, 400,
				   "a request may not have both Content-Length and Transfer-Encoding");
	}
	if (has_te &&
	    (!tc__http_header(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING, te, sizeof(te)) || strcasecmp(te, "chunked")))
		return refuse_body(srv, wsi, pss, 501,
				   "the only Transfer-Encoding of a request body understood is chunked");
	if (has_cl && strtoull(cl, NULL, 10) > (unsigned long long)srv->cfg->max_frame_bytes)
		return refuse_body(srv, wsi, pss, 413, NULL);
	if (!has_te && !has_cl)
		return tc__http_body_complete(srv, wsi, pss); /* nothing will come */
	return 0;
}

int tc__http_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *in, size_t len)
{
	struct tc_http_body *b = pss->body;
	if (!b || !len)
		return 0; /* a body nobody asked for is ignored (and lws may hand an empty piece) */
	size_t max = (size_t)srv->cfg->max_frame_bytes;
	if (!b->chunked) {
		if (b->len + len > max)
			return refuse_body(srv, wsi, pss, 413, NULL);
		b->data = tc_xrealloc(b->data, b->len + len + 1);
		memcpy(b->data + b->len, in, len);
		b->len += len;
		return 0;
	}
	size_t n, used;
	b->data = tc_xrealloc(b->data, b->len + len + 1);
	enum tc_chunked_rc rc = tc_chunked_decode(&b->dechunk, in, len, b->data + b->len, &n, &used, max);
	if (rc == TC_CHUNKED_BAD)
		return refuse_body(srv, wsi, pss, 400, "the request body's chunked encoding is malformed");
	if (rc == TC_CHUNKED_TOO_BIG || b->len + n > max)
		return refuse_body(srv, wsi, pss, 413, NULL);
	b->len += n;
	return rc == TC_CHUNKED_DONE ? tc__http_body_complete(srv, wsi, pss) : 0;
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
		rc = tc__request_command(srv, wsi, pss, b->thread, &b->grant, b->sp, data, b->len);
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

static int serve_commands(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	return expect_body(srv, wsi, pss, BODY_COMMAND, rq, NULL);
}

/* ---- /threads/:thread_id/stream without an upgrade: SSE ----------------------------------- */

static bool accepts_event_stream(struct lws *wsi)
{
	char accept[256];
	return tc__http_header(wsi, WSI_TOKEN_HTTP_ACCEPT, accept, sizeof(accept)) &&
	       strstr(accept, "text/event-stream");
}

static int serve_stream(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq)
{
	if (rq->method == TC_HTTP_POST)
		return expect_body(srv, wsi, pss, BODY_SSE, rq, NULL);
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
		return tc__http_detail(wsi, 403,
				       "this token may not change anything (its \"commands\" claim is not true)");
	rc = tc__rest_request(srv, wsi, pss, rq->m->id, rq->method, rq->m, &pending);
	if (pending)
		rc = expect_body(srv, wsi, pss, BODY_REST, rq, pending);
	return rc;
}

/* ==== routing ============================================================================ */

/* How each route of router.h is served. */
static const struct route_handler {
	int (*serve)(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct request *rq);
	const char *allowed; /* the 405 message: what the route serves */
} handlers[TC_ROUTE_COUNT] = { [TC_ROUTE_HEALTHZ] = { serve_healthz, "only GET is served here" },
			       [TC_ROUTE_READYZ] = { serve_readyz, "only GET is served here" },
			       [TC_ROUTE_METRICS] = { serve_metrics, "only GET is served here" },
			       [TC_ROUTE_INFO] = { serve_info, "only GET is served here" },
			       [TC_ROUTE_OK] = { serve_ok, "only GET is served here" },
			       [TC_ROUTE_STREAM] = { serve_stream, "GET (WebSocket or SSE) or POST (SSE)" },
			       [TC_ROUTE_STREAM_EVENTS] = { serve_stream, "GET (WebSocket or SSE) or POST (SSE)" },
			       [TC_ROUTE_COMMANDS] = { serve_commands, "POST one command as JSON" },
#define TC__REST_HANDLER(e, pattern, ms) [TC_ROUTE_##e] = { serve_rest, "this method is not served here" },
			       TC_REST_ROUTE_MAP(TC__REST_HANDLER, TC__REST_METHOD_BIT) };

int tc__http_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *path)
{
	struct tc_route_match m;
	struct request rq = { .method = method_of(wsi), .m = &m };
	int rc;

	/* lws (4.1, 4.3: lwsver.h) takes a POST, PUT or PATCH without a length to have a body of 100 MiB. */
	pss->close_after = (rq.method & (TC_HTTP_POST | TC_HTTP_PUT | TC_HTTP_PATCH)) &&
			   !lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
	/* A browser asks before a cross-origin call (CORS), whatever the path. */
	if (rq.method == TC_HTTP_OPTIONS && tc__http_preflight(wsi, &rc))
		return rc;
	/* HEAD is GET without the body: the writers leave it out (httpres.h). */
	if (rq.method == TC_HTTP_HEAD)
		rq.method = TC_HTTP_GET;
	enum tc_match found = tc_route_match(tc_routes, TC_ROUTE_COUNT, rq.method, path, &m);
	/* The test-only wipe is no route at all unless asked for. */
	if (found != TC_MATCH_NONE && m.id == TC_ROUTE_R_TRUNCATE && !srv->cfg->test_truncate)
		found = TC_MATCH_NONE;

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
	if (found == TC_MATCH_METHOD) /* (the state's path: the REST API's GET and POST) */
		return tc__http_error(wsi, 405, "method_not_allowed",
				      m.id == TC_ROUTE_STATE ? "GET (the state) or POST (an update)" : h->allowed);
	return h->serve(srv, wsi, pss, &rq);
}

/* CONFIRM_UPGRADE's answer once a response went out: >0, or <0 to hang up. */
static int answered(int rc)
{
	return rc < 0 ? -1 : 1;
}

int tc__http_confirm_upgrade(struct tc_server *srv, struct lws *wsi, const char *proto, struct tc_upgrade *up)
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
			if (srv->conns.draining || srv->conns.all.count >= (size_t)srv->cfg->max_connections)
				up->refuse = TC_CLOSE_TRY_AGAIN; /* it reconnects, through the balancer */
			return 0;
		}
		if (check_access_or_reply(srv, wsi, up->thread, &up->grant, &rc))
			return answered(rc);
		rc = tc__http_refuse_if_full(&srv->conns, wsi);
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
