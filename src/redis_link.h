/*
 * redis_link.h — one connection to one Redis node, kept up: the lowest layer
 * of redis.c.
 *
 * A link is a command connection (hiredis async on libuv, redis_uv.h) or a
 * pub/sub connection (pslink.h). It connects in the background with a
 * timeout, runs the connection setup, and when the connection drops or an
 * attempt fails it tries again after an exponential backoff with jitter. A
 * command link's setup, queued at once and answered in order:
 *
 *   AUTH [user] password        when configured
 *   SELECT db                   when the address names a database
 *   ROLE                        (Sentinel) the node must be a master
 *   MULTI, FUNCTION LOAD REPLACE <library> per library, EXEC
 *                               the function libraries, all or none
 *                               (a replica's READONLY is let pass: its
 *                               master has them)
 *   PING                        its answer makes the link up
 *
 * With a rediss:// URL (cfg->tls) a TCP link runs TLS to the host it was
 * given (tls.h: under hiredis through redis_uv.h, under pslink itself); a
 * TLS failure is logged at error level on every attempt, with its reason.
 *
 * A link knows nothing of nodes, Clusters or Sentinels: it asks its owner
 * where to connect each time (ops->address) and tells it through the ops it
 * was given when it is up and when it was lost. Nothing here calls redis.c.
 */
#ifndef TC_REDIS_LINK_H
#define TC_REDIS_LINK_H

#include <hiredis/async.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "pslink.h"
#include "reply_arena.h"

/** A connection attempt not answered by then is abandoned and retried. */
#define TC__LINK_CONNECT_TIMEOUT_MS 3000

enum tc__link_kind {
	TC__LINK_CMD, /**< commands: hiredis async */
	TC__LINK_SUB, /**< pub/sub: pslink */
};

/** What the links of one owner share; must outlive them. */
struct tc__link_conf {
	uv_loop_t *loop;
	const struct tc_config *cfg; /**< backoff bounds, credentials */
	const char *fn_src;          /**< the function libraries a command link loads */
	size_t fn_len;
	bool check_role; /**< a command link must reach a master (ROLE) */
};

/** Where a link connects (strings are the owner's, read during the call). */
struct tc__link_addr {
	const char *host; /**< NULL with unix_path */
	int port;
	const char *unix_path; /**< NULL for TCP */
	int db;                /**< SELECTed when non-zero */
};

struct tc__link;

/** How a link reaches its owner. ctx is the one given to tc__link_init(). */
struct tc__link_ops {
	/**
	 * Where to connect now, into a. false: not now (the owner starts the
	 * link again, with tc__link_start(), once it knows).
	 */
	bool (*address)(void *ctx, struct tc__link *l, struct tc__link_addr *a);
	/** The setup was answered: the link is up. */
	void (*up)(void *ctx, struct tc__link *l);
	/**
	 * The connection dropped or an attempt failed (was_up: it had been up);
	 * the link has already scheduled its next attempt.
	 */
	void (*lost)(void *ctx, struct tc__link *l, bool was_up);
	/** Pub/sub links: pslink's push and refused, passed on as they come. */
	void (*push)(void *ctx, const char *kind, const char *ch, size_t clen, const char *data, size_t dlen);
	void (*refused)(void *ctx, const char *verb, const char *channel, const char *err);
};

/**
 * One link. The owner embeds it and reads its public fields; only this file
 * writes them. A command link's hiredis context has the link as ac->data,
 * so reply callbacks of commands sent on it can find it.
 */
struct tc__link {
	/** TC__LINK_CMD: the connection; NULL while disconnected. */
	redisAsyncContext *ac;
	/** TC__LINK_SUB: the connection; NULL while disconnected. */
	struct tc_pslink *ps;
	/** The setup was answered on this connection. */
	bool up;
	/** The owner's, as given to tc__link_init(). */
	void *ctx;
	/* private */
	enum tc__link_kind kind;
	const char *name; /* "commands" or "pubsub", for logs */
	const char *addr; /* the owner's text of the node's address, for logs */
	const struct tc__link_conf *conf;
	const struct tc__link_ops *ops;
	uv_timer_t retry;            /* the next attempt; the connect timeout while one is out */
	unsigned attempt;            /* failed attempts since the last success */
	bool readonly;               /* a replica refused the function libraries */
	bool closed;                 /* tc__link_close() ran: no more attempts */
	struct tc_reply_arena arena; /* TC__LINK_CMD: where its replies are built */
};

/**
 * Sets l up, not connected (tc__link_start() connects it). addr is the
 * node's address as logs name it: the owner's text, which may change.
 */
void tc__link_init(struct tc__link *l, enum tc__link_kind kind, const char *name, const char *addr,
		   const struct tc__link_conf *conf, const struct tc__link_ops *ops, void *ctx);

/**
 * Connects from the loop when l has no connection: at once (at_once: even
 * when a reconnect was waiting out its backoff), or else unless an attempt
 * is already scheduled.
 */
void tc__link_start(struct tc__link *l, bool at_once);

/** Drops the connection (safe inside a hiredis callback); l reconnects. */
void tc__link_drop(struct tc__link *l);

/** Schedules the next attempt after the backoff, as after a failed one. */
void tc__link_retry_later(struct tc__link *l);

/** Whether a ROLE answer names a master. */
bool tc__link_is_master(const redisReply *rep);

/**
 * Closes l for good: pending command callbacks get NULL, no attempt follows,
 * and its timer is closed (timer_closed, when not NULL, runs once libuv is
 * done with it, with the timer handle, whose data is l; l's memory must live
 * until then). Returns whether l was up.
 */
bool tc__link_close(struct tc__link *l, uv_close_cb timer_closed);

#endif
