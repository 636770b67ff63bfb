#include "query.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filter.h"
#include "log.h"
#include "store.h"
#include "tree.h"
#include "util.h"

/*
 * A query is a chain of reads, one at a time: each reply's callback takes
 * what it needs and sends the next read, or reports. At most one read is in
 * flight, and every path either has one out or reports (which frees the
 * query), so a cancelled query is freed by the reply it is waiting for.
 */
struct tc_query {
	tc_query_cb *cb;
	void *ctx;
	struct tc_redis *redis;
	char *thread, *want_run;
	bool in_flight; /* a read is out */
	bool cancelled;
	uint64_t head;
	char *run_id;  /* the current run per meta */
	cJSON *result; /* being built */
	char *graph;   /* state: the root graph's name */
	bool active;   /* state: the run is running or interrupted */
};

static void query_free(struct tc_query *q)
{
	free(q->thread);
	free(q->want_run);
	free(q->run_id);
	free(q->graph);
	cJSON_Delete(q->result);
	free(q);
}

static struct tc_query *query_new(struct tc_redis *r, const char *thread, tc_query_cb *cb, void *ctx)
{
	struct tc_query *q = tc_xcalloc(1, sizeof(*q));
	q->cb = cb;
	q->ctx = ctx;
	q->redis = r;
	q->thread = tc_xstrdup(thread);
	return q;
}

/* A reply is in: false when the query was cancelled (and is now freed). */
static bool take_reply(struct tc_query *q)
{
	assert(q->in_flight);
	q->in_flight = false;
	if (q->cancelled) {
		query_free(q);
		return false;
	}
	return true;
}

/* The one report; the query is over. */
static void report(struct tc_query *q, enum tc_err code, const char *message, cJSON *result)
{
	q->cb(q->ctx, code, message, result, q->head);
	query_free(q);
}

/* Takes q->result as the answer. */
static void report_result(struct tc_query *q)
{
	cJSON *res = q->result;
	q->result = NULL;
	report(q, TC_OK, NULL, res);
}

/* Sends the next read of the chain; reports instead when it cannot. */
static void next_read(struct tc_query *q, tc_redis_cb *cb, const struct tc_store_cmd *c)
{
	if (tc_redis_cmd(q->redis, cb, q, c->argv)) {
		report(q, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN, NULL);
		return;
	}
	q->in_flight = true;
}

/* Common head of the callbacks: false when the query stops here. */
static bool reply_ok(struct tc_query *q, redisReply *reply)
{
	if (!take_reply(q))
		return false;
	if (!reply) {
		report(q, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN, NULL);
		return false;
	}
	if (reply->type == REDIS_REPLY_ERROR) {
		tc_log(TC_LOG_ERROR, "unexpected Redis reply", TC_LS("thread", q->thread), TC_LS("error", reply->str));
		report(q, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly", NULL);
		return false;
	}
	return true;
}

/* The first read of a query; NULL when Redis cannot take commands now. */
static struct tc_query *first_read(struct tc_query *q, tc_redis_cb *cb, const struct tc_store_cmd *c)
{
	if (!tc_redis_cmd_up(q->redis) || tc_redis_cmd(q->redis, cb, q, c->argv)) {
		query_free(q);
		return NULL;
	}
	q->in_flight = true;
	return q;
}

/* The pairs of an HGETALL reply, sorted by field (caller frees). */
static struct tc_store_pair *sorted_pairs(const redisReply *reply, size_t *n)
{
	struct tc_store_pair *pairs = tc_xcalloc(reply->elements / 2 + 1, sizeof(*pairs));
	*n = tc_store_pairs(reply, pairs);
	tc_tree_sort(pairs, *n);
	return pairs;
}

/* ==== agent.getTree ============================================================================ */

static void on_tree(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	char msg[256];
	size_t n;

	if (!reply_ok(q, reply))
		return;
	struct tc_store_pair *pairs = sorted_pairs(reply, &n);
	cJSON *tree = tc_tree_build(pairs, n);
	free(pairs);
	if (!tree || (q->want_run && (!q->run_id || strcmp(q->want_run, q->run_id)))) {
		cJSON_Delete(tree);
		if (q->want_run)
			snprintf(msg, sizeof(msg), "run \"%.64s\" is not this thread's current run", q->want_run);
		else
			snprintf(msg, sizeof(msg), "thread \"%s\" has no run", q->thread);
		report(q, TC_ERR_NO_SUCH_RUN, msg, NULL);
		return;
	}
	q->result = cJSON_CreateObject();
	cJSON_AddItemToObject(q->result, "tree", tree);
	report_result(q);
}

static void on_tree_meta(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	struct tc_store_meta m;
	struct tc_store_cmd c;

	if (!reply_ok(q, reply))
		return;
	if (tc_store_meta_parse(reply, &m)) {
		report(q, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly", NULL);
		return;
	}
	q->head = m.seq;
	q->run_id = m.run_id ? tc_xstrndup(m.run_id, m.run_id_len) : NULL;
	tc_store_read_index(&c, q->thread, TC_KEY_TREE);
	next_read(q, on_tree, &c);
}

struct tc_query *tc_query_tree(struct tc_redis *r, const char *thread, const char *want_run, tc_query_cb *cb, void *ctx)
{
	struct tc_store_cmd c;
	struct tc_query *q = query_new(r, thread, cb, ctx);
	q->want_run = want_run ? tc_xstrdup(want_run) : NULL;
	tc_store_read_meta(&c, thread);
	return first_read(q, on_tree_meta, &c);
}

/* ==== GET /threads/:thread_id/state ============================================================ */

/* The parsed JSON of a "<seq>\n<event JSON>" index value, or NULL. */
static cJSON *indexed_event(const char *v, size_t len)
{
	uint64_t seq;
	const char *json;
	size_t jlen;
	return tc_store_values_parse(v, len, &seq, &json, &jlen) ? NULL : cJSON_ParseWithLength(json, jlen);
}

/* An event's params.<name>, detached from ev. */
static cJSON *take_param(cJSON *ev, const char *name)
{
	return cJSON_DetachItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "params"), name);
}

