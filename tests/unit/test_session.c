/* Unit tests: session.c — one reply per command, subscription registry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "protocol.h"
#include "redis.h"
#include "session.h"
#include "util.h"

struct sink {
	cJSON *frames[64];
	int n;
};

static void sink_send(void *ctx, struct tc_buf *b)
{
	struct sink *s = ctx;
	assert_true(s->n < 64);
	s->frames[s->n] = cJSON_ParseWithLength((const char *)tc_buf_data(b), b->len);
	assert_non_null(s->frames[s->n]);
	s->n++;
	tc_buf_unref(b);
}

static size_t sink_queued(void *ctx)
{
	return 0;
}

static void sink_set_reading(void *ctx, bool reading)
{
}

static void sink_close(void *ctx, int code, const char *reason)
{
	fail_msg("unexpected close %d %s", code, reason);
}

static const struct tc_session_io io = {
	.kind = TC_FRAME_WS,
	.send = sink_send,
	.queued = sink_queued,
	.set_reading = sink_set_reading,
	.close = sink_close,
};

/* A session whose Redis is unreachable (the loop never runs): everything
 * that does not need Redis is answered at once, the rest says Redis is down. */
struct fixture {
	struct tc_config cfg;
	uv_loop_t loop;
	struct tc_redis *redis;
	struct tc_hub *hub;
	struct tc_session_env env;
	struct sink sink;
	struct tc_session *s;
};

static int setup(void **state)
{
	struct fixture *fx = tc_xcalloc(1, sizeof(*fx));
	char err[256];
	char *argv[] = { (char *)"threadcast", (char *)"--max-subscriptions=2",
			 (char *)"--redis-url=redis://127.0.0.1:1", (char *)"--auth=off" };
	assert_int_equal(tc_config_load(&fx->cfg, 4, argv, err, sizeof(err)), TC_CONFIG_OK);
	uv_loop_init(&fx->loop);
	fx->redis = tc_redis_new(&fx->loop, &fx->cfg, "", 0, 0);
	fx->hub = tc_hub_new(&fx->cfg, fx->redis);
	fx->env = (struct tc_session_env){ .cfg = &fx->cfg, .hub = fx->hub, .redis = fx->redis };
	fx->s = tc_session_new(&fx->env, "t1", &io, &fx->sink);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	for (int i = 0; i < fx->sink.n; i++)
		cJSON_Delete(fx->sink.frames[i]);
	tc_session_close(fx->s);
	tc_hub_free(fx->hub);
	tc_redis_stop(fx->redis);
	uv_run(&fx->loop, UV_RUN_DEFAULT);
	tc_redis_free(fx->redis);
	assert_int_equal(uv_loop_close(&fx->loop), 0);
	tc_config_free(&fx->cfg);
	free(fx);
	return 0;
}

/* Sends one frame and returns the single reply it produced. */
static cJSON *roundtrip(struct fixture *fx, const char *frame)
{
	int before = fx->sink.n;
	tc_session_on_frame(fx->s, frame, strlen(frame));
	assert_int_equal(fx->sink.n, before + 1); /* exactly one reply */
	return fx->sink.frames[before];
}

static const char *str(cJSON *o, const char *k)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void unknown_and_unsupported(void **state)
{
	struct fixture *fx = *state;
	cJSON *r = roundtrip(fx, "{\"id\":1,\"method\":\"nope\",\"params\":{}}");
	assert_string_equal(str(r, "type"), "error");
	assert_string_equal(str(r, "error"), "unknown_command");
	assert_int_equal(cJSON_GetObjectItem(r, "id")->valuedouble, 1);
	assert_non_null(strstr(str(r, "message"), "nope"));

	r = roundtrip(fx, "{\"id\":2,\"method\":\"run.start\",\"params\":{}}");
	assert_string_equal(str(r, "error"), "not_supported");

	r = roundtrip(fx, "not json");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "id")));
	assert_string_equal(str(r, "error"), "invalid_argument");
}

