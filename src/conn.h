/*
 * conn.h — internal to the server files (conn.c, ws.c, sse.c, http.c,
 * server.c): one client connection, its bounded outbound queue, the one
 * close path, and the server state every one of those files reads.
 *
 * Lifetime. A connection is allocated when a request is accepted
 * (LWS_CALLBACK_ESTABLISHED for WebSockets, the end of the request for SSE
 * and POST /commands) and destroyed by tc__conn_destroy() only from lws'
 * CLOSED / CLOSED_HTTP callbacks or when an HTTP exchange completes.
 * Everything else that wants it gone asks tc__conn_close(). Sessions and
 * the bridge never hold the conn: they hold the session, which outlives it.
 */
#ifndef TC_CONN_H
#define TC_CONN_H

#include <libwebsockets.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "auth.h"
#include "buf.h"
#include "config.h"
#include "dlist.h"
#include "handshake.h"
#include "protocol.h"
#include "session.h"
#include "util.h"
#include "wsdeflate.h"

/*
 * What a connection carries. WebSockets and SSE streams hold a session that
 * lives as long as the connection; a POST /commands holds one for a single
 * command and its reply.
 */
enum tc_conn_kind {
	TC_CONN_WS,      /**< a WebSocket (ws.c) */
	TC_CONN_SSE,     /**< an SSE stream (sse.c) */
	TC_CONN_COMMAND, /**< one POST /threads/:thread_id/commands exchange (http.c) */
	TC_CONN_QUERY,   /**< one GET /threads/:thread_id/state exchange (http.c); no session */
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

/** One client connection of any kind. */
struct tc_conn {
	struct tc_server *srv;    /**< the server it belongs to */
	struct lws *wsi;          /**< its lws connection */
	enum tc_conn_kind kind;   /**< what it carries */
	struct tc_session *session; /**< its protocol state; closed with the conn */
	struct tc_bufq out;       /**< frames not yet handed to lws; bounded by --max-queue-bytes */
	char *rx;                 /**< WebSocket: reassembly of a fragmented message, else NULL */
	size_t rx_len;            /**< WebSocket: bytes in rx */
	size_t rx_cap;            /**< WebSocket: capacity of rx */
	const char *close_reason; /**< with close_code: a static string */
	uint16_t close_code;      /**< nonzero: closing (an enum tc_close) once `out` is written */
	bool want_write;          /**< lws_callback_on_writable() pending */
	bool queue_full;          /**< reading stopped until `out` drains below a quarter */
	bool session_busy;        /**< reading stopped while the session serves a command */
	bool rx_off;              /**< what lws was last told about reading */
	bool headers_sent;        /**< SSE: the response head is out */
	bool no_heartbeat;        /**< SSE kind: a stream whose format has no comments (NDJSON) */
	bool close_sent;          /**< WebSocket: our close frame is out; waiting for the peer's */
	bool pinged;              /**< WebSocket: a PING went out since we last heard from it */
	bool ping_due;            /**< WebSocket: write a PING with the next flush */
	bool deflate;             /**< WebSocket: permessage-deflate negotiated (ws.c compresses its frames) */
	struct tc_dzref dz;       /**< WebSocket: its place in a (shared) compressor while it receives events */
	uint64_t deflated_at;     /**< WebSocket: loop time (ms) dz was last used */
	uint64_t heard;           /**< WebSocket: loop time (ms) of its last frame (ws.c's idle list) */
	unsigned status;          /**< POST /commands, GET /state: HTTP status of the reply */
	struct tc_query *query;   /**< GET /state: the read in flight, else NULL */
	struct tc_rest *rest;     /**< a REST API exchange (rest.h), else NULL */
	int64_t auth_exp;         /**< the token's exp (Unix s); 0 when auth is off */
	struct tc_dlink link;     /**< on srv->conns */
	struct tc_dlink dirty;    /**< WebSocket: on srv->dirty, written by the next flush */
	struct tc_dlink quiet;    /**< WebSocket: on srv->quiet, the idle list */
	struct tc_dlink deflating; /**< WebSocket with dz: on srv->deflating, least recently used first */
};

/** The conn whose member `member` is the list link n. */
#define TC_CONN_OF(n, member) TC_DLIST_ENTRY(n, struct tc_conn, member)

struct tc_http_body;
struct tc_rest;

/**
 * lws' per-session data, one per connection of any kind, so it is kept
 * small: an idle WebSocket uses only `conn`. lws allocates it when a request
 * needs it (not yet at CONFIRM_UPGRADE) and allocates a new, zeroed one when
 * a request upgrades to a WebSocket.
 */
struct tc_pss {
	struct tc_conn *conn;       /**< once the request is accepted as a connection */
	struct tc_http_body *body;  /**< a request body being read (http.c), else NULL */
};

/** What an accepted WebSocket upgrade hands to LWS_CALLBACK_ESTABLISHED. */
struct tc_upgrade {
	char thread[TC_THREAD_ID_MAX + 1]; /**< the thread of the route */
	struct tc_grant grant;             /**< what the request's token allows */
	enum tc_spelling sp;               /**< how the route spells the protocol */
	bool deflate;                      /**< permessage-deflate accepted in the response */
	bool deflate_alone;                /**< … with client_no_context_takeover (each client message inflated alone) */
	/**
	 * Nonzero: the upgrade is refused, on a 0.0.21 route, by accepting it
	 * and closing at once with this code (its official client gives up on
	 * a refused HTTP upgrade for good, but reads a 44xx close code).
	 */
	enum tc_close refuse;
};

/** The server: lws, the connections, and each component's handles. */
struct tc_server {
	uv_loop_t *loop;                    /**< the process's loop, shared with lws */
	const struct tc_config *cfg;        /**< the configuration */
	const struct tc_session_env *env;   /**< what sessions share */
	struct tc_redis *redis;             /**< env->redis */
	struct lws_context *ctx;            /**< NULL once lws finished destroying it */
	struct lws_vhost *vhost;            /**< the one vhost */
	int port;                           /**< the port listened on */
	struct tc_dlist conns;              /**< every open connection (tc_conn.link) */
	size_t nws;                         /**< WebSockets among conns */
	size_t nsse;                        /**< SSE streams among conns */
	bool draining;                      /**< refusing new connections */
	unsigned churn;                     /**< connections opened or closed since the heap was last trimmed */
	uint64_t churn_at;                  /**< loop time (ms) of the last of them */

