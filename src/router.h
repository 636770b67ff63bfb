/*
 * router.h — which route an HTTP request is for: a pure route table matcher.
 *
 * No sockets, no lws: a method and a path go in, a route id and the path's
 * parameters come out, so the table is unit-tested on its own
 * (tests/unit/test_router.c) and http.c only dispatches on the id.
 *
 * A pattern is a path of segments, each a literal ("threads") or a
 * parameter (":thread_id"), matched segment by segment against the request
 * path: "/threads/:thread_id/stream" matches "/threads/t1/stream" with
 * thread_id "t1". A new route is one line in TC_ROUTE_MAP; a route serves
 * the methods its line names, and several lines may share a pattern with
 * different methods.
 *
 * Every parameter is validated before the route is reported: thread_id is a
 * thread id (util.h), and so is any other parameter unless router.c gives
 * its name a rule of its own. A path whose only fault is a parameter is
 * answered for that route (400 invalid_thread_id), not as an unknown path.
 */
#ifndef TC_ROUTER_H
#define TC_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/** HTTP methods as bits, so that a route can name every method it serves. */
enum tc_http_method {
	TC_HTTP_GET = 1 << 0,
	TC_HTTP_POST = 1 << 1,
	TC_HTTP_PUT = 1 << 2,
	TC_HTTP_PATCH = 1 << 3,
	TC_HTTP_DELETE = 1 << 4,
	TC_HTTP_HEAD = 1 << 5,
	TC_HTTP_OPTIONS = 1 << 6,
	TC_HTTP_OTHER = 1 << 7, /**< any other method (CONNECT, unknown): no route serves it */
};

/**
 * X(ENUM, methods, pattern): threadcast's routes. Among the routes that
 * match a request, the first in this order wins. Paths no route matches go
 * to --static-dir (GET) or get 404.
 */
#define TC_ROUTE_MAP(X)                                                       \
	X(HEALTHZ, TC_HTTP_GET, "/healthz")                                   \
	X(READYZ, TC_HTTP_GET, "/readyz")                                     \
	X(METRICS, TC_HTTP_GET, "/metrics")                                   \
	X(STREAM, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/stream")   \
	X(STREAM_EVENTS, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/stream/events") \
	X(COMMANDS, TC_HTTP_POST, "/threads/:thread_id/commands")             \
	X(STATE, TC_HTTP_GET, "/threads/:thread_id/state")                   \
	TC_REST_ROUTE_MAP(X)

/**
 * The Agent Protocol's REST API (rest.h). Literal segments come before the
 * parameters they could be mistaken for ("/threads/search" before
 * "/threads/:thread_id").
 */
#define TC_REST_ROUTE_MAP(X)                                                                   \
	X(R_THREADS, TC_HTTP_POST, "/threads")                                                 \
	X(R_THREADS_SEARCH, TC_HTTP_POST, "/threads/search")                                   \
	X(R_THREAD, TC_HTTP_GET | TC_HTTP_PATCH | TC_HTTP_DELETE, "/threads/:thread_id")       \
	X(R_THREAD_COPY, TC_HTTP_POST, "/threads/:thread_id/copy")                             \
	X(R_STATE_UPDATE, TC_HTTP_POST, "/threads/:thread_id/state")                           \
	X(R_STATE_CKPT, TC_HTTP_POST, "/threads/:thread_id/state/checkpoint")                  \
	X(R_STATE_AT, TC_HTTP_GET, "/threads/:thread_id/state/:checkpoint_id")                 \
	X(R_HISTORY, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/history")                \
	X(R_RUNS, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/runs")                      \
	X(R_RUNS_STREAM, TC_HTTP_POST, "/threads/:thread_id/runs/stream")                      \
	X(R_RUNS_WAIT, TC_HTTP_POST, "/threads/:thread_id/runs/wait")                          \
	X(R_RUN, TC_HTTP_GET | TC_HTTP_DELETE, "/threads/:thread_id/runs/:run_id")             \
	X(R_RUN_STREAM, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/stream")                \
	X(R_RUN_JOIN, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/join")                    \
	X(R_RUN_WAIT, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/wait")                    \
	X(R_RUN_CANCEL, TC_HTTP_POST, "/threads/:thread_id/runs/:run_id/cancel")               \
	X(R_RUN_CHUNKS, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/chunks")                \
	X(R_RUN_CHUNKS_STATUS, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/chunks/status")  \
	X(R_RUN_NDJSON, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/ndjson")                \
	X(R_SL_RUNS, TC_HTTP_POST, "/runs")                                                    \
	X(R_SL_STREAM, TC_HTTP_POST, "/runs/stream")                                           \
	X(R_SL_WAIT, TC_HTTP_POST, "/runs/wait")                                               \
	X(R_STORE_ITEMS, TC_HTTP_GET | TC_HTTP_PUT | TC_HTTP_DELETE, "/store/items")           \
	X(R_STORE_SEARCH, TC_HTTP_POST, "/store/items/search")                                 \
	X(R_STORE_NS, TC_HTTP_POST, "/store/namespaces")                                       \
	X(R_ASSISTANTS_SEARCH, TC_HTTP_POST, "/assistants/search")                             \
	X(R_ASSISTANT, TC_HTTP_GET, "/assistants/:assistant_id")                               \
	X(R_ASSISTANT_GRAPH, TC_HTTP_GET, "/assistants/:assistant_id/graph")                   \
	X(R_ASSISTANT_SCHEMAS, TC_HTTP_GET, "/assistants/:assistant_id/schemas")             \
	X(R_AGENT_STREAM, TC_HTTP_POST, "/v1/agents/:agent_name/stream")                       \
	X(R_AGENT_RUN_STREAM, TC_HTTP_GET, "/v1/agents/:agent_name/threads/:thread_id/runs/:run_id/stream")

