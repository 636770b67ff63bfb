#include "bridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "spell.h"
#include "store.h"
#include "util.h"

/* Commands the whole process may have waiting for an answer. */
#define MAX_WAITING 100000

/*
 * A command waiting for its answer. Entries sit in a ring in the order they
 * were sent, so entry i has correlation number first + i; answered ones stay
 * (caller NULL) until they reach the head, which keeps lookups O(1) and the
 * head the next to time out (every command gets the same timeout).
 */
struct waiting {
	uint64_t deadline; /* uv_now() ms */
	uint64_t sent_ns;  /* uv_hrtime() at submit */
	uint64_t client_id;
	int64_t head;                    /* the thread's seq when the command was sent; -1 unknown */
	bool raw;                        /* a REST method: any JSON result, passed as it is */
	struct tc_bridge_caller *caller; /* NULL once answered */
};

struct tc_bridge {
	uv_loop_t *loop;
	const struct tc_config *cfg;
	struct tc_redis *redis;
	char instance[24];
	char reply_ch[TC_STORE_REPLY_MAX];
	unsigned sub_node; /* where the reply channel's SSUBSCRIBE went; 0: nowhere */
	bool subscribed;   /* ... and Redis confirmed it */
	struct waiting *ring;
	size_t cap, head, count, live;
	uint64_t first; /* correlation number of ring[head] */
	uv_timer_t timer;
	bool stopping;
};

static void on_timeout(uv_timer_t *t);

static const char down_msg[] = "agent commands are unavailable while Redis is unreachable; retry shortly";

static struct waiting *entry(struct tc_bridge *b, uint64_t n)
{
	if (n < b->first || n - b->first >= b->count)
		return NULL;
	return &b->ring[(b->head + (n - b->first)) % b->cap];
}

/* Answers (frame may be NULL: no answer) and releases one waiting command. */
static void finish(struct tc_bridge *b, struct waiting *w, struct tc_buf *frame)
{
	struct tc_bridge_caller *c = w->caller;
	if (!c) {
		tc_buf_unref(frame);
		return;
	}
	w->caller = NULL;
	b->live--;
	if (frame) {
		tc_hist_observe(&tc_metrics.command_latency, (double)(uv_hrtime() - w->sent_ns) / 1e9);
		c->answer(c, frame);
	}
	c->release(c);
}

/* Drops answered entries from the head and re-arms the timeout timer. */
static void trim(struct tc_bridge *b)
{
	while (b->count && !b->ring[b->head].caller) {
		b->head = (b->head + 1) % b->cap;
		b->count--;
		b->first++;
	}
	if (b->stopping)
		return;
	if (!b->count) {
		uv_timer_stop(&b->timer);
		return;
	}
	uint64_t now = uv_now(b->loop), due = b->ring[b->head].deadline;
	uv_timer_start(&b->timer, on_timeout, due > now ? due - now : 0, 0);
}

static void fail(struct tc_bridge *b, struct waiting *w, enum tc_err code, const char *msg)
{
	finish(b, w, tc_response_error(true, w->client_id, code, msg));
}

static void on_timeout(uv_timer_t *t)
{
	struct tc_bridge *b = t->data;
	uint64_t now = uv_now(b->loop);
	char msg[160];

	snprintf(msg, sizeof(msg), "no agent worker answered within %lld ms; is a worker running?",
		 b->cfg->command_timeout_ms);
	while (b->count) {
		struct waiting *w = &b->ring[b->head];
		if (w->caller && w->deadline > now)
			break;
		if (w->caller)
			fail(b, w, TC_ERR_UNKNOWN_ERROR, msg);
		b->head = (b->head + 1) % b->cap;
		b->count--;
		b->first++;
	}
	trim(b);
}

/* ---- worker answers ------------------------------------------------------------------------ */

/*
 * {"corr":"<instance>:<n>","type":"success","result":{…}} or
 * {"corr":…,"type":"error","error":<ErrorCode>,"message":…}
 */
