/*
 * srv.h — internal to the server files: the state of the HTTP and WebSocket
 * server, for the files above the kinds of connection (http.c, server.c)
 * and the kinds that start with a request (sse.c, request.c, rest/). Pure
 * data: each part is owned by the file its header names.
 */
#ifndef TC_SRV_H
#define TC_SRV_H

#include <libwebsockets.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "conn.h"
#include "handshake.h"
#include "session.h"
#include "stream.h"
#include "ws.h"

struct tc_run_feeds;

/** The server: lws, the connections, and each component's part. */
struct tc_server {
	uv_loop_t *loop;                  /**< the process's loop, shared with lws */
	const struct tc_config *cfg;      /**< the configuration */
	const struct tc_session_env *env; /**< what sessions share */
	struct tc_redis *redis;           /**< env->redis */
	struct lws_context *ctx;          /**< NULL once lws finished destroying it */
	struct lws_vhost *vhost;          /**< the one vhost */
	int port;                         /**< the port listened on */

	struct tc_conn_set conns;        /**< every client connection (conn.h) */
	struct tc_ws_set ws;             /**< the WebSockets (ws.h) */
	struct tc_stream_set streams;    /**< streamed responses: SSE, run streams (stream.h) */
	struct tc_handshakes handshakes; /**< connections whose request has not arrived yet (handshake.h) */
	struct tc_run_feeds *feeds;      /**< runs' streams, translated once per run and format (run/feed.h) */

	/* server.c: drain, token expiry, the upgrade being accepted. */
	uv_timer_t drain_timer;     /**< drain deadline; at 0 ms, the drain's end */
	uv_timer_t drain_tick;      /**< closes the next batch while draining */
	uv_timer_t expiry;          /**< closes connections whose token expired */
	size_t drain_per_tick;      /**< connections to close per tick while draining */
	void (*drain_done)(void *); /**< runs once when the drain ends; NULL after */
	void *drain_arg;            /**< drain_done's argument */
	struct lws *upgrade_wsi;    /**< whose accepted upgrade `upgrade` holds, else NULL */
	struct tc_upgrade upgrade;  /**< from CONFIRM_UPGRADE to ESTABLISHED */
};

#endif
