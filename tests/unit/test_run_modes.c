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
#include "run/follow.h"
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
	assert_int_equal(tc_run_modes_parse(v), TC_MODE_VALUES | TC_MODE_MESSAGES_TUPLE);
	cJSON_Delete(v);
	v = cJSON_Parse("[\"messages\",\"events\",\"tools\",\"debug\",\"checkpoints\",\"tasks\",\"custom\"]");
	assert_int_equal(tc_run_modes_parse(v), TC_MODE_MESSAGES | TC_MODE_EVENTS | TC_MODE_TOOLS | TC_MODE_DEBUG |
							TC_MODE_CHECKPOINTS | TC_MODE_TASKS | TC_MODE_CUSTOM);
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
	assert_string_equal(s.text, "id: 1\nevent: values\ndata: {\"n\":2}\n\n");
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
	/* a chunk the graph wrote: LangGraph wraps it as {payload} unless it has a name of its own */
	feed(f, "custom", "[]", "\"data\":{\"payload\":{\"p\":true}}");
	feed(f, "custom", "[]", "\"data\":{\"name\":\"x\",\"payload\":{\"p\":true}}");
	feed(f, "values", "[]", "\"data\":{\"n\":1}"); /* not asked for */
	assert_string_equal(s.text, "id: 1\nevent: updates\ndata: {\"agent\":{\"k\":1}}\n\n"
				    "id: 2\nevent: updates|tools:7|inner\ndata: {\"k\":2}\n\n"
				    "id: 3\nevent: custom\ndata: {\"p\":true}\n\n"
				    "id: 4\nevent: custom\ndata: {\"name\":\"x\",\"payload\":{\"p\":true}}\n\n");
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
	assert_non_null(strstr(p, "\"type\":\"ai\""));
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
	assert_non_null(strstr(a, "\"type\":\"ai\",\"name\":null,\"id\":\"m1\""));
	assert_non_null(strstr(b, "\"type\":\"human\",\"name\":null,\"id\":\"i1\""));
	assert_non_null(strstr(c, "\"type\":\"ai\",\"name\":null,\"id\":\"m1\""));
	tc_run_modes_free(f);
}

/* The events of a subgraph's message: streamed, then in its values, then returned by the root node that ran it. */
static void subgraph_message(struct tc_run_modes *f)
{
	feed(f, "lifecycle", "[\"researcher:1\"]", "\"data\":{\"event\":\"started\"}");
	feed(f, "messages", "[\"researcher:1\"]",
	     "\"node\":\"summarize\",\"data\":{\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"s1\"}");
	feed(f, "messages", "[\"researcher:1\"]",
	     "\"node\":\"summarize\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":"
	     "\"text-delta\",\"text\":\"Sum\"}}");
	feed(f, "messages", "[\"researcher:1\"]", "\"node\":\"summarize\",\"data\":{\"event\":\"message-finish\"}");
	feed(f, "values", "[\"researcher:1\"]",
	     "\"data\":{\"messages\":[{\"type\":\"ai\",\"content\":\"Sum\",\"id\":\"s1\"}]}");
	feed(f, "updates", "[]",
	     "\"data\":{\"node\":\"researcher\",\"values\":{\"messages\":[{\"type\":\"ai\",\"content\":\"Sum\",\"id\":"
	     "\"s1\"}]}}");
}

/*
 * Without subgraphs a subgraph's message reaches messages-tuple once, whole,
 * from the root node that ran the subgraph (as LangGraph streams it); with
 * subgraphs it streams in its namespace and the root node's update does not
 * repeat it.
 */
static void subgraph_messages_in_tuples(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
	subgraph_message(f);
	assert_int_equal(s.units, 1);
	assert_non_null(strstr(s.text, "event: messages\ndata: [{\"type\":\"ai\",\"content\":\"Sum\",\"id\":\"s1\"},"
				       "{\"langgraph_node\":\"researcher\",\"langgraph_checkpoint_ns\":\"\""));
	tc_run_modes_free(f);

	struct sink s2 = { 0 };
	f = fmt(&s2, "[\"messages-tuple\"]", true, true);
	subgraph_message(f);
	assert_int_equal(s2.units, 1);
	assert_non_null(strstr(s2.text, "event: messages|researcher:1\ndata: [{\"content\":\"Sum\""));
	tc_run_modes_free(f);
}

/* Node tasks are not subgraphs: their events are their graph's, the node named. */
static void node_tasks_are_not_subgraphs(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\",\"custom\"]", true, true);
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