static void on_answer(struct tc_bridge *b, const char *data, size_t len)
{
	cJSON *m = cJSON_ParseWithLength(data, len);
	const cJSON *corr = cJSON_GetObjectItemCaseSensitive(m, "corr");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
	size_t ilen = strlen(b->instance);
	struct waiting *w = NULL;

	if (cJSON_IsString(corr) && !strncmp(corr->valuestring, b->instance, ilen) && corr->valuestring[ilen] == ':') {
		char *end;
		unsigned long long n = strtoull(corr->valuestring + ilen + 1, &end, 10);
		if (!*end)
			w = entry(b, n);
	}
	if (!w || !w->caller || !cJSON_IsString(type)) {
		/* Late (timed out), duplicate (redelivered command) or foreign. */
		tc_log(TC_LOG_DEBUG, "worker answer dropped",
		       TC_LS("corr", cJSON_IsString(corr) ? corr->valuestring : NULL));
		cJSON_Delete(m);
		return;
	}
	if (!strcmp(type->valuestring, "success")) {
		cJSON *result = cJSON_DetachItemFromObjectCaseSensitive(m, "result");
		if (result && !cJSON_IsObject(result) && !w->raw) {
			cJSON_Delete(result);
			result = NULL;
		}
		/* Workers answer in either spelling; the client reads its own. */
		if (!w->raw)
			tc_spell_tree(result, w->caller->sp);
		/* The seq the answer is consistent with: the worker's word, or the
		 * thread's head when the command was sent (what the client may
		 * have seen before the command took effect). */
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(m, "meta");
		const cJSON *seq = tc_spell_get(meta, "appliedThroughSeq", TC_SPELL_021);
		int64_t applied =
			cJSON_IsNumber(seq) && seq->valuedouble >= 0 && seq->valuedouble <= (double)TC_JS_MAX_SAFE
				? (int64_t)seq->valuedouble
				: w->head;
		finish(b, w, tc_response_success(w->client_id, result, applied, w->caller->sp));
	} else {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(m, "error");
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(m, "message");
		enum tc_err e = TC_ERR_UNKNOWN_ERROR;
		for (int i = 0; cJSON_IsString(code) && i < TC__ERRNUM_COUNT; i++)
			if (!strcmp(code->valuestring, tc_err_code((enum tc_err)(-1 - i))))
				e = (enum tc_err)(-1 - i);
		finish(b, w, tc_response_error(true, w->client_id, e, cJSON_IsString(msg) ? msg->valuestring : NULL));
	}
	cJSON_Delete(m);
	trim(b);
}

/*
 * Redis routes to the bridge only channels under TC_STORE_REPLY_PREFIX, and
 * the only one it subscribes is its own: every channel event here is about
 * b->reply_ch.
 */
static void on_message(void *ctx, const char *ch, size_t clen, const char *data, size_t dlen)
{
	on_answer(ctx, data, dlen);
}

static void on_subscribed(void *ctx, const char *ch, size_t clen)
{
	struct tc_bridge *b = ctx;
	b->subscribed = true;
}

static void subscribe_replies(struct tc_bridge *b)
{
	b->subscribed = false;
	b->sub_node = tc_redis_subscribe(b->redis, b->reply_ch);
}

static void on_sub_up(void *ctx)
{
	struct tc_bridge *b = ctx;
	if (!b->sub_node)
		subscribe_replies(b);
}

/* Answers published while the channel is not subscribed are lost; those commands time out. */
static void on_sub_down(void *ctx, unsigned node)
{
	struct tc_bridge *b = ctx;
	if (b->sub_node == node) {
		b->subscribed = false;
		b->sub_node = 0;
	}
}

static void on_unsubscribed(void *ctx, const char *ch, size_t clen)
{
	subscribe_replies(ctx); /* dropped unasked: its slot moved */
}

static void on_refused(void *ctx, const char *ch, size_t clen)
{
	struct tc_bridge *b = ctx;
	b->subscribed = false;
	b->sub_node = 0; /* on_sub_up tries again */
}

static void on_group(struct tc_redis *r, redisReply *reply, void *priv)
{
	if (reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "BUSYGROUP", 9))
		tc_log(TC_LOG_WARN, "cannot create the workers group", TC_LS("error", reply->str));
}

static void on_cmd_up(void *ctx)
{
	struct tc_bridge *b = ctx;
	struct tc_store_cmd c;
	tc_store_create_group(&c);
	tc_redis_cmd(b->redis, on_group, b, c.argv);
}

static const struct tc_redis_listener listener = {
	.sub_up = on_sub_up,
	.sub_down = on_sub_down,
	.subscribed = on_subscribed,
	.unsubscribed = on_unsubscribed,
	.refused = on_refused,
	.message = on_message,
	.cmd_up = on_cmd_up,
};

