/*
 * hub.h — the per-thread fan-out table.
 *
 * For every thread with local subscribers the hub holds one tc_thread: the
 * subscribed members (one per client connection), the doorbell SSUBSCRIBE,
 * the thread's epoch and `head`, the highest seq the hub has fanned out.
 * Doorbells carry everything needed to deliver (seq, epoch, method, encoded
 * namespace, event JSON), so the usual path costs no Redis round trip: the
 * event is framed once into a shared buffer and queued on every matching
 * live member. A doorbell that skips seqs, or one that arrives before the
 * hub knows where the thread stands, makes the hub read the gap from the
 * stream (XRANGE) before delivering anything newer: the stream is the truth,
 * pub/sub only rings the bell. A new epoch means Redis lost the thread's
 * history; members are told (ops->lost) rather than fed a different history.
 *
 * Members catch up on their own (replay.c reads the stream for them) and go
 * live once their cursor has reached the hub's head while the hub is ready;
 * from then on the hub delivers every event with seq > cursor exactly once,
 * in order. The hub is the only writer of a member's cursor and live flag:
 * a replay moves them through tc_hub_pause(), tc_hub_advance() and
 * tc_hub_go_live(). Cost per event is independent of how many threads are
 * watched.
 */
#ifndef TC_HUB_H
#define TC_HUB_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "buf.h"
#include "config.h"
#include "dlist.h"
#include "event.h"
#include "filter.h"
#include "redis.h"
#include "store.h"

struct tc_hub;
struct tc_thread;
struct tc_member;

/** What the hub needs from a member (implemented by the session). */
struct tc_member_ops {
	/** True when the event passes one of the member's subscriptions. */
	bool (*match)(struct tc_member *m, const struct tc_event_key *key);
	/** Sends ev to the client (take frames with tc_event_frame). */
	void (*send)(struct tc_member *m, struct tc_event *ev);
	/** The thread became ready (subscribed, head known): re-check going live. */
	void (*ready)(struct tc_member *m);
	/** Events the member relies on are gone (new epoch, or trimmed before delivery). */
	void (*lost)(struct tc_member *m, const char *why);
};

/**
 * A subscriber of one thread; embedded in its owner (the session), which
 * sets ops and reads the rest. Only the hub writes the other fields.
 */
struct tc_member {
	const struct tc_member_ops *ops;
	struct tc_thread *thread; /**< set while attached */
	struct tc_dlink link;     /**< on the thread's member list */
	uint64_t cursor;          /**< every seq <= cursor is accounted for */
	bool live;                /**< receives the hub's fan-out */
};

/** Creates the hub and registers it as the Redis pub/sub listener. */
struct tc_hub *tc_hub_new(const struct tc_config *cfg, struct tc_redis *redis);

/** Frees the hub; every member must have been detached. */
void tc_hub_free(struct tc_hub *hub);

/** Adds m (not live) to thread_id's members, watching the thread if new. */
void tc_hub_attach(struct tc_hub *hub, const char *thread_id, struct tc_member *m);

/** Removes m; the last member leaving stops watching the thread. */
void tc_hub_detach(struct tc_hub *hub, struct tc_member *m);

/**
 * Stops the fan-out to m (attached) while a replay reads the stream for it;
 * every seq <= m->cursor stays accounted for.
 */
void tc_hub_pause(struct tc_member *m);

/** The paused m's replay accounted for every seq <= seq: its cursor moves up to it. */
void tc_hub_advance(struct tc_member *m, uint64_t seq);

/** What tc_hub_go_live() found. */
enum tc_live {
	TC_LIVE,        /**< m is live: the hub delivers everything after its cursor */
	TC_LIVE_WAIT,   /**< the thread is not ready; ops->ready() calls back */
	TC_LIVE_BEHIND, /**< the hub fanned out past m's cursor: read the stream on */
};

/** Makes the paused m live if it has caught up with the thread's head. */
enum tc_live tc_hub_go_live(struct tc_member *m);

/** True when the thread's doorbell is subscribed and its head is known. */
bool tc_thread_ready(const struct tc_thread *t);
/** Highest seq the hub has fanned out for the thread. */
uint64_t tc_thread_head(const struct tc_thread *t);
/** The thread's epoch as the hub knows it ("" before the first event). */
const char *tc_thread_epoch(const struct tc_thread *t);

/** Threads currently watched. */
size_t tc_hub_threads(const struct tc_hub *hub);

#endif
