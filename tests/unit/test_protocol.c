/* Unit tests: protocol.c — command parsing, error table, response frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "util.h"

static enum tc_err parse(const char *s, struct tc_command *cmd, struct tc_error *err)
{
	return tc_command_parse(s, strlen(s), cmd, err);
}

static void valid_command(void **state)
{
	struct tc_command cmd;
	struct tc_error err;
	assert_int_equal(
		parse(" {\"id\":7,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[]}}\n", &cmd, &err),
		TC_OK);
	assert_true(cmd.has_id);
	assert_int_equal(cmd.id, 7);
	assert_int_equal(cmd.method, TC_METHOD_SUBSCRIBE);
	assert_string_equal(cmd.method_name, "subscription.subscribe");
	assert_non_null(cmd.params);
	tc_command_free(&cmd);

	/* params is optional at this layer; an unknown method still parses. */
	assert_int_equal(parse("{\"id\":0,\"method\":\"nope\"}", &cmd, &err), TC_OK);
	assert_int_equal(cmd.method, TC_METHOD_UNKNOWN);
	assert_null(cmd.params);
	tc_command_free(&cmd);

	assert_int_equal(parse("{\"id\":9007199254740991,\"method\":\"x\"}", &cmd, &err), TC_OK);
	assert_int_equal(cmd.id, 9007199254740991ULL);
	tc_command_free(&cmd);
}

static void every_method_known(void **state)
{
	const char *names[] = { "run.start",
				"subscription.subscribe",
				"subscription.unsubscribe",
				"subscription.reconnect",
				"agent.getTree",
				"input.respond",
				"input.inject",
				"state.get",
				"state.listCheckpoints",
				"state.fork" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		enum tc_method m = tc_method_lookup(names[i], strlen(names[i]));
		assert_int_not_equal(m, TC_METHOD_UNKNOWN);
		assert_string_equal(tc_method_name(m), names[i]);
	}
	assert_int_equal(tc_method_lookup("run.star", 8), TC_METHOD_UNKNOWN);
	assert_int_equal(tc_method_lookup("run.start2", 10), TC_METHOD_UNKNOWN);
}

/* Inputs whose reply must carry id null. */
static void unusable_ids(void **state)
{
	const char *frames[] = {
		"",
		"   ",
		"hello",
		"{\"id\":3",
		"{\"id\":1}}",
		"[1,2]",
		"42",
		"null",
		"{\"method\":\"x\"}",
		"{\"id\":\"1\",\"method\":\"x\"}",
		"{\"id\":-1,\"method\":\"x\"}",
		"{\"id\":1.5,\"method\":\"x\"}",
		"{\"id\":9007199254740992,\"method\":\"x\"}",
		"{\"id\":null,\"method\":\"x\"}",
		"{\"id\":true,\"method\":\"x\"}",
		"{\"id\":1,\"method\":\"x\"} {\"id\":2}",
	};
	for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		struct tc_command cmd;
		struct tc_error err;
		assert_int_equal(parse(frames[i], &cmd, &err), TC_ERR_INVALID_ARGUMENT);
		assert_false(cmd.has_id);
		assert_true(strlen(err.message) > 0);
		tc_command_free(&cmd);
	}
}

static void nul_inside_frame_is_malformed(void **state)
{
	struct tc_command cmd;
	struct tc_error err;
	const char frame[] = "{\"id\":1,\"method\":\"x\"}\0garbage";
	assert_int_equal(tc_command_parse(frame, sizeof(frame) - 1, &cmd, &err), TC_ERR_INVALID_ARGUMENT);
	tc_command_free(&cmd);
}