/* ---- submitting ------------------------------------------------------------------------------ */

/*
 * A command on its way: first the thread's meta (where it stands, and the
 * graph it runs when the command does not name one), then threadcast_submit
 * routes it to a worker's stream. Owns the strings it still needs.
 */
struct sent {
	struct tc_bridge *b;
	uint64_t n;
	char *thread, *params;
	const char *method;
	char corr[48], deadline[24];
	char assistant[TC_STORE_ASSISTANT_MAX + 1]; /* "" when the command names none */
};

static void sent_free(struct sent *s)
{
	free(s->thread);
	free(s->params);
	free(s);
}

static void on_submitted(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct sent *sent = priv;
	struct tc_bridge *b = sent->b;
	struct waiting *w = entry(b, sent->n);

	sent_free(sent);
	if (!w || !w->caller || (reply && reply->type == REDIS_REPLY_STRING))
		return;
	if (reply && reply->type == REDIS_REPLY_ERROR && !strncmp(reply->str, "ERR threadcast: no worker", 25)) {
		/* Nothing would answer it: said now, not after the timeout. */
		fail(b, w, strstr(reply->str, "no worker is running") ? TC_ERR_UNKNOWN_ERROR : TC_ERR_INVALID_ARGUMENT,
		     reply->str + 16);
		trim(b);
		return;
	}
	char msg[200];
	snprintf(msg, sizeof(msg), "the command could not be queued for a worker: %s",
		 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "Redis connection lost");
	fail(b, w, TC_ERR_UNKNOWN_ERROR, msg);
	trim(b);
}

/* Where the thread stands (meta.appliedThroughSeq) and its graph; then route it. */
static void on_route(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct sent *sent = priv;
	struct tc_bridge *b = sent->b;
	struct waiting *w = entry(b, sent->n);
	uint64_t seq;
	const char *a;
	size_t alen;

	if (!w || !w->caller) {
		sent_free(sent);
		return;
	}
	if (!reply || tc_store_route_parse(reply, &seq, &a, &alen)) {
		sent_free(sent);
		fail(b, w, TC_ERR_UNKNOWN_ERROR, down_msg);
		trim(b);
		return;
	}
	w->head = (int64_t)seq;
	if (!sent->assistant[0]) {
		memcpy(sent->assistant, a, alen);
		sent->assistant[alen] = '\0';
	}
	struct tc_store_cmd c;
	tc_store_submit(&c, &(struct tc_store_command){ .thread = sent->thread,
							.method = sent->method,
							.params = sent->params,
							.corr = sent->corr,
							.reply = b->reply_ch,
							.deadline = sent->deadline,
							.assistant = sent->assistant });
	if (tc_redis_cmd(b->redis, on_submitted, sent, c.argv)) {
		sent_free(sent);
		fail(b, w, TC_ERR_UNKNOWN_ERROR, down_msg);
		trim(b);
	}
}

/* Sends method (a static name) with params (taken over) for thread; assistant may be NULL. */
static enum tc_err submit(struct tc_bridge *b, struct tc_bridge_caller *caller, const char *thread, const char *method,
			  uint64_t client_id, char *params, const char *assistant, bool raw, struct tc_error *err)
{
	if (!b->subscribed || !tc_redis_cmd_up(b->redis)) {
		free(params);
		return tc_error_set(err, TC_ERR_UNKNOWN_ERROR, "%s", down_msg);
	}
	if (b->live >= MAX_WAITING || b->count >= 4 * MAX_WAITING) {
		free(params);
		return tc_error_set(err, TC_ERR_UNKNOWN_ERROR,
				    "this gateway has too many commands waiting for workers; retry shortly");
	}
	if (b->count == b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 64;
		struct waiting *n = tc_xmalloc(ncap * sizeof(*n));
		for (size_t i = 0; i < b->count; i++)
			n[i] = b->ring[(b->head + i) % b->cap];
		free(b->ring);
		b->ring = n;
		b->cap = ncap;
		b->head = 0;
	}
	uint64_t n = b->first + b->count;
	struct sent *sent = tc_xcalloc(1, sizeof(*sent));
	sent->b = b;
	sent->n = n;
	sent->thread = tc_xstrdup(thread);
	sent->method = method;
	sent->params = params;
	if (assistant)
		snprintf(sent->assistant, sizeof(sent->assistant), "%s", assistant);
	snprintf(sent->corr, sizeof(sent->corr), "%s:%llu", b->instance, (unsigned long long)n);
	snprintf(sent->deadline, sizeof(sent->deadline), "%lld",
		 (long long)(tc_wall_ms() + b->cfg->command_timeout_ms));
	struct tc_store_cmd route;
	tc_store_read_route(&route, thread);
	if (tc_redis_cmd(b->redis, on_route, sent, route.argv)) {
		sent_free(sent);
		return tc_error_set(err, TC_ERR_UNKNOWN_ERROR, "%s", down_msg);
	}
	b->ring[(b->head + b->count) % b->cap] = (struct waiting){
		.deadline = uv_now(b->loop) + (uint64_t)b->cfg->command_timeout_ms,
		.sent_ns = uv_hrtime(),
		.client_id = client_id,
		.head = -1,
		.raw = raw,
		.caller = caller,
	};
	b->count++;
	b->live++;
	if (b->count == 1)
		trim(b); /* arm the timer */
	return TC_OK;
}

