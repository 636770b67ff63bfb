#include "hub.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

/* Stream entries read per gap-fill round trip. */
#define FILL_BATCH 512

/*
 * The doorbell subscription of a thread. At most one SUBSCRIBE or
 * UNSUBSCRIBE of a channel is in flight at a time, so every confirmation
 * Redis sends can be matched to the command that caused it.
 */
enum sub_state { SUB_NONE, SUB_PENDING, SUB_ACTIVE, SUB_LEAVING };

struct tc_thread {
	struct tc_hub *hub;
	char *id;
	char channel[TC_STORE_KEY_MAX]; /* "tc:{id}:live" */
	struct tc_thread *hnext;        /* hash chain */
	struct tc_dlist members;        /* of struct tc_member, by link */
	unsigned inflight;              /* Redis commands whose callback is pending */
	bool detached;                  /* out of the table; freed when inflight drops to 0 */
	enum sub_state sub;             /* the doorbell SSUBSCRIBE, see on_pubsub_* below */
	unsigned sub_node;              /* the Redis node it went to (tc_redis_subscribe) */
	bool synced;                    /* head and epoch read since the last SUBSCRIBE */
	bool syncing, filling;          /* a meta read / an XRANGE fill is in flight */
	bool rang_while_filling;        /* a doorbell arrived during the fill */
	uint64_t head;                  /* highest seq fanned out */
	uint64_t heard;                 /* highest seq a doorbell announced */
	char epoch[TC_EPOCH_MAX];       /* "" until the thread's first event */
};

struct tc_hub {
	const struct tc_config *cfg;
	struct tc_redis *redis;
	struct tc_thread **buckets;
	size_t nbuckets, nthreads;
};

#define MEMBER_OF(n) TC_DLIST_ENTRY(n, struct tc_member, link)

static void sync_thread(struct tc_thread *t);
static void fill(struct tc_thread *t);

/* ==== the thread table ======================================================================= */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static struct tc_thread **slot_of(struct tc_hub *hub, const char *id)
{
	struct tc_thread **p = &hub->buckets[hash_str(id) & (hub->nbuckets - 1)];
	while (*p && strcmp((*p)->id, id))
		p = &(*p)->hnext;
	return p;
}

static void grow(struct tc_hub *hub)
{
	size_t n = hub->nbuckets * 2;
	struct tc_thread **b = tc_xcalloc(n, sizeof(*b));
	for (size_t i = 0; i < hub->nbuckets; i++) {
		struct tc_thread *t = hub->buckets[i], *next;
		for (; t; t = next) {
			next = t->hnext;
			size_t j = hash_str(t->id) & (n - 1);
			t->hnext = b[j];
			b[j] = t;
		}
	}
	free(hub->buckets);
	hub->buckets = b;
	hub->nbuckets = n;
}

/* The thread of a doorbell channel "tc:{<id>}:live", or NULL. */
static struct tc_thread *thread_of_channel(struct tc_hub *hub, const char *ch, size_t len)
{
	char id[TC_THREAD_ID_MAX + 1];
	return tc_store_live_thread(ch, len, id) ? NULL : *slot_of(hub, id);
}

static void thread_free(struct tc_thread *t)
{
	assert(!t->inflight && !t->members.count);
	free(t->id);
	free(t);
}

/* A Redis callback of t finished; frees t if it was waiting for that. */
static bool thread_release(struct tc_thread *t)
{
	assert(t->inflight > 0);
	t->inflight--;
	if (t->detached) {
		if (!t->inflight)
			thread_free(t);
		return true;
	}
	return false;
}

/* ==== fan-out ================================================================================= */

