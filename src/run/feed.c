/*
 * run/feed.c — a run's stream translated once per instance (feed.h).
 */
#include "run/feed.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "protocol.h"
#include "run/agent_events.h"
#include "run/chunks.h"
#include "run/modes.h"
#include "run/ndjson.h"
#include "util.h"

/* One unit of the log. */
struct unit {
	uint64_t id;
	uint64_t seq; /* the thread's event it was made from (UINT64_MAX: none) */
	struct tc_buf *b;
};

struct tc_run_feed {
	struct tc_run_feeds *feeds;
	char *key;             /* in the table under it; NULL: a feed of one viewer's own */
	struct tc_dlink hlink; /* on its bucket */
	enum tc_run_format format;
	const struct tc_run_fmt_ops *ops;
	void *fmt;                  /* the translator */
	struct tc_session *session; /* following the thread */
	struct tc_dlist viewers;
	uint64_t cur_seq; /* the event being translated (UINT64_MAX: none) */
	/* the log: a ring of units at positions base .. base+count-1 */
	struct unit *ring;
	size_t cap; /* a power of two (0: none yet) */
	size_t count;
	uint64_t base;
	uint64_t dropped_id;  /* base > 0: the id of the last unit that left the log */
	uint64_t dropped_seq; /* and the seq it was made from */
	size_t bytes;         /* of the log's units, big ones apart: */
	size_t big_bytes;     /* those of more than a quarter of --max-queue-bytes (see TC_BUFQ_BIG_MAX) */
	bool ended;           /* the translator ended the stream */
	bool failed;          /* the session gave up */
	int code;             /* failed: the close code, and its reason (static) */
	const char *reason;
};

struct tc_run_feeds {
	const struct tc_session_env *env;
	size_t log_max;
	struct tc_dlist *buckets;
	size_t nbuckets; /* a power of two */
	size_t count;    /* shared feeds in the table */
	size_t alive;    /* every feed, shared or not */
};

/* ==== the table ================================================================================ */

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct tc_dlist *bucket(struct tc_run_feeds *t, const char *key)
{
	return &t->buckets[hash(key) & (t->nbuckets - 1)];
}

static struct tc_run_feed *lookup(struct tc_run_feeds *t, const char *key)
{
	for (struct tc_dlink *n = bucket(t, key)->head; n; n = n->next) {
		struct tc_run_feed *f = TC_DLIST_ENTRY(n, struct tc_run_feed, hlink);
		if (!strcmp(f->key, key))
			return f;
	}
	return NULL;
}

static void grow(struct tc_run_feeds *t)
{
	struct tc_dlist *old = t->buckets;
	size_t n = t->nbuckets;
	t->nbuckets *= 2;
	t->buckets = tc_xcalloc(t->nbuckets, sizeof(*t->buckets));
	for (size_t i = 0; i < n; i++) {
		struct tc_dlink *l;
		while ((l = old[i].head)) {
			struct tc_run_feed *f = TC_DLIST_ENTRY(l, struct tc_run_feed, hlink);
			tc_dlist_remove(&old[i], l);
			tc_dlist_push_head(bucket(t, f->key), l);
		}
	}
	free(old);
}

static void unlist(struct tc_run_feed *f)
{
	if (!f->key)
		return;
	tc_dlist_remove(bucket(f->feeds, f->key), &f->hlink);
	f->feeds->count--;
	free(f->key);
	f->key = NULL;
}

struct tc_run_feeds *tc_run_feeds_new(const struct tc_session_env *env, size_t log_max)
{
	struct tc_run_feeds *t = tc_xcalloc(1, sizeof(*t));
	t->env = env;
	t->log_max = log_max;
	t->nbuckets = 64;
	t->buckets = tc_xcalloc(t->nbuckets, sizeof(*t->buckets));
	return t;
}

