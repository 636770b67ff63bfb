/*
 * stream.h — streamed HTTP response bodies: a response head with no length,
 * then units (SSE events, NDJSON lines) written together as they are queued,
 * and a heartbeat comment on idle SSE streams so that proxies keep them.
 * What an SSE stream (sse.h) and a REST run stream (rest/) have in common;
 * a kind embeds a struct tc_stream beside its struct tc_conn.
 */
#ifndef TC_STREAM_H
#define TC_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "conn.h"

/** Every stream of the process. */
struct tc_stream_set {
	struct tc_conn_set *conns; /**< the connections they are among */
	size_t count;              /**< streams whose head went out (served as "sse") */
	struct tc_dlist streams;   /**< those streams (tc_stream.link) */
	uv_timer_t heartbeat;      /**< writes frame to idle streams */
	struct tc_buf *frame;      /**< one shared ": heartbeat" comment */
};

/** A connection's stream. */
struct tc_stream {
	struct tc_conn *c; /**< the connection it is written on */
	bool started;      /**< the head went out; on set->streams */
	bool no_heartbeat; /**< a format without comments (NDJSON): no heartbeat */
	/**
	 * HTTP/1.1: the body goes in chunks (RFC 9112 7.1), so that a cut
	 * connection is an error to the client, not the end of the stream;
	 * only a stream that finished ends with the last chunk.
	 */
	bool chunked;
	bool finished;        /**< the stream is complete: its close ends it cleanly */
	bool head_only;       /**< a HEAD request: the head, then the exchange is over */
	struct tc_dlink link; /**< on the set's streams */
};

/** Initializes the set's handles (the heartbeat timer) and the heartbeat comment. */
void tc__streams_init(struct tc_stream_set *set, struct tc_conn_set *conns);
/** Starts the heartbeat (every --sse-heartbeat-ms). */
void tc__streams_start_timers(struct tc_stream_set *set);
/** Stops and closes the set's handles. */
void tc__streams_close_handles(struct tc_stream_set *set);
/** Frees what tc__streams_init() allocated; after the handles are closed. */
void tc__streams_free(struct tc_stream_set *set);

/**
 * Writes st's response head (status, type, extra headers: NULL-terminated
 * "name:", value pairs, a NULL value skipped, at most 4) with no length —
 * chunked for an HTTP/1.1 client when chunk is set — and counts it as a
 * stream. 0, or -1 when it could not be written.
 *
 * Chunks are for streams that end (a run's): a client must tell their end
 * from a cut. A stream that never ends is left close-delimited: through
 * HAProxy 2.6 a chunked response's bytes wait up to 200 ms unless the
 * proxy has "option http-no-delay" (deploy/haproxy.cfg has it).
 */
int tc__stream_start(struct tc_stream_set *set, struct tc_stream *st, unsigned status, const char *type,
		     const char *const *extra, bool chunk);

/**
 * LWS_CALLBACK_HTTP_WRITEABLE for a started stream: writes what is queued;
 * once it is all written and the connection closing, ends the body (the
 * last chunk when finished; else the connection is cut, which a chunked
 * client sees as an error and resumes from). A HEAD's exchange ends after
 * its head. Returns what the callback returns.
 */
int tc__stream_write(struct tc_stream *st);

/**
 * The kind's tc_conn_ops.flush for a started stream: writes what is queued
 * from the loop (the end of an iteration), without lws' WRITEABLE round
 * trip through epoll. -1 on a write error.
 */
int tc__stream_flush(struct tc_stream *st);

/** The stream's connection is going: off the set. */
void tc__stream_end(struct tc_stream_set *set, struct tc_stream *st);

#endif