/*
 * A message a node returns without streaming it (a tool's result) is a tuple of its own, from the
 * node's update, as LangGraph's messages mode has it; one streamed or already in the state is not.
 */
static void returned_messages_are_tuples(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
	feed(f, "values", "[]", "\"data\":{\"messages\":[{\"content\":\"hi\",\"type\":\"human\",\"id\":\"h1\"}]}");
	feed(f, "messages", "[\"model:2\"]", "\"data\":{\"event\":\"message-start\",\"id\":\"m1\"}");
	feed(f, "messages", "[\"model:2\"]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"a\"}}");
	feed(f, "messages", "[\"model:2\"]", "\"data\":{\"event\":\"message-finish\"}");
	feed(f, "updates", "[]",
	     "\"node\":\"model\",\"data\":{\"node\":\"model\",\"values\":{\"messages\":[{\"content\":\"a\",\"type\":\"ai\",\"id\":\"m1\"}]}}");
	feed(f, "tools", "[\"tools:3\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c1\",\"output\":{\"content\":\"42\",\"type\":\"tool\"}}");
	feed(f, "updates", "[]",
	     "\"node\":\"tools\",\"data\":{\"node\":\"tools\",\"values\":{\"messages\":[{\"content\":\"42\",\"type\":\"tool\",\"tool_call_id\":\"c1\",\"id\":\"t1\"},"
	     "{\"content\":\"43\",\"type\":\"tool\",\"tool_call_id\":\"c2\"},{\"content\":\"hi\",\"type\":\"human\",\"id\":\"h1\"},"
	     "{\"content\":\"no id\",\"type\":\"human\"}],\"n\":1}}}");
	/* "a"; the two tool messages (not the streamed one, not the state's, not one without an id that is no tool's) */
	assert_int_equal(s.units, 3);
	assert_non_null(strstr(
		s.text,
		"id: 2\nevent: messages\ndata: [{\"content\":\"42\",\"type\":\"tool\",\"tool_call_id\":\"c1\",\"id\":\"t1\"},{\"langgraph_node\":\"tools\""));
	assert_non_null(strstr(
		s.text,
		"id: 3\nevent: messages\ndata: [{\"content\":\"43\",\"type\":\"tool\",\"tool_call_id\":\"c2\",\"id\":\"run-r1-tool-c2\"}"));
	tc_run_modes_free(f);
}

/* A message that starts again before it finished replaces the first (found by fuzz_runfmt: a leak). */
static void message_started_twice(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
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
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
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

/*
 * An interrupt a producer says only as input.requested shows as LangGraph shows one: updates and
 * values {"__interrupt__": [{value, id}]}, the wait's result.
 */
static void interrupts(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\",\"updates\"]", false, true);
	feed(f, "values", "[]", "\"data\":{\"n\":1}");
	feed(f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"ask\":\"ok?\"}}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	assert_string_equal(
		s.text,
		"id: 1\nevent: values\ndata: {\"n\":1}\n\n"
		"id: 2\nevent: updates\ndata: {\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}\n\n"
		"id: 3\nevent: values\ndata: {\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}\n\n");
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	assert_string_equal(j, "{\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}");
	free(j);
	cJSON_Delete(res);
	tc_run_modes_free(f);
}

/*
 * The LangGraph worker gives LangGraph's own {"__interrupt__": …} updates and values (side
 * events), in their place and namespace — an empty one at an interrupt_before stop: those are
 * sent, and nothing is made up from its input.requested.
 */
static void interrupts_as_langgraph_gives_them(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\",\"updates\"]", true, true);
	feed(f, "lifecycle", "[\"sub:1\"]", "\"data\":{\"event\":\"started\"}");
	feed(f, TC_RUN_MODES_SIDE, "[\"sub:1\"]",
	     "\"data\":{\"mode\":\"updates\",\"data\":{\"__interrupt__\":[{\"id\":\"i1\",\"value\":2}]}}");
	feed(f, TC_RUN_MODES_SIDE, "[\"sub:1\"]",
	     "\"data\":{\"mode\":\"values\",\"data\":{\"__interrupt__\":[{\"id\":\"i1\",\"value\":2}]}}");
	feed(f, "input.requested", "[\"sub:1\"]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":2}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"values\",\"data\":{\"__interrupt__\":[]}}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	assert_string_equal(s.text,
			    "id: 1\nevent: updates|sub:1\ndata: {\"__interrupt__\":[{\"id\":\"i1\",\"value\":2}]}\n\n"
			    "id: 2\nevent: values|sub:1\ndata: {\"__interrupt__\":[{\"id\":\"i1\",\"value\":2}]}\n\n"
			    "id: 3\nevent: values\ndata: {\"__interrupt__\":[]}\n\n");
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	assert_string_equal(j, "{\"__interrupt__\":[]}");
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
	assert_string_equal(s.text, "id: 1\nevent: error\ndata: {\"error\":\"Error\",\"message\":\"boom\"}\n\n");
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