static void subscribe_needs_redis(void **state)
{
	struct fixture *fx = *state;
	cJSON *r = roundtrip(
		fx, "{\"id\":1,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[\"messages\"]}}");
	assert_string_equal(str(r, "type"), "error");
	assert_string_equal(str(r, "error"), "unknown_error");
	assert_non_null(strstr(str(r, "message"), "Redis"));
	/* A failed subscribe leaves nothing behind. */
	assert_int_equal(tc_session_subscriptions(fx->s), 0);

	r = roundtrip(fx,
		      "{\"id\":2,\"method\":\"subscription.unsubscribe\",\"params\":{\"subscriptionId\":\"s1.e30\"}}");
	assert_string_equal(str(r, "error"), "no_such_subscription");

	r = roundtrip(fx, "{\"id\":3,\"method\":\"agent.getTree\",\"params\":{}}");
	assert_string_equal(str(r, "error"), "unknown_error");
}

static void reconnect_validation(void **state)
{
	struct fixture *fx = *state;
	struct {
		const char *frame, *code, *needle;
	} cases[] = {
		{ "{\"id\":1,\"method\":\"subscription.reconnect\",\"params\":{}}", "invalid_argument",
		  "params.runId" },
		{ "{\"id\":1,\"method\":\"subscription.reconnect\",\"params\":{\"runId\":\"r\",\"lastEventId\":\"nope\"}}",
		  "invalid_argument", "params.lastEventId" },
		{ "{\"id\":1,\"method\":\"subscription.reconnect\",\"params\":{\"runId\":\"r\",\"lastEventId\":\"e:0\"}}",
		  "invalid_argument", "params.lastEventId" },
		{ "{\"id\":1,\"method\":\"subscription.reconnect\",\"params\":{\"runId\":\"r\",\"subscriptions\":\"x\"}}",
		  "invalid_argument", "params.subscriptions" },
		{ "{\"id\":1,\"method\":\"subscription.reconnect\",\"params\":{\"runId\":\"r\",\"subscriptions\":[\"bogus\"]}}",
		  "no_such_subscription", "bogus" },
		{ "{\"id\":1,\"method\":\"subscription.reconnect\",\"params\":{\"runId\":\"r\",\"subscriptions\":[1]}}",
		  "invalid_argument", "params.subscriptions[0]" },
		{ "{\"id\":1,\"method\":\"agent.getTree\",\"params\":{\"runId\":5}}", "invalid_argument",
		  "params.runId" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *r = roundtrip(fx, cases[i].frame);
		assert_string_equal(str(r, "error"), cases[i].code);
		if (!strstr(str(r, "message"), cases[i].needle))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, str(r, "message"), cases[i].needle);
	}
	assert_int_equal(tc_session_subscriptions(fx->s), 0);
}

static void param_errors_name_fields(void **state)
{
	struct fixture *fx = *state;
	struct {
		const char *frame, *needle;
	} cases[] = {
		{ "{\"id\":1,\"method\":\"subscription.subscribe\"}", "params is required" },
		{ "{\"id\":1,\"method\":\"subscription.subscribe\",\"params\":{}}", "params.channels" },
		{ "{\"id\":1,\"method\":\"subscription.unsubscribe\",\"params\":{}}", "params.subscriptionId" },
		{ "{\"id\":1,\"method\":\"subscription.unsubscribe\",\"params\":{\"subscriptionId\":5}}",
		  "params.subscriptionId must be a string" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *r = roundtrip(fx, cases[i].frame);
		assert_string_equal(str(r, "error"), "invalid_argument");
		assert_int_equal(cJSON_GetObjectItem(r, "id")->valuedouble, 1);
		assert_non_null(strstr(str(r, "message"), cases[i].needle));
	}
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(unknown_and_unsupported, setup, teardown),
		cmocka_unit_test_setup_teardown(subscribe_needs_redis, setup, teardown),
		cmocka_unit_test_setup_teardown(reconnect_validation, setup, teardown),
		cmocka_unit_test_setup_teardown(param_errors_name_fields, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