/* Inputs where the id is good, so the error carries it. */
static void errors_with_id(void **state)
{
	struct {
		const char *frame, *needle;
	} cases[] = {
		{ "{\"id\":4}", "method is required" },
		{ "{\"id\":4,\"method\":5}", "method must be a string" },
		{ "{\"id\":4,\"method\":\"x\",\"params\":[]}", "params must be an object" },
		{ "{\"id\":4,\"method\":\"x\",\"params\":\"p\"}", "params must be an object" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tc_command cmd;
		struct tc_error err;
		assert_int_equal(parse(cases[i].frame, &cmd, &err), TC_ERR_INVALID_ARGUMENT);
		assert_true(cmd.has_id);
		assert_int_equal(cmd.id, 4);
		assert_non_null(strstr(err.message, cases[i].needle));
		tc_command_free(&cmd);
	}
}

static void error_table(void **state)
{
	assert_string_equal(tc_err_code(TC_ERR_INVALID_ARGUMENT), "invalid_argument");
	assert_string_equal(tc_err_code(TC_ERR_UNKNOWN_COMMAND), "unknown_command");
	assert_string_equal(tc_err_code(TC_ERR_NO_SUCH_SUBSCRIPTION), "no_such_subscription");
	assert_string_equal(tc_err_code(TC_ERR_NOT_SUPPORTED), "not_supported");
	assert_string_equal(tc_err_code(TC_ERR_PERMISSION_DENIED), "permission_denied");
	assert_true(TC_ERR_INVALID_ARGUMENT < 0);
	assert_string_equal(tc_err_code((enum tc_err) - 999), "unknown_error");
}

static void frame_is(struct tc_buf *b, const char *expect)
{
	assert_int_equal(b->len, strlen(expect));
	assert_memory_equal(tc_buf_data(b), expect, b->len);
	tc_buf_unref(b);
}

static void responses(void **state)
{
	frame_is(
		tc_response_error(true, 1, TC_ERR_UNKNOWN_COMMAND, "unknown method \"nope\""),
		"{\"type\":\"error\",\"id\":1,\"error\":\"unknown_command\",\"message\":\"unknown method \\\"nope\\\"\"}");
	frame_is(
		tc_response_error(false, 0, TC_ERR_INVALID_ARGUMENT, NULL),
		"{\"type\":\"error\",\"id\":null,\"error\":\"invalid_argument\",\"message\":\"the command is malformed\"}");
	frame_is(tc_response_success(1000000000000000ULL, NULL, -1, TC_SPELL_SEED),
		 "{\"type\":\"success\",\"id\":1000000000000000,\"result\":{}}");
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "subscriptionId", "s1.x");
	frame_is(tc_response_success(9007199254740991ULL, r, 42, TC_SPELL_SEED),
		 "{\"type\":\"success\",\"id\":9007199254740991,\"result\":{\"subscriptionId\":\"s1.x\"},"
		 "\"meta\":{\"appliedThroughSeq\":42}}");
	frame_is(tc_response_success(7, NULL, 0, TC_SPELL_021),
		 "{\"type\":\"success\",\"id\":7,\"result\":{},\"meta\":{\"applied_through_seq\":0}}");
}

static void utf8_prefix(void **state)
{
	const char *s = "ab\xc3\xa9"
			"cd"; /* "abécd" */
	assert_int_equal(tc_utf8_prefix(s, 6, 10), 6);
	assert_int_equal(tc_utf8_prefix(s, 6, 3), 2); /* would split é */
	assert_int_equal(tc_utf8_prefix(s, 6, 4), 4);
	assert_int_equal(tc_utf8_prefix(s, 6, 0), 0);
}

