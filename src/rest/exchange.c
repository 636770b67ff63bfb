/*
 * rest/exchange.c — one REST exchange: its connection, its answer, its Redis
 * calls (exchange.h).
 */
#include "rest/exchange.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpres.h"
#include "query.h"
#include "store.h"
#include "stream.h"

/* The exchange's connection: the common part, its stream once it streams, the exchange. */
struct rest_conn {
	struct tc_conn c;
	struct tc_stream st;
	struct tc_rest *r; /* the connection's reference */
	bool ndjson;       /* a stream of NDJSON lines (else SSE) */
};

#define REST_CONN(c) ((struct rest_conn *)(c))

static void unpark(struct tc_rest *r);

struct tc_rest *tc__rest_new(struct tc_server *srv, int route, const struct tc_rest_op *op)
{
	struct tc_rest *r = tc_xcalloc(1, sizeof(*r));
	r->srv = srv;
	r->refs = 1;
	r->route = route;
	r->op = op;
	r->python = srv->cfg->rest_python;
	return r;
}

void tc__rest_ref(struct tc_rest *r)
{
	r->refs++;
}

void tc__rest_unref(struct tc_rest *r)
{
	if (--r->refs > 0)
		return;
	cJSON_Delete(r->path);
	cJSON_Delete(r->query);
	cJSON_Delete(r->body);
	free(r->kwargs);
	tc_buf_unref(r->saved);
	cJSON_Delete(r->actions);
	assert(!r->view.feed && !r->query_read); /* both end with the conn */
	free(r);
}

bool tc__rest_truthy(const cJSON *v)
{
	return cJSON_IsTrue(v) ||
	       (cJSON_IsString(v) && (!strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "1")));
}

/* ==== the connection ======================================================================== */

/* The headers an answer may have: where the run is, where it streams; a search's page. */
#define HDR(v) ((v)[0] ? (v) : NULL)
#define EXTRA_HEADERS(r)                                                                                               \
	{                                                                                                              \
		"location:", HDR((r)->location), "content-location:", HDR((r)->content_location),                      \
			"x-pagination-total:", HDR((r)->pagination_total),                                             \
			"x-pagination-next:", HDR((r)->pagination_next), NULL                                          \
	}

static int rest_writeable(struct tc_conn *c)
{
	struct rest_conn *rc = REST_CONN(c);
	struct tc_rest *r = rc->r;
	const char *extra[] = EXTRA_HEADERS(r);

	if (r->out == OUT_STREAM) {
		if (!rc->st.started) {
			if (tc__stream_start(&r->srv->streams, &rc->st, 200,
					     rc->ndjson ? "application/x-ndjson" : "text/event-stream", extra, true))
				return -1;
			/* Everything the exchange needs of the request is read: its header
			 * table (about 5 KiB) goes back to lws for the stream's life. */
			lws_http_headers_detach(c->wsi);
		}
		return tc__stream_write(&rc->st);
	}
	c->want_write = false;
	struct tc_buf *b = tc_bufq_pop(&c->out);
	if (!b)
		return c->close_code ? -1 : 0;
	int rc_ = -1;
	bool empty = r->status == 204, head = tc__http_is_head(c->wsi);
	if (!tc__http_head_x(c->wsi, r->status, r->text ? TC_HTTP_TEXT : "application/json", empty ? 0 : b->len,
			     extra) &&
	    (empty || head || lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP_FINAL) == (int)b->len))
		rc_ = 0;
	tc_buf_unref(b);
	return tc__http_exchange_over(c, rc_);
}

/* A run's stream, once its head is out, writes from the loop; anything else when lws says. */
static int rest_flush(struct tc_conn *c)
{
	struct rest_conn *rc = REST_CONN(c);
	if (rc->r->out != OUT_STREAM || !rc->st.started) {
		tc__conn_request_write(c);
		return 0;
	}
	return tc__stream_flush(&rc->st);
}

/* The client drained its queue: a run's stream goes on. */
static void rest_drained(struct tc_conn *c)
{
	tc_run_view_drained(&REST_CONN(c)->r->view);
}

/* The connection is going: the exchange forgets it (what it waits for is dropped when it comes). */
static void rest_destroy(struct tc_conn *c)
{
	struct rest_conn *rc = REST_CONN(c);
	struct tc_rest *r = rc->r;
	tc__stream_end(&r->srv->streams, &rc->st);
	tc_query_cancel(r->query_read);
	r->query_read = NULL;
	r->conn = NULL;
	unpark(r);
	if (r->gone)
		r->gone(r);
	tc_run_feed_detach(&r->view);
	tc__rest_unref(r);
	free(rc);
}

