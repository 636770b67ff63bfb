/* Unit tests: run/modes.c — a run's protocol events as the SDK's run stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_frame.h"
#include "run/modes.h"
#include "sink.h"
#include "util.h"

static int seq;

/* Feeds one event as the gateway frames it (0.0.21 spelling). */
static bool feed(struct tc_run_modes *f, const char *method, const char *ns, const char *params_rest)
{
	char frame[4096];
	seq++;
	int n = snprintf(frame, sizeof(frame),
			 "{\"type\":\"event\",\"event_id\":\"ep:%d\",\"seq\":%d,\"method\":\"%s\",\"params\":"
			 "{\"namespace\":%s,\"timestamp\":1,%s}}",
			 seq, seq, method, ns, params_rest);
	return feed_frame(tc_run_modes_ops.event, f, frame, (size_t)n);
}

static struct tc_run_modes *fmt(struct sink *s, const char *modes, bool subgraphs, bool in_run)
{
	cJSON *m = cJSON_Parse(modes);
	struct tc_run_modes *f =
		tc_run_modes_new("r1", "t1", tc_run_modes_parse(m), subgraphs, in_run, 0, s ? collect : NULL, s);
	cJSON_Delete(m);
	seq = 0;
	return f;
}

static void modes(void **state)
{
	cJSON *v = cJSON_Parse("[\"values\",\"messages-tuple\",\"nope\"]");
	assert_int_equal(tc_run_modes_parse(v), TC_MODE_VALUES | TC_MODE_MESSAGES);
	cJSON_Delete(v);
	v = cJSON_Parse("\"updates\"");
	assert_int_equal(tc_run_modes_parse(v), TC_MODE_UPDATES);
	cJSON_Delete(v);
	assert_int_equal(tc_run_modes_parse(NULL), TC_MODE_VALUES);
}

/* Only the run's own events: after its root started, up to its end. */
static void only_the_run(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\"]", false, false);
	assert_false(feed(f, "lifecycle", "[\"sub:1\"]", "\"data\":{\"event\":\"started\"}")); /* a subgraph */
	assert_false(feed(f, "values", "[]", "\"data\":{\"n\":0}"));                           /* an earlier run */
	assert_false(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"started\",\"run_id\":\"r0\"}"));
	assert_false(feed(f, "values", "[]", "\"data\":{\"n\":1}"));
	assert_int_equal(s.units, 0);
	assert_false(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"started\",\"run_id\":\"r1\"}"));
	assert_false(feed(f, "values", "[]", "\"data\":{\"n\":2}"));
	assert_false(feed(f, "values", "[\"sub:1\"]", "\"data\":{\"n\":3}")); /* no subgraphs */
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	assert_true(feed(f, "values", "[]", "\"data\":{\"n\":4}")); /* after: ignored */
	assert_string_equal(s.text, "id: 48\nevent: values\ndata: {\"n\":2}\n\n");
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	assert_string_equal(j, "{\"n\":2}");
	free(j);
	cJSON_Delete(res);
	tc_run_modes_free(f);
}

/* Another run's start ends ours (a resumed stream that began inside it). */
static void next_run_ends_it(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\"]", false, true);
	assert_false(feed(f, "values", "[]", "\"data\":{\"n\":1}"));
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"started\",\"runId\":\"r2\"}"));
	assert_true(tc_run_modes_ended(f));
	assert_int_equal(s.units, 1);
	tc_run_modes_free(f);
}

static void updates_custom_subgraphs(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"updates\",\"custom\"]", true, true);
	feed(f, "lifecycle", "[\"tools:7\",\"inner\"]", "\"data\":{\"event\":\"started\"}");
	feed(f, "updates", "[]", "\"data\":{\"node\":\"agent\",\"values\":{\"k\":1}}");
	feed(f, "updates", "[\"tools:7\",\"inner\"]", "\"data\":{\"values\":{\"k\":2}}");
	feed(f, "custom", "[]", "\"data\":{\"name\":\"x\",\"payload\":{\"p\":true}}");
	feed(f, "values", "[]", "\"data\":{\"n\":1}"); /* not asked for */
	assert_string_equal(s.text, "id: 16\nevent: updates\ndata: {\"agent\":{\"k\":1}}\n\n"
				    "id: 24\nevent: updates|tools:7|inner\ndata: {\"k\":2}\n\n"
				    "id: 32\nevent: custom\ndata: {\"p\":true}\n\n");
	tc_run_modes_free(f);
}