/* Resumed from an id: the events up to it are made again (the same ones), not sent again. */
static void resume_within_an_event(void **state)
{
	struct sink s = { 0 };
	cJSON *m = cJSON_Parse("[\"values\",\"updates\"]");
	/* id 2 = the first event input.requested made (its updates) was received */
	struct tc_run_modes *f = tc_run_modes_new("r1", "t1", tc_run_modes_parse(m), false, true, 2, collect, &s);
	cJSON_Delete(m);
	seq = 0;
	feed(f, "values", "[]", "\"data\":{\"n\":7}"); /* read again, not sent again */
	feed(f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":1}");
	feed(f, "updates", "[]", "\"data\":{\"node\":\"a\",\"values\":{\"n\":8}}");
	assert_int_equal(s.units, 2);
	assert_string_equal(s.text, "id: 3\nevent: values\ndata: {\"__interrupt__\":[{\"value\":1,\"id\":\"i1\"}]}\n\n"
				    "id: 4\nevent: updates\ndata: {\"a\":{\"n\":8}}\n\n");
	tc_run_modes_free(f);
}

/*
 * messages: for each AI message a model streams, its metadata once, then the message so far at
 * each chunk (text and tool calls); the root values' new messages, together, as complete.
 */
static void messages_partial_and_complete(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages\"]", false, true);
	feed(f, "values", "[]", "\"data\":{\"messages\":[{\"content\":\"hi\",\"type\":\"human\",\"id\":\"h1\"}]}");
	feed(f, "messages", "[\"agent:1\"]", "\"data\":{\"event\":\"message-start\",\"id\":\"m1\"}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"\"}}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"be\"}}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"gin\"}}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-start\",\"index\":1,\"content\":{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"\"}}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"tool-call-delta\",\"args\":\"{\\\"q\\\":\"}}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"tool-call-delta\",\"args\":\"1}\"}}");
	feed(f, "messages", "[\"agent:1\"]",
	     "\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"begin\"}}");
	feed(f, "messages", "[\"agent:1\"]", "\"data\":{\"event\":\"message-finish\"}");
	feed(f, "values", "[]",
	     "\"data\":{\"messages\":[{\"content\":\"hi\",\"type\":\"human\",\"id\":\"h1\"},{\"content\":\"begin\",\"type\":\"ai\",\"id\":\"m1\"}]}");
	const char *t = s.text;
	assert_ptr_equal(
		strstr(t,
		       "id: 1\nevent: messages/complete\ndata: [{\"content\":\"hi\",\"type\":\"human\",\"id\":\"h1\"}]\n\n"),
		t);
	assert_non_null(strstr(
		t, "id: 2\nevent: messages/metadata\ndata: {\"m1\":{\"metadata\":{\"langgraph_node\":\"agent\""));
	assert_non_null(strstr(t, "id: 3\nevent: messages/partial\ndata: [{\"content\":\"be\","));
	assert_non_null(strstr(t, "id: 4\nevent: messages/partial\ndata: [{\"content\":\"begin\","));
	assert_non_null(strstr(
		t,
		"\"tool_call_chunks\":[{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"{\\\"q\\\":1}\",\"index\":1}],"
		"\"tool_calls\":[{\"name\":\"search\",\"args\":{\"q\":1},\"id\":\"c1\",\"type\":\"tool_call\"}],\"id\":\"m1\""));
	assert_non_null(strstr(
		t,
		"id: 7\nevent: messages/complete\ndata: [{\"content\":\"begin\",\"type\":\"ai\",\"id\":\"m1\"}]\n\n"));
	assert_int_equal(s.units, 7); /* the finished text is not news */
	tc_run_modes_free(f);

	/* with subgraphs, as the Agent Server does, nothing complete */
	struct sink s2 = { 0 };
	f = fmt(&s2, "[\"messages\"]", true, true);
	feed(f, "values", "[]", "\"data\":{\"messages\":[{\"content\":\"hi\",\"type\":\"human\",\"id\":\"h1\"}]}");
	assert_int_equal(s2.units, 0);
	tc_run_modes_free(f);
}

