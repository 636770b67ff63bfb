#include "query.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"
#include "tree.h"
#include "util.h"

struct tc_query {
	tc_query_cb *cb;
	void *ctx;
	char *thread, *want_run;
	bool in_flight;          /* a read is out */
	bool cancelled;
	struct tc_redis *redis;
	uint64_t head;
	char *run_id;            /* the current run per meta */
};

static void query_free(struct tc_query *q)
{
	free(q->thread);
	free(q->want_run);
	free(q->run_id);
	free(q);
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

static void on_tree(struct tc_redis *r, redisReply *reply, void *priv);

static void on_meta(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	struct tc_store_meta m;
	struct tc_store_cmd c;

	if (!take_reply(q))
		return;
	if (!reply || tc_store_meta_parse(reply, &m)) {
		report(q, TC_ERR_UNKNOWN_ERROR, reply ? "the event store answered unexpectedly" :
			TC_MSG_REDIS_DOWN, NULL);
		return;
	}
	q->head = m.seq;
	q->run_id = m.run_id ? tc_xstrndup(m.run_id, m.run_id_len) : NULL;
	tc_store_read_index(&c, q->thread, TC_KEY_TREE);
	if (tc_redis_cmd(q->redis, on_tree, q, c.argv)) {
		report(q, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN, NULL);
		return;
	}
	q->in_flight = true;
}

static void on_tree(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_query *q = priv;
	char msg[256];

	if (!take_reply(q))
		return;
	if (!reply) {
		report(q, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN, NULL);
		return;
	}
	if (reply->type != REDIS_REPLY_ARRAY) {
		tc_log(TC_LOG_ERROR, "unexpected Redis reply", TC_LS("thread", q->thread),
		       TC_LS("error", reply->type == REDIS_REPLY_ERROR ? reply->str : NULL));
		report(q, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly", NULL);
		return;
	}
	struct tc_store_pair *pairs = tc_xcalloc(reply->elements / 2 + 1, sizeof(*pairs));
	size_t n = tc_store_pairs(reply, pairs);
	tc_tree_sort(pairs, n);
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
	cJSON *res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "tree", tree);
	report(q, TC_OK, NULL, res);
}

struct tc_query *tc_query_tree(struct tc_redis *r, const char *thread, const char *want_run,
			       tc_query_cb *cb, void *ctx)
{
	struct tc_store_cmd c;

	if (!tc_redis_cmd_up(r))
		return NULL;
	struct tc_query *q = tc_xcalloc(1, sizeof(*q));
	q->cb = cb;
	q->ctx = ctx;
	q->redis = r;
	q->thread = tc_xstrdup(thread);
	q->want_run = want_run ? tc_xstrdup(want_run) : NULL;
	tc_store_read_meta(&c, thread);
	if (tc_redis_cmd(r, on_meta, q, c.argv)) {
		query_free(q);
		return NULL;
	}
	q->in_flight = true;
	return q;
}

void tc_query_cancel(struct tc_query *q)
{
	if (q)
		q->cancelled = true; /* freed by the reply in flight */
}