	/* server.c: drain, token expiry, the upgrade being accepted. */
	uv_timer_t drain_timer;             /**< drain deadline; at 0 ms, the drain's end */
	uv_timer_t drain_tick;              /**< closes the next batch while draining */
	uv_timer_t expiry;                  /**< closes connections whose token expired */
	size_t drain_per_tick;              /**< connections to close per tick while draining */
	void (*drain_done)(void *);         /**< runs once when the drain ends; NULL after */
	void *drain_arg;                    /**< drain_done's argument */
	struct lws *upgrade_wsi;            /**< whose accepted upgrade `upgrade` holds, else NULL */
	struct tc_upgrade upgrade;          /**< from CONFIRM_UPGRADE to ESTABLISHED */

	/* handshake.c: connections whose request has not arrived yet. */
	struct tc_handshakes handshakes;

	/* ws.c: coalesced writes and idle WebSockets. */
	uv_check_t flush;                   /**< writes what this loop iteration queued */
	struct tc_dlist dirty;              /**< WebSockets with frames queued since the last flush */
	uv_timer_t idle;                    /**< pings and drops silent WebSockets */
	struct tc_dlist quiet;              /**< every WebSocket, least recently heard first */
	struct tc_dlist deflating;          /**< WebSockets holding a compressor, least recently used first */
	char too_big[64];                   /**< close reason naming --max-frame-bytes */

	/* rest.c: run streams, translated once per run and format (run/feed.h). */
	struct tc_run_feeds *feeds;

	/* sse.c: heartbeats. */
	uv_timer_t heartbeat;               /**< writes heartbeat_frame to idle streams */
	struct tc_buf *heartbeat_frame;     /**< one shared ": heartbeat" event */
};

/**
 * A new connection of kind on wsi, for thread, with a new session speaking
 * through io (whose ctx is the conn) and spelling sp; a TC_CONN_QUERY has no
 * session (io NULL). Counted on srv->conns.
 */
struct tc_conn *tc__conn_new(struct tc_server *srv, struct lws *wsi, enum tc_conn_kind kind,
			     const char *thread, const struct tc_session_io *io, enum tc_spelling sp);

/**
 * Frees c: off every list, its session closed, its queue dropped. Only from
 * lws' CLOSED / CLOSED_HTTP callbacks (after clearing the pss' pointer) or
 * when an HTTP exchange completes. While draining, the last one to go
 * tells the server (tc__server_conn_gone()).
 */
void tc__conn_destroy(struct tc_conn *c);

/**
 * The one way to ask for a close. FLUSH and DROP record code and reason (a
 * static string) and let the write path finish: a WebSocket writes its close
 * frame, an HTTP connection just ends. Asking again while closing does
 * nothing. KILL closes the socket now; c is gone when this returns, and
 * code and reason are not used.
 */
void tc__conn_close(struct tc_conn *c, enum tc_conn_close_mode mode, enum tc_close code,
		    const char *reason);

/** Asks lws for a WRITEABLE callback, once until it comes. */
void tc__conn_request_write(struct tc_conn *c);

/**
 * Queues frame b (taking over the reference), bounded: past --max-queue-bytes
 * the client is cut off with 1013, past half of it reading stops.
 */
void tc__conn_send(struct tc_conn *c, struct tc_buf *b);

/** Tells lws to stop or resume reading c if queue_full or session_busy changed. */
void tc__conn_update_rx(struct tc_conn *c);

/**
 * Gives the heap's free pages back to the kernel once a burst of
 * connections opening or closing has settled (called from a periodic
 * timer with the loop's time).
 */
void tc__conn_trim_heap(struct tc_server *srv, uint64_t now);

/**
 * After a write: resumes reading once the queue is under a quarter of its
 * bound (and lets a paced replay go on), asks for another WRITEABLE when
 * frames remain. Returns 1 when everything is written and c is closing (the
 * caller ends it: a WebSocket writes its close frame), else 0.
 */
int tc__conn_after_write(struct tc_conn *c);

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

/**
 * A connection went away: while draining, the last one ends the drain on
 * the next loop iteration, never inside the lws callback (server.c).
 */
void tc__server_conn_gone(struct tc_server *srv);

#endif