/* A streamed tool call's args deltas are tool call chunks of their own in messages-tuple. */
static void tool_call_deltas(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"messages-tuple\"]", false, true);
	feed(f, "messages", "[]", "\"data\":{\"event\":\"message-start\",\"id\":\"m1\"}");
	feed(f, "messages", "[]",
	     "\"data\":{\"event\":\"content-block-start\",\"index\":1,\"content\":{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"\"}}");
	feed(f, "messages", "[]",
	     "\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"tool-call-delta\",\"args\":\"{}\"}}");
	assert_int_equal(s.units, 2);
	assert_non_null(strstr(
		s.text,
		"\"tool_call_chunks\":[{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"\",\"index\":1}]"));
	assert_non_null(strstr(
		s.text,
		"\"tool_call_chunks\":[{\"type\":\"tool_call_chunk\",\"id\":null,\"name\":null,\"args\":\"{}\",\"index\":1}]"));
	tc_run_modes_free(f);
}

/* The worker's debug chunks: debug as they are; checkpoints {values, metadata, next} of the checkpoint ones. */
static void debug_and_checkpoints(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"debug\",\"checkpoints\",\"tasks\"]", false, true);
	feed(f, TC_RUN_MODES_SIDE, "[]",
	     "\"data\":{\"mode\":\"debug\",\"data\":{\"step\":-1,\"type\":\"checkpoint\",\"payload\":{\"config\":{},\"values\":{\"n\":0},"
	     "\"metadata\":{\"source\":\"input\",\"step\":-1},\"next\":[\"__start__\"],\"tasks\":[]}}}");
	feed(f, "tasks", "[]",
	     "\"data\":{\"id\":\"t1\",\"name\":\"a\",\"input\":{},\"triggers\":[],\"interrupts\":[]}");
	feed(f, "lifecycle", "[\"sub:1\"]", "\"data\":{\"event\":\"started\"}"); /* a subgraph's: not asked for */
	feed(f, TC_RUN_MODES_SIDE, "[\"sub:1\"]",
	     "\"data\":{\"mode\":\"debug\",\"data\":{\"step\":0,\"type\":\"task\",\"payload\":{}}}");
	assert_string_equal(
		s.text,
		"id: 1\nevent: debug\ndata: {\"step\":-1,\"type\":\"checkpoint\",\"payload\":{\"config\":{},\"values\":{\"n\":0},"
		"\"metadata\":{\"source\":\"input\",\"step\":-1},\"next\":[\"__start__\"],\"tasks\":[]}}\n\n"
		"id: 2\nevent: checkpoints\ndata: {\"values\":{\"n\":0},\"metadata\":{\"source\":\"input\",\"step\":-1},\"next\":[\"__start__\"]}\n\n"
		"id: 3\nevent: tasks\ndata: {\"id\":\"t1\",\"name\":\"a\",\"input\":{},\"triggers\":[],\"interrupts\":[]}\n\n");
	tc_run_modes_free(f);
}

/* events: LangChain's callback events as the worker gives them; checkpoint envelopes with subgraphs and values. */
static void events_and_envelopes(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"events\",\"values\"]", true, true);
	feed(f, TC_RUN_MODES_SIDE, "[]",
	     "\"data\":{\"mode\":\"events\",\"data\":{\"event\":\"on_chain_start\",\"name\":\"g\"}}");
	feed(f, "checkpoints", "[]", "\"data\":{\"id\":\"c1\",\"step\":0,\"source\":\"loop\"}");
	feed(f, "values", "[]", "\"data\":{\"n\":1}");
	assert_string_equal(s.text,
			    "id: 1\nevent: events\ndata: {\"event\":\"on_chain_start\",\"name\":\"g\"}\n\n"
			    "id: 2\nevent: checkpoints\ndata: {\"id\":\"c1\",\"step\":0,\"source\":\"loop\"}\n\n"
			    "id: 3\nevent: values\ndata: {\"n\":1}\n\n");
	tc_run_modes_free(f);
	struct sink s2 = { 0 };
	f = fmt(&s2, "[\"values\"]", false, true); /* no subgraphs: no envelopes */
	feed(f, "checkpoints", "[]", "\"data\":{\"id\":\"c1\",\"step\":0,\"source\":\"loop\"}");
	assert_int_equal(s2.units, 0);
	tc_run_modes_free(f);
}