/* ISO 8601 (UTC, ms) of a timestamp in ms, as the Agent Protocol writes times. */
static cJSON *iso_time(const cJSON *ms)
{
	char buf[40];
	if (!cJSON_IsNumber(ms))
		return cJSON_CreateNull();
	time_t s = (time_t)(ms->valuedouble / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)((long long)ms->valuedouble % 1000));
	return cJSON_CreateString(buf);
}

static cJSON *checkpoint_ref(const char *thread, const cJSON *id)
{
	if (!cJSON_IsString(id))
		return cJSON_CreateNull();
	cJSON *ref = cJSON_CreateObject();
	cJSON_AddStringToObject(ref, "thread_id", thread);
	cJSON_AddStringToObject(ref, "checkpoint_ns", "");
	cJSON_AddStringToObject(ref, "checkpoint_id", id->valuestring);
	return ref;
}

/* The unanswered interrupts: tasks (one per interrupt) and the flat list. */
static void on_interrupts(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	size_t n;

	if (!reply_ok(q, reply))
		return;
	cJSON *tasks = cJSON_AddArrayToObject(q->result, "tasks");
	cJSON *all = cJSON_AddArrayToObject(q->result, "interrupts");
	struct tc_store_pair *pairs = sorted_pairs(reply, &n);
	for (size_t i = 0; i < n; i++) {
		cJSON *ev = indexed_event(pairs[i].value, pairs[i].value_len);
		cJSON *data = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "params"), "data");
		cJSON *ns =
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ev, "params"), "namespace");
		if (!cJSON_IsObject(data)) {
			cJSON_Delete(ev);
			continue;
		}
		char *id = tc_xstrndup(pairs[i].key, pairs[i].key_len);
		cJSON *payload = cJSON_DetachItemFromObjectCaseSensitive(data, "payload");
		cJSON *intr = cJSON_CreateObject();
		cJSON_AddStringToObject(intr, "id", id);
		cJSON_AddItemToObject(intr, "value", payload ? payload : cJSON_CreateNull());
		cJSON_AddItemToArray(all, cJSON_Duplicate(intr, true));
		/* checkpoint_ns "a|b" for a namespace ["a","b"], as LangGraph writes it. */
		char ns_joined[512] = "";
		const cJSON *seg;
		cJSON_ArrayForEach(seg, ns) if (cJSON_IsString(seg))
			snprintf(ns_joined + strlen(ns_joined), sizeof(ns_joined) - strlen(ns_joined), "%s%s",
				 *ns_joined ? "|" : "", seg->valuestring);
		cJSON *task = cJSON_CreateObject();
		cJSON_AddStringToObject(task, "id", id);
		cJSON_AddStringToObject(task, "name", q->graph ? q->graph : "");
		cJSON_AddItemToObject(task, "interrupts", cJSON_CreateArray());
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(task, "interrupts"), intr);
		cJSON *ck = cJSON_AddObjectToObject(task, "checkpoint");
		cJSON_AddStringToObject(ck, "checkpoint_ns", ns_joined);
		cJSON_AddItemToArray(tasks, task);
		free(id);
		cJSON_Delete(ev);
		q->active = true;
	}
	free(pairs);
	cJSON *next = cJSON_AddArrayToObject(q->result, "next");
	if (q->active && q->graph)
		cJSON_AddItemToArray(next, cJSON_CreateString(q->graph));
	report_result(q);
}

