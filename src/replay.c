#include "replay.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlist.h"
#include "log.h"
#include "metrics.h"
#include "scratch.h"
#include "tree.h"
#include "util.h"

/* Stream entries per replay round trip, and the prefetch budget of the
 * counting pass (a replay that fits is read from Redis only once). */
#define SCAN_BATCH 512
#define PREFETCH_BYTES (256 * 1024)

/* What the replay does next; advance() issues it. */
enum step {
	ST_META,   /* HMGET meta */
	ST_VALUES, /* HGETALL values (subscribe: the baseline) */
	ST_FIRST,  /* XRANGE - + COUNT 1 (reconnect: oldest seq kept) */
	ST_TREE,   /* HGETALL tree (reconnect: currentNamespaces) */
	ST_COUNT,  /* XRANGE over the replay range, counting (subscribe) */
	ST_EPOCH,  /* HGET meta epoch: the thread got its first event meanwhile */
	ST_SCAN,   /* XRANGE (pos, +], sending */
	ST_LIVE,   /* caught up: wait for the hub, then go live */
};

/* See replay.h for hist_end and start. */
struct tc_replay {
	const struct tc_config *cfg;
	struct tc_redis *redis;
	char *thread;
	struct tc_member *member;
	enum tc_frame_kind kind;
	enum tc_spelling spelling;
	bool per_subscription;
	const struct tc_replay_ops *ops;
	void *ctx;
	bool reconnect; /* else subscribe */
	bool fresh_member;
	enum step step;
	bool answered;     /* ops->answer ran */
	bool in_flight;    /* a Redis command of this replay is out */
	bool cancelled;    /* freed by its owner while in flight: the reply frees it */
	bool over;         /* fail/close/done ran: nothing more happens */
	bool starting;     /* inside tc_replay_start() */
	bool start_failed; /* ... and its first command could not be sent */
	bool wait_drain;   /* frames wait in out until the client drains */
	uint64_t hist_end, start, end, pos;
	uint64_t counted; /* subscribe: replayedEvents */
	uint64_t skipped; /* events before start left out by --max-replay */
	uint64_t run_seq, head, first;
	uint64_t entry_max;          /* meta's, when it covers every entry through head (0: not known) */
	struct tc_store_range range; /* the read in flight */
	char epoch[TC_EPOCH_MAX];    /* the thread's epoch per meta */
	struct tc_replay_from from;
	bool has_from;
	struct tc_bufq out;      /* frames ready for the client, paced */
	struct tc_bufq baseline; /* subscribe: values snapshots, sent after the answer */
	struct tc_bufq prefetch; /* subscribe: the whole replay, when small */
	bool prefetch_ok;
	bool run_over; /* subscribe: the replay holds the end of the run */
	struct tc_replay_holds *holds;
	struct tc_dlink held; /* on holds->held while its answer waits */
	uint64_t hold_since;  /* uv_now() of the last frame it served or was nudged by */
	uint64_t hold_max;    /* uv_now() past which it is not held (0: never held) */
	struct tc_redis_waiter waiter;
};

struct tc_replay_holds {
	uv_timer_t timer;
	struct tc_dlist held; /* replays whose answer waits */
	bool stopping;
};

static void advance(struct tc_replay *rp);

/* ==== lifetime ============================================================================ */

static void destroy(struct tc_replay *rp)
{
	tc_redis_wait_cancel(rp->redis, &rp->waiter);
	tc_bufq_clear(&rp->out);
	tc_bufq_clear(&rp->baseline);
	tc_bufq_clear(&rp->prefetch);
	tc_scratch_free(rp->thread);
	tc_scratch_free(rp);
}

void tc_replay_free(struct tc_replay *rp)
{
	if (!rp)
		return;
	/* Held only between Redis replies: off the list now, as the holds may
	 * be gone by the time a reply still in flight frees it. */
	if (rp->holds)
		tc_dlist_remove(&rp->holds->held, &rp->held);
	if (rp->in_flight) {
		rp->cancelled = true; /* the reply callback frees it */
		tc_redis_wait_cancel(rp->redis, &rp->waiter);
		return;
	}
	destroy(rp);
}