enum tc_err tc_bridge_submit(struct tc_bridge *b, struct tc_bridge_caller *caller, const char *thread,
			     const struct tc_command *cmd, struct tc_error *err)
{
	/* The graph a run.start names; other commands go to the thread's. */
	const cJSON *a = cmd->params ? cJSON_GetObjectItemCaseSensitive(cmd->params, "assistant_id") : NULL;
	if (cJSON_IsString(a) && !tc_store_assistant_valid(a->valuestring, strlen(a->valuestring)))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "params.assistant_id must be 1 to %d printable characters without spaces",
				    TC_STORE_ASSISTANT_MAX);
	char *params = cmd->params ? cJSON_PrintUnformatted(cmd->params) : tc_xstrdup("{}");
	return submit(b, caller, thread, tc_method_name(cmd->method), cmd->id, params,
		      cJSON_IsString(a) ? a->valuestring : NULL, false, err);
}

enum tc_err tc_bridge_submit_method(struct tc_bridge *b, struct tc_bridge_caller *caller, const char *thread,
				    const char *assistant, const char *method, const cJSON *params,
				    struct tc_error *err)
{
	if (assistant && !tc_store_assistant_valid(assistant, strlen(assistant)))
		assistant = NULL; /* the thread's own, then */
	char *json = params ? cJSON_PrintUnformatted(params) : tc_xstrdup("{}");
	return submit(b, caller, thread, method, 0, json, assistant, true, err);
}

/* ---- lifecycle ---------------------------------------------------------------------------------- */

static void random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[16];
	tc_random_bytes(buf, sizeof(buf));
	for (size_t i = 0; i < n; i++)
		out[i] = hex[buf[i % sizeof(buf)] >> (i & 1 ? 0 : 4) & 15];
	out[n] = '\0';
}
struct tc_bridge *tc_bridge_new(uv_loop_t *loop, const struct tc_config *cfg, struct tc_redis *redis)
{
	struct tc_bridge *b = tc_xcalloc(1, sizeof(*b));
	b->loop = loop;
	b->cfg = cfg;
	b->redis = redis;
	random_hex(b->instance, 16);
	tc_store_reply_channel(b->reply_ch, b->instance);
	b->first = 1;
	uv_timer_init(loop, &b->timer);
	b->timer.data = b;
	tc_redis_add_listener(redis, TC_STORE_REPLY_PREFIX, &listener, b);
	return b;
}

size_t tc_bridge_pending(const struct tc_bridge *b)
{
	return b->live;
}

const char *tc_bridge_reply_channel(const struct tc_bridge *b)
{
	return b->reply_ch;
}

void tc_bridge_stop(struct tc_bridge *b)
{
	b->stopping = true;
	for (size_t i = 0; i < b->count; i++)
		finish(b, &b->ring[(b->head + i) % b->cap], NULL);
	b->count = 0;
	uv_timer_stop(&b->timer);
	uv_close((uv_handle_t *)&b->timer, NULL);
}

void tc_bridge_free(struct tc_bridge *b)
{
	if (!b)
		return;
	free(b->ring);
	free(b);
}