static const struct tc_conn_ops rest_ops = {
	.transport = "http",
	.writeable = rest_writeable,
	.flush = rest_flush,
	.drained = rest_drained,
	.destroy = rest_destroy,
};

int tc__rest_connect(struct tc_rest *r, struct lws *wsi, struct tc_pss *pss)
{
	struct tc_server *srv = r->srv;
	int admitted = tc__http_refuse_if_full(&srv->conns, wsi);
	if (admitted != 1) {
		tc__rest_unref(r);
		return admitted;
	}
	struct rest_conn *rc = tc_xcalloc(1, sizeof(*rc));
	tc__conn_init(&rc->c, &srv->conns, &rest_ops, wsi, r->thread, NULL, TC_SPELL_021);
	rc->st.c = &rc->c;
	rc->r = r; /* the reference the request held */
	r->conn = &rc->c;
	pss->conn = &rc->c;
	return 1;
}

/* ==== answering ================================================================================== */

/* Queues body as the answer, JSON or (an error's message) text. */
static void answer(struct tc_rest *r, unsigned status, bool text, const char *body, size_t len)
{
	struct tc_conn *c = r->conn;
	if (!c)
		return;
	r->status = status;
	r->text = text;
	r->out = OUT_JSON;
	/* One whole answer, however large (a search's page): not subject to the stream queue's bound. */
	tc_bufq_push(&c->out, tc_buf_copy(body, len));
	tc__conn_request_write(c);
}

void tc__rest_answer(struct tc_rest *r, unsigned status, const char *body, size_t len)
{
	if (status >= 400 && !r->python) { /* {"detail": "<message>"} and nothing else: the message */
		cJSON *o = cJSON_ParseWithLength(body, len);
		const cJSON *d = cJSON_IsObject(o) && o->child && !o->child->next ? o->child : NULL;
		bool detail = d && !strcmp(d->string, "detail") && cJSON_IsString(d);
		if (detail)
			tc__rest_answer_detail(r, status, d->valuestring);
		cJSON_Delete(o);
		if (detail)
			return;
	}
	answer(r, status, false, body, len);
}

void tc__rest_answer_detail(struct tc_rest *r, unsigned status, const char *detail)
{
	if (!r->python) {
		answer(r, status, true, detail, strlen(detail));
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "detail", detail);
	char *s = cJSON_PrintUnformatted(o);
	answer(r, status, false, s, strlen(s));
	free(s);
	cJSON_Delete(o);
}

void tc__rest_answer_text(struct tc_rest *r, unsigned status, const char *text)
{
	answer(r, status, true, text, strlen(text));
}

void tc__rest_answer_json(struct tc_rest *r, unsigned status, const cJSON *body)
{
	char *s = cJSON_PrintUnformatted(body);
	tc__rest_answer(r, status, s, strlen(s));
	free(s);
}

void tc__rest_answer_saved(struct tc_rest *r)
{
	struct tc_buf *b = r->saved;
	r->saved = NULL;
	r->status = r->saved_status;
	r->out = OUT_JSON;
	tc_bufq_push(&r->conn->out, b);
	tc__conn_request_write(r->conn);
}

void tc__rest_stream(struct tc_rest *r, bool ndjson)
{
	struct rest_conn *rc = REST_CONN(r->conn);
	r->out = OUT_STREAM;
	rc->ndjson = ndjson;
	rc->st.no_heartbeat = ndjson; /* a line that is not JSON would break it */
	/* The head goes now, not with the first unit: a stream resumed or joined
	 * while the run is quiet (between steps, waiting for a worker) may have
	 * nothing to send for seconds, and a client waiting for its headers
	 * cannot tell that from a dead gateway. */
	tc__conn_request_write(r->conn);
}

void tc__rest_stream_finish(struct tc_rest *r)
{
	if (r->conn)
		REST_CONN(r->conn)->st.finished = true;
}

void tc__rest_stream_unit(struct tc_rest *r, const char *text, size_t len)
{
	if (r->conn)
		tc__conn_send(r->conn, tc_buf_copy(text, len));
}

/* ==== Redis calls ============================================================================ */

struct call {
	struct tc_rest *r;
	tc_rest_reply_fn *fn;
	char **argv; /* argv_copy's, while it may be sent (again): parked, or a read */
	bool again;  /* a read: sent once more if its connection breaks before the answer */
};

static void park(struct tc_rest *r, struct call *k);