/* The replay failed before its answer; the session refuses the command. */
static void fail(struct tc_replay *rp, enum tc_err code, const char *message)
{
	rp->over = true;
	rp->ops->fail(rp->ctx, code, message); /* may free rp */
}

/* The replay failed after its answer; the session closes the connection. */
static void close_client(struct tc_replay *rp, enum tc_close code, const char *reason)
{
	rp->over = true;
	rp->ops->close(rp->ctx, code, reason);
}

/* ==== Redis plumbing ============================================================================= */

static void on_redis_back(struct tc_redis_waiter *w)
{
	advance((struct tc_replay *)((char *)w - offsetof(struct tc_replay, waiter)));
}

/* A command could not be sent, or its reply was lost with the link. Before
 * the answer the client is told to retry; after it, the replay resumes where
 * it was once Redis is back. */
static void redis_failed(struct tc_replay *rp)
{
	if (rp->starting) {
		rp->start_failed = true;
		return;
	}
	if (!rp->answered) {
		fail(rp, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN);
		return;
	}
	tc_redis_wait_ready(rp->redis, &rp->waiter);
}

static void command(struct tc_replay *rp, tc_redis_cb *cb, const struct tc_store_cmd *c)
{
	if (tc_redis_cmd(rp->redis, cb, rp, c->argv)) {
		redis_failed(rp);
		return;
	}
	rp->in_flight = true;
}

