/*
 * session_subs.h — a session's subscriptions and the commands it serves at
 * length (internal to the session: session.c is its only user).
 *
 * session_subs.c owns the connection's subscriptions, the session's member
 * of the thread's fan-out (hub.h), and the commands a replay or a query
 * answers: subscription.subscribe, subscription.reconnect, the SSE stream
 * (tc_session_open_stream) and agent.getTree, plus subscription.unsubscribe.
 * A command it starts serving sets s->serving and is answered later; when
 * it is over (answered, refused, or its replay done) the session goes on
 * with the commands queued behind it through s->serve_next (session_int.h).
 * It also implements tc_session_open_stream() and tc_session_on_drained()
 * of session.h.
 */
#ifndef TC_SESSION_SUBS_H
#define TC_SESSION_SUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub.h"
#include "protocol.h"

struct tc_session;
struct tc__pending;

/**
 * The session's hub member ops: match the subscriptions, send, let a
 * waiting replay go on, close on a lost history.
 */
extern const struct tc_member_ops tc__session_member_ops;

/** Frees the subscriptions and what the command being served holds (the session is going). */
void tc__session_subs_free(struct tc_session *s);

/**
 * subscription.subscribe: adds the subscription and starts its replay; its
 * reply comes later. On an error nothing was added and err says why (the
 * caller sends it).
 */
enum tc_err tc__session_subscribe(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err);

/** subscription.unsubscribe, served at once: the subscription goes, the reply is sent; else err. */
enum tc_err tc__session_unsubscribe(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err);

/**
 * subscription.reconnect: restores the named subscriptions and replays
 * after lastEventId; the reply comes later. On an error nothing was added.
 */
enum tc_err tc__session_reconnect(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err);

/** agent.getTree: asks Redis for the tree; the reply comes later. Else err (nothing started). */
enum tc_err tc__session_get_tree(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err);

/**
 * An unsubscribe frame that arrives while another command is served takes
 * effect at once; only its reply waits its turn. Returns true with *out, a
 * new queue entry (unsubscribed, cmd_id; the caller queues it), when data
 * was such an unsubscribe of an existing subscription; false otherwise
 * (the frame is then queued as it is and served in its turn).
 */
bool tc__session_unsubscribe_now(struct tc_session *s, const char *data, size_t len, struct tc__pending **out);

/** The reply to an unsubscribe that already took effect (queued by tc__session_unsubscribe_now). */
void tc__session_send_unsubscribed(struct tc_session *s, uint64_t id);

#endif