/* argv and its strings, copied into one block (freed with free()). */
static char **argv_copy(const char *const *argv)
{
	size_t n = 0, bytes = 0;
	for (; argv[n]; n++)
		bytes += strlen(argv[n]) + 1;
	char **out = tc_xmalloc((n + 1) * sizeof(char *) + bytes);
	char *at = (char *)(out + n + 1);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(argv[i]) + 1;
		out[i] = memcpy(at, argv[i], l);
		at += l;
	}
	out[n] = NULL;
	return out;
}

/* Commands that only read: sent again after a broken connection, they cannot do anything twice. */
static bool is_read(const char *command)
{
	static const char *const reads[] = { "HMGET", "HGET", "HGETALL", "FCALL_RO", "XRANGE", "XREVRANGE" };
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		if (!strcmp(command, reads[i]))
			return true;
	return false;
}

static void call_free(struct call *k)
{
	free(k->argv);
	free(k);
}

static void on_reply(struct tc_redis *redis, redisReply *reply, void *priv)
{
	struct call *k = priv;
	struct tc_rest *r = k->r;
	if (!reply && k->again && r->conn && !r->parked) {
		/* Its connection broke before the answer (Redis restarting): a read waits for Redis and goes again. */
		k->again = false;
		park(r, k);
		return;
	}
	tc_rest_reply_fn *fn = k->fn;
	call_free(k);
	if (r->conn && fn)
		fn(r, reply);
	tc__rest_unref(r);
}

/*
 * A call made while Redis is down — this gateway just started, or Redis is
 * restarting or failing over — waits for the link for up to REDIS_WAIT_MS
 * rather than failing at once (the SDK does not retry a POST, and a client
 * reconnecting to a gateway that came back before its link would count a
 * failed attempt and wait seconds more). It was never sent, so sending it
 * later cannot do it twice; so does a read whose connection broke before
 * its answer (on_reply), once. One at a time per exchange (its calls follow one
 * another); it goes with the exchange's connection.
 */
#define REDIS_WAIT_MS 5000

struct tc_rest_parked {
	struct tc_redis_waiter waiter;
	uv_timer_t timer;
	struct call *k; /* its argv is what is sent */
};

static void parked_free(uv_handle_t *h)
{
	free(h->data);
}

/* The parked call is over (sent, given up, or its connection gone): r forgets it. */
static void park_end(struct tc_rest *r)
{
	struct tc_rest_parked *p = r->parked;
	r->parked = NULL;
	tc_redis_wait_cancel(r->srv->redis, &p->waiter);
	uv_timer_stop(&p->timer);
	uv_close((uv_handle_t *)&p->timer, parked_free);
}

static void fail_call(struct tc_rest *r, struct call *k)
{
	call_free(k);
	if (r->conn)
		tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
	tc__rest_unref(r);
}

static void park_ready(struct tc_redis_waiter *w)
{
	struct tc_rest_parked *p = TC_DLIST_ENTRY(w, struct tc_rest_parked, waiter);
	struct call *k = p->k;
	struct tc_rest *r = k->r;
	park_end(r); /* p itself goes once its timer is closed */
	if (tc_redis_cmd(r->srv->redis, on_reply, k, (const char *const *)k->argv))
		fail_call(r, k);
}

static void park_timeout(uv_timer_t *t)
{
	struct tc_rest_parked *p = t->data;
	struct call *k = p->k;
	struct tc_rest *r = k->r;
	park_end(r);
	fail_call(r, k);
}

static void unpark(struct tc_rest *r)
{
	if (!r->parked)
		return;
	struct call *k = r->parked->k;
	park_end(r);
	fail_call(r, k);
}

/* k (its argv copied) waits for Redis. */
static void park(struct tc_rest *r, struct call *k)
{
	struct tc_rest_parked *p = tc_xcalloc(1, sizeof(*p));
	p->k = k;
	p->waiter.fn = park_ready;
	uv_timer_init(r->srv->loop, &p->timer);
	p->timer.data = p;
	uv_timer_start(&p->timer, park_timeout, REDIS_WAIT_MS, 0);
	r->parked = p;
	tc_redis_wait_ready(r->srv->redis, &p->waiter);
}

int tc__rest_call(struct tc_rest *r, tc_rest_reply_fn *fn, const char *const *argv)
{
	struct call *k = tc_xmalloc(sizeof(*k));
	bool down = !tc_redis_cmd_up(r->srv->redis) && r->conn && !r->parked, read = is_read(argv[0]);
	*k = (struct call){ .r = r, .fn = fn, .argv = down || read ? argv_copy(argv) : NULL, .again = read };
	r->refs++;
	if (down) {
		park(r, k);
		return 0;
	}
	if (tc_redis_cmd(r->srv->redis, on_reply, k, argv)) {
		call_free(k);
		r->refs--;
		tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		return -1;
	}
	return 0;
}