/* tools: LangGraph's own tools events, the tool's name kept from its start. */
static void tools_mode(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"tools\"]", false, true);
	feed(f, "tools", "[\"tools:3\"]",
	     "\"data\":{\"event\":\"tool-started\",\"tool_call_id\":\"c1\",\"tool_name\":\"search\",\"input\":\"{}\"}");
	feed(f, "tools", "[\"tools:3\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c1\",\"output\":{\"content\":\"42\",\"type\":\"tool\"}}");
	assert_string_equal(
		s.text,
		"id: 1\nevent: tools\ndata: {\"event\":\"on_tool_start\",\"toolCallId\":\"c1\",\"name\":\"search\",\"input\":\"{}\"}\n\n"
		"id: 2\nevent: tools\ndata: {\"event\":\"on_tool_end\",\"toolCallId\":\"c1\",\"name\":\"search\","
		"\"output\":{\"content\":\"42\",\"type\":\"tool\"}}\n\n");
	tc_run_modes_free(f);
}

/* A failure the worker explained: the error event and the wait's __error__ name the exception's class. */
static void failure_with_its_class(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = fmt(&s, "[\"values\"]", false, true);
	feed(f, TC_RUN_MODES_SIDE, "[]",
	     "\"data\":{\"mode\":\"error\",\"data\":{\"error\":\"GraphRecursionError\",\"message\":\"too deep\"}}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"failed\",\"error\":\"too deep\"}"));
	assert_string_equal(
		s.text, "id: 1\nevent: error\ndata: {\"error\":\"GraphRecursionError\",\"message\":\"too deep\"}\n\n");
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	assert_string_equal(j, "{\"__error__\":{\"error\":\"GraphRecursionError\",\"message\":\"too deep\"}}");
	free(j);
	cJSON_Delete(res);
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

/* ==== rendered runs ============================================================================ */

#define RENDERED_START "\"data\":{\"event\":\"started\",\"run_id\":\"r1\",\"rendered\":true}"

/* A side event {mode: "sse", data: {event: name, data: json}} at namespace ns. */
static void sse(struct tc_run_modes *f, const char *ns, const char *name, const char *json)
{
	char rest[2048];
	snprintf(rest, sizeof(rest), "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"%s\",\"data\":%s}}", name, json);
	feed(f, TC_RUN_MODES_SIDE, ns, rest);
}

/* A rendered stream given the modes given (JSON text, NULL: none), resumed after resume_id. */
static struct tc_run_modes *rendered(struct sink *s, const char *given, uint64_t resume_id)
{
	cJSON *m = cJSON_Parse("[\"values\"]");
	struct tc_run_modes *f =
		tc_run_modes_new("r1", "t1", tc_run_modes_parse(m), false, false, resume_id, s ? collect : NULL, s);
	cJSON_Delete(m);
	tc_run_modes_set_given(f, given);
	seq = 0;
	return f;
}

static char *result_text(const struct tc_run_modes *f)
{
	cJSON *res = tc_run_modes_result(f);
	char *j = cJSON_PrintUnformatted(res);
	cJSON_Delete(res);
	return j;
}

/*
 * A run its worker renders: each sse side event is one unit, its data as the worker wrote it
 * (1.0 and 12345678901234567 stay so: cJSON would print 1 and 1.2345678901234568e+16); the
 * run's protocol events and its other side events make nothing, and its failure no error of
 * the gateway's. The wait's result is the last values event's data, as written.
 */
static void rendered_run(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = rendered(&s, NULL, 0);
	assert_false(feed(f, "lifecycle", "[]", RENDERED_START));
	assert_true(tc_run_modes_rendered(f));
	sse(f, "[]", "values", "{\"x\":1.0,\"big\":12345678901234567}");
	feed(f, "values", "[]", "\"data\":{\"n\":1}");                                         /* the protocol's */
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"values\",\"data\":{\"n\":2}}"); /* another mode */
	feed(f, "messages", "[]", "\"data\":{\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"m1\"}");
	feed(f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":1}");
	feed(f, "lifecycle", "[\"sub:1\"]", "\"data\":{\"event\":\"started\"}");
	sse(f, "[\"sub:1\"]", "updates|sub:1", "{\"a\": {\"b\": [1, 2.50]}}"); /* (spaces kept) */
	sse(f, "[]", "messages/partial", "[{\"content\":\"h\\u00e9\\n\",\"type\":\"ai\"}]");
	sse(f, "[]", "values", "{\"x\":2.0}");
	sse(f, "[]", "custom", "\"text\"");
	sse(f, "[]", "error", "{\"error\":\"ValueError\",\"message\":\"no\"}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"failed\",\"error\":\"no\"}"));
	sse(f, "[]", "values", "{\"after\":true}"); /* the run is over */
	assert_string_equal(s.text,
			    "id: 1\nevent: values\ndata: {\"x\":1.0,\"big\":12345678901234567}\n\n"
			    "id: 2\nevent: updates|sub:1\ndata: {\"a\": {\"b\": [1, 2.50]}}\n\n"
			    "id: 3\nevent: messages/partial\ndata: [{\"content\":\"h\\u00e9\\n\",\"type\":\"ai\"}]\n\n"
			    "id: 4\nevent: values\ndata: {\"x\":2.0}\n\n"
			    "id: 5\nevent: custom\ndata: \"text\"\n\n"
			    "id: 6\nevent: error\ndata: {\"error\":\"ValueError\",\"message\":\"no\"}\n\n");
	char *j = result_text(f);
	assert_string_equal(j, "{\"__error__\":{\"error\":\"ValueError\",\"message\":\"no\"}}");
	free(j);
	tc_run_modes_free(f);

	/* a wait: nothing emitted; the last values, as written (any JSON) */
	f = rendered(NULL, NULL, 0);
	feed(f, "lifecycle", "[]", RENDERED_START);
	sse(f, "[]", "values", "{\"x\":1.0}");
	sse(f, "[]", "values|sub:1", "{\"inner\":1}");
	sse(f, "[]", "values", "[1, 2.0]");
	sse(f, "[]", "updates", "{\"n\":{\"x\":3}}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	j = result_text(f);
	assert_string_equal(j, "[1, 2.0]");
	free(j);
	tc_run_modes_free(f);

	/* none: {} */
	f = rendered(NULL, NULL, 0);
	feed(f, "lifecycle", "[]", RENDERED_START);
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	j = result_text(f);
	assert_string_equal(j, "{}");
	free(j);
	tc_run_modes_free(f);
}