static void deliver(struct tc_thread *t, uint64_t seq, const char *method, size_t mlen, const char *ns, size_t nlen,
		    const char *json, size_t jlen)
{
	struct tc_event_key key;
	struct tc_event ev = { .epoch = t->epoch,
			       .seq = seq,
			       .method = method,
			       .method_len = mlen,
			       .ns = ns,
			       .ns_len = nlen,
			       .json = json,
			       .json_len = jlen };

	t->head = seq;
	if (tc_event_key_init(&key, method, mlen, ns, nlen))
		return; /* not an event method: the function never writes one */
	for (struct tc_dlink *n = t->members.head; n; n = n->next) {
		struct tc_member *m = MEMBER_OF(n);
		if (!m->live || seq <= m->cursor)
			continue;
		m->cursor = seq;
		if (m->ops->match(m, &key))
			m->ops->send(m, &ev); /* frames are built once, on first need */
	}
	tc_event_release(&ev);
}

/* Members that cannot be served the thread's history any more are told so. */
static void lose_members(struct tc_thread *t, bool only_live, const char *why)
{
	for (struct tc_dlink *n = t->members.head; n; n = n->next) {
		struct tc_member *m = MEMBER_OF(n);
		if (!only_live || m->live)
			m->ops->lost(m, why);
	}
}

static void notify_ready(struct tc_thread *t)
{
	/* ready() may detach nothing (detaching happens on close, later), so
	 * iterating is safe. */
	for (struct tc_dlink *n = t->members.head; n; n = n->next) {
		struct tc_member *m = MEMBER_OF(n);
		if (!m->live)
			m->ops->ready(m);
	}
}

static void new_epoch(struct tc_thread *t, const char *why)
{
	tc_log(TC_LOG_WARN, "thread history reset", TC_LS("thread", t->id), TC_LS("why", why));
	lose_members(t, false, "the thread's history was reset (Redis lost it); reconnect to resync");
	/* Start over from what Redis holds now. */
	t->synced = false;
	t->head = t->heard = 0;
	t->epoch[0] = '\0';
	if (t->sub == SUB_ACTIVE && !t->syncing)
		sync_thread(t);
}

/* ==== gap fill ==================================================================================== */

static void on_fill(struct tc_redis *r, redisReply *reply, void *privdata)
{
	struct tc_thread *t = privdata;
	const redisReply *got;
	bool more;

	t->filling = false;
	if (thread_release(t))
		return;
	if (!reply || tc_store_range_parse(reply, NULL, &got, &more)) {
		/* Redis went away mid-fill; cmd_up resumes it. */
		return;
	}
	for (size_t i = 0; i < got->elements; i++) {
		struct tc_stream_entry e;
		if (tc_store_entry_parse(got->element[i], &e) || e.seq <= t->head)
			continue;
		if (e.seq != t->head + 1) {
			/* The stream was trimmed past events we never delivered. */
			tc_log(TC_LOG_WARN, "events trimmed before delivery", TC_LS("thread", t->id),
			       TC_LI("from", t->head + 1), TC_LI("to", e.seq - 1));
			lose_members(t, true,
				     "events were trimmed before they could be delivered; reconnect to resync");
		}
		deliver(t, e.seq, e.method, e.method_len, e.ns, e.ns_len, e.json, e.json_len);
	}
	/* The end of the stream was reached: whatever is newer rings its own
	 * doorbell. Only a doorbell during the read calls for another. */
	bool again = more || t->rang_while_filling;
	t->rang_while_filling = false;
	if (again)
		fill(t);
	else
		t->heard = t->head;
}

static void fill(struct tc_thread *t)
{
	struct tc_store_cmd c;

	if (t->filling || !t->synced)
		return;
	/* Gaps are rare, and often big events (a thin doorbell): read with no
	 * bound, so with threadcast_range, whose byte bound is exact. */
	struct tc_store_range r = { .after = t->head, .count = FILL_BATCH };
	tc_store_read_range(&c, t->id, &r, NULL);
	tc_log(TC_LOG_DEBUG, "filling gap", TC_LS("thread", t->id), TC_LI("after", t->head), TC_LI("heard", t->heard));
	if (tc_redis_cmd(t->hub->redis, on_fill, t, c.argv) == 0) {
		tc_metrics.gap_fills++;
		t->filling = true;
		t->inflight++;
	}
}