/* Redis answered what no replay asks for: the client is told, the replay ends. */
static void unexpected(struct tc_replay *rp, const redisReply *reply)
{
	tc_log(TC_LOG_ERROR, "unexpected Redis reply", TC_LS("thread", rp->thread),
	       TC_LS("error", reply->type == REDIS_REPLY_ERROR ? reply->str : NULL));
	if (!rp->answered)
		fail(rp, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly");
	else
		close_client(rp, TC_CLOSE_INTERNAL, "internal error while replaying");
}

/* Common head of every reply callback: false when it must stop here. */
static bool take_reply(struct tc_replay *rp, redisReply *reply, int type)
{
	assert(rp->in_flight);
	rp->in_flight = false;
	if (rp->cancelled) {
		destroy(rp);
		return false;
	}
	if (!reply) {
		redis_failed(rp);
		return false;
	}
	if (reply->type != type) {
		unexpected(rp, reply);
		return false;
	}
	return true;
}

/* take_reply() for a threadcast_range reply: its entries and whether more may follow. */
static bool take_range(struct tc_replay *rp, redisReply *reply, const redisReply **got, bool *more)
{
	if (!take_reply(rp, reply, REDIS_REPLY_ARRAY))
		return false;
	if (!tc_store_range_parse(reply, &rp->range, got, more))
		return true;
	unexpected(rp, reply);
	return false;
}

/* ==== matching and pacing ============================================================================ */

/* Whether the client is owed the event with this seq (see replay.h). */
static bool wants(const struct tc_replay *rp, const struct tc_event_key *k, uint64_t seq)
{
	if (seq <= rp->hist_end)
		return rp->ops->match(rp->ctx, k, TC_SUBS_FRESH) &&
		       (rp->per_subscription || !rp->ops->match(rp->ctx, k, TC_SUBS_OLD));
	if (seq < rp->start)
		return rp->ops->match(rp->ctx, k, TC_SUBS_OLD);
	return rp->ops->match(rp->ctx, k, TC_SUBS_ANY);
}

/* Moves frames to the client while it has room. True when out is empty. */
static bool pump(struct tc_replay *rp)
{
	const size_t room = (size_t)rp->cfg->max_queue_bytes / 2;
	while (tc_bufq_peek(&rp->out) && rp->ops->queued(rp->ctx) < room)
		rp->ops->send(rp->ctx, tc_bufq_pop(&rp->out));
	if (!rp->out.count)
		return true;
	rp->wait_drain = true;
	return false;
}

void tc_replay_drained(struct tc_replay *rp)
{
	if (!rp->wait_drain)
		return;
	rp->wait_drain = false;
	advance(rp);
}

void tc_replay_ready(struct tc_replay *rp)
{
	if (rp->step == ST_LIVE)
		advance(rp);
}

static void queue_frame(struct tc_replay *rp, struct tc_buf *b)
{
	tc_metrics.events_delivered++;
	tc_metrics.replayed_events++;
	tc_bufq_push(&rp->out, b);
}

/* A replayed event framed for this client (one reference). */
static struct tc_buf *replay_frame(struct tc_replay *rp, uint64_t seq, const char *method, size_t mlen,
				   const char *json, size_t jlen)
{
	struct tc_event ev = {
		.epoch = rp->epoch, .seq = seq, .method = method, .method_len = mlen, .json = json, .json_len = jlen
	};
	struct tc_buf *b = tc_buf_ref(tc_event_frame(&ev, rp->kind, rp->spelling));
	tc_event_release(&ev);
	return b;
}

/* ==== steps ============================================================================================ */

/*
 * Bounds the work one request can ask for: a replay from start to end that
 * is longer than --max-replay begins at the newest --max-replay events
 * instead; what it leaves out is counted in skipped.
 */
static void cap_replay(struct tc_replay *rp)
{
	const uint64_t max = (uint64_t)rp->cfg->max_replay;
	if (rp->end < rp->start || rp->end - rp->start < max)
		return;
	uint64_t start = rp->end - max + 1;
	rp->skipped += start - rp->start;
	rp->start = start;
	tc_metrics.replays_capped++;
}

/*
 * A connection that joins the thread with this command has no history on
 * it: what comes before the replay range (the run's start, or the client's
 * lastEventId) is accounted for, by definition. The member's cursor says so
 * too — else a replay that finds nothing to send (a reconnect at the head of
 * an idle thread) would never catch up with the hub and read the stream
 * again and again.
 */
static void history_ends(struct tc_replay *rp, uint64_t seq)
{
	rp->hist_end = seq;
	tc_hub_advance(rp->member, seq);
}

static void on_meta(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;
	struct tc_store_meta m;

	if (!take_reply(rp, reply, REDIS_REPLY_ARRAY))
		return;
	if (tc_store_meta_parse(reply, &m)) {
		fail(rp, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly");
		return;
	}
	rp->head = m.seq;
	/* Measured through the head, or not at all: entries after entry_seq were
	 * appended by an earlier version (a rolling deploy), of unknown size. */
	rp->entry_max = m.epoch_len && m.entry_seq == m.seq ? m.entry_max : 0;
	rp->run_over = m.run_over;
	memcpy(rp->epoch, m.epoch, m.epoch_len);
	rp->epoch[m.epoch_len] = '\0';
	rp->run_seq = m.run_seq ? m.run_seq : 1;
	rp->end = rp->head;
	if (rp->reconnect) {
		rp->step = ST_FIRST;
	} else {
		if (rp->ops->gather)
			rp->ops->gather(rp->ctx);
		rp->start = rp->run_seq;
		cap_replay(rp);
		if (rp->fresh_member)
			history_ends(rp, rp->start - 1);
		rp->pos = rp->start - 1;
		rp->step = ST_VALUES;
	}
	advance(rp);
}

struct snapshot {
	uint64_t seq;
	const char *json;
	size_t len;
};

static int cmp_snapshot(const void *a, const void *b)
{
	const struct snapshot *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Values snapshots older than the replay that the fresh subscription wants. */
static void on_values(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;

	if (!take_reply(rp, reply, REDIS_REPLY_ARRAY))
		return;
	struct tc_store_pair *pairs = tc_xcalloc(reply->elements / 2 + 1, sizeof(*pairs));
	size_t npairs = tc_store_pairs(reply, pairs);
	struct snapshot *base = tc_xcalloc(npairs + 1, sizeof(*base));
	size_t nbase = 0;
	for (size_t i = 0; i < npairs; i++) {
		struct tc_event_key key;
		struct snapshot sn;
		if (tc_store_values_parse(pairs[i].value, pairs[i].value_len, &sn.seq, &sn.json, &sn.len) ||
		    sn.seq >= rp->start || sn.seq > rp->hist_end ||
		    tc_event_key_init(&key, "values", 6, pairs[i].key, pairs[i].key_len))
			continue;
		if (!rp->ops->match(rp->ctx, &key, TC_SUBS_FRESH) ||
		    (!rp->per_subscription && rp->ops->match(rp->ctx, &key, TC_SUBS_OLD)))
			continue;
		if (rp->ops->tally)
			rp->ops->tally(rp->ctx, &key);
		base[nbase++] = sn;
	}
	/* Oldest first, so the connection's seqs still rise. */
	qsort(base, nbase, sizeof(*base), cmp_snapshot);
	for (size_t i = 0; i < nbase; i++)
		tc_bufq_push(&rp->baseline, replay_frame(rp, base[i].seq, "values", 6, base[i].json, base[i].len));
	rp->counted += nbase;
	free(base);
	free(pairs);
	rp->step = ST_COUNT;
	rp->prefetch_ok = rp->hist_end + 1 >= rp->start;
	advance(rp);
}

/* The count is known: answer, then baseline, then the replay, then live. */
static void answer_subscribe(struct tc_replay *rp)
{
	struct tc_replay_answer a = { .applied = rp->end,
				      .replayed = rp->counted,
				      .restored = !rp->skipped,
				      .has_missed = rp->skipped != 0,
				      .missed = rp->skipped };
	struct tc_buf *b;

	rp->answered = true;
	rp->ops->answer(rp->ctx, &a);
	while ((b = tc_bufq_pop(&rp->baseline)))
		queue_frame(rp, b);
	if (rp->prefetch_ok) {
		while ((b = tc_bufq_pop(&rp->prefetch)))
			queue_frame(rp, b);
		rp->pos = rp->end;
		tc_hub_advance(rp->member, rp->end);
	} else {
		rp->pos = (rp->hist_end + 1 < rp->start ? rp->hist_end + 1 : rp->start) - 1;
	}
	rp->step = ST_SCAN;
	advance(rp);
}

/* ==== held answers (replay.h) ================================================================ */

static void arm_holds(struct tc_replay_holds *h);

/* Whether rp's answer waits for subscribes that may follow; it waits on h->held. */
static bool hold(struct tc_replay *rp)
{
	struct tc_replay_holds *h = rp->holds;

	if (!h || h->stopping || !rp->run_over || !rp->ops->may_hold || !rp->ops->may_hold(rp->ctx))
		return false;
	uint64_t now = uv_now(h->timer.loop);
	if (!rp->hold_max) {
		rp->hold_max = now + TC_REPLAY_HOLD_MAX_MS;
		tc_metrics.replays_held++;
	}
	if (now >= rp->hold_max)
		return false;
	/* Each wait starts at the last frame (the command served, or one that nudged). */
	tc_dlist_push_tail(&h->held, &rp->held);
	arm_holds(h);
	return true;
}

/* When rp's wait ends: quiet since its last frame, and within its longest wait. */
static uint64_t hold_until(const struct tc_replay *rp)
{
	uint64_t quiet = rp->hold_since + TC_REPLAY_HOLD_QUIET_MS;
	return quiet < rp->hold_max ? quiet : rp->hold_max;
}

static void counted_all(struct tc_replay *rp);

/* The held replay whose wait ends first; NULL when none waits. */
static struct tc_replay *first_due(const struct tc_replay_holds *h, uint64_t *at)
{
	struct tc_replay *first = NULL;

	*at = UINT64_MAX;
	for (struct tc_dlink *n = h->held.head; n; n = n->next) {
		struct tc_replay *rp = TC_DLIST_ENTRY(n, struct tc_replay, held);
		uint64_t until = hold_until(rp);
		if (until < *at || !first) {
			first = rp;
			*at = until;
		}
	}
	return first;
}

static void on_holds_timer(uv_timer_t *t)
{
	struct tc_replay_holds *h = t->data;
	uint64_t now = uv_now(t->loop), at;
	struct tc_replay *rp;

	/* A handful wait at a time; answering one may change the list. */
	while ((rp = first_due(h, &at)) && at <= now) {
		tc_dlist_remove(&h->held, &rp->held);
		rp->hold_max = now; /* no second wait: answer */
		counted_all(rp);
	}
	arm_holds(h);
}

static void arm_holds(struct tc_replay_holds *h)
{
	uint64_t at, now = uv_now(h->timer.loop);

	if (!first_due(h, &at))
		uv_timer_stop(&h->timer);
	else
		uv_timer_start(&h->timer, on_holds_timer, at > now ? at - now : 0, 0);
}

struct tc_replay_holds *tc_replay_holds_new(uv_loop_t *loop)
{
	struct tc_replay_holds *h = tc_xcalloc(1, sizeof(*h));
	uv_timer_init(loop, &h->timer);
	h->timer.data = h;
	return h;
}

void tc_replay_holds_stop(struct tc_replay_holds *h)
{
	struct tc_dlink *n;

	h->stopping = true;
	while ((n = h->held.head)) {
		tc_dlist_remove(&h->held, n);
		counted_all(TC_DLIST_ENTRY(n, struct tc_replay, held));
	}
	uv_close((uv_handle_t *)&h->timer, NULL);
}

void tc_replay_holds_free(struct tc_replay_holds *h)
{
	if (!h)
		return;
	assert(!h->held.head);
	free(h);
}

void tc_replay_nudge(struct tc_replay *rp)
{
	struct tc_replay_holds *h = rp->holds;

	if (!h || !tc_dlist_linked(&h->held, &rp->held))
		return;
	tc_dlist_remove(&h->held, &rp->held);
	rp->hold_since = uv_now(h->timer.loop);
	counted_all(rp); /* gathers what arrived, or answers (rp may be gone after) */
	arm_holds(h);
}

/* The count is done: answer, unless more subscriptions joined meanwhile or may still join. */
static void counted_all(struct tc_replay *rp)
{
	if (rp->ops->gather && rp->ops->gather(rp->ctx)) {
		/* Count again, for all of them: nothing has been sent yet. */
		rp->counted = rp->skipped = 0;
		tc_bufq_clear(&rp->baseline);
		tc_bufq_clear(&rp->prefetch);
		rp->step = ST_META;
		advance(rp);
		return;
	}
	if (hold(rp))
		return;
	answer_subscribe(rp);
}

static void on_count(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;
	const redisReply *got;
	bool more;

	if (!take_range(rp, reply, &got, &more))
		return;
	for (size_t i = 0; i < got->elements; i++) {
		struct tc_stream_entry e;
		struct tc_event_key key;
		if (tc_store_entry_parse(got->element[i], &e) || e.seq > rp->end)
			continue;
		rp->pos = e.seq;
		if (tc_event_key_init(&key, e.method, e.method_len, e.ns, e.ns_len))
			continue;
		bool wanted = wants(rp, &key, e.seq);
		if (wanted && rp->ops->match(rp->ctx, &key, TC_SUBS_FRESH)) {
			rp->counted++;
			if (rp->ops->tally)
				rp->ops->tally(rp->ctx, &key);
		}
		if (!rp->prefetch_ok || !wanted)
			continue;
		if (rp->prefetch.bytes + e.json_len > PREFETCH_BYTES || more) {
			/* Too big to hold: the sending pass reads it again. */
			tc_bufq_clear(&rp->prefetch);
			rp->prefetch_ok = false;
			continue;
		}
		tc_bufq_push(&rp->prefetch, replay_frame(rp, e.seq, e.method, e.method_len, e.json, e.json_len));
	}
	if (more && rp->pos < rp->end) {
		advance(rp); /* more to count */
		return;
	}
	counted_all(rp);
}

static void on_scan(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;
	const size_t budget = (size_t)rp->cfg->max_queue_bytes / 2;
	bool stopped = false, more;
	const redisReply *got;

	if (!take_range(rp, reply, &got, &more))
		return;
	if (!rp->epoch[0] && got->elements) {
		/* The thread had no history when meta was read: learn the epoch
		 * of the one that began since, then read this batch again. */
		rp->step = ST_EPOCH;
		advance(rp);
		return;
	}
	for (size_t i = 0; i < got->elements; i++) {
		struct tc_stream_entry e;
		struct tc_event_key key;
		if (tc_store_entry_parse(got->element[i], &e) || e.seq <= rp->pos)
			continue;
		if (rp->out.bytes >= budget) {
			stopped = true; /* the rest is read again after the client drains */
			break;
		}
		rp->pos = e.seq;
		if (e.seq > rp->hist_end)
			tc_hub_advance(rp->member, e.seq);
		if (!tc_event_key_init(&key, e.method, e.method_len, e.ns, e.ns_len) && wants(rp, &key, e.seq))
			queue_frame(rp, replay_frame(rp, e.seq, e.method, e.method_len, e.json, e.json_len));
	}
	if (!stopped && !more)
		rp->step = ST_LIVE;
	advance(rp);
}

/* subscription.reconnect: decide, answer, then replay. */
static void on_tree(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;
	struct tc_replay_answer a = { .applied = rp->head, .restored = true };

	if (!take_reply(rp, reply, REDIS_REPLY_ARRAY))
		return;
	if (rp->from.any_epoch)
		memcpy(rp->from.epoch, rp->epoch, sizeof(rp->epoch));
	if (rp->has_from) {
		if (!rp->epoch[0] || strcmp(rp->epoch, rp->from.epoch)) {
			/* Redis lost the history the client knew: the count is unknowable. */
			a.restored = false;
			rp->start = rp->first ? rp->first : 1;
		} else if (rp->from.seq + 1 < rp->first) {
			a.restored = false;
			a.has_missed = true;
			a.missed = rp->first - rp->from.seq - 1;
			rp->start = rp->first;
		} else {
			rp->start = rp->from.seq + 1;
		}
	} else {
		rp->start = rp->run_seq;
	}
	cap_replay(rp);
	if (rp->skipped) {
		/* Too far behind to replay all of it: the newest --max-replay events
		 * come, the rest is missed (added to what trimming took, if known). */
		if (a.has_missed || a.restored) {
			a.has_missed = true;
			a.missed += rp->skipped;
		}
		a.restored = false;
	}
	struct tc_store_pair *pairs = tc_xcalloc(reply->elements / 2 + 1, sizeof(*pairs));
	size_t npairs = tc_store_pairs(reply, pairs);
	tc_tree_sort(pairs, npairs);
	a.namespaces = tc_tree_namespaces(pairs, npairs);
	free(pairs);
	if (rp->fresh_member)
		history_ends(rp, rp->start - 1);
	rp->pos = (rp->hist_end + 1 < rp->start ? rp->hist_end + 1 : rp->start) - 1;
	rp->answered = true;
	rp->ops->answer(rp->ctx, &a);
	cJSON_Delete(a.namespaces); /* NULL when the session took it */
	rp->step = ST_SCAN;
	advance(rp);
}

static void on_epoch(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;

	if (!take_reply(rp, reply, reply && reply->type == REDIS_REPLY_NIL ? REDIS_REPLY_NIL : REDIS_REPLY_STRING))
		return;
	if (reply->type != REDIS_REPLY_STRING || reply->len >= TC_EPOCH_MAX) {
		/* Events without meta: someone deleted it; the history is unusable. */
		close_client(rp, TC_CLOSE_HISTORY_RESET, "the thread's history is inconsistent; reconnect");
		return;
	}
	memcpy(rp->epoch, reply->str, reply->len);
	rp->epoch[reply->len] = '\0';
	rp->step = ST_SCAN;
	advance(rp);
}

static void on_first(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_replay *rp = priv;
	struct tc_stream_entry e;

	if (!take_reply(rp, reply, REDIS_REPLY_ARRAY))
		return;
	rp->first = reply->elements && !tc_store_entry_parse(reply->element[0], &e) ? e.seq : rp->head + 1;
	rp->step = ST_TREE;
	advance(rp);
}

/* The events after pos, through seq through (0: to the end), bounded by what meta said. */
static void read_range(struct tc_replay *rp, struct tc_store_cmd *c, uint64_t through)
{
	rp->range = (struct tc_store_range){ .after = rp->pos, .through = through, .count = SCAN_BATCH };
	tc_store_read_range(c, rp->thread, &rp->range,
			    &(struct tc_store_bound){ .head = rp->head, .entry_max = rp->entry_max });
}

/* Issues the replay's next Redis command, or goes live. */
static void advance(struct tc_replay *rp)
{
	struct tc_store_cmd c;

	if (rp->over || rp->in_flight || !pump(rp))
		return;
	switch (rp->step) {
	case ST_META:
		tc_store_read_meta(&c, rp->thread);
		command(rp, on_meta, &c);
		break;
	case ST_VALUES:
		tc_store_read_index(&c, rp->thread, TC_KEY_VALUES);
		command(rp, on_values, &c);
		break;
	case ST_FIRST:
		tc_store_read_first(&c, rp->thread);
		command(rp, on_first, &c);
		break;
	case ST_TREE:
		tc_store_read_index(&c, rp->thread, TC_KEY_TREE);
		command(rp, on_tree, &c);
		break;
	case ST_COUNT:
		if (rp->pos >= rp->end) {
			counted_all(rp); /* empty range: nothing to count */
			break;
		}
		read_range(rp, &c, rp->end);
		command(rp, on_count, &c);
		break;
	case ST_EPOCH:
		tc_store_read_epoch(&c, rp->thread);
		command(rp, on_epoch, &c);
		break;
	case ST_SCAN:
		read_range(rp, &c, 0);
		command(rp, on_scan, &c);
		break;
	case ST_LIVE:
		switch (tc_hub_go_live(rp->member)) {
		case TC_LIVE_WAIT:
			return; /* tc_replay_ready() calls again */
		case TC_LIVE_BEHIND:
			rp->step = ST_SCAN; /* the hub moved on while we read: read on */
			advance(rp);
			return;
		case TC_LIVE:
			rp->over = true;
			rp->ops->done(rp->ctx); /* may free rp */
			return;
		}
		break;
	}
}

struct tc_replay *tc_replay_start(const struct tc_replay_start *s)
{
	if (!tc_redis_cmd_up(s->redis))
		return NULL;
	/* Request-lived: scratch memory, apart from the connections' (scratch.h). */
	struct tc_replay *rp = tc_scratch_zalloc(sizeof(*rp));
	rp->cfg = s->cfg;
	rp->redis = s->redis;
	rp->thread = tc_scratch_strdup(s->thread);
	rp->member = s->member;
	rp->fresh_member = s->fresh_member;
	rp->kind = s->kind;
	rp->spelling = s->spelling;
	rp->per_subscription = s->per_subscription;
	rp->ops = s->ops;
	rp->ctx = s->ctx;
	rp->waiter.fn = on_redis_back;
	rp->reconnect = s->reconnect;
	rp->holds = s->holds;
	rp->hold_since = s->holds ? uv_now(s->holds->timer.loop) : 0;
	if (s->from) {
		rp->has_from = true;
		rp->from = *s->from;
	}
	rp->step = ST_META;
	/* Until caught up again, what the hub fans out is read from the stream
	 * instead; everything up to the cursor is accounted for. */
	tc_hub_pause(rp->member);
	rp->hist_end = rp->member->cursor;
	rp->starting = true;
	advance(rp);
	rp->starting = false;
	if (rp->start_failed) {
		destroy(rp);
		return NULL;
	}
	return rp;
}