void tc_run_feeds_free(struct tc_run_feeds *t)
{
	if (!t)
		return;
	assert(t->alive == 0);
	free(t->buckets);
	free(t);
}

size_t tc_run_feeds_count(const struct tc_run_feeds *t)
{
	return t->alive;
}

/* ==== viewers ================================================================================ */

/* The unit at position p of the log (base <= p < base + count). */
static struct unit *at(struct tc_run_feed *f, uint64_t p)
{
	return &f->ring[(size_t)p & (f->cap - 1)];
}

/*
 * Sends v what it is owed while its client has room: from its position to
 * the log's end; then, with the feed over, its end or failure (once).
 */
static void pump(struct tc_run_feed *f, struct tc_run_view *v)
{
	const size_t max = (size_t)f->feeds->env->cfg->max_queue_bytes;
	uint64_t end = f->base + f->count;
	while (!v->done && v->next < end) {
		if (v->next < f->base) {
			/* What it needs left the log while its client did not read. */
			v->done = true;
			v->ops->fail(v, TC_CLOSE_TRY_AGAIN, "the client fell too far behind the run's stream");
			return;
		}
		struct unit *u = at(f, v->next);
		if (u->id > v->after && (u->seq > v->after_seq || u->seq == UINT64_MAX)) {
			/* Up to half the queue's bound, and never past it: the client is paced, not cut. */
			size_t queued = v->ops->queued(v);
			if (queued && (queued >= max / 2 || queued + u->b->len > max))
				return; /* tc_run_view_drained() goes on */
			v->ops->unit(v, tc_buf_ref(u->b));
		}
		v->next++;
	}
	if (v->done || !(f->ended || f->failed))
		return;
	v->done = true;
	if (f->failed)
		v->ops->fail(v, f->code, f->reason);
	else
		v->ops->end(v);
}

static void pump_all(struct tc_run_feed *f)
{
	for (struct tc_dlink *n = f->viewers.head; n; n = n->next)
		pump(f, TC_DLIST_ENTRY(n, struct tc_run_view, link));
}

void tc_run_view_drained(struct tc_run_view *v)
{
	if (v->feed)
		pump(v->feed, v);
}

bool tc_run_view_over(const struct tc_run_view *v)
{
	return v->feed && v->feed->ended;
}

cJSON *tc_run_feed_result(const struct tc_run_view *v)
{
	const struct tc_run_feed *f = v->feed;
	return f && f->format == TC_RUN_MODES ? tc_run_modes_result(f->fmt) : NULL;
}

/* ==== the translation ========================================================================= */

/* Whether a unit of len bytes is a big one, held to a bound of its own as a connection holds it. */
static bool is_big(const struct tc_run_feed *f, size_t len)
{
	return len > (size_t)f->feeds->env->cfg->max_queue_bytes / 4;
}

/* A unit the translator made: to the viewers, and into the log (its oldest go past log_max). */
static void feed_emit(void *ctx, uint64_t id, const char *text, size_t len)
{
	struct tc_run_feed *f = ctx;
	if (f->count == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct unit *ring = tc_xmalloc(cap * sizeof(*ring));
		for (size_t i = 0; i < f->count; i++)
			ring[(size_t)(f->base + i) & (cap - 1)] = *at(f, f->base + i);
		free(f->ring);
		f->ring = ring;
		f->cap = cap;
	}
	*at(f, f->base + f->count) = (struct unit){ .id = id, .seq = f->cur_seq, .b = tc_buf_copy(text, len) };
	f->count++;
	*(is_big(f, len) ? &f->big_bytes : &f->bytes) += len;
	tc_metrics.run_units++;
	/* Viewers with room take it first: the log only has to keep what the slow ones lack. */
	pump_all(f);
	while ((f->bytes > f->feeds->log_max || f->big_bytes > TC_BUFQ_BIG_MAX) && f->count > 1) {
		struct unit *u = at(f, f->base);
		*(is_big(f, u->b->len) ? &f->big_bytes : &f->bytes) -= u->b->len;
		f->dropped_id = u->id;
		f->dropped_seq = u->seq;
		tc_buf_unref(u->b);
		f->base++;
		f->count--;
	}
}