/* Runtime command params: valid ones pass, each bad one names its field. */
static void runtime_params(void **state)
{
	const char *ok[] = {
		"{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistantId\":\"a\",\"input\":null}}",
		"{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistantId\":\"a\",\"input\":{},\"config\":{},\"metadata\":{}}}",
		"{\"id\":1,\"method\":\"input.respond\",\"params\":{\"namespace\":[],\"interruptId\":\"i\",\"response\":1,\"goto\":\"n\"}}",
		"{\"id\":1,\"method\":\"input.respond\",\"params\":{\"responses\":[{\"namespace\":[\"a\"],\"interruptId\":\"i\",\"response\":null}],\"goto\":[\"n\",{\"node\":\"m\",\"input\":1}]}}",
		"{\"id\":1,\"method\":\"input.inject\",\"params\":{\"namespace\":[],\"message\":{\"role\":\"user\",\"content\":\"hi\"}}}",
		"{\"id\":1,\"method\":\"state.get\",\"params\":{\"namespace\":[],\"keys\":[\"messages\"]}}",
		"{\"id\":1,\"method\":\"state.listCheckpoints\",\"params\":{}}",
		"{\"id\":1,\"method\":\"state.listCheckpoints\",\"params\":{\"limit\":5,\"before\":\"c\"}}",
		"{\"id\":1,\"method\":\"state.fork\",\"params\":{\"checkpointId\":\"c\",\"input\":1,\"config\":{}}}",
	};
	struct {
		const char *frame, *needle;
	} bad[] = {
		{ "{\"id\":1,\"method\":\"run.start\"}", "params is required" },
		{ "{\"id\":1,\"method\":\"run.start\",\"params\":{\"input\":1}}", "params.assistantId is required" },
		{ "{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistantId\":1,\"input\":1}}",
		  "params.assistantId must be a string" },
		{ "{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistantId\":\"a\"}}",
		  "params.input is required" },
		{ "{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistantId\":\"a\",\"input\":1,\"config\":[]}}",
		  "params.config" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"interruptId\":\"i\",\"response\":1}}",
		  "params.namespace is required" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"namespace\":[],\"response\":1}}",
		  "params.interruptId" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"namespace\":[],\"interruptId\":\"i\"}}",
		  "params.response" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"responses\":[]}}", "params.responses" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"responses\":[{\"namespace\":[1],\"interruptId\":\"i\",\"response\":1}]}}",
		  "params.responses[0].namespace" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"namespace\":[],\"interruptId\":\"i\",\"response\":1,\"goto\":5}}",
		  "params.goto" },
		{ "{\"id\":1,\"method\":\"input.inject\",\"params\":{\"namespace\":[],\"message\":{\"role\":\"ai\",\"content\":\"x\"}}}",
		  "params.message.role" },
		{ "{\"id\":1,\"method\":\"input.inject\",\"params\":{\"namespace\":[]}}",
		  "params.message is required" },
		{ "{\"id\":1,\"method\":\"state.get\",\"params\":{}}", "params.namespace is required" },
		{ "{\"id\":1,\"method\":\"state.get\",\"params\":{\"namespace\":[],\"keys\":\"k\"}}", "params.keys" },
		{ "{\"id\":1,\"method\":\"state.listCheckpoints\",\"params\":{\"limit\":-1}}", "params.limit" },
		{ "{\"id\":1,\"method\":\"state.fork\",\"params\":{}}", "params.checkpointId is required" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct tc_command cmd;
		struct tc_error err;
		assert_int_equal(parse(ok[i], &cmd, &err), TC_OK);
		assert_true(tc_method_is_runtime(cmd.method));
		if (tc_params_validate(&cmd, TC_SPELL_SEED, &err))
			fail_msg("%s: %s", ok[i], err.message);
		tc_command_free(&cmd);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tc_command cmd;
		struct tc_error err;
		assert_int_equal(parse(bad[i].frame, &cmd, &err), TC_OK);
		assert_int_equal(tc_params_validate(&cmd, TC_SPELL_SEED, &err), TC_ERR_INVALID_ARGUMENT);
		if (!strstr(err.message, bad[i].needle))
			fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].frame, err.message, bad[i].needle);
		tc_command_free(&cmd);
	}
	/* 0.0.21: params in either spelling; messages in the route's; forwarded as 0.0.21. */
	struct {
		const char *frame, *needle;
	} snake[] = {
		{ "{\"id\":1,\"method\":\"run.start\",\"params\":{\"input\":1}}", "params.assistant_id is required" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"namespace\":[],\"response\":1}}",
		  "params.interrupt_id" },
		{ "{\"id\":1,\"method\":\"input.respond\",\"params\":{\"responses\":[{\"namespace\":[],\"response\":1}]}}",
		  "params.responses[0].interrupt_id" },
		{ "{\"id\":1,\"method\":\"state.fork\",\"params\":{}}", "params.checkpoint_id is required" },
		{ "{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistant_id\":\"a\",\"input\":1,\"langsmith_tracer\":2}}",
		  "params.langsmith_tracer" },
	};
	for (size_t i = 0; i < sizeof(snake) / sizeof(snake[0]); i++) {
		struct tc_command cmd;
		struct tc_error err;
		assert_int_equal(parse(snake[i].frame, &cmd, &err), TC_OK);
		assert_int_equal(tc_params_validate(&cmd, TC_SPELL_021, &err), TC_ERR_INVALID_ARGUMENT);
		if (!strstr(err.message, snake[i].needle))
			fail_msg("%s: \"%s\" lacks \"%s\"", snake[i].frame, err.message, snake[i].needle);
		tc_command_free(&cmd);
	}
	struct tc_command cmd;
	struct tc_error err;
	assert_int_equal(parse("{\"id\":1,\"method\":\"run.start\",\"params\":{\"assistantId\":\"a\","
			       "\"input\":{\"runId\":1},\"langsmith_tracer\":{\"projectName\":\"p\"}}}",
			       &cmd, &err),
			 TC_OK);
	assert_int_equal(tc_params_validate(&cmd, TC_SPELL_021, &err), TC_OK);
	char *fwd = cJSON_PrintUnformatted(cmd.params);
	assert_string_equal(
		fwd, "{\"assistant_id\":\"a\",\"input\":{\"runId\":1},\"langsmith_tracer\":{\"project_name\":\"p\"}}");
	free(fwd);
	tc_command_free(&cmd);

	assert_false(tc_method_is_runtime(TC_METHOD_SUBSCRIBE));
	assert_false(tc_method_is_runtime(TC_METHOD_AGENT_GET_TREE));
}