/* The root graph's name and status: a running or interrupted run is active. */
static void on_state_tree(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	struct tc_store_cmd c;
	size_t n;

	if (!reply_ok(q, reply))
		return;
	struct tc_store_pair *pairs = sorted_pairs(reply, &n);
	if (n && pairs[0].key_len == 0) {
		struct tc_tree_value v;
		tc_store_tree_parse(pairs[0].value, pairs[0].value_len, &v);
		q->graph = tc_xstrndup(v.graph, v.graph_len);
		q->active = (v.status_len == 7 && !memcmp(v.status, "running", 7)) ||
			    (v.status_len == 7 && !memcmp(v.status, "started", 7)) ||
			    (v.status_len == 11 && !memcmp(v.status, "interrupted", 11));
	}
	free(pairs);
	tc_store_read_index(&c, q->thread, TC_KEY_INTERRUPTS);
	next_read(q, on_interrupts, &c);
}

static void on_root_values(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	struct tc_store_cmd c;

	if (!reply_ok(q, reply))
		return;
	cJSON *ev = reply->type == REDIS_REPLY_STRING ? indexed_event(reply->str, reply->len) : NULL;
	cJSON *values = take_param(ev, "data");
	cJSON_AddItemToObject(q->result, "values", values ? values : cJSON_CreateObject());
	cJSON_Delete(ev);
	tc_store_read_index(&c, q->thread, TC_KEY_TREE);
	next_read(q, on_state_tree, &c);
}

static void on_status(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	struct tc_store_cmd c;
	char msg[200];

	if (!reply_ok(q, reply))
		return;
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4) {
		report(q, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly", NULL);
		return;
	}
	const redisReply *seq = reply->element[0], *epoch = reply->element[1], *ckpt = reply->element[3];
	if (epoch->type != REDIS_REPLY_STRING) {
		snprintf(msg, sizeof(msg), "thread \"%s\" not found: it has no events (or they expired)", q->thread);
		report(q, TC_ERR_NO_SUCH_RUN, msg, NULL);
		return;
	}
	if (seq->type == REDIS_REPLY_STRING && tc_store_u64(seq->str, seq->len, &q->head))
		q->head = 0;
	/* The checkpoint: the latest checkpoints event of the root namespace. */
	cJSON *ev = ckpt->type == REDIS_REPLY_STRING ? indexed_event(ckpt->str, ckpt->len) : NULL;
	cJSON *params = cJSON_GetObjectItemCaseSensitive(ev, "params");
	cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
	q->result = cJSON_CreateObject();
	cJSON_AddItemToObject(q->result, "checkpoint",
			      checkpoint_ref(q->thread, cJSON_GetObjectItemCaseSensitive(data, "id")));
	const cJSON *parent = cJSON_GetObjectItemCaseSensitive(data, "parent_id");
	cJSON_AddItemToObject(
		q->result, "parent_checkpoint",
		checkpoint_ref(q->thread, parent ? parent : cJSON_GetObjectItemCaseSensitive(data, "parentId")));
	cJSON *meta = cJSON_AddObjectToObject(q->result, "metadata");
	const cJSON *step = cJSON_GetObjectItemCaseSensitive(data, "step");
	if (cJSON_IsNumber(step))
		cJSON_AddNumberToObject(meta, "step", step->valuedouble);
	cJSON_AddItemToObject(q->result, "created_at", iso_time(cJSON_GetObjectItemCaseSensitive(params, "timestamp")));
	cJSON_Delete(ev);
	tc_store_read_root_values(&c, q->thread);
	next_read(q, on_root_values, &c);
}

struct tc_query *tc_query_state(struct tc_redis *r, const char *thread, tc_query_cb *cb, void *ctx)
{
	struct tc_store_cmd c;
	struct tc_query *q = query_new(r, thread, cb, ctx);
	tc_store_read_status(&c, thread);
	return first_read(q, on_status, &c);
}

void tc_query_cancel(struct tc_query *q)
{
	if (q)
		q->cancelled = true; /* freed by the reply in flight */
}
