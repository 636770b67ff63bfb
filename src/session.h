/*
 * session.h — one client's protocol state, independent of the transport.
 *
 * A session takes complete text frames (tc_session_on_frame), answers each
 * command exactly once through the transport's send hook, owns the client's
 * subscriptions, and is the client's member of the thread's fan-out (hub.h).
 * It never sees a socket, so the WebSocket server, the SSE transport and
 * unit tests drive it the same way.
 *
 * Ordering. The session's hub member keeps a cursor: every event of the
 * thread with a seq at or below it has been sent if the client's
 * subscriptions wanted it. Subscribing (or reconnecting) replays from the
 * stream (replay.h), then catches up to the hub and goes live; while a
 * replay runs the hub sends the session nothing and later commands wait
 * their turn, so the client sees: the command's response, its replay, then
 * live events with strictly increasing seq, no gap, no duplicate. A subscription added after events were already
 * sent replays the current run's events that match it and that no other
 * subscription of the connection matched; those come right after its
 * response, below the connection's position.
 */
#ifndef TC_SESSION_H
#define TC_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "bridge.h"
#include "config.h"
#include "hub.h"
#include "redis.h"

/** What a session needs from its transport. */
struct tc_session_io {
	/** How this transport frames events. */
	enum tc_frame_kind kind;
	/** Queues frame for the client, taking over the caller's reference. */
	void (*send)(void *ctx, struct tc_buf *frame);
	/** Bytes queued and not yet written, to pace replays. */
	size_t (*queued)(void *ctx);
	/** Stops (false) or resumes (true) reading frames from the client. */
	void (*set_reading)(void *ctx, bool reading);
	/** Closes the connection with a WebSocket close code and a reason. */
	void (*close)(void *ctx, int code, const char *reason);
	/**
	 * Stream mode only (tc_session_open_stream): the replay is about to
	 * start. restored is false when the requested history is gone; then
	 * has_missed says whether the number of missed events is known.
	 */
	void (*stream_started)(void *ctx, bool restored, bool has_missed, uint64_t missed);
};

struct tc_session;

/** What every session of the process shares. */
struct tc_session_env {
	const struct tc_config *cfg;
	struct tc_hub *hub;
	struct tc_redis *redis;
	struct tc_bridge *bridge;      /**< NULL: runtime commands answer not_supported */
	struct tc_auth *auth;          /**< NULL: authentication is off */
	struct tc_replay_holds *holds; /**< NULL: subscribe answers are never held (replay.h) */
};

/**
 * New session for thread_id (already validated). env, io and ctx must
 * outlive the session's tc_session_close().
 */
struct tc_session *tc_session_new(const struct tc_session_env *env, const char *thread_id,
				  const struct tc_session_io *io, void *ctx);

/**
 * The transport is gone: stops everything and drops the transport's
 * reference. The memory goes when the last Redis reply in flight returns;
 * io and ctx are never used again. NULL is a no-op.
 */
void tc_session_close(struct tc_session *s);

/**
 * Stream mode, for SSE: one connection-scoped subscription from an
 * EventStreamRequest object (channels, namespaces, depth, since). Replays
 * the current run, or — with since, or last_event_id (which wins) — every
 * matching event after it, then goes live. No command replies are sent;
 * io->stream_started() marks the start. On a bad request returns
 * invalid_argument with a message naming the field, and nothing started.
 */
enum tc_err tc_session_open_stream(struct tc_session *s, const cJSON *request, const char *last_event_id,
				   struct tc_error *err);

/** Handles one complete text frame; its reply (exactly one) may come later. */
void tc_session_on_frame(struct tc_session *s, const char *data, size_t len);

/** The transport's queue shrank below a quarter of its bound. */
void tc_session_on_drained(struct tc_session *s);

/** Whether runtime commands are allowed (a token's "commands" claim); default yes. */
void tc_session_allow_commands(struct tc_session *s, bool allowed);

/**
 * How the client spells the protocol's field names (spell.h): everything
 * the session writes is spelled so; what it reads may use either. Seed
 * (camelCase) until set.
 */
void tc_session_set_spelling(struct tc_session *s, enum tc_spelling sp);
enum tc_spelling tc_session_spelling(const struct tc_session *s);

/** The thread this session watches. */
const char *tc_session_thread(const struct tc_session *s);

/** Number of subscriptions the session holds. */
size_t tc_session_subscriptions(const struct tc_session *s);

#endif