#define TC__ROUTE_ENUM(e, methods, pattern) TC_ROUTE_##e,
/** Route ids: index into tc_routes. */
enum tc_route_id { TC_ROUTE_MAP(TC__ROUTE_ENUM) TC_ROUTE_COUNT };

/** One line of a route table. */
struct tc_route {
	int id;              /**< what the match reports (enum tc_route_id in tc_routes) */
	unsigned methods;    /**< tc_http_method bits this route serves */
	const char *pattern; /**< "/segment/:param/…"; at most TC_ROUTE_PARAMS_MAX params */
};

/** threadcast's route table, TC_ROUTE_COUNT lines in TC_ROUTE_MAP's order. */
extern const struct tc_route tc_routes[TC_ROUTE_COUNT];

/** Most parameters one pattern may have. */
#define TC_ROUTE_PARAMS_MAX 4
/** Longest parameter value (bytes); every validation rule stays within it. */
#define TC_ROUTE_VALUE_MAX TC_THREAD_ID_MAX

/** One parameter a match captured. */
struct tc_route_param {
	const char *name; /**< points into the pattern, after the ':'; name_len bytes, no NUL */
	size_t name_len;  /**< length of name */
	char value[TC_ROUTE_VALUE_MAX + 1]; /**< the path segment, validated, NUL-terminated */
};

/** What tc_route_match() found. */
enum tc_match {
	TC_MATCH_FOUND,      /**< a route serves this method and path: id, params */
	TC_MATCH_NONE,       /**< no route has this path */
	TC_MATCH_METHOD,     /**< the path is a route's (id, params) but no route serves the method */
	TC_MATCH_BAD_PARAM,  /**< the path is a route's (id) but a parameter is not valid: error, message */
};

/** The result of a match; which fields are set depends on the enum tc_match. */
struct tc_route_match {
	int id;         /**< FOUND, METHOD, BAD_PARAM: the route's id */
	size_t nparams; /**< FOUND, METHOD: parameters captured, in pattern order */
	struct tc_route_param params[TC_ROUTE_PARAMS_MAX]; /**< FOUND, METHOD */
	const char *error;   /**< BAD_PARAM: the wire error code, e.g. "invalid_thread_id" */
	const char *message; /**< BAD_PARAM: what a valid value looks like */
};

/**
 * Matches method (one tc_http_method bit) and path (the decoded request
 * path, starting with '/', no query) against routes[0..n). A route that
 * serves the method wins over one that only has the path; a path that fits
 * a route apart from a parameter is BAD_PARAM. Fills m; never allocates.
 */
enum tc_match tc_route_match(const struct tc_route *routes, size_t n, unsigned method, const char *path,
			     struct tc_route_match *m);

/** The value of the parameter called name in a FOUND or METHOD match, or NULL. */
const char *tc_route_param(const struct tc_route_match *m, const char *name);

#endif