/* Messages channel content blocks become [chunk, metadata] pairs. */
static void message_tuples(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"m1\"}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"\"}}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"Hel\"}}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"lo\"}}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"Hello\"}}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":1,\"content\":{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"search\",\"args\":{\"q\":\"x\"}}}");
	feed(f, "messages", "[]", "\"node\":\"agent\",\"data\":{\"event\":\"message-finish\"}");
	/* three chunks: "Hel", "lo" (the finished text is not sent again), the tool call */
	assert_int_equal(s.units, 3);
	char *p = s.text;
	assert_non_null(strstr(p, "event: messages\ndata: [{\"content\":\"Hel\""));
	assert_non_null(strstr(p, "\"type\":\"AIMessageChunk\""));
	assert_non_null(strstr(p, "\"id\":\"m1\""));
	assert_non_null(strstr(
		p,
		"{\"langgraph_node\":\"agent\",\"langgraph_checkpoint_ns\":\"\",\"run_id\":\"r1\",\"thread_id\":\"t1\""));
	assert_non_null(strstr(
		p,
		"\"tool_call_chunks\":[{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"{\\\"q\\\":\\\"x\\\"}\",\"index\":1}]"));
	tc_run_modes_free(f);
}

/*
 * A message is known by where it comes from, its namespace and its node: a
 * message injected into a running run (node "input") streams in the same
 * namespace as the model's without mixing with it.
 */
static void messages_apart_by_node(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"m1\"}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"a\"}}");
	feed(f, "messages", "[]",
	     "\"node\":\"input\",\"data\":{\"event\":\"message-start\",\"role\":\"human\",\"id\":\"i1\"}");
	feed(f, "messages", "[]",
	     "\"node\":\"input\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"b\"}}");
	feed(f, "messages", "[]", "\"node\":\"input\",\"data\":{\"event\":\"message-finish\"}");
	feed(f, "messages", "[]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"c\"}}");
	assert_int_equal(s.units, 3);
	const char *a = strstr(s.text, "{\"content\":\"a\""), *b = strstr(s.text, "{\"content\":\"b\""),
		   *c = strstr(s.text, "{\"content\":\"c\"");
	assert_true(a && b && c);
	assert_non_null(strstr(a, "\"type\":\"AIMessageChunk\",\"name\":null,\"id\":\"m1\""));
	assert_non_null(strstr(b, "\"type\":\"human\",\"name\":null,\"id\":\"i1\""));
	assert_non_null(strstr(c, "\"type\":\"AIMessageChunk\",\"name\":null,\"id\":\"m1\""));
	tc_run_modes_free(f);
}

/* Node tasks are not subgraphs: their events are their graph's, the node named. */
static void node_tasks_are_not_subgraphs(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages\",\"custom\"]", true, true);
	feed(f, "lifecycle", "[\"researcher:1\"]", "\"data\":{\"event\":\"started\"}");
	feed(f, "messages", "[\"model:9\"]", "\"data\":{\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"m1\"}");
	feed(f, "messages", "[\"model:9\"]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"a\"}}");
	feed(f, "custom", "[\"researcher:1\",\"search:4\"]", "\"data\":{\"payload\":1}");
	assert_non_null(strstr(s.text, "event: messages\ndata: [{\"content\":\"a\""));
	assert_non_null(strstr(s.text, "\"langgraph_node\":\"model\""));
	assert_non_null(strstr(s.text, "event: custom|researcher:1\ndata: 1\n"));
	tc_run_modes_free(f);
}

/* A tool's result (the tools channel) is a ToolMessage in messages mode, from the tools node. */
static void tool_results_are_messages(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
	feed(f, "tools", "[\"tools:3\"]",
	     "\"data\":{\"event\":\"tool-started\",\"tool_call_id\":\"c1\",\"tool_name\":\"search\"}");
	feed(f, "tools", "[\"tools:3\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c1\",\"output\":{\"content\":\"42\",\"type\":\"tool\"}}");
	feed(f, "tools", "[\"tools:3\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c2\",\"output\":\"plain\"}");
	assert_int_equal(s.units, 2);
	assert_non_null(strstr(
		s.text,
		"event: messages\ndata: [{\"content\":\"42\",\"type\":\"tool\",\"tool_call_id\":\"c1\",\"id\":\"tool-c1\"},{\"langgraph_node\":\"tools\""));
	assert_non_null(strstr(s.text, "[{\"content\":\"plain\",\"type\":\"tool\",\"tool_call_id\":\"c2\""));
	tc_run_modes_free(f);
}

/* A message that starts again before it finished replaces the first (found by fuzz_runfmt: a leak). */
static void message_started_twice(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages\"]", false, true);
	feed(f, "messages", "[]", "\"data\":{\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"m1\"}");
	feed(f, "messages", "[]", "\"data\":{\"event\":\"message-start\",\"role\":\"tool\",\"id\":\"m2\"}");
	feed(f, "messages", "[]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"x\"}}");
	assert_non_null(strstr(s.text, "\"type\":\"tool\",\"name\":null,\"id\":\"m2\""));
	tc_run_modes_free(f);
}

