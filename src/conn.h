/*
 * conn.h — the part every client connection has, whatever its kind: its
 * bounded outbound queue and backpressure, the session transport hooks the
 * kinds share, and the one close path. The bottom of the server files.
 *
 * Kinds. A WebSocket (ws.h), an SSE stream (sse.h), a REST exchange
 * (rest/rest.h) and a plain request (request.h) each have a type of their
 * own that embeds struct tc_conn first and reaches the common code through
 * it; the common code reaches a kind only through its tc_conn_ops, never by
 * calling up.
 *
 * Lifetime. A kind allocates its connection when a request is accepted
 * (LWS_CALLBACK_ESTABLISHED for WebSockets, the end of the request for the
 * others) and initializes the common part with tc__conn_init(); it is
 * destroyed by tc__conn_destroy() only from lws' CLOSED / CLOSED_HTTP
 * callbacks or when an HTTP exchange completes. Everything else that wants
 * it gone asks tc__conn_close(). Sessions and the bridge never hold the
 * conn: they hold the session, which outlives it.
 */
#ifndef TC_CONN_H
#define TC_CONN_H

#include <libwebsockets.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "buf.h"
#include "config.h"
#include "dlist.h"
#include "protocol.h"
#include "session.h"

/** Every client connection of the process. */
struct tc_conn_set {
	uv_loop_t *loop;                  /**< the process's loop */
	const struct tc_config *cfg;      /**< the configuration */
	const struct tc_session_env *env; /**< what the connections' sessions share */
	struct tc_dlist all;              /**< every open connection (tc_conn.link) */
	uv_check_t flush;                 /**< writes what this loop iteration queued (tc__conn_flush_init) */
	struct tc_dlist dirty;            /**< connections with frames queued since the last flush */
	bool leaving;                     /**< shutting down: /readyz fails (still served until draining) */
	bool draining;                    /**< refusing new connections */
	unsigned churn;                   /**< connections opened or closed since the heap was last trimmed */
	uint64_t churn_at;                /**< loop time (ms) of the last of them */
	/** Optional: a connection went away (after it is gone); the server's drain waits for the last. */
	void (*gone)(void *arg);
	void *gone_arg; /**< gone's argument */
};

struct tc_conn;

/** What the common code needs of a connection's kind. */
struct tc_conn_ops {
	const char *transport; /**< "websocket", "sse", "http": for logs */
	/** Reading can be paused for backpressure (a WebSocket; an HTTP client has sent all it will). */
	bool flow_control;
	/** An exchange that ends with its one answer: a drain lets it finish. */
	bool one_shot;
	/**
	 * Optional: writes what is queued now, from the loop's check handle,
	 * outside lws' callbacks (the socket is not known to be full), then
	 * calls tc__conn_after_write(); -1 on a write error (c is killed).
	 * Frames queued in one loop iteration leave together, and the common
	 * case costs no POLLOUT round trip through epoll. NULL: every frame
	 * asks lws for WRITEABLE.
	 */
	int (*flush)(struct tc_conn *c);
	/** LWS_CALLBACK_(SERVER|HTTP)_WRITEABLE: writes what is queued. Returns what the callback returns. */
	int (*writeable)(struct tc_conn *c);
	/** Optional: the queue drained below a quarter of its bound (default: the session's replay goes on). */
	void (*drained)(struct tc_conn *c);
	/** Frees the kind's connection; the common part was already taken apart. */
	void (*destroy)(struct tc_conn *c);
};

/** How tc__conn_close() ends a connection. */
enum tc_conn_close_mode {
	/** Write what is queued first, then close (a WebSocket with code/reason). */
	TC_CONN_FLUSH,
	/** Drop what is queued and close; the socket is killed if it does not
	 *  become writable within 2 s (a client that stopped reading never will). */
	TC_CONN_DROP,
	/** Close the socket now, without a close frame: lws calls CLOSED at once,
	 *  which destroys the conn before tc__conn_close() returns. */
	TC_CONN_KILL,
};

/** The common part of a client connection; embedded first in each kind's. */
struct tc_conn {
	struct tc_conn_set *set;       /**< the connections it is one of */
	const struct tc_conn_ops *ops; /**< its kind */
	struct lws *wsi;               /**< its lws connection */
	struct tc_session *session;    /**< its protocol state, closed with the conn; NULL for a REST exchange */
	struct tc_bufq out;            /**< frames not yet handed to lws; bounded (conn.c, TC_BUFQ_BIG_MAX) */
	const char *close_reason;      /**< with close_code: a static string */
	uint16_t close_code;           /**< nonzero: closing (an enum tc_close) once `out` is written */
	bool want_write;               /**< lws_callback_on_writable() pending */
	bool queue_full;               /**< reading stopped until `out` drains below a quarter */
	bool session_busy;             /**< reading stopped while the session serves a command */
	bool rx_off;                   /**< what lws was last told about reading */
	int64_t auth_exp;              /**< the token's exp (Unix s); 0 when auth is off */
	struct tc_dlink link;          /**< on set->all */
	struct tc_dlink dirty;         /**< on set->dirty, written by the next flush */
};