/* ==== sync: where does the thread stand? ============================================================ */

static void on_sync(struct tc_redis *r, redisReply *reply, void *privdata)
{
	struct tc_thread *t = privdata;

	t->syncing = false;
	if (thread_release(t))
		return;
	struct tc_store_meta m;
	if (!reply || tc_store_meta_parse(reply, &m) || t->sub != SUB_ACTIVE)
		return; /* retried on cmd_up / next subscribe */
	uint64_t s = m.seq;
	const char *e = m.epoch;

	if (t->epoch[0] && strcmp(t->epoch, e)) {
		new_epoch(t, *e ? "epoch changed" : "thread vanished from Redis");
		return;
	}
	if (!t->epoch[0] && t->head) {
		new_epoch(t, "thread vanished from Redis");
		return;
	}
	if (!*e && t->heard > s) {
		/* The thread began while this was read: read again, for its epoch.
		 * Filling from the stream instead would deliver events of a history
		 * whose epoch the hub does not know. Only a later doorbell asks
		 * again: a thread deleted as soon as it began is read once more. */
		t->heard = s;
		sync_thread(t);
		return;
	}
	tc_log(TC_LOG_DEBUG, "thread synced", TC_LS("thread", t->id), TC_LI("seq", s), TC_LI("head", t->head),
	       TC_LS("epoch", e));
	snprintf(t->epoch, sizeof(t->epoch), "%s", e);
	if (!t->synced && !t->head) {
		/* First sync: members catch up by themselves from here. */
		t->head = s;
	}
	if (s > t->heard)
		t->heard = s;
	t->synced = true;
	notify_ready(t);
	if (t->heard > t->head)
		fill(t);
}

static void sync_thread(struct tc_thread *t)
{
	struct tc_store_cmd c;

	if (t->syncing)
		return;
	tc_store_read_head(&c, t->id);
	if (tc_redis_cmd(t->hub->redis, on_sync, t, c.argv) == 0) {
		t->syncing = true;
		t->inflight++;
	}
}

/* ==== doorbells ===================================================================================== */

/*
 * One event of a doorbell. Returns false when the rest of the doorbell must
 * be dropped: the thread is being resynced (a new epoch), or a gap is being
 * filled from the stream (which reads the rest too).
 */
static bool ring(struct tc_thread *t, const struct tc_doorbell *d)
{
	uint64_t seq = d->seq;
	if (seq > t->heard)
		t->heard = seq;
	if (!t->synced)
		return true; /* the sync that follows every SUBSCRIBE catches up */

	bool same_epoch = strlen(t->epoch) == d->epoch_len && !memcmp(t->epoch, d->epoch, d->epoch_len);
	if (!same_epoch) {
		if (t->epoch[0] || t->head) {
			new_epoch(t, "epoch changed");
			return false;
		}
		/* The thread's very first event: adopt its epoch. */
		memcpy(t->epoch, d->epoch, d->epoch_len);
		t->epoch[d->epoch_len] = '\0';
	}
	if (seq <= t->head)
		return true;
	if (seq == t->head + 1 && !t->filling && d->json) {
		deliver(t, seq, d->method, d->method_len, d->ns, d->ns_len, d->json, d->json_len);
		return true;
	}
	if (t->filling)
		t->rang_while_filling = true;
	fill(t);
	return false;
}

/*
 * A doorbell carries the events of one append call: one, or a batch, or
 * (when they are big) only the seq of the last, a gap to fill. Each
 * is delivered from the message itself while the seqs follow on; a malformed
 * message is dropped whole (checked before anything is delivered), and the
 * next doorbell's gap brings its events from the stream.
 */
