/*
 * replay.h — catching a client up from the thread's stream, then live.
 *
 * A replay serves one command of one session: subscription.subscribe,
 * subscription.reconnect, or the opening of an SSE stream. It reads the
 * thread's meta, indexes and stream from Redis (store.h), decides what the
 * client is owed, lets the session answer the command, sends the owed
 * events in seq order paced by the client's queue, and finally makes the
 * session's hub member live (hub.h) once it has caught up with the hub:
 *
 *   subscribe   meta → values baselines → count the run's matching events
 *               (and keep them when few) → answer → baselines → events → live
 *   reconnect   meta → oldest kept seq → tree index → decide restored /
 *               missedEvents → answer → events after lastEventId → live
 *
 * Which events the client is owed depends on the session's subscriptions,
 * asked through ops->match: those added by this command ("fresh") and the
 * ones it held before ("old"). The member's cursor says what the connection
 * already accounted for, hist_end below:
 *   seq <= hist_end           sent only if a fresh subscription wants it and
 *                             no old one did (the old ones had their chance),
 *                             or — per_subscription — if a fresh one wants it;
 *   hist_end < seq < start    before the replay range: old subscriptions only;
 *   seq >= start              any subscription.
 *
 * The session learns the outcome through ops; after ops->done or ops->fail
 * the replay is over and the session frees it with tc_replay_free(). A
 * replay whose session goes away is cancelled with tc_replay_free() at any
 * time: a Redis reply still in flight is then dropped without touching the
 * session.
 */
#ifndef TC_REPLAY_H
#define TC_REPLAY_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "buf.h"
#include "config.h"
#include "event.h"
#include "filter.h"
#include "hub.h"
#include "protocol.h"
#include "redis.h"
#include "store.h"

struct tc_replay;

/** Which of the session's subscriptions to match an event against. */
enum tc_subs {
	TC_SUBS_ANY,   /**< every subscription */
	TC_SUBS_FRESH, /**< those added by the command being served */
	TC_SUBS_OLD,   /**< those held before it */
};

/** What the replay found, for the command's answer. */
struct tc_replay_answer {
	uint64_t applied;  /**< the seq the answer is consistent with (meta.appliedThroughSeq) */
	uint64_t replayed; /**< subscribe: events replayed for the fresh subscription */
	bool restored;     /**< reconnect and streams: the client's history is intact */
	bool has_missed;   /**< missed is known (absent after an epoch change) */
	uint64_t missed;   /**< events the client will not get */
	cJSON *namespaces; /**< reconnect: currentNamespaces (the session takes it) */
};

/** What a replay needs from its session. ctx is the session. */
struct tc_replay_ops {
	/** True when one of the session's subscriptions (of kind which) wants the event. */
	bool (*match)(void *ctx, const struct tc_event_key *key, enum tc_subs which);
	/** Answer the command now; the events follow. */
	void (*answer)(void *ctx, struct tc_replay_answer *a);
	/** Queue one frame for the client (taking over the reference). */
	void (*send)(void *ctx, struct tc_buf *frame);
	/** Bytes the client has queued and not yet read. */
	size_t (*queued)(void *ctx);
	/** Failed before answering: the session refuses the command with code/message. */
	void (*fail)(void *ctx, enum tc_err code, const char *message);
	/** Failed after answering: the session closes the connection (close code, reason). */
	void (*close)(void *ctx, enum tc_close code, const char *reason);
	/** Caught up: the member is live, the replay is over. */
	void (*done)(void *ctx);
	/**
	 * Optional. A subscribe's replay calls it before it looks at the
	 * history and again before it answers: the session may add more fresh
	 * subscriptions (subscribes that arrived together, replayed together)
	 * and returns true when it did; the replay then starts over, counting
	 * for all of them (nothing has been sent yet).
	 */
	bool (*gather)(void *ctx);
	/** Optional. A subscribe counts this event (or values snapshot) as replayed. */
	void (*tally)(void *ctx, const struct tc_event_key *key);
	/**
	 * Optional. A subscribe whose replay holds the end of the run asks,
	 * with nothing gathered, whether to hold its answer for subscribes
	 * that may still be on their way (see struct tc_replay_holds): true
	 * when the session has nothing else to serve after it.
	 */
	bool (*may_hold)(void *ctx);
};

