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
 * thread_id "t1". A new route is one line in TC_CORE_ROUTE_MAP or
 * TC_REST_ROUTE_MAP; a route serves the methods its line names, and several
 * lines may share a pattern with different methods.
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
 * X(ENUM, methods, pattern): threadcast's own routes. Among the routes that
 * match a request, the first in this order wins (these, then the REST API's
 * below). Paths no route matches go to --static-dir (GET) or get 404.
 */
#define TC_CORE_ROUTE_MAP(X)                                                                                           \
	X(HEALTHZ, TC_HTTP_GET, "/healthz")                                                                            \
	X(READYZ, TC_HTTP_GET, "/readyz")                                                                              \
	X(METRICS, TC_HTTP_GET, "/metrics")                                                                            \
	X(INFO, TC_HTTP_GET, "/info")                                                                                  \
	X(OK, TC_HTTP_GET, "/ok")                                                                                      \
	X(STREAM, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/stream")                                            \
	X(STREAM_EVENTS, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/stream/events")                              \
	X(COMMANDS, TC_HTTP_POST, "/threads/:thread_id/commands")

/**
 * X(ENUM, pattern, M(…) M(…) …): the Agent Protocol's REST API (rest/),
 * one line a route, with what each method it serves does:
 * M(METHOD, KIND, "op", OUT, FLAGS) — how rest/routes.c serves it (KIND:
 * one function call LUA, a run's CREATE / JOIN / CANCEL / STATUS, a worker
 * answers WORKER / COPY / STATE / BULK, seed 002's AGENT), the Redis function's op
 * (or the worker's method), the response (JSON, a run's STREAM, a WAIT for
 * its end), and flags: TC_REST_W the token's "commands" right is needed,
 * TC_REST_STORE the store's function, TC_REST_SL a run on a new, temporary
 * thread. Literal segments come before the parameters they could be
 * mistaken for ("/threads/search" before "/threads/:thread_id").
 */
#define TC_REST_ROUTE_MAP(X, M)                                                                                        \
	X(STATE, "/threads/:thread_id/state", M(GET, STATE, "rest.state.get", JSON, 0))                                \
	X(R_THREADS, "/threads", M(POST, BULK, "threads.create", JSON, TC_REST_W))                                     \
	X(R_THREADS_SEARCH, "/threads/search", M(POST, LUA, "threads.search", JSON, 0))                                \
	X(R_THREAD, "/threads/:thread_id",                                                                             \
	  M(GET, LUA, "threads.get", JSON, 0) M(PATCH, LUA, "threads.patch", JSON, TC_REST_W)                          \
		  M(DELETE, LUA, "threads.delete", JSON, TC_REST_W))                                                   \
	X(R_THREAD_COPY, "/threads/:thread_id/copy", M(POST, COPY, "threads.copy", JSON, TC_REST_W))                   \
	X(R_STATE_UPDATE, "/threads/:thread_id/state", M(POST, WORKER, "rest.state.update", JSON, TC_REST_W))          \
	X(R_STATE_CKPT, "/threads/:thread_id/state/checkpoint", M(POST, WORKER, "rest.state.get", JSON, 0))            \
	X(R_STATE_AT, "/threads/:thread_id/state/:checkpoint_id", M(GET, WORKER, "rest.state.get", JSON, 0))           \
	X(R_HISTORY, "/threads/:thread_id/history",                                                                    \
	  M(GET, WORKER, "rest.history", JSON, 0) M(POST, WORKER, "rest.history", JSON, 0))                            \
	X(R_RUNS, "/threads/:thread_id/runs",                                                                          \
	  M(GET, LUA, "runs.list", JSON, 0) M(POST, CREATE, "runs.create", JSON, TC_REST_W))                           \
	X(R_RUNS_STREAM, "/threads/:thread_id/runs/stream", M(POST, CREATE, "runs.create", STREAM, TC_REST_W))         \
	X(R_RUNS_WAIT, "/threads/:thread_id/runs/wait", M(POST, CREATE, "runs.create", WAIT, TC_REST_W))               \
	X(R_RUN, "/threads/:thread_id/runs/:run_id",                                                                   \
	  M(GET, LUA, "runs.get", JSON, 0) M(DELETE, LUA, "runs.delete", JSON, TC_REST_W))                             \
	X(R_RUN_STREAM, "/threads/:thread_id/runs/:run_id/stream", M(GET, JOIN, NULL, STREAM, 0))                      \
	X(R_RUN_JOIN, "/threads/:thread_id/runs/:run_id/join", M(GET, JOIN, NULL, WAIT, 0))                            \
	X(R_RUN_WAIT, "/threads/:thread_id/runs/:run_id/wait", M(GET, JOIN, NULL, WAIT, 0))                            \
	X(R_RUN_CANCEL, "/threads/:thread_id/runs/:run_id/cancel", M(POST, CANCEL, "runs.cancel", JSON, TC_REST_W))    \
	X(R_RUN_CHUNKS, "/threads/:thread_id/runs/:run_id/chunks", M(GET, JOIN, NULL, STREAM, 0))                      \
	X(R_RUN_CHUNKS_STATUS, "/threads/:thread_id/runs/:run_id/chunks/status", M(GET, STATUS, NULL, JSON, 0))        \
	X(R_RUN_NDJSON, "/threads/:thread_id/runs/:run_id/ndjson", M(GET, JOIN, NULL, STREAM, 0))                      \
	X(R_SL_RUNS, "/runs", M(POST, CREATE, "runs.create", JSON, TC_REST_W | TC_REST_SL))                            \
	X(R_SL_STREAM, "/runs/stream", M(POST, CREATE, "runs.create", STREAM, TC_REST_W | TC_REST_SL))                 \
	X(R_SL_WAIT, "/runs/wait", M(POST, CREATE, "runs.create", WAIT, TC_REST_W | TC_REST_SL))                       \
	X(R_STORE_ITEMS, "/store/items",                                                                               \
	  M(GET, LUA, "store.get", JSON, TC_REST_STORE) M(PUT, LUA, "store.put", JSON, TC_REST_STORE | TC_REST_W)      \
		  M(DELETE, LUA, "store.delete", JSON, TC_REST_STORE | TC_REST_W))                                     \
	X(R_STORE_SEARCH, "/store/items/search", M(POST, LUA, "store.search", JSON, TC_REST_STORE))                    \
	X(R_STORE_NS, "/store/namespaces", M(POST, LUA, "store.namespaces", JSON, TC_REST_STORE))                      \
	X(R_ASSISTANTS_SEARCH, "/assistants/search", M(POST, LUA, "assistants.search", JSON, 0))                       \
	X(R_ASSISTANT, "/assistants/:assistant_id", M(GET, LUA, "assistants.get", JSON, 0))                            \
	X(R_ASSISTANT_GRAPH, "/assistants/:assistant_id/graph", M(GET, LUA, "assistants.graph", JSON, 0))              \
	X(R_ASSISTANT_SCHEMAS, "/assistants/:assistant_id/schemas", M(GET, LUA, "assistants.schemas", JSON, 0))        \
	X(R_AGENT_STREAM, "/v1/agents/:agent_name/stream", M(POST, AGENT, "runs.create", STREAM, TC_REST_W))           \
	X(R_AGENT_RUN_STREAM, "/v1/agents/:agent_name/threads/:thread_id/runs/:run_id/stream",                         \
	  M(GET, JOIN, NULL, STREAM, 0))

