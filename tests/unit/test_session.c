/* Unit tests: session.c — one reply per command, subscription registry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
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

static const struct tc_session_io io = { .send = sink_send };

struct fixture {
	struct tc_config cfg;
	struct sink sink;
	struct tc_session *s;
};

static int setup(void **state)
{
	struct fixture *fx = tc_xcalloc(1, sizeof(*fx));
	char err[256];
	char *argv[] = { (char *)"threadcast", (char *)"--max-subscriptions=2" };
	assert_int_equal(tc_config_load(&fx->cfg, 2, argv, err, sizeof(err)), TC_CONFIG_OK);
	fx->s = tc_session_new(&fx->cfg, "t1", &io, &fx->sink);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	for (int i = 0; i < fx->sink.n; i++)
		cJSON_Delete(fx->sink.frames[i]);
	tc_session_free(fx->s);
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

static void subscribe_unsubscribe(void **state)
{
	struct fixture *fx = *state;
	cJSON *r = roundtrip(fx, "{\"id\":1,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[\"messages\"]}}");
	assert_string_equal(str(r, "type"), "success");
	cJSON *result = cJSON_GetObjectItem(r, "result");
	char *id = tc_xstrdup(str(result, "subscriptionId"));
	assert_int_equal(cJSON_GetObjectItem(result, "replayedEvents")->valuedouble, 0);
	assert_int_equal(tc_session_subscriptions(fx->s), 1);

	/* The same filter again is a second, distinct subscription. */
	r = roundtrip(fx, "{\"id\":2,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[\"messages\"]}}");
	assert_string_not_equal(str(cJSON_GetObjectItem(r, "result"), "subscriptionId"), id);

	/* The limit is 2 in this fixture. */
	r = roundtrip(fx, "{\"id\":3,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[\"values\"]}}");
	assert_string_equal(str(r, "error"), "invalid_argument");
	assert_non_null(strstr(str(r, "message"), "limit"));
	assert_int_equal(tc_session_subscriptions(fx->s), 2);

	char frame[4096];
	snprintf(frame, sizeof(frame),
		 "{\"id\":4,\"method\":\"subscription.unsubscribe\",\"params\":{\"subscriptionId\":\"%s\"}}", id);
	r = roundtrip(fx, frame);
	assert_string_equal(str(r, "type"), "success");
	assert_int_equal(tc_session_subscriptions(fx->s), 1);

	r = roundtrip(fx, frame); /* twice: gone */
	assert_string_equal(str(r, "error"), "no_such_subscription");

	r = roundtrip(fx, "{\"id\":5,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[\"values\"]}}");
	assert_string_equal(str(r, "type"), "success");
	free(id);
}

static void param_errors_name_fields(void **state)
{
	struct fixture *fx = *state;
	struct { const char *frame, *needle; } cases[] = {
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
		cmocka_unit_test_setup_teardown(subscribe_unsubscribe, setup, teardown),
		cmocka_unit_test_setup_teardown(param_errors_name_fields, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