/* The function's arguments: path, query, body, fresh ids, after_seq. */
static char *args_json(struct tc_rest *r)
{
	bool stateless = r->op->flags & TC_REST_SL;
	cJSON *a = cJSON_CreateObject();
	cJSON *path = cJSON_Duplicate(r->path, true);
	if (stateless)
		cJSON_AddStringToObject(path, "thread_id", r->fresh_thread);
	cJSON_AddItemToObject(a, "path", path);
	cJSON_AddItemReferenceToObject(a, "query", r->query);
	if (r->body)
		cJSON_AddItemReferenceToObject(a, "body", r->body);
	else
		cJSON_AddNullToObject(a, "body");
	cJSON *ids = cJSON_AddObjectToObject(a, "ids");
	cJSON_AddStringToObject(ids, "run_id", r->fresh_run);
	cJSON_AddStringToObject(ids, "thread_id", r->fresh_thread);
	cJSON_AddStringToObject(ids, "assistant_id", r->fresh_thread); /* an exchange makes one or the other */
	char request_id[37]; /* the request's id: a Python graph's run keeps it (langgraph_request_id) */
	tc_uuid4(request_id);
	cJSON_AddStringToObject(ids, "request_id", request_id);
	cJSON_AddNumberToObject(a, "after_seq", (double)r->after_seq);
	if (stateless)
		cJSON_AddTrueToObject(a, "stateless");
	if (r->srv->cfg->rest_python) /* (absent: the JavaScript server's answers) */
		cJSON_AddStringToObject(a, "flavor", "python");
	char *s = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return s;
}

void tc__rest_fcall(struct tc_rest *r, const char *op, tc_rest_reply_fn *fn)
{
	struct tc_store_cmd c;
	char *args = args_json(r);
	tc_store_rest_call(&c, r->op->flags & TC_REST_STORE, op, args);
	tc__rest_call(r, fn, c.argv);
	free(args);
}

int tc__rest_parse_answer(struct tc_rest *r, redisReply *reply, unsigned *status, const char **body, size_t *len)
{
	if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
	    reply->element[0]->type != REDIS_REPLY_INTEGER || reply->element[1]->type != REDIS_REPLY_STRING) {
		char msg[300];
		snprintf(msg, sizeof(msg), "the REST function failed: %.250s",
			 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "no answer");
		if (!reply || reply->type != REDIS_REPLY_ERROR)
			tc__rest_answer_detail(r, 503, TC_MSG_REDIS_DOWN);
		else
			tc__rest_answer_detail(r, 500, msg);
		return -1;
	}
	*status = (unsigned)reply->element[0]->integer;
	*body = reply->element[1]->str;
	*len = reply->element[1]->len;
	if (reply->elements > 2 && reply->element[2]->type == REDIS_REPLY_STRING) {
		cJSON *x = cJSON_ParseWithLength(reply->element[2]->str, reply->element[2]->len);
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(x, "flavor");
		if (cJSON_IsString(f))
			r->python = !strcmp(f->valuestring, "python");
		cJSON_Delete(x);
	}
	return 0;
}

/* A search's extra: the page headers the reference server sends. */
static void pagination(struct tc_rest *r, const redisReply *reply)
{
	if (reply->elements < 3 || reply->element[2]->type != REDIS_REPLY_STRING)
		return;
	cJSON *x = cJSON_ParseWithLength(reply->element[2]->str, reply->element[2]->len);
	const cJSON *total = cJSON_GetObjectItemCaseSensitive(x, "pagination_total"),
		    *next = cJSON_GetObjectItemCaseSensitive(x, "pagination_next");
	if (cJSON_IsNumber(total))
		snprintf(r->pagination_total, sizeof(r->pagination_total), "%.0f", total->valuedouble);
	if (cJSON_IsNumber(next))
		snprintf(r->pagination_next, sizeof(r->pagination_next), "%.0f", next->valuedouble);
	cJSON_Delete(x);
}

void tc__rest_lua_answered(struct tc_rest *r, redisReply *reply)
{
	unsigned status;
	const char *body;
	size_t len;
	if (tc__rest_parse_answer(r, reply, &status, &body, &len))
		return;
	pagination(r, reply);
	tc__rest_answer(r, status, body, len);
}