/** TC_REST_ROUTE_MAP's flags. */
enum {
	TC_REST_W = 1 << 0,     /**< changes something: the token's "commands" right is needed */
	TC_REST_STORE = 1 << 1, /**< the store's function (threadcast_store) */
	TC_REST_SL = 1 << 2,    /**< a stateless run: on a new, temporary thread */
};

/** The methods of a REST line's M(…)s, as the route table's bits. */
#define TC__REST_METHOD_BIT(meth, kind, op, out, flags) | TC_HTTP_##meth

#define TC__ROUTE_ENUM(e, methods, pattern) TC_ROUTE_##e,
#define TC__REST_ROUTE_ENUM(e, pattern, ms) TC_ROUTE_##e,
/** Route ids: index into tc_routes; the REST API's from TC_ROUTE_STATE on. */
enum tc_route_id {
	TC_CORE_ROUTE_MAP(TC__ROUTE_ENUM) TC_REST_ROUTE_MAP(TC__REST_ROUTE_ENUM, TC__REST_METHOD_BIT) TC_ROUTE_COUNT,
	TC_ROUTE_REST_FIRST = TC_ROUTE_STATE,
};

/** One line of a route table. */
struct tc_route {
	int id;              /**< what the match reports (enum tc_route_id in tc_routes) */
	unsigned methods;    /**< tc_http_method bits this route serves */
	const char *pattern; /**< "/segment/:param/…"; at most TC_ROUTE_PARAMS_MAX params */
};

/** threadcast's route table, TC_ROUTE_COUNT lines: TC_CORE_ROUTE_MAP's, then TC_REST_ROUTE_MAP's. */
extern const struct tc_route tc_routes[TC_ROUTE_COUNT];

/** Most parameters one pattern may have. */
#define TC_ROUTE_PARAMS_MAX 4
/** Longest parameter value (bytes); every validation rule stays within it. */
#define TC_ROUTE_VALUE_MAX TC_THREAD_ID_MAX

/** One parameter a match captured. */
struct tc_route_param {
	const char *name;                   /**< points into the pattern, after the ':'; name_len bytes, no NUL */
	size_t name_len;                    /**< length of name */
	char value[TC_ROUTE_VALUE_MAX + 1]; /**< the path segment, validated, NUL-terminated */
};

/** What tc_route_match() found. */
enum tc_match {
	TC_MATCH_FOUND,     /**< a route serves this method and path: id, params */
	TC_MATCH_NONE,      /**< no route has this path */
	TC_MATCH_METHOD,    /**< the path is a route's (id, params) but no route serves the method */
	TC_MATCH_BAD_PARAM, /**< the path is a route's (id) but a parameter is not valid: error, message */
};

/** The result of a match; which fields are set depends on the enum tc_match. */
struct tc_route_match {
	int id;                                            /**< FOUND, METHOD, BAD_PARAM: the route's id */
	size_t nparams;                                    /**< FOUND, METHOD: parameters captured, in pattern order */
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
