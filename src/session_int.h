/*
 * session_int.h — a session's internals, shared by the files that make it
 * up and by nothing else: session.c (lifetime, the command queue and its
 * dispatch, runtime commands) and, below it, session_subs.c (the
 * subscriptions, the commands a replay or a query answers, the hub member).
 * Everything else sees only session.h.
 */
#ifndef TC_SESSION_INT_H
#define TC_SESSION_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bridge.h"
#include "hub.h"
#include "metrics.h"
#include "protocol.h"
#include "query.h"
#include "replay.h"
#include "session.h"

/* One subscription of the connection. */
struct tc__sub {
	char *id;
	struct tc_filter *filter;
	bool fresh;        /* added by the command being served */
	uint64_t replayed; /* fresh: the events its replay counts for it */
};

/* A subscribe that arrived behind the one being served and joined its replay. */
struct tc__joined {
	uint64_t cmd_id;
	char *sub;
};

/* A command frame that arrived while another command was being served. */
struct tc__pending {
	struct tc__pending *next;
	bool unsubscribed; /* an unsubscribe already done: only its reply waits (cmd_id) */
	uint64_t cmd_id;
	size_t len;
	char data[];
};

/* What the command being served is (TC__SERVE_NONE between commands). */
enum tc__serving {
	TC__SERVE_NONE,
	TC__SERVE_SUBSCRIBE,
	TC__SERVE_RECONNECT,
	TC__SERVE_STREAM,
	TC__SERVE_TREE,
};

struct tc_session {
	const struct tc_session_env *env;
	const struct tc_session_io *io;
	void *ctx;
	char *thread_id;
	struct tc__sub *subs;
	size_t nsubs, capsubs;
	uint64_t next_nonce;
	struct tc_member member;
	struct tc_bridge_caller caller; /* runtime commands waiting for workers */
	size_t inflight;                /* how many */
	unsigned refs;                  /* the transport's + one per runtime command in flight */
	bool may_command;               /* runtime commands allowed */
	bool closed;
	bool reading;
	struct tc__pending *pending, *pending_tail;
	size_t npending;
	/*
	 * Runs the commands queued behind the one just served (session.c's,
	 * set by tc_session_new). session_subs.c finishes a command when its
	 * replay or query reports, and goes on through this pointer: the code
	 * below never calls up into the queue's file.
	 */
	void (*serve_next)(struct tc_session *s);
	double tokens; /* command rate limit: a token bucket */
	uint64_t refilled_ns;
	unsigned rejected; /* commands refused in a row */
	/* The command being served; later ones wait in pending. An idle
	 * session holds no replay or query: they exist only while served. */
	enum tc__serving serving;
	uint64_t cmd_id;
	char *serving_sub;         /* the subscription the command being served adds */
	struct tc__joined *joined; /* subscribes replayed with it (0.0.21) */
	size_t njoined;
	struct tc_replay *replay;
	struct tc_query *query;
	enum tc_spelling sp; /* how this client spells the protocol */
};

/* Takes the oldest frame off the queue, which is not empty; the caller frees it. */
static inline struct tc__pending *tc__session_pending_pop(struct tc_session *s)
{
	struct tc__pending *p = s->pending;
	s->pending = p->next;
	if (!s->pending)
		s->pending_tail = NULL;
	s->npending--;
	return p;
}

/* Replies: every command gets exactly one, through the transport's send hook. */
static inline void tc__session_send_error(struct tc_session *s, bool has_id, uint64_t id, const struct tc_error *err)
{
	tc_metrics.command_errors++;
	s->io->send(s->ctx, tc_response_error(has_id, id, err->code, err->message));
}

static inline void tc__session_send_success(struct tc_session *s, uint64_t id, cJSON *result, int64_t seq)
{
	s->io->send(s->ctx, tc_response_success(id, result, seq, s->sp));
}

#endif
