/*
 * ws.h — the WebSocket kind of connection (conn.h): receiving (reassembly,
 * limits), writing (frames coalesced once per loop iteration, compressed
 * with permessage-deflate when it was negotiated), closing (our close frame,
 * then the peer's) and the idle list (PING after --ping-interval, drop
 * after --idle-timeout).
 */
#ifndef TC_WS_H
#define TC_WS_H

#include <stddef.h>

#include "auth.h"
#include "conn.h"
#include "wsdeflate.h"

/** WebSocket frames queued together leave in one write of up to this many bytes. */
#define TC_WS_COALESCE_MAX (64 * 1024)

/** What every WebSocket of the process shares. */
struct tc_ws_set {
	struct tc_conn_set *conns; /**< the connections they are among */
	size_t count;              /**< open WebSockets */
	uv_timer_t idle;           /**< pings and drops silent WebSockets */
	struct tc_dlist quiet;     /**< every WebSocket, least recently heard first */
	struct tc_dlist deflating; /**< WebSockets holding a compressor, least recently used first */
	char too_big[64];          /**< close reason naming --max-frame-bytes */
};

/** A WebSocket connection. */
struct tc_ws {
	struct tc_conn c;          /**< the common part (first) */
	struct tc_ws_set *set;     /**< the process' WebSockets */
	char *rx;                  /**< reassembly of a fragmented message, else NULL */
	size_t rx_len;             /**< bytes in rx */
	size_t rx_cap;             /**< capacity of rx */
	bool close_sent;           /**< our close frame is out; waiting for the peer's */
	bool pinged;               /**< a PING went out since we last heard from it */
	bool ping_due;             /**< write a PING with the next flush */
	bool deflate;              /**< permessage-deflate negotiated (its frames are compressed here) */
	struct tc_dzref dz;        /**< its place in a (shared) compressor while it receives events */
	uint64_t deflated_at;      /**< loop time (ms) dz was last used */
	uint64_t heard;            /**< loop time (ms) of its last frame (the idle list) */
	struct tc_dlink quiet;     /**< on set->quiet, the idle list */
	struct tc_dlink deflating; /**< with dz: on set->deflating, least recently used first */
};

/** What an accepted WebSocket upgrade hands to LWS_CALLBACK_ESTABLISHED. */
struct tc_upgrade {
	char thread[TC_THREAD_ID_MAX + 1]; /**< the thread of the route */
	struct tc_grant grant;             /**< what the request's token allows */
	enum tc_spelling sp;               /**< how the route spells the protocol */
	bool deflate;                      /**< permessage-deflate accepted in the response */
	bool deflate_alone; /**< … with client_no_context_takeover (each client message inflated alone) */
	/**
	 * Nonzero: the upgrade is refused, on a 0.0.21 route, by accepting it
	 * and closing at once with this code (its official client gives up on
	 * a refused HTTP upgrade for good, but reads a 44xx close code).
	 */
	enum tc_close refuse;
};

/** Initializes the WebSockets' handle (the idle timer) for conns. */
void tc__ws_init(struct tc_ws_set *set, struct tc_conn_set *conns);

/** Starts the idle timer. */
void tc__ws_start_timers(struct tc_ws_set *set);

/** Stops and closes the idle timer. */
void tc__ws_close_handles(struct tc_ws_set *set);

/**
 * LWS_CALLBACK_ESTABLISHED: the upgrade up was accepted (for its thread,
 * grant and spelling); makes the connection and puts it on the idle list.
 * An upgrade refused on a 0.0.21 route (up->refuse) is closed at once with
 * that code. Returns what the callback returns.
 */
int tc__ws_open(struct tc_ws_set *set, struct lws *wsi, struct tc_pss *pss, const struct tc_upgrade *up);

/** The WebSocket c is (NULL when c is another kind's). */
struct tc_ws *tc__ws_of(struct tc_conn *c);

/** We heard from w (a frame, a PONG): it moves to the tail of the idle list. */
void tc__ws_heard_from(struct tc_ws *w);

/**
 * LWS_CALLBACK_RECEIVE: a piece of a message. Joins fragments up to
 * --max-frame-bytes (else 1009) and hands whole text messages to the
 * session; a binary one closes with 1003. Returns what the callback returns.
 */
int tc__ws_receive(struct tc_ws *w, const char *in, size_t len);

/** LWS_CALLBACK_WS_PEER_INITIATED_CLOSE for w (NULL: none yet). Returns what the callback returns. */
int tc__ws_peer_closed(struct tc_ws *w);

#endif
