/* Unit tests: router.c — the route table, method-aware matching, path parameters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "router.h"

static const char bad_thread[] = "a thread id is 1 to 128 characters of A-Z a-z 0-9 . _ : -";

/* Matches against threadcast's own table. */
static enum tc_match route(unsigned method, const char *path, struct tc_route_match *m)
{
	return tc_route_match(tc_routes, TC_ROUTE_COUNT, method, path, m);
}

static void table_is_well_formed(void **state)
{
	for (int i = 0; i < TC_ROUTE_COUNT; i++) {
		assert_int_equal(tc_routes[i].id, i);
		assert_int_equal(tc_routes[i].pattern[0], '/');
		assert_true(tc_routes[i].methods != 0);
		assert_int_equal(tc_routes[i].methods & TC_HTTP_OTHER, 0);
		size_t params = 0;
		for (const char *p = tc_routes[i].pattern; (p = strstr(p, "/:")); p++)
			params++;
		assert_true(params <= TC_ROUTE_PARAMS_MAX);
	}
}

static void plain_routes(void **state)
{
	struct tc_route_match m;
	static const struct {
		const char *path;
		int id;
	} cases[] = {
		{ "/healthz", TC_ROUTE_HEALTHZ },
		{ "/readyz", TC_ROUTE_READYZ },
		{ "/metrics", TC_ROUTE_METRICS },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(route(TC_HTTP_GET, cases[i].path, &m), TC_MATCH_FOUND);
		assert_int_equal(m.id, cases[i].id);
		assert_int_equal(m.nparams, 0);
		/* GET only: other methods find the route but not a way to serve them. */
		for (unsigned meth = TC_HTTP_POST; meth <= TC_HTTP_OTHER; meth <<= 1) {
			assert_int_equal(route(meth, cases[i].path, &m), TC_MATCH_METHOD);
			assert_int_equal(m.id, cases[i].id);
		}
	}
}

