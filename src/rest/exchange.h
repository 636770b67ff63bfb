/*
 * rest/exchange.h — internal to rest/: one REST exchange, its connection (a
 * kind of conn.h's), its answer, and its Redis calls. The jobs (runs.c,
 * worker.c, agents.c) build on it; routes.c starts them.
 *
 * An exchange is owned by its connection and by each Redis reply or bridge
 * answer it waits for (refs); the last of them frees it. Its connection
 * goes when the client does (r->conn NULL from then on): what arrives later
 * is dropped, and answers go nowhere.
 */
#ifndef TC_REST_EXCHANGE_H
#define TC_REST_EXCHANGE_H

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "bridge.h"
#include "router.h"
#include "run/feed.h"
#include "srv.h"

/** How a route and method is served (router.h's M(…, KIND, …)). */
enum tc_rest_kind {
	K_LUA,      /**< one FCALL; its answer is the response */
	K_CREATE,   /**< runs.create, then the response, a stream or a wait (out) */
	K_JOIN,     /**< an existing run: a stream or a wait (out) */
	K_CANCEL,   /**< runs.cancel, then (wait=1) the run's end */
	K_WORKER,   /**< threads.get, then a worker answers (op: its method) */
	K_COPY,     /**< threads.copy, then a worker copies the checkpoints */
	K_STATE,    /**< threads.get, then a worker; a thread without a record: from its events */
	K_STATUS,   /**< a run's record: seed 004's stream status */
	K_AGENT,    /**< seed 002: a request becomes runs.create (threads.get first for a threadId) */
	K_THREAD,   /**< threads.create, then (supersteps) a worker of its graph applies them */
	K_TRUNCATE, /**< the test-only wipe (--test-truncate): the records', then the store's */
};

/** What an exchange answers with. */
enum tc_rest_out { OUT_JSON, OUT_STREAM, OUT_WAIT };

/** What a route does for one method: one M(…) of TC_REST_ROUTE_MAP. */
struct tc_rest_op {
	unsigned method; /**< a tc_http_method bit; 0: the end of a route's list */
	enum tc_rest_kind kind;
	const char *op; /**< the function's op (K_WORKER: the worker's method), or NULL */
	enum tc_rest_out out;
	unsigned flags; /**< TC_REST_W, TC_REST_STORE, TC_REST_SL */
};

/** How a run's stream is written: the SDK's stream modes, or one of the other seeds' formats. */
enum tc_rest_fmt { FMT_SDK, FMT_CHUNKS, FMT_NDJSON, FMT_AEP };

/** One REST exchange. */
struct tc_rest {
	struct tc_server *srv;
	struct tc_conn *conn; /**< NULL once the client is gone */
	int refs;             /**< the conn (or the pending body) and each answer awaited */
	const struct tc_rest_op *op;
	int route; /**< its route (enum tc_route_id) */
	char thread[TC_THREAD_ID_MAX + 1];
	char run_id[TC_ROUTE_VALUE_MAX + 1];
	cJSON *path;                          /**< {"thread_id":…, …}: the path's parameters */
	cJSON *query;                         /**< the query string (tc__http_query) */
	cJSON *body;                          /**< the body, NULL when none */
	char leid[128];                       /**< Last-Event-ID, "" when none */
	char fresh_run[40], fresh_thread[40]; /**< ids for what it may create */
	uint64_t after_seq;                   /**< a run's events come after this seq */
	char *kwargs;                         /**< a joined run's kwargs (JSON text) */
	uint64_t join_from;                   /**< a join from now: the thread's seq up to which nothing is sent */
	/* the response */
	enum tc_rest_out out;
	unsigned status;
	bool text; /**< the answer is an error's message (TC_HTTP_TEXT), not JSON */
	/**
	 * The answers are the Python server's, not the JavaScript one's (--rest-flavor, then
	 * what the REST function said of the graph or record the exchange concerns: its extra's
	 * "flavor"): errors as {"detail"} JSON, a cancel's wait, a join of a run that is over.
	 */
	bool python;
	char location[320], content_location[320];
	char pagination_total[24], pagination_next[24]; /**< X-Pagination-Total / -Next, "" when none */
	struct tc_buf *saved; /**< K_CANCEL / K_COPY: the body to answer once the rest is done */
	unsigned saved_status;
	enum tc_rest_fmt fk;                    /**< how a run's stream is written */
	struct tc_run_view view;                /**< a run's stream or wait: its place in the run's feed */
	char assistant[TC_ROUTE_VALUE_MAX + 1]; /**< a joined run's graph */
	cJSON *actions;                         /**< seed 002: the action ids the request answers */
	struct tc_bridge_caller caller;         /**< a worker's answer awaited (worker.c) */
	struct tc_query *query_read; /**< a state read from the thread's events in flight (worker.c), else NULL */
	/** Optional: the client went away before the exchange ended (runs.c: cancel on disconnect). */
	void (*gone)(struct tc_rest *r);
	struct tc_rest_parked *parked; /**< a call waiting for Redis to come back, else NULL (exchange.c) */
	/** Optional: runs.create refused the run; the job answers in its own words (agents.c). */
	void (*refused)(struct tc_rest *r, unsigned status, const char *body, size_t len);
};