/* What is not a unit: another mode, no name, a name with a line break, no data. */
static void rendered_not_units(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = rendered(&s, NULL, 0);
	feed(f, "lifecycle", "[]", RENDERED_START);
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"ssex\",\"data\":{\"event\":\"values\",\"data\":1}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"data\":1}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"\",\"data\":1}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"a\\nid: 9\",\"data\":1}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"a\\r\",\"data\":1}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"values\"}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":5,\"data\":1}}");
	feed(f, TC_RUN_MODES_SIDE, "[]", "\"data\":{\"mode\":\"sse\",\"data\":[1]}");
	feed(f, "custom:other", "[]", "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"values\",\"data\":1}}");
	sse(f, "[]", "values", "null"); /* (null is data) */
	assert_string_equal(s.text, "id: 1\nevent: values\ndata: null\n\n");
	tc_run_modes_free(f);
}

/*
 * The data's text as stored, unless it would not be one data line (written over lines), or the
 * way to it has a key with an escape (cJSON reads it otherwise), or no text came: then printed.
 */
static void rendered_text_or_printed(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = rendered(&s, NULL, 0);
	feed(f, "lifecycle", "[]", RENDERED_START);
	feed(f, TC_RUN_MODES_SIDE, "[]",
	     "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"values\",\"data\":{\n  \"x\": 1.0\n}}}");
	feed(f, TC_RUN_MODES_SIDE, "[]",
	     "\"data\":{\"mode\":\"sse\",\"data\":{\"event\":\"values\",\"d\\u0061ta\":{\"x\":2.0}}}");
	/* the first of two keys, as cJSON takes it; keys and strings holding brackets and quotes skipped */
	feed(f, TC_RUN_MODES_SIDE, "[]",
	     "\"data\":{\"mode\":\"sse\",\"data\":{\"x\":{\"data\":[\"}\\\"]\"]},\"event\":\"values\","
	     "\"data\":{\"y\":3.0},\"data\":{\"y\":4}}}");
	static const char ev[] =
		"{\"method\":\"custom:threadcast.modes\",\"params\":{\"namespace\":[],\"data\":{\"mode\":"
		"\"sse\",\"data\":{\"event\":\"values\",\"data\":{\"z\":5.0}}}}}";
	cJSON *j = cJSON_Parse(ev);
	assert_false(tc_run_modes_event(f, 99, j, NULL, 0));
	assert_false(tc_run_modes_event(f, 100, j, ev, sizeof(ev) - 1));
	cJSON_Delete(j);
	assert_string_equal(s.text, "id: 1\nevent: values\ndata: {\"x\":1}\n\n"
				    "id: 2\nevent: values\ndata: {\"x\":2}\n\n"
				    "id: 3\nevent: values\ndata: {\"y\":3.0}\n\n"
				    "id: 4\nevent: values\ndata: {\"z\":5}\n\n"
				    "id: 5\nevent: values\ndata: {\"z\":5.0}\n\n");
	tc_run_modes_free(f);
}

