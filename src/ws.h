/*
 * ws.h — internal to the server: WebSocket connections. Receiving
 * (reassembly, limits), writing (frames coalesced once per loop iteration),
 * closing (our close frame, then the peer's) and the idle list (PING after
 * --ping-interval, drop after --idle-timeout).
 */
#ifndef TC_WS_H
#define TC_WS_H

#include <stddef.h>

#include "conn.h"

/** WebSocket frames queued together leave in one write of up to this many bytes. */
#define TC_WS_COALESCE_MAX (64 * 1024)

/** Initializes ws.c's handles in srv (flush check, idle timer) and its close reasons. */
void tc__ws_init(struct tc_server *srv);

/** Starts the idle timer. */
void tc__ws_start_timers(struct tc_server *srv);

/** Stops and closes ws.c's handles; frames queued later are written through lws' WRITEABLE. */
void tc__ws_close_handles(struct tc_server *srv);

/**
 * LWS_CALLBACK_ESTABLISHED: the upgrade up was accepted (for its thread,
 * grant and spelling); makes the connection and puts it on the idle list.
 * An upgrade refused on a 0.0.21 route (up->refuse) is closed at once with
 * that code. Returns what the callback returns.
 */
int tc__ws_open(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const struct tc_upgrade *up);

/** We heard from c (a frame, a PONG): it moves to the tail of the idle list. */
void tc__ws_heard_from(struct tc_conn *c);

/**
 * LWS_CALLBACK_RECEIVE: a piece of a message. Joins fragments up to
 * --max-frame-bytes (else 1009) and hands whole text messages to the
 * session; a binary one closes with 1003. Returns what the callback returns.
 */
int tc__ws_receive(struct tc_conn *c, const char *in, size_t len);

/** LWS_CALLBACK_SERVER_WRITEABLE: writes queued frames, then the close frame. -1: close. */
int tc__ws_writeable(struct tc_conn *c);
/** Frees c's compressor, if it has one (a closing connection; one quiet a while). */
void tc__ws_drop_deflater(struct tc_conn *c);

/** LWS_CALLBACK_WS_PEER_INITIATED_CLOSE for c (NULL: none yet). Returns what the callback returns. */
int tc__ws_peer_closed(struct tc_conn *c);

/** c has frames to write: they leave at the end of this loop iteration. */
void tc__ws_mark_dirty(struct tc_conn *c);

#endif