/* ---- the session's transport hooks: the feed is its client ---- */

static void feed_send(void *ctx, struct tc_buf *frame)
{
	struct tc_run_feed *f = ctx;
	struct tc_event_parts parts;
	if (!f->ended && !f->failed && !tc_event_parts_read(frame, &parts)) {
		cJSON *event = cJSON_ParseWithLength(parts.json, parts.json_len);
		tc_metrics.run_events++;
		f->cur_seq = parts.seq;
		f->ended = f->ops->event(f->fmt, parts.seq, event, parts.json, parts.json_len);
		f->cur_seq = UINT64_MAX;
		cJSON_Delete(event);
		if (f->ended)
			pump_all(f);
	}
	tc_buf_unref(frame);
}

/* The feed translates as it receives: nothing waits in it. */
static size_t feed_queued(void *ctx)
{
	return 0;
}

static void feed_set_reading(void *ctx, bool reading)
{
}

/* History cut by --max-replay (or trimmed) may have taken the run's start: assume we are in it. */
static void feed_started(void *ctx, bool restored, bool has_missed, uint64_t missed)
{
	struct tc_run_feed *f = ctx;
	if (!restored || (has_missed && missed))
		f->ops->assume_in_run(f->fmt);
}

/*
 * The session gave up (the thread's history was reset under it, Redis
 * failed): a format with a terminal unit of its own ends with it, and every
 * viewer is told once it has the rest.
 */
static void feed_close(void *ctx, int code, const char *reason)
{
	struct tc_run_feed *f = ctx;
	if (f->ended || f->failed)
		return;
	unlist(f);
	if (f->ops->finish)
		f->ops->finish(f->fmt, "internal_error", reason);
	f->failed = true;
	f->code = code;
	f->reason = reason;
	pump_all(f);
}

static const struct tc_session_io feed_io = {
	.kind = TC_FRAME_PARTS,
	.send = feed_send,
	.queued = feed_queued,
	.set_reading = feed_set_reading,
	.close = feed_close,
	.stream_started = feed_started,
};

/* ==== starting and ending ===================================================================== */

/* The spec as a key: every field that changes what the feed makes. */
static char *key_of(const struct tc_run_spec *s)
{
	const char *agent = s->agent ? s->agent : "", *message = s->message ? s->message : "";
	const char *given = s->given ? s->given : "";
	size_t n = strlen(s->thread) + strlen(s->run_id) + strlen(agent) + strlen(given) + strlen(message) + 128;
	char *k = tc_xmalloc(n);
	snprintf(k, n, "%d|%s|%s|%llu|%u|%d|%d|%zu:%s|%zu:%s|%s", (int)s->format, s->thread, s->run_id,
		 (unsigned long long)s->after_seq, s->modes, s->subgraphs, s->result_only, strlen(agent), agent,
		 strlen(given), given, message);
	return k;
}

static void *translator(struct tc_run_feed *f, const struct tc_run_spec *s, const struct tc_run_fmt_ops **ops)
{
	tc_run_emit *emit = s->result_only ? NULL : feed_emit;
	switch (s->format) {
	case TC_RUN_MODES: {
		*ops = &tc_run_modes_ops;
		struct tc_run_modes *m =
			tc_run_modes_new(s->run_id, s->thread, s->modes, s->subgraphs, false, 0, emit, f);
		tc_run_modes_set_given(m, s->given);
		return m;
	}
	case TC_RUN_CHUNKS:
		*ops = &tc_run_chunks_ops;
		return tc_run_chunks_new(s->run_id, s->agent, false, 0, emit, f);
	case TC_RUN_NDJSON:
		*ops = &tc_run_ndjson_ops;
		return tc_run_ndjson_new(s->run_id, s->thread, s->agent, s->message, false, 0, emit, f);
	case TC_RUN_AGENT_EVENTS:
		*ops = &tc_run_agent_events_ops;
		return tc_run_agent_events_new(s->run_id, s->run_id, s->thread, s->agent ? s->agent : "", false, 0,
					       emit, f);
	}
	return NULL;
}