static void event_ids(void **state)
{
	char epoch[40];
	uint64_t seq;
	assert_true(tc_event_id_parse("6b02d195e2774:42", epoch, &seq));
	assert_string_equal(epoch, "6b02d195e2774");
	assert_int_equal(seq, 42);
	assert_true(tc_event_id_parse("a:9007199254740991", epoch, &seq));
	const char *bad[] = { "",
			      ":1",
			      "a:",
			      "a:0",
			      "a:01",
			      "a:1x",
			      "a:b:1",
			      "a-b:1",
			      "a:9007199254740992",
			      "0123456789012345678901234567890123456789:1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tc_event_id_parse(bad[i], epoch, &seq))
			fail_msg("accepted \"%s\"", bad[i]);
}

static void stream_query(void **state)
{
	struct tc_error err;
	cJSON *q = tc_stream_request_from_query("messages,,custom:x", "[[\"a\"]]", "2", "40", &err);
	char *s = cJSON_PrintUnformatted(q);
	assert_string_equal(
		s, "{\"channels\":[\"messages\",\"custom:x\"],\"namespaces\":[[\"a\"]],\"depth\":2,\"since\":40}");
	free(s);
	cJSON_Delete(q);
	q = tc_stream_request_from_query(NULL, NULL, NULL, NULL, &err);
	assert_int_equal(cJSON_GetArraySize(q), 0);
	cJSON_Delete(q);
	assert_null(tc_stream_request_from_query("a", "[[", NULL, NULL, &err));
	assert_non_null(strstr(err.message, "namespaces"));
	assert_null(tc_stream_request_from_query("a", NULL, "two", NULL, &err));
	assert_non_null(strstr(err.message, "depth"));
	assert_null(tc_stream_request_from_query("a", NULL, NULL, "4x", &err));
	assert_non_null(strstr(err.message, "since"));
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(valid_command),  cmocka_unit_test(every_method_known),
		cmocka_unit_test(unusable_ids),   cmocka_unit_test(nul_inside_frame_is_malformed),
		cmocka_unit_test(errors_with_id), cmocka_unit_test(error_table),
		cmocka_unit_test(responses),      cmocka_unit_test(utf8_prefix),
		cmocka_unit_test(runtime_params), cmocka_unit_test(event_ids),
		cmocka_unit_test(stream_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