/* The units a stream given the modes given gets of one rendered run, as "name name …". */
static void rendered_filtered(const char *given, const char *want)
{
	static const char *const names[] = {
		"values",    "updates", "messages",   "messages/partial", "messages/metadata", "messages/complete",
		"messagesX", "custom",  "values|a:1", "values|a:1|b:2",   "updates|a:1",       "messages|a:1",
		"debug",     "events",  "error",      "tasks|x",          "metadata"
	};
	struct sink s = { 0 };
	struct tc_run_modes *f = rendered(&s, given, 0);
	feed(f, "lifecycle", "[]", RENDERED_START);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		sse(f, "[]", names[i], "{}");
	char got[1024] = "";
	for (const char *p = s.text; (p = strstr(p, "event: ")); p += 7) {
		size_t n = strcspn(p + 7, "\n");
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%.*s", *got ? " " : "", (int)n, p + 7);
	}
	assert_string_equal(got, want);
	/* ids count the units sent */
	char last[32];
	snprintf(last, sizeof(last), "id: %d\n", s.units);
	assert_true(s.units == 0 || strstr(s.text, last));
	tc_run_modes_free(f);
}

/*
 * Which rendered events a stream gets, as the Python server's _run_stream_mode_matches: none
 * given, every one; else a name that is one of the modes, one starting with "messages" when
 * messages or messages-tuple is one, one whose part before its first "|" is one.
 */
static void rendered_filter(void **state)
{
	const char *all = "values updates messages messages/partial messages/metadata messages/complete messagesX "
			  "custom values|a:1 values|a:1|b:2 updates|a:1 messages|a:1 debug events error tasks|x "
			  "metadata";
	rendered_filtered(NULL, all);
	rendered_filtered("[]", all);
	rendered_filtered("[\"values\"]", "values values|a:1 values|a:1|b:2");
	rendered_filtered("[\"updates\",\"custom\"]", "updates custom updates|a:1");
	rendered_filtered("[\"messages-tuple\"]",
			  "messages messages/partial messages/metadata messages/complete messagesX messages|a:1");
	rendered_filtered("[\"messages\"]",
			  "messages messages/partial messages/metadata messages/complete messagesX messages|a:1");
	rendered_filtered("[\"debug\",\"events\",\"error\",\"tasks\"]", "debug events error tasks|x");
	rendered_filtered("[\"values|a:1\"]", "values|a:1"); /* a name that is one of the modes */
	rendered_filtered("[\"value\",\"messages/partial\"]", "messages/partial");
	rendered_filtered("[\"nope\"]", "");
	rendered_filtered("[1]", ""); /* given, but no name */

	/* what a stream was given: a string (one, or a JSON array's text), an array; none: NULL */
	static const struct {
		const char *stream_mode, *given;
	} cases[] = {
		{ "null", NULL },
		{ "\"\"", NULL },
		{ "[]", NULL },
		{ "\"[]\"", NULL },
		{ "\"values\"", "[\"values\"]" },
		{ "[\"values\",\"messages-tuple\"]", "[\"values\",\"messages-tuple\"]" },
		{ "\"[\\\"updates\\\",\\\"custom\\\"]\"", "[\"updates\",\"custom\"]" },
		{ "\"[updates\"", "[\"[updates\"]" },
		{ "\"[1]\"", "[1]" },
		{ "5", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *v = cJSON_Parse(cases[i].stream_mode);
		char *g = tc_run_modes_given(v);
		if (cases[i].given)
			assert_string_equal(g, cases[i].given);
		else
			assert_null(g);
		free(g);
		cJSON_Delete(v);
	}
	assert_null(tc_run_modes_given(NULL));
}

/*
 * A run that is not rendered is translated as ever, whatever the stream was given: its mode bits
 * choose, and sse side events are nothing.
 */
static void not_rendered(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = rendered(&s, "[\"updates\"]", 0);
	feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"started\",\"run_id\":\"r1\",\"rendered\":false}");
	assert_false(tc_run_modes_rendered(f));
	sse(f, "[]", "values", "{\"x\":1.0}");
	feed(f, "values", "[]", "\"data\":{\"n\":1.0}");
	feed(f, "updates", "[]", "\"data\":{\"node\":\"a\",\"values\":{\"n\":2}}");
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"failed\",\"error\":\"boom\"}"));
	assert_string_equal(s.text, "id: 1\nevent: values\ndata: {\"n\":1}\n\n"
				    "id: 2\nevent: error\ndata: {\"error\":\"Error\",\"message\":\"boom\"}\n\n");
	char *j = result_text(f);
	assert_string_equal(j, "{\"__error__\":{\"error\":\"Error\",\"message\":\"boom\"}}");
	free(j);
	tc_run_modes_free(f);

	/* "rendered" other than true is not */
	struct sink s2 = { 0 };
	f = rendered(&s2, NULL, 0);
	feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"started\",\"run_id\":\"r1\",\"rendered\":1}");
	assert_false(tc_run_modes_rendered(f));
	feed(f, "values", "[]", "\"data\":{\"n\":1}");
	assert_string_equal(s2.text, "id: 1\nevent: values\ndata: {\"n\":1}\n\n");
	tc_run_modes_free(f);
}