/** A Redis reply for the exchange, given only while its client is there. */
typedef void tc_rest_reply_fn(struct tc_rest *r, redisReply *reply);

/** A new exchange of srv for route's op, one reference (the request's). */
struct tc_rest *tc__rest_new(struct tc_server *srv, int route, const struct tc_rest_op *op);
/** Takes one more reference. */
void tc__rest_ref(struct tc_rest *r);
/** Drops one reference; the last frees r. */
void tc__rest_unref(struct tc_rest *r);

/**
 * Makes the exchange's connection on wsi (taking over the request's
 * reference) once admitted; answers 503 itself when full or draining (a
 * call made while Redis is down waits for it a while: tc__rest_call).
 * Returns 1 when the connection is there, else what the
 * callback returns.
 */
int tc__rest_connect(struct tc_rest *r, struct lws *wsi, struct tc_pss *pss);

/**
 * Queues the whole answer (JSON body of len bytes) with status. An error's
 * {"detail": "<message>"} (the REST functions' shape) goes out as
 * tc__rest_answer_detail's.
 */
void tc__rest_answer(struct tc_rest *r, unsigned status, const char *body, size_t len);
/**
 * Answers an error as the server the exchange imitates writes them (its clients match the
 * words): the JavaScript one its message as text, the Python one {"detail": message}.
 */
void tc__rest_answer_detail(struct tc_rest *r, unsigned status, const char *detail);
/** Answers status with text as it is (text/plain), whatever the flavor. */
void tc__rest_answer_text(struct tc_rest *r, unsigned status, const char *text);
/** Answers body as JSON. */
void tc__rest_answer_json(struct tc_rest *r, unsigned status, const cJSON *body);
/** The body kept for later (r->saved, a cancel's or a copy's) is the answer now. */
void tc__rest_answer_saved(struct tc_rest *r);

/**
 * The exchange's response becomes a stream (a run's): its head goes out
 * with the first units; NDJSON gets no heartbeat comments.
 */
void tc__rest_stream(struct tc_rest *r, bool ndjson);
/** The stream is complete: once written, its body ends cleanly (its close is not a cut). */
void tc__rest_stream_finish(struct tc_rest *r);
/** Queues one unit of the stream (new text). */
void tc__rest_stream_unit(struct tc_rest *r, const char *text, size_t len);

/**
 * Sends argv; fn (NULL: none) gets the reply if the client is still there.
 * While Redis is down the call waits for it, up to 5 s (then 503). 0, or -1
 * having answered 503.
 */
int tc__rest_call(struct tc_rest *r, tc_rest_reply_fn *fn, const char *const *argv);
/** Calls the REST records' (or the store's) function with op and the exchange's arguments. */
void tc__rest_fcall(struct tc_rest *r, const char *op, tc_rest_reply_fn *fn);
/**
 * The function's {status, body[, extra]}: 0, or -1 having answered (500 or 503). An extra
 * naming a "flavor" sets r->python.
 */
int tc__rest_parse_answer(struct tc_rest *r, redisReply *reply, unsigned *status, const char **body, size_t *len);
/** A function's answer is the exchange's. */
void tc__rest_lua_answered(struct tc_rest *r, redisReply *reply);

/** A flag given as true, "true" or "1". */
bool tc__rest_truthy(const cJSON *v);

#endif