static void thread_routes(void **state)
{
	struct tc_route_match m;

	assert_int_equal(route(TC_HTTP_GET, "/threads/t1/stream", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_STREAM);
	assert_int_equal(m.nparams, 1);
	assert_string_equal(tc_route_param(&m, "thread_id"), "t1");
	assert_null(tc_route_param(&m, "run_id"));
	assert_null(tc_route_param(&m, "thread"));

	assert_int_equal(route(TC_HTTP_POST, "/threads/a.b_c:d-E9/stream", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_STREAM);
	assert_string_equal(tc_route_param(&m, "thread_id"), "a.b_c:d-E9");

	assert_int_equal(route(TC_HTTP_PUT, "/threads/t1/stream", &m), TC_MATCH_METHOD);
	assert_int_equal(m.id, TC_ROUTE_STREAM);
	assert_string_equal(tc_route_param(&m, "thread_id"), "t1");

	assert_int_equal(route(TC_HTTP_POST, "/threads/t1/commands", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_COMMANDS);
	assert_string_equal(tc_route_param(&m, "thread_id"), "t1");
	assert_int_equal(route(TC_HTTP_GET, "/threads/t1/commands", &m), TC_MATCH_METHOD);
	assert_int_equal(m.id, TC_ROUTE_COMMANDS);

	/* A thread may be called like a route's literal. */
	assert_int_equal(route(TC_HTTP_GET, "/threads/stream/stream", &m), TC_MATCH_FOUND);
	assert_string_equal(tc_route_param(&m, "thread_id"), "stream");
	assert_int_equal(route(TC_HTTP_POST, "/threads/threads/commands", &m), TC_MATCH_FOUND);
	assert_string_equal(tc_route_param(&m, "thread_id"), "threads");
}

static void thread_id_limits(void **state)
{
	struct tc_route_match m;
	char path[300], id[140];

	memset(id, 'a', sizeof(id));
	id[128] = '\0';
	snprintf(path, sizeof(path), "/threads/%s/stream", id);
	assert_int_equal(route(TC_HTTP_GET, path, &m), TC_MATCH_FOUND);
	assert_string_equal(tc_route_param(&m, "thread_id"), id);

	id[128] = 'a';
	id[129] = '\0';
	snprintf(path, sizeof(path), "/threads/%s/stream", id);
	assert_int_equal(route(TC_HTTP_GET, path, &m), TC_MATCH_BAD_PARAM);
	assert_int_equal(m.id, TC_ROUTE_STREAM);
	assert_string_equal(m.error, "invalid_thread_id");
	assert_string_equal(m.message, bad_thread);
}

static void bad_thread_ids(void **state)
{
	/* Every one is answered 400 invalid_thread_id, whatever the method:
	 * braces, spaces, nothing at all, or a '/' (sent as %2F) inside. */
	static const struct {
		const char *path;
		int id;
	} cases[] = {
		{ "/threads/bad{id/stream", TC_ROUTE_STREAM },
		{ "/threads/a b/stream", TC_ROUTE_STREAM },
		{ "/threads/\xc3\xa9/stream", TC_ROUTE_STREAM },
		{ "/threads//stream", TC_ROUTE_STREAM },
		{ "/threads/a/b/stream", TC_ROUTE_STREAM },
		{ "/threads/x//stream", TC_ROUTE_STREAM },
		{ "/threads///stream", TC_ROUTE_STREAM },
		{ "/threads/a/b/c/commands", TC_ROUTE_COMMANDS },
		{ "/threads/a/stream/commands", TC_ROUTE_COMMANDS },
		{ "/threads/x/commands/stream", TC_ROUTE_STREAM },
		{ "/threads//commands", TC_ROUTE_COMMANDS },
	};
	struct tc_route_match m;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (unsigned meth = TC_HTTP_GET; meth <= TC_HTTP_OTHER; meth <<= 1) {
			assert_int_equal(route(meth, cases[i].path, &m), TC_MATCH_BAD_PARAM);
			assert_int_equal(m.id, cases[i].id);
			assert_string_equal(m.error, "invalid_thread_id");
			assert_string_equal(m.message, bad_thread);
		}
	}
}

/* The 0.0.21 routes (issue 15) sit beside the seed's. */
static void protocol_021_routes(void **state)
{
	struct tc_route_match m;
	assert_int_equal(route(TC_HTTP_GET, "/threads/t1/stream/events", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_STREAM_EVENTS);
	assert_string_equal(tc_route_param(&m, "thread_id"), "t1");
	assert_int_equal(route(TC_HTTP_POST, "/threads/t1/stream/events", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_STREAM_EVENTS);
	assert_int_equal(route(TC_HTTP_GET, "/threads/t1/state", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_STATE);
	assert_int_equal(route(TC_HTTP_PUT, "/threads/t1/state", &m), TC_MATCH_METHOD);
	assert_int_equal(route(TC_HTTP_GET, "/threads/t%7B/stream/events", &m), TC_MATCH_BAD_PARAM);
}

/* The Agent Protocol's REST API (issue 17): literals win over the parameters they look like. */
static void rest_routes(void **state)
{
	struct tc_route_match m;
	assert_int_equal(route(TC_HTTP_POST, "/threads/t1/state", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_STATE_UPDATE);
	assert_int_equal(route(TC_HTTP_POST, "/threads/search", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_THREADS_SEARCH);
	assert_int_equal(route(TC_HTTP_GET, "/threads/search", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_THREAD);
	assert_string_equal(tc_route_param(&m, "thread_id"), "search");
	assert_int_equal(route(TC_HTTP_POST, "/threads/t1/runs/stream", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_RUNS_STREAM);
	assert_int_equal(route(TC_HTTP_GET, "/threads/t1/runs/r-1/stream", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_RUN_STREAM);
	assert_string_equal(tc_route_param(&m, "run_id"), "r-1");
	assert_int_equal(route(TC_HTTP_DELETE, "/threads/t1/runs/r-1", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_RUN);
	assert_int_equal(route(TC_HTTP_POST, "/threads/t1/runs/r-1", &m), TC_MATCH_METHOD);
	assert_int_equal(route(TC_HTTP_GET, "/threads/t1/state/ck-1", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_STATE_AT);
	assert_int_equal(route(TC_HTTP_POST, "/threads/t1/state/checkpoint", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_STATE_CKPT);
	assert_int_equal(route(TC_HTTP_POST, "/runs/wait", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_SL_WAIT);
	assert_int_equal(route(TC_HTTP_DELETE, "/store/items", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_STORE_ITEMS);
	assert_int_equal(route(TC_HTTP_GET, "/assistants/agent/schemas", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT_SCHEMAS);
	assert_string_equal(tc_route_param(&m, "assistant_id"), "agent");
	assert_int_equal(route(TC_HTTP_GET, "/assistants/a%20b", &m), TC_MATCH_BAD_PARAM);
}

/* The assistants (issue 26): their literal routes before the id, a subgraph's namespace with its "|". */
static void assistant_routes(void **state)
{
	struct tc_route_match m;
	assert_int_equal(route(TC_HTTP_POST, "/assistants", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANTS);
	assert_int_equal(route(TC_HTTP_POST, "/assistants/count", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANTS_COUNT);
	assert_int_equal(route(TC_HTTP_GET, "/assistants/count", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT);
	assert_string_equal(tc_route_param(&m, "assistant_id"), "count");
	for (unsigned meth = TC_HTTP_PATCH; meth <= TC_HTTP_DELETE; meth <<= 1) {
		assert_int_equal(route(meth, "/assistants/a-1", &m), TC_MATCH_FOUND);
		assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT);
	}
	assert_int_equal(route(TC_HTTP_POST, "/assistants/a-1/versions", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT_VERSIONS);
	assert_int_equal(route(TC_HTTP_POST, "/assistants/a-1/latest", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT_LATEST);
	assert_int_equal(route(TC_HTTP_GET, "/assistants/a-1/subgraphs", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT_SUBGRAPHS);
	assert_int_equal(route(TC_HTTP_GET, "/assistants/a-1/subgraphs/gp_two|p two", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_ASSISTANT_SUBGRAPH);
	assert_string_equal(tc_route_param(&m, "namespace"), "gp_two|p two");
	assert_int_equal(route(TC_HTTP_GET, "/assistants/a-1/subgraphs/a\tb", &m), TC_MATCH_BAD_PARAM);
	assert_string_equal(m.error, "invalid_argument");
	assert_int_equal(route(TC_HTTP_GET, "/assistants/a|b/subgraphs", &m), TC_MATCH_BAD_PARAM);
	assert_int_equal(route(TC_HTTP_POST, "/threads/count", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_THREADS_COUNT);
	assert_int_equal(route(TC_HTTP_POST, "/internal/truncate", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, TC_ROUTE_R_TRUNCATE);
}

static void unknown_paths(void **state)
{
	static const char *const paths[] = {
		"/",
		"",
		"healthz",
		"/nope",
		"/healthz/",
		"/Healthz",
		"/healthzz",
		"//healthz",
		"/threads/t1/x/y",
		"/runs/x/y",
		"/threads/t1/stream/",
		"/threads/t1/streamx",
		"/threads/t1/Stream",
		"threads/t1/stream",
		"/threads/t1/stream/event",
		"/x/threads/t1/stream",
		"/index.html",
		"/threads/t1/commands/x",
		"/threads/t1/stream/events/x",
		"/threads/t1/states",
	};
	struct tc_route_match m;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		for (unsigned meth = TC_HTTP_GET; meth <= TC_HTTP_OTHER; meth <<= 1)
			if (route(meth, paths[i], &m) != TC_MATCH_NONE)
				fail_msg("%s matched a route", paths[i]);
}

/* The routes the next issues bring, to show the matcher holds them. */
enum { R_STREAM, R_RUN_STREAM, R_SEARCH, R_THREAD, R_STATE_GET, R_STATE_POST, R_ITEMS, R_ASSISTANTS };
static const struct tc_route more[] = {
	{ R_STREAM, TC_HTTP_GET | TC_HTTP_POST, "/threads/:thread_id/stream" },
	{ R_RUN_STREAM, TC_HTTP_GET, "/threads/:thread_id/runs/:run_id/stream" },
	{ R_SEARCH, TC_HTTP_POST, "/threads/search" },
	{ R_THREAD, TC_HTTP_GET | TC_HTTP_DELETE | TC_HTTP_PATCH, "/threads/:thread_id" },
	{ R_STATE_GET, TC_HTTP_GET, "/threads/:thread_id/state" },
	{ R_STATE_POST, TC_HTTP_POST, "/threads/:thread_id/state" },
	{ R_ITEMS, TC_HTTP_PUT | TC_HTTP_GET | TC_HTTP_DELETE, "/store/items" },
	{ R_ASSISTANTS, TC_HTTP_POST, "/assistants/search" },
};
#define NMORE (sizeof(more) / sizeof(more[0]))

static void several_params(void **state)
{
	struct tc_route_match m;

	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_GET, "/threads/t1/runs/r-9/stream", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_RUN_STREAM);
	assert_int_equal(m.nparams, 2);
	assert_string_equal(m.params[0].value, "t1");
	assert_string_equal(tc_route_param(&m, "thread_id"), "t1");
	assert_string_equal(tc_route_param(&m, "run_id"), "r-9");

	/* A parameter other than thread_id has the general rule and complaint. */
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_GET, "/threads/t1/runs/r{9}/stream", &m),
			 TC_MATCH_BAD_PARAM);
	assert_int_equal(m.id, R_RUN_STREAM);
	assert_string_equal(m.error, "invalid_argument");
	/* With both bad, the first is reported. */
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_GET, "/threads/t{1}/runs/r{9}/stream", &m),
			 TC_MATCH_BAD_PARAM);
	assert_string_equal(m.error, "invalid_thread_id");
	/* The run route wins over the stream route reading "t1/runs/r9" as a thread. */
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_POST, "/threads/t1/runs/r9/stream", &m), TC_MATCH_METHOD);
	assert_int_equal(m.id, R_RUN_STREAM);
}

static void methods_pick_the_route(void **state)
{
	struct tc_route_match m;

	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_GET, "/threads/t1/state", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_STATE_GET);
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_POST, "/threads/t1/state", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_STATE_POST);
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_DELETE, "/threads/t1/state", &m), TC_MATCH_METHOD);
	assert_int_equal(m.id, R_STATE_GET); /* the first line with the path */

	/* A literal and a parameter both fit: the method decides, then the order. */
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_POST, "/threads/search", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_SEARCH);
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_GET, "/threads/search", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_THREAD);
	assert_string_equal(tc_route_param(&m, "thread_id"), "search");
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_PUT, "/threads/search", &m), TC_MATCH_METHOD);
	assert_int_equal(m.id, R_SEARCH);

	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_PUT, "/store/items", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_ITEMS);
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_POST, "/assistants/search", &m), TC_MATCH_FOUND);
	assert_int_equal(m.id, R_ASSISTANTS);
	assert_int_equal(tc_route_match(more, NMORE, TC_HTTP_POST, "/assistants", &m), TC_MATCH_NONE);
}

/* Thirty routes: each path finds its own. */
static void thirty_routes(void **state)
{
	static char patterns[30][64], paths[30][64];
	struct tc_route table[30];
	struct tc_route_match m;

	for (int i = 0; i < 30; i++) {
		if (i % 3 == 0)
			snprintf(patterns[i], sizeof(patterns[i]), "/r%d", i);
		else if (i % 3 == 1)
			snprintf(patterns[i], sizeof(patterns[i]), "/threads/:thread_id/r%d", i);
		else
			snprintf(patterns[i], sizeof(patterns[i]), "/threads/:thread_id/r%d/:item/x", i);
		table[i] = (struct tc_route){ .id = i, .methods = TC_HTTP_GET, .pattern = patterns[i] };
		if (i % 3 == 0)
			snprintf(paths[i], sizeof(paths[i]), "/r%d", i);
		else if (i % 3 == 1)
			snprintf(paths[i], sizeof(paths[i]), "/threads/t%d/r%d", i, i);
		else
			snprintf(paths[i], sizeof(paths[i]), "/threads/t%d/r%d/i%d/x", i, i, i);
	}
	for (int i = 0; i < 30; i++) {
		assert_int_equal(tc_route_match(table, 30, TC_HTTP_GET, paths[i], &m), TC_MATCH_FOUND);
		assert_int_equal(m.id, i);
		assert_int_equal(m.nparams, (size_t)(i % 3));
	}
	assert_int_equal(tc_route_match(table, 30, TC_HTTP_GET, "/r30", &m), TC_MATCH_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table_is_well_formed),   cmocka_unit_test(plain_routes),
		cmocka_unit_test(thread_routes),          cmocka_unit_test(thread_id_limits),
		cmocka_unit_test(bad_thread_ids),         cmocka_unit_test(unknown_paths),
		cmocka_unit_test(protocol_021_routes),    cmocka_unit_test(rest_routes),
		cmocka_unit_test(assistant_routes),       cmocka_unit_test(several_params),
		cmocka_unit_test(methods_pick_the_route), cmocka_unit_test(thirty_routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