static void on_message(void *ctx, const char *ch, size_t clen, const char *data, size_t dlen)
{
	struct tc_hub *hub = ctx;
	struct tc_thread *t = thread_of_channel(hub, ch, clen);
	struct tc_doorbell_reader r;
	struct tc_doorbell d;
	int rc;

	if (!t)
		return;
	if (tc_store_doorbell_open(&r, data, dlen)) {
		tc_log(TC_LOG_WARN, "malformed doorbell ignored", TC_LS("thread", t->id));
		return;
	}
	struct tc_doorbell_reader check = r;
	while ((rc = tc_store_doorbell_next(&check, &d)) == 1)
		;
	if (rc < 0) {
		tc_log(TC_LOG_WARN, "malformed doorbell ignored", TC_LS("thread", t->id));
		return;
	}
	while (tc_store_doorbell_next(&r, &d) == 1 && ring(t, &d))
		;
}

static void thread_unlink(struct tc_thread *t)
{
	*slot_of(t->hub, t->id) = t->hnext;
	t->hub->nthreads--;
	if (t->inflight)
		t->detached = true;
	else
		thread_free(t);
}

static void subscribe(struct tc_thread *t)
{
	t->synced = false;
	t->sub_node = tc_redis_subscribe(t->hub->redis, t->channel);
	t->sub = t->sub_node ? SUB_PENDING : SUB_NONE;
}

static void on_subscribed(void *ctx, const char *ch, size_t clen)
{
	struct tc_thread *t = thread_of_channel(ctx, ch, clen);
	tc_log(TC_LOG_DEBUG, "doorbell subscribed", TC_LS("thread", t ? t->id : NULL),
	       TC_LI("state", t ? (int)t->sub : -1));
	if (!t || t->sub != SUB_PENDING)
		return; /* confirms a SUBSCRIBE already being undone */
	t->sub = SUB_ACTIVE;
	sync_thread(t);
}

static void left(struct tc_thread *t)
{
	if (t->members.count)
		subscribe(t); /* someone came back while we were leaving */
	else
		thread_unlink(t);
}

static void on_unsubscribed(void *ctx, const char *ch, size_t clen)
{
	struct tc_thread *t = thread_of_channel(ctx, ch, clen);
	if (!t || t->sub == SUB_NONE)
		return;
	if (t->sub == SUB_LEAVING) {
		left(t);
		return;
	}
	/* Unasked: Redis dropped the channel (its slot moved to another
	 * master). Subscribe again; its sync fills what was missed. */
	tc_log(TC_LOG_INFO, "doorbell dropped by redis; subscribing again", TC_LS("thread", t->id));
	subscribe(t);
}

static void on_refused(void *ctx, const char *ch, size_t clen)
{
	struct tc_thread *t = thread_of_channel(ctx, ch, clen);
	if (!t || t->sub == SUB_NONE)
		return;
	if (t->sub == SUB_LEAVING) {
		left(t); /* not subscribed there either way */
		return;
	}
	t->synced = false;
	t->sub = SUB_NONE; /* on_sub_up tries again, once the slot map is re-read */
}

static void for_each_thread(struct tc_hub *hub, void (*fn)(struct tc_thread *))
{
	for (size_t i = 0; i < hub->nbuckets; i++)
		for (struct tc_thread *t = hub->buckets[i], *next; t; t = next) {
			next = t->hnext; /* fn may unlink t */
			fn(t);
		}
}

static void resubscribe(struct tc_thread *t)
{
	if (t->sub == SUB_NONE)
		subscribe(t);
}

static void on_sub_up(void *ctx)
{
	for_each_thread(ctx, resubscribe);
}

static void link_lost(struct tc_thread *t)
{
	/* Doorbells are lost until the next SUBSCRIBE; its sync fills the gap. */
	t->synced = false;
	t->sub = SUB_NONE;
	if (!t->members.count)
		thread_unlink(t);
}

static void on_sub_down(void *ctx, unsigned node)
{
	struct tc_hub *hub = ctx;
	for (size_t i = 0; i < hub->nbuckets; i++)
		for (struct tc_thread *t = hub->buckets[i], *next; t; t = next) {
			next = t->hnext; /* link_lost may unlink t */
			if (t->sub != SUB_NONE && t->sub_node == node)
				link_lost(t);
		}
}

