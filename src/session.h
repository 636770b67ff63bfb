/*
 * session.h — one client's protocol state, independent of the transport.
 *
 * A session takes complete text frames (tc_session_on_frame), answers each
 * command exactly once through the transport's send hook, and owns the
 * client's subscriptions. It never sees a socket, so the WebSocket server,
 * the SSE transport and unit tests all drive it the same way.
 */
#ifndef TC_SESSION_H
#define TC_SESSION_H

#include <stddef.h>

#include "buf.h"
#include "config.h"

/** What a session needs from its transport. */
struct tc_session_io {
	/** Queues frame for the client, taking over the caller's reference. */
	void (*send)(void *ctx, struct tc_buf *frame);
};

struct tc_session;

/**
 * New session for thread_id (already validated) on a transport. cfg, io and
 * ctx must outlive the session.
 */
struct tc_session *tc_session_new(const struct tc_config *cfg, const char *thread_id,
				  const struct tc_session_io *io, void *ctx);

/** Frees the session and its subscriptions. NULL is a no-op. */
void tc_session_free(struct tc_session *s);

/** Handles one complete text frame: parses it and sends exactly one reply. */
void tc_session_on_frame(struct tc_session *s, const char *data, size_t len);

/** The thread this session watches. */
const char *tc_session_thread(const struct tc_session *s);

/** Number of subscriptions the session holds. */
size_t tc_session_subscriptions(const struct tc_session *s);

#endif