/** The conn whose member `member` is the list link n. */
#define TC_CONN_OF(n, member) TC_DLIST_ENTRY(n, struct tc_conn, member)

struct tc_http_body;

/**
 * lws' per-session data, one per connection of any kind, so it is kept
 * small: an idle WebSocket uses only `conn`. lws allocates it when a request
 * needs it (not yet at CONFIRM_UPGRADE) and allocates a new, zeroed one when
 * a request upgrades to a WebSocket.
 */
struct tc_pss {
	struct tc_conn *conn;      /**< once the request is accepted as a connection */
	struct tc_http_body *body; /**< a request body being read (http.c), else NULL */
	/**
	 * The request's body came without a length (chunked, or none at all):
	 * lws 4.1 and 4.3 then wait for 100 MiB of it, so the connection cannot carry
	 * another request: the answer says connection: close, then hangs up.
	 */
	bool close_after;
};

/**
 * Initializes the common part of c (the kind zeroed its whole connection)
 * on wsi, with a new session for thread speaking through io (whose ctx is
 * the conn) and spelling sp; no session when io is NULL. Counted on set.
 */
void tc__conn_init(struct tc_conn *c, struct tc_conn_set *set, const struct tc_conn_ops *ops, struct lws *wsi,
		   const char *thread, const struct tc_session_io *io, enum tc_spelling sp);

/**
 * Takes c apart and frees it: off the set, its session closed, its queue
 * dropped, then its kind's destroy. Only from lws' CLOSED / CLOSED_HTTP
 * callbacks (after clearing the pss' pointer) or when an HTTP exchange
 * completes. set->gone is told after.
 */
void tc__conn_destroy(struct tc_conn *c);

/**
 * The one way to ask for a close. FLUSH and DROP record code and reason (a
 * static string) and let the write path finish: a WebSocket writes its close
 * frame, an HTTP connection just ends. Asking again while closing does
 * nothing. KILL closes the socket now; c is gone when this returns, and
 * code and reason are not used.
 */
void tc__conn_close(struct tc_conn *c, enum tc_conn_close_mode mode, enum tc_close code, const char *reason);

/** Asks lws for a WRITEABLE callback, once until it comes. */
void tc__conn_request_write(struct tc_conn *c);

/** c has frames to write: they leave at the end of this loop iteration (ops->flush), else on WRITEABLE. */
void tc__conn_mark_dirty(struct tc_conn *c);

/** A WRITEABLE callback is writing c: the next flush leaves it out. */
void tc__conn_unmark_dirty(struct tc_conn *c);

/** Initializes set's flush check handle. */
void tc__conn_flush_init(struct tc_conn_set *set);

/** Stops and closes the flush handle; frames queued later are written through lws' WRITEABLE. */
void tc__conn_flush_close(struct tc_conn_set *set);

/**
 * Queues frame b (taking over the reference), bounded: past --max-queue-bytes
 * the client is cut off with 1013, past half of it reading stops.
 */
void tc__conn_send(struct tc_conn *c, struct tc_buf *b);

/** Tells lws to stop or resume reading c if queue_full or session_busy changed (flow-controlled kinds). */
void tc__conn_update_rx(struct tc_conn *c);

/**
 * Gives the heap's free pages back to the kernel once a burst of
 * connections opening or closing has settled (called from a periodic
 * timer with the loop's time).
 */
void tc__conn_trim_heap(struct tc_conn_set *set, uint64_t now);

/**
 * After a write: resumes reading once the queue is under a quarter of its
 * bound (and lets a paced producer go on), asks for another WRITEABLE when
 * frames remain or force is set. Returns 1 when everything is written and
 * c is closing (the caller ends it: a WebSocket writes its close frame),
 * else 0.
 */
int tc__conn_after_write(struct tc_conn *c, bool force);

/** Session transport hooks every kind shares (session.h); ctx is the conn. */
void tc__conn_io_send(void *ctx, struct tc_buf *b);
/** Bytes queued on the conn ctx. */
size_t tc__conn_io_queued(void *ctx);
/** The session stops (false) or resumes (true) reading the conn ctx. */
void tc__conn_io_set_reading(void *ctx, bool reading);
/** The session closes the conn ctx: queued frames are dropped. */
void tc__conn_io_close(void *ctx, int code, const char *reason);

/** Messages as JSON text, no stream mode: WebSockets and POST /commands speak it. */
extern const struct tc_session_io tc__conn_json_io;

/** The thread c's session watches, for logs (NULL without a session). */
const char *tc__conn_thread(const struct tc_conn *c);

#endif