/* A rendered stream resumed after an id: the units up to it are not sent again, the next keep their ids. */
static void rendered_resume(void **state)
{
	struct sink s = { 0 };
	struct tc_run_modes *f = rendered(&s, "[\"values\",\"custom\"]", 2);
	feed(f, "lifecycle", "[]", RENDERED_START);
	sse(f, "[]", "values", "{\"n\":1}");  /* 1 */
	sse(f, "[]", "updates", "{\"n\":2}"); /* (not this stream's) */
	sse(f, "[]", "custom", "2");          /* 2 */
	sse(f, "[]", "values", "{\"n\":3}");  /* 3 */
	sse(f, "[]", "custom", "4");          /* 4 */
	assert_true(feed(f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	assert_string_equal(s.text, "id: 3\nevent: values\ndata: {\"n\":3}\n\n"
				    "id: 4\nevent: custom\ndata: 4\n\n");
	char *j = result_text(f);
	assert_string_equal(j, "{\"n\":3}");
	free(j);
	tc_run_modes_free(f);
}

/* The raw text finder: the value at a path as written; false where cJSON would read otherwise. */
static void json_at(void **state)
{
	static const char *const path[] = { "a", "b", NULL };
	static const struct {
		const char *json, *want; /* want NULL: false */
	} cases[] = {
		{ "{\"a\":{\"b\":1.50}}", "1.50" },
		{ " { \"a\" :\n{ \"x\" : [1,{\"b\":2}] , \"b\" : [ 1 , \"]\" ] } } ", "[ 1 , \"]\" ]" },
		{ "{\"a\":{\"b\":\"q\\\"}\"}}", "\"q\\\"}\"" },
		{ "{\"a\":{\"b\":true},\"a\":{\"b\":false}}", "true" },
		{ "{\"x\":\"{\\\"a\\\":{\\\"b\\\":9}}\",\"a\":{\"b\":null}}", "null" },
		{ "{\"a\":{\"b\":{}}}", "{}" },
		{ "{\"a\":{\"\\u0062\":1}}", NULL },
		{ "{\"a\":{}}", NULL },
		{ "{\"a\":[]}", NULL },
		{ "{\"a\":{\"c\":1}}", NULL },
		{ "{\"a\":{\"b\":", NULL },
		{ "{\"a\":{\"b\":\"open", NULL },
		{ "[{\"a\":{\"b\":1}}]", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *at = NULL;
		size_t n = 0;
		bool found = tc_run_json_at(cases[i].json, strlen(cases[i].json), path, &at, &n);
		if (!cases[i].want) {
			assert_false(found);
			continue;
		}
		assert_true(found);
		assert_int_equal(n, strlen(cases[i].want));
		assert_memory_equal(at, cases[i].want, n);
	}
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
		cmocka_unit_test(subgraph_messages_in_tuples),
		cmocka_unit_test(node_tasks_are_not_subgraphs),
		cmocka_unit_test(returned_messages_are_tuples),
		cmocka_unit_test(message_started_twice),
		cmocka_unit_test(whole_tool_message),
		cmocka_unit_test(interrupts),
		cmocka_unit_test(interrupts_as_langgraph_gives_them),
		cmocka_unit_test(failure),
		cmocka_unit_test(subgraph_end_and_wait),
		cmocka_unit_test(resume_within_an_event),
		cmocka_unit_test(messages_partial_and_complete),
		cmocka_unit_test(tool_call_deltas),
		cmocka_unit_test(debug_and_checkpoints),
		cmocka_unit_test(events_and_envelopes),
		cmocka_unit_test(tools_mode),
		cmocka_unit_test(failure_with_its_class),
		cmocka_unit_test(garbage),
		cmocka_unit_test(rendered_run),
		cmocka_unit_test(rendered_not_units),
		cmocka_unit_test(rendered_text_or_printed),
		cmocka_unit_test(rendered_filter),
		cmocka_unit_test(not_rendered),
		cmocka_unit_test(rendered_resume),
		cmocka_unit_test(json_at),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
