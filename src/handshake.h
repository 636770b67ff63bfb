/*
 * handshake.h — accepting connections, and their deadline until their HTTP
 * request has arrived (a WebSocket upgrade, an SSE stream, any request).
 *
 * lws 4.1 and 4.3 (lwsver.h) are quadratic in a reconnect storm: every
 * accepted connection gets a timeout filed in one list sorted by expiry and
 * walked from the head on each insertion, and a header table whose timeout goes in the same list
 * (all the same length, so each insertion walks them all): at 10,000
 * clients at once that walk was half of the server's CPU. So threadcast
 * listens itself, accepts as fast as the kernel hands connections over (so
 * none wait in the backlog, where a full queue drops SYNs and clients back
 * off for seconds), and hands them to lws (lws_adopt_socket_vhost) at most
 * TC_HANDSHAKES_PER_TURN per loop iteration, in arrival order; the rest
 * wait in a FIFO. The listener defers accept until a connection's first
 * bytes arrived (TCP_DEFER_ACCEPT), so those lws takes in one turn have
 * their request and are done with it by the next: its lists hold about two
 * turns' worth, not the storm (without it, clients slower than the accepts
 * left thousands in lws waiting for their requests). (A cap on how many lws
 * holds at once would let a few silent sockets stall every newcomer.)
 * Every handshake has the same length (--handshake-timeout), counted from
 * the accept, so arrival order is deadline order: adding, finishing and
 * expiring are O(1).
 */
#ifndef TC_HANDSHAKE_H
#define TC_HANDSHAKE_H

#include <libwebsockets.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dlist.h"

/** Accepted connections handed to lws per loop iteration, at most. */
#define TC_HANDSHAKES_PER_TURN 64

struct tc_handshakes {
	struct lws_vhost *vhost; /**< where accepted connections are adopted */
	int fd;                  /**< the listening socket, -1 when closed */
	uv_poll_t poll;          /**< its readiness */
	bool polling;
	uv_timer_t timer;        /**< drops what is past its deadline; retries accept after EMFILE */
	uv_idle_t pump;          /**< hands waiting connections to lws each loop iteration; while
	                           *   any wait, the loop polls without blocking */
	struct tc_dlist waiting; /**< accepted, not yet adopted (oldest first) */
	struct tc_dlist in_lws;  /**< adopted, request not arrived (oldest first) */
	uint64_t timeout_ms;
	size_t max_waiting;   /**< more accepted at once are closed at once */
	uint64_t accepted_ms; /**< the accept time of the connection being adopted */
};

/** Sets h up on loop (not listening yet); every handshake gets timeout_ms. */
void tc_handshakes_init(struct tc_handshakes *h, uv_loop_t *loop, uint64_t timeout_ms, size_t max_waiting);
/**
 * Listens on host:port (host NULL: every interface, IPv6 and IPv4) and
 * accepts; connections go to vhost. Returns the port bound, or -1 with
 * errno set.
 */
int tc_handshakes_listen(struct tc_handshakes *h, struct lws_vhost *vhost, const char *host, int port);
/** lws made the connection (LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED). */
void tc_handshake_begin(struct tc_handshakes *h, struct lws *wsi);
/** Its request arrived, or it closed: its deadline goes. Nothing when it has none. */
void tc_handshake_end(struct tc_handshakes *h, struct lws *wsi);
/** Connections accepted whose request has not arrived yet. */
size_t tc_handshakes_pending(const struct tc_handshakes *h);
/** Stops listening, closes what waits, forgets every deadline (lws keeps its connections). */
void tc_handshakes_close(struct tc_handshakes *h);

#endif
