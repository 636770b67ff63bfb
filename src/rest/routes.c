/*
 * rest/routes.c — what each REST route and method does, and the requests
 * that start exchanges (rest.h). The routes are router.h's
 * TC_REST_ROUTE_MAP: one line a route, its methods' behaviour on it.
 */
#include "rest/rest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpres.h"
#include "rest/jobs.h"
#include "run/follow.h"
#include "store.h"

/* Most methods one route serves (its M(…)s). */
#define ROUTE_METHODS 3

#define TC__REST_OP(meth, kind, op, out, flags) { TC_HTTP_##meth, K_##kind, op, OUT_##out, flags },
#define TC__REST_OPS(e, pattern, ms) [TC_ROUTE_##e - TC_ROUTE_REST_FIRST] = { ms },
static const struct tc_rest_op route_ops[TC_ROUTE_COUNT - TC_ROUTE_REST_FIRST][ROUTE_METHODS + 1] = { TC_REST_ROUTE_MAP(
	TC__REST_OPS, TC__REST_OP) };

static const struct tc_rest_op *op_of(int route, unsigned method)
{
	if (route < TC_ROUTE_REST_FIRST || route >= TC_ROUTE_COUNT)
		return NULL;
	for (const struct tc_rest_op *o = route_ops[route - TC_ROUTE_REST_FIRST]; o->method; o++)
		if (o->method == method)
			return o;
	return NULL;
}

bool tc__rest_writes(int route, unsigned method)
{
	const struct tc_rest_op *o = op_of(route, method);
	return o && (o->flags & TC_REST_W);
}

/* How a run's stream on this route is written: the SDK's stream modes, or one of the other seeds' formats. */
static enum tc_rest_fmt fmt_of(int route)
{
	switch (route) {
	case TC_ROUTE_R_RUN_CHUNKS:
		return FMT_CHUNKS;
	case TC_ROUTE_R_RUN_NDJSON:
		return FMT_NDJSON;
	case TC_ROUTE_R_AGENT_STREAM:
	case TC_ROUTE_R_AGENT_RUN_STREAM:
		return FMT_AEP;
	default:
		return FMT_SDK;
	}
}

/* The test-only wipe: the records' part answered; the store's goes next when asked. */
static void truncated(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	if (status != 200 || !tc__rest_truthy(cJSON_GetObjectItemCaseSensitive(r->body, "store"))) {
		tc__rest_answer(r, status, body, len);
		return;
	}
	struct tc_store_cmd c;
	tc_store_rest_call(&c, true, "store.truncate", "{}");
	tc__rest_call(r, tc__rest_lua_answered, c.argv);
}

/* The exchange has its connection: its job starts. */
static void begin(struct tc_rest *r)
{
	switch (r->op->kind) {
	case K_TRUNCATE:
		tc__rest_fcall(r, r->op->op, truncated);
		return;
	case K_LUA:
		tc__rest_fcall(r, r->op->op, tc__rest_lua_answered);
		return;
	case K_CREATE:
		tc__rest_run_create(r);
		return;
	case K_JOIN:
	case K_STATUS:
		tc__rest_run_read(r);
		return;
	case K_CANCEL:
		tc__rest_run_cancel(r);
		return;
	case K_WORKER:
	case K_STATE:
	case K_COPY:
		tc__rest_worker_begin(r);
		return;
	case K_THREAD:
		tc__rest_thread_begin(r);
		return;
	case K_AGENT:
		tc__rest_agent_begin(r);
		return;
	}
}

/* Takes the connection: the exchange's answer goes out through its writeable callback. */
static int start(struct tc_rest *r, struct lws *wsi, struct tc_pss *pss)
{
	int rc = tc__rest_connect(r, wsi, pss);
	if (rc != 1)
		return rc;
	begin(r);
	return 0;
}

/* An error before an exchange starts, as the server the gateway imitates writes it (rest.h). */
static int early_error(struct tc_server *srv, struct lws *wsi, unsigned status, const char *js, const char *py)
{
	if (!srv->cfg->rest_python)
		return tc__http_detail(wsi, status, js);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "detail", py);
	char *body = cJSON_PrintUnformatted(o);
	int rc = tc__http_send(wsi, status, "application/json", body);
	free(body);
	cJSON_Delete(o);
	return rc;
}

int tc__rest_request(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, int route, unsigned method,
		     const struct tc_route_match *m, struct tc_rest **pending)
{
	const struct tc_rest_op *op = op_of(route, method);
	*pending = NULL;
	if (!op)
		return early_error(srv, wsi, 405, "this method is not served here", "Method Not Allowed");
	struct tc_rest *r = tc__rest_new(srv, route, op);
	r->path = cJSON_CreateObject();
	for (size_t i = 0; i < m->nparams; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%.*s", (int)m->params[i].name_len, m->params[i].name);
		cJSON_AddStringToObject(r->path, name, m->params[i].value);
		if (!strcmp(name, "thread_id"))
			snprintf(r->thread, sizeof(r->thread), "%s", m->params[i].value);
		else if (!strcmp(name, "run_id"))
			snprintf(r->run_id, sizeof(r->run_id), "%s", m->params[i].value);
	}
	r->query = tc__http_query(wsi);
	char leid[128];
	const char *qleid = tc_run_str(r->query, "last_event_id"); /* an EventSource cannot set the header */
	if (tc__http_last_event_id(wsi, leid, sizeof(leid)))
		snprintf(r->leid, sizeof(r->leid), "%s", leid);
	else if (qleid)
		snprintf(r->leid, sizeof(r->leid), "%s", qleid);
	r->fk = fmt_of(route);
	tc_uuid4(r->fresh_run);
	tc_uuid4(r->fresh_thread);
	if (method == TC_HTTP_POST || method == TC_HTTP_PUT || method == TC_HTTP_PATCH ||
	    (method == TC_HTTP_DELETE && (op->flags & TC_REST_STORE))) {
		*pending = r;
		return 0;
	}
	return start(r, wsi, pss);
}

int tc__rest_body(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, struct tc_rest *r, const char *data,
		  size_t len)
{
	size_t i = 0;
	while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t'))
		i++;
	if (i < len) {
		r->body = cJSON_ParseWithLength(data, len);
		if (!r->body) {
			tc__rest_unref(r);
			return early_error(srv, wsi, 422, "the body is not valid JSON", "Invalid JSON in request body");
		}
	}
	return start(r, wsi, pss);
}

void tc__rest_drop(struct tc_rest *r)
{
	if (r)
		tc__rest_unref(r);
}