static void feed_free(struct tc_run_feed *f)
{
	unlist(f);
	tc_session_close(f->session);
	f->ops->free(f->fmt);
	for (size_t i = 0; i < f->count; i++)
		tc_buf_unref(at(f, f->base + i)->b);
	free(f->ring);
	f->feeds->alive--;
	free(f);
}

/* Every protocol channel: the translators choose; the SDK's stream modes also take the worker's side events. */
static const char *const channels[] = { "values", "updates",     "messages", "tools", "lifecycle",
					"input",  "checkpoints", "tasks",    "custom" };

/* A new feed for spec (listed under key when given, taking it), following the run from its start. */
static struct tc_run_feed *feed_start(struct tc_run_feeds *t, const struct tc_run_spec *spec, char *key,
				      struct tc_error *err)
{
	struct tc_run_feed *f = tc_xcalloc(1, sizeof(*f));
	f->feeds = t;
	f->cur_seq = UINT64_MAX;
	f->format = spec->format;
	f->fmt = translator(f, spec, &f->ops);
	t->alive++;
	f->session = tc_session_new(t->env, spec->thread, &feed_io, f);
	tc_session_set_spelling(f->session, TC_SPELL_021);
	cJSON *req = cJSON_CreateObject();
	cJSON *ch = cJSON_AddArrayToObject(req, "channels");
	for (size_t i = 0; i < sizeof(channels) / sizeof(channels[0]); i++)
		cJSON_AddItemToArray(ch, cJSON_CreateString(channels[i]));
	if (spec->format == TC_RUN_MODES)
		cJSON_AddItemToArray(ch, cJSON_CreateString(TC_RUN_MODES_SIDE));
	cJSON_AddNumberToObject(req, "since", (double)spec->after_seq);
	enum tc_err rc = tc_session_open_stream(f->session, req, NULL, err);
	cJSON_Delete(req);
	if (rc) {
		free(key);
		feed_free(f);
		return NULL;
	}
	if (key && !f->failed) { /* (the session may have given up at once) */
		f->key = key;
		tc_dlist_push_head(bucket(t, key), &f->hlink);
		if (++t->count > t->nbuckets)
			grow(t);
	} else {
		free(key);
	}
	return f;
}

/* Whether v can be served from f: no unit it is owed has left the log. */
static bool serves(const struct tc_run_feed *f, const struct tc_run_view *v)
{
	return f->base == 0 || f->dropped_id <= v->after || f->dropped_seq <= v->after_seq;
}

int tc_run_feed_attach(struct tc_run_feeds *t, const struct tc_run_spec *spec, struct tc_run_view *v,
		       struct tc_error *err)
{
	char *key = key_of(spec);
	struct tc_run_feed *f = lookup(t, key);
	if (f && serves(f, v)) {
		free(key);
	} else {
		/* None yet; or one that moved on without what v needs: v's own, unlisted. */
		f = feed_start(t, spec, f ? (free(key), NULL) : key, err);
		if (!f)
			return -1;
	}
	v->feed = f;
	v->next = f->base;
	v->done = false;
	tc_dlist_push_tail(&f->viewers, &v->link);
	pump(f, v);
	return 0;
}

void tc_run_feed_detach(struct tc_run_view *v)
{
	struct tc_run_feed *f = v->feed;
	if (!f)
		return;
	tc_dlist_remove(&f->viewers, &v->link);
	v->feed = NULL;
	if (!f->viewers.count)
		feed_free(f);
}
