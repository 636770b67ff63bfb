/*
 * server.h — the libwebsockets side: HTTP routes and WebSocket connections.
 *
 * libwebsockets runs on the process's own libuv loop (a foreign loop), so
 * WebSockets, Redis and timers share one thread and never lock. Routes:
 *
 *   GET /threads/:thread_id/stream   WebSocket upgrade (no subprotocol needed)
 *   GET /healthz                     200 while the process runs
 *   GET /readyz                      200 when Redis is up and not draining, else 503
 *
 * Each WebSocket connection has a bounded outbound queue of shared frames
 * (buf.h). Replies to the client's own commands never cut it off: when the
 * queue passes half its bound the server stops reading that client until it
 * drains, so a command burst slows the sender down instead.
 */
#ifndef TC_SERVER_H
#define TC_SERVER_H

#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "session.h"

struct tc_server;

/**
 * Creates the lws context on loop and starts listening; sessions share env,
 * which must outlive the server. Returns NULL (after logging why) when the
 * port cannot be bound.
 */
struct tc_server *tc_server_new(uv_loop_t *loop, const struct tc_session_env *env);

/** The port actually listened on (useful with --port 0). */
int tc_server_port(const struct tc_server *s);

/** Open WebSocket connections. */
size_t tc_server_connections(const struct tc_server *s);

/**
 * Starts draining: /readyz turns 503 at once, while new requests and
 * upgrades are still served for grace_ms (a balancer's health checks see it
 * leave before it refuses anyone); then new ones get 503 and every
 * connection is closed (WebSockets with 1001, going away) once its queued
 * frames are written, spread over cfg->drain_spread_ms. done(arg) runs once,
 * when the last connection closed or after cfg->drain_timeout_ms more,
 * whichever comes first; always from a timer of the loop, never inside an
 * lws callback, so done may call tc_server_stop().
 */
void tc_server_drain(struct tc_server *s, int grace_ms, void (*done)(void *arg), void *arg);

/**
 * Begins teardown: destroys the lws context (closing what is left) and
 * closes the server's timer. Run the loop until it has no handles left,
 * then call tc_server_free().
 */
void tc_server_stop(struct tc_server *s);

/** Frees s once tc_server_stop() ran and the loop has drained. */
void tc_server_free(struct tc_server *s);

#endif