/* A tool message given whole at its finish still goes out once. */
static void whole_tool_message(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages\"]", false, true);
	feed(f, "messages", "[]",
	     "\"data\":{\"event\":\"message-start\",\"role\":\"tool\",\"id\":\"m2\",\"tool_call_id\":\"c1\"}");
	feed(f, "messages", "[]",
	     "\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"42\"}}");
	assert_int_equal(s.units, 1);
	assert_non_null(strstr(s.text, "\"content\":\"42\""));
	assert_non_null(strstr(s.text, "\"type\":\"tool\""));
	assert_non_null(strstr(s.text, "\"tool_call_id\":\"c1\""));
	tc_run_modes_free(f);
}

/* An interrupt shows in values and updates as "__interrupt__", and in the wait's result. */
static void interrupts(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\",\"updates\"]", false, true);
	feed(f, "values", "[]", "\"data\":{\"n\":1}");
	feed(f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"ask\":\"ok?\"}}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	assert_non_null(strstr(
		s.text, "event: updates\ndata: {\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}"));
	assert_non_null(strstr(
		s.text,
		"event: values\ndata: {\"n\":1,\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}"));
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	assert_string_equal(j, "{\"n\":1,\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}");
	free(j);
	cJSON_Delete(res);
	tc_run_modes_free(f);
}

/* A failed run: an error event, and the wait's __error__. */
static void failure(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\"]", false, true);
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"failed\",\"error\":\"boom\"}"));
	assert_string_equal(s.text, "id: 8\nevent: error\ndata: {\"error\":\"Error\",\"message\":\"boom\"}\n\n");
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	assert_string_equal(j, "{\"__error__\":{\"error\":\"Error\",\"message\":\"boom\"}}");
	free(j);
	cJSON_Delete(res);
	tc_run_modes_free(f);
}

/* A subgraph's lifecycle end is not the run's; a wait emits nothing but follows. */
static void subgraph_end_and_wait(void **state)
{
	struct tc_run_modes *f = fmt(NULL, "null", false, true);
	assert_false(feed(f, "lifecycle", "[\"sub:1\"]", "\"data\":{\"event\":\"completed\"}"));
	assert_false(feed(f, "values", "[]", "\"data\":{\"done\":true}"));
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	cJSON *res = tc_run_modes_result(f);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(res, "done")));
	cJSON_Delete(res);
	tc_run_modes_free(f);
}

/* Resumed from an id: that event's outputs up to it are not sent again. */
static void resume_within_an_event(void **state)
{
	struct sink s = { 0 };
	cJSON *m = cJSON_Parse("[\"values\",\"updates\"]");
	/* id 24 = the first output of seq 3 (the interrupt's updates) was received */
	struct tc_run_modes *f = tc_run_modes_new("r1", "t1", tc_run_modes_parse(m), false, true, 24, collect, &s);
	cJSON_Delete(m);
	seq = 0;
	feed(f, "values", "[]", "\"data\":{\"n\":7}"); /* read again, not sent again */
	feed(f, "updates", "[]", "\"data\":{\"values\":{\"n\":7}}");
	feed(f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":1}");
	assert_int_equal(s.units, 1);
	assert_true(strncmp(s.text, "id: 25\nevent: values\n", 21) == 0);
	assert_non_null(strstr(s.text, "{\"n\":7,\"__interrupt__\""));
	tc_run_modes_free(f);
}

/* Garbage in: ignored, nothing emitted, nothing leaked. */
static void garbage(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\",\"messages\"]", true, true);
	static const char *const bad[] = {
		"",
		"{",
		"[]",
		"{\"method\":1}",
		"{\"method\":\"values\"}",
		"{\"method\":\"values\",\"params\":{\"namespace\":{}}}",
		"{\"method\":\"messages\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"content-block-delta\"}}}",
		"{\"method\":\"lifecycle\",\"params\":{\"namespace\":[],\"data\":{\"event\":5}}}"
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(feed_frame(tc_run_modes_ops.event, f, bad[i], strlen(bad[i])));
	assert_int_equal(s.units, 0);
	tc_run_modes_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(modes),
		cmocka_unit_test(only_the_run),
		cmocka_unit_test(next_run_ends_it),
		cmocka_unit_test(updates_custom_subgraphs),
		cmocka_unit_test(message_tuples),
		cmocka_unit_test(messages_apart_by_node),
		cmocka_unit_test(node_tasks_are_not_subgraphs),
		cmocka_unit_test(tool_results_are_messages),
		cmocka_unit_test(message_started_twice),
		cmocka_unit_test(whole_tool_message),
		cmocka_unit_test(interrupts),
		cmocka_unit_test(failure),
		cmocka_unit_test(subgraph_end_and_wait),
		cmocka_unit_test(resume_within_an_event),
		cmocka_unit_test(garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