static void resume(struct tc_thread *t)
{
	if (t->sub == SUB_ACTIVE && !t->synced)
		sync_thread(t);
	else if (t->synced && t->heard > t->head)
		fill(t);
}

static void on_cmd_up(void *ctx)
{
	for_each_thread(ctx, resume);
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

/* ==== members ======================================================================================== */

struct tc_hub *tc_hub_new(const struct tc_config *cfg, struct tc_redis *redis)
{
	struct tc_hub *hub = tc_xcalloc(1, sizeof(*hub));
	hub->cfg = cfg;
	hub->redis = redis;
	hub->nbuckets = 64;
	hub->buckets = tc_xcalloc(hub->nbuckets, sizeof(*hub->buckets));
	tc_redis_add_listener(redis, TC_STORE_LIVE_PREFIX, &listener, hub);
	return hub;
}

void tc_hub_free(struct tc_hub *hub)
{
	if (!hub)
		return;
	/* Threads still in the table have members; that is a caller bug. */
	for (size_t i = 0; i < hub->nbuckets; i++)
		for (struct tc_thread *t = hub->buckets[i], *n; t; t = n) {
			n = t->hnext;
			if (t->inflight)
				t->detached = true; /* freed by its last callback */
			else
				thread_free(t);
		}
	free(hub->buckets);
	free(hub);
}

void tc_hub_attach(struct tc_hub *hub, const char *thread_id, struct tc_member *m)
{
	struct tc_thread **slot = slot_of(hub, thread_id), *t = *slot;

	if (!t) {
		if (hub->nthreads >= hub->nbuckets) {
			grow(hub);
			slot = slot_of(hub, thread_id);
		}
		t = tc_xcalloc(1, sizeof(*t));
		t->hub = hub;
		t->id = tc_xstrdup(thread_id);
		tc_store_key(t->channel, thread_id, TC_KEY_LIVE);
		*slot = t;
		hub->nthreads++;
		subscribe(t); /* or on_sub_up, when the link is down now */
	}
	assert(!m->thread);
	m->thread = t;
	m->cursor = 0;
	m->live = false;
	tc_dlist_push_tail(&t->members, &m->link); /* served in the order they came */
}

void tc_hub_detach(struct tc_hub *hub, struct tc_member *m)
{
	struct tc_thread *t = m->thread;

	if (!t)
		return;
	tc_dlist_remove(&t->members, &m->link);
	m->thread = NULL;
	m->live = false;
	if (t->members.count)
		return;
	/* Last one out: stop watching. The thread stays in the table until
	 * Redis confirms, so a SUBSCRIBE for a returning member cannot cross
	 * the UNSUBSCRIBE. */
	if (t->sub == SUB_LEAVING)
		return;
	if ((t->sub == SUB_ACTIVE || t->sub == SUB_PENDING) &&
	    tc_redis_unsubscribe(hub->redis, t->sub_node, t->channel) == 0) {
		t->sub = SUB_LEAVING;
		t->synced = false;
		return;
	}
	thread_unlink(t);
}

void tc_hub_pause(struct tc_member *m)
{
	assert(m->thread);
	m->live = false;
}

void tc_hub_advance(struct tc_member *m, uint64_t seq)
{
	assert(m->thread && !m->live);
	if (seq > m->cursor)
		m->cursor = seq;
}

enum tc_live tc_hub_go_live(struct tc_member *m)
{
	const struct tc_thread *t = m->thread;
	assert(t && !m->live);
	if (!t->synced)
		return TC_LIVE_WAIT;
	if (m->cursor < t->head)
		return TC_LIVE_BEHIND;
	m->live = true;
	return TC_LIVE;
}

bool tc_thread_ready(const struct tc_thread *t)
{
	return t->synced;
}

uint64_t tc_thread_head(const struct tc_thread *t)
{
	return t->head;
}

const char *tc_thread_epoch(const struct tc_thread *t)
{
	return t->epoch;
}

size_t tc_hub_threads(const struct tc_hub *hub)
{
	return hub->nthreads;
}