/**
 * Subscribe answers held back, briefly, for the subscribes that follow.
 *
 * A 0.0.21 client (the official SDK) sends several subscribes at once —
 * after a reconnect, one per subscription it had — and takes a run's end
 * as the end of every subscription that matched it. Subscribes that arrive
 * while one is served join its replay (ops->gather): one pass in seq order,
 * the end last. But frames sent together can arrive apart (a client that
 * compresses each on its own, a loaded machine); replayed one after
 * another, a lifecycle subscription's replay would carry the run's end to
 * the client ahead of the events a later subscription is owed, and the SDK
 * would drop those. So a subscribe that has counted a replay holding the
 * end of the run (the run is over) waits up to TC_REPLAY_HOLD_QUIET_MS
 * after the connection's last frame, and at most TC_REPLAY_HOLD_MAX_MS in
 * all, before it answers; a frame that arrives meanwhile ends the wait
 * (tc_replay_nudge). One timer serves every held replay.
 */
#define TC_REPLAY_HOLD_QUIET_MS 10
#define TC_REPLAY_HOLD_MAX_MS 50
struct tc_replay_holds;

/** The process' holds, on loop. */
struct tc_replay_holds *tc_replay_holds_new(uv_loop_t *loop);
/** Stopping: every held answer goes out now, none is held again; the timer is closed. */
void tc_replay_holds_stop(struct tc_replay_holds *h);
/** After the loop ended and every replay was freed. NULL is a no-op. */
void tc_replay_holds_free(struct tc_replay_holds *h);

/** A frame arrived for the session while rp serves it: a held answer stops waiting. */
void tc_replay_nudge(struct tc_replay *rp);

/** The request of a reconnect (or of a stream resumed from an event). */
struct tc_replay_from {
	uint64_t seq;             /**< the last event the client has */
	char epoch[TC_EPOCH_MAX]; /**< its epoch; "" with any_epoch */
	bool any_epoch;           /**< SSE `since`: a bare seq of the current history */
};

/** Everything a replay is started with. */
struct tc_replay_start {
	const struct tc_config *cfg;
	struct tc_redis *redis;
	const char *thread;
	struct tc_member *member;  /**< the session's, attached to the thread's hub */
	bool fresh_member;         /**< attached for this command (its cursor means nothing yet) */
	enum tc_frame_kind kind;   /**< how events are framed for this client */
	enum tc_spelling spelling; /**< ... and spelled */
	/**
	 * Each fresh subscription is owed the whole matching history, even
	 * events an older subscription of the connection already received
	 * (0.0.21 clients match and dedupe per subscription themselves).
	 */
	bool per_subscription;
	const struct tc_replay_ops *ops;
	void *ctx;
	struct tc_replay_holds *holds;     /**< NULL: answers are never held */
	bool reconnect;                    /**< else subscribe (replay the current run) */
	const struct tc_replay_from *from; /**< reconnect: where the client is; NULL: the current run */
};

/**
 * Starts a replay, pausing the member's fan-out. Returns NULL, having done
 * nothing, when Redis cannot take commands now. The ops are only ever called
 * later, from the loop.
 */
struct tc_replay *tc_replay_start(const struct tc_replay_start *start);

/** The client's queue drained: a paced replay goes on. */
void tc_replay_drained(struct tc_replay *rp);

/** The member's thread became ready: a replay waiting to go live checks again. */
void tc_replay_ready(struct tc_replay *rp);

/** Ends the replay (done, failed or cancelled); NULL is a no-op. */
void tc_replay_free(struct tc_replay *rp);

#endif
