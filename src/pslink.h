/*
 * pslink.h — one Redis pub/sub connection on a libuv loop.
 *
 * hiredis 0.14's async client knows SUBSCRIBE and PSUBSCRIBE but not the
 * sharded SSUBSCRIBE of Redis 7: it would hand a shard message to whatever
 * callback came before, or abort when there was none. This link speaks RESP
 * itself (hiredis' reader parses, its formatter writes) and tells replies
 * from pushes by their shape:
 *   - a push is an array whose first element names a pub/sub kind
 *     ("smessage", "ssubscribe", "sunsubscribe", and the unsharded ones);
 *     a confirmation answers the oldest command when it names the same
 *     channel, anything else (Redis dropping a shard channel whose slot
 *     moved) is passed on as unsolicited;
 *   - everything else answers the oldest command in flight: the handshake
 *     (AUTH, SELECT, PING) or a refused (S)SUBSCRIBE (MOVED, CROSSSLOT...).
 * Over TLS (addr->tls) the TCP connection goes through a pump (tls.h) once
 * it is connected; a TLS failure is reported by down() with the pump's
 * reason ("TLS handshake failed: certificate verify failed: ...").
 * Reconnecting is the owner's business: a link that fails reports down()
 * once and is then inert until tc_pslink_close().
 */
#ifndef TC_PSLINK_H
#define TC_PSLINK_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <uv.h>

struct tc_pslink;
struct tc_tls;

/** Where to connect and how to log in. Strings are copied. */
struct tc_pslink_addr {
	const char *host; /**< NULL with unix_path */
	int port;
	const char *unix_path; /**< NULL for TCP */
	const char *user, *password;
	int db;                   /**< SELECTed when non-zero */
	const struct tc_tls *tls; /**< TLS to host (tls.h) when not NULL; must outlive the link */
};

struct tc_pslink_ops {
	/** The handshake was answered: (S)SUBSCRIBE may be sent. */
	void (*up)(void *ctx);
	/** The connection failed or closed; why is a short text. Called once. */
	void (*down)(void *ctx, const char *why);
	/**
	 * A push: kind is "smessage", "message", "ssubscribe", "subscribe",
	 * "sunsubscribe" or "unsubscribe"; data is NULL except for messages.
	 */
	void (*push)(void *ctx, const char *kind, const char *ch, size_t clen, const char *data, size_t dlen);
	/** Redis refused the (S)SUBSCRIBE or (S)UNSUBSCRIBE of channel with err. */
	void (*refused)(void *ctx, const char *verb, const char *channel, const char *err);
};

/** Starts connecting; ops and ctx must outlive the link. Never NULL. */
struct tc_pslink *tc_pslink_open(uv_loop_t *loop, const struct tc_pslink_addr *addr, const struct tc_pslink_ops *ops,
				 void *ctx);

/**
 * Sends verb ("SSUBSCRIBE", "SUNSUBSCRIBE", "SUBSCRIBE", "UNSUBSCRIBE")
 * for one channel. 0 when written, -1 when the link is not up.
 */
int tc_pslink_send(struct tc_pslink *p, const char *verb, const char *channel);

/** Closes the link: no callback runs after this; memory goes when libuv is done. */
void tc_pslink_close(struct tc_pslink *p);

#endif
