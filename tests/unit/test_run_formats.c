/* Unit tests: run/chunks.c, run/agent_events.c, run/ndjson.c, run/follow.c — a run in the seeds' wire formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_frame.h"
#include "run/agent_events.h"
#include "run/chunks.h"
#include "run/follow.h"
#include "run/ndjson.h"
#include "sink.h"
#include "util.h"

/* How many times needle occurs in hay. */
static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static int seq;

/* One event frame as the gateway frames it (0.0.21 spelling), in a buffer of the caller's. */
static size_t frame(char *buf, size_t cap, const char *method, const char *ns, const char *params_rest)
{
	seq++;
	return (size_t)snprintf(buf, cap,
				"{\"type\":\"event\",\"event_id\":\"ep:%d\",\"seq\":%d,\"method\":\"%s\",\"params\":"
				"{\"namespace\":%s,\"timestamp\":%d,%s}}",
				seq, seq, method, ns, 1000 + seq, params_rest);
}

/* A translator's event function, whichever format (tc_run_<format>_ops.event). */
typedef tc_event_fn feed_fn;

static bool feed(feed_fn *fn, void *f, const char *method, const char *ns, const char *params_rest)
{
	char buf[4096];
	size_t n = frame(buf, sizeof(buf), method, ns, params_rest);
	return feed_frame(fn, f, buf, n);
}

/*
 * A root task's event (seed 003's node spans): data is the task's. It does
 * not advance seq, so the timestamps the other formats' expectations show
 * are those of the run without them (they make nothing in those formats).
 */
static void task(feed_fn *fn, void *f, const char *data)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf),
			 "{\"type\":\"event\",\"seq\":%d,\"method\":\"tasks\",\"params\":{\"namespace\":[],"
			 "\"timestamp\":%d,\"data\":%s}}",
			 seq, 1000 + seq, data);
	feed_frame(fn, f, buf, (size_t)n);
}

#define TASK(id, name)                                                                                                 \
	"{\"id\":\"" id "\",\"name\":\"" name "\",\"input\":{},\"triggers\":[\"branch:to:" name "\"],\"interrupts\":[]}"
#define TASK_OK(id, name) "{\"id\":\"" id "\",\"name\":\"" name "\",\"result\":{},\"interrupts\":[],\"error\":null}"

#define STARTED(run) "\"data\":{\"event\":\"started\",\"run_id\":\"" run "\"}"
#define MSG_START(role, id)                                                                                            \
	"\"node\":\"agent\",\"data\":{\"event\":\"message-start\",\"role\":\"" role "\",\"id\":\"" id "\"}"
#define BLOCK_START_TEXT                                                                                               \
	"\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"\"}}"
#define TEXT_DELTA(t)                                                                                                                 \
	"\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"" t \
	"\"}}"
#define BLOCK_FINISH_TEXT(t)                                                                                                       \
	"\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"" t \
	"\"}}"
#define MSG_FINISH                                                                                                     \
	"\"node\":\"agent\",\"data\":{\"event\":\"message-finish\",\"usage\":{\"input_tokens\":10,\"output_tokens\":4,\"total_tokens\":14}}"

/*
 * A whole run, as the example graph makes it: an earlier run's events, the
 * run's start, reasoning, a tool call, the tool, an answer, values, a
 * custom event, each node a task (created, then its result), then the end given (completed / failed / interrupted / the
 * next run's start). Returns what the last feed returned.
 */
static bool whole_run(feed_fn *fn, void *f, const char *end)
{
	seq = 0;
	feed(fn, f, "lifecycle", "[]", STARTED("r0"));
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"old\"]}");
	feed(fn, f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}");
	feed(fn, f, "lifecycle", "[]", STARTED("r1"));
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"q\"]}");
	task(fn, f, TASK("1", "agent"));
	feed(fn, f, "messages", "[\"agent:1\"]", MSG_START("ai", "m1"));
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"reasoning\",\"reasoning\":\"\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"reasoning-delta\",\"reasoning\":\"hmm\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"reasoning\",\"reasoning\":\"hmm\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":1,\"content\":{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"block-delta\",\"fields\":{\"type\":\"tool_call_chunk\",\"args\":\"{\\\"q\\\":\"}}}");
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"block-delta\",\"fields\":{\"type\":\"tool_call_chunk\",\"args\":\"\\\"x\\\"}\"}}}");
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":1,\"content\":{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"search\",\"args\":{\"q\":\"x\"}}}");
	feed(fn, f, "messages", "[\"agent:1\"]", MSG_FINISH);
	feed(fn, f, "updates", "[]", "\"data\":{\"node\":\"agent\",\"values\":{\"messages\":[\"call\"]}}");
	task(fn, f, TASK_OK("1", "agent"));
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"q\",\"call\"]}");
	task(fn, f, TASK("2", "tools"));
	feed(fn, f, "tools", "[\"tools:2\"]",
	     "\"data\":{\"event\":\"tool-started\",\"tool_call_id\":\"c1\",\"tool_name\":\"search\",\"input\":{\"q\":\"x\"}}");
	feed(fn, f, "tools", "[\"tools:2\"]",
	     "\"data\":{\"event\":\"tool-output-delta\",\"tool_call_id\":\"c1\",\"delta\":\"work\"}");
	feed(fn, f, "tools", "[\"tools:2\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c1\",\"output\":{\"content\":\"42\",\"type\":\"tool\"}}");
	feed(fn, f, "messages", "[\"tools:2\"]",
	     "\"node\":\"tools\",\"data\":{\"event\":\"message-start\",\"role\":\"tool\",\"id\":\"m2\",\"tool_call_id\":\"c1\"}");
	feed(fn, f, "messages", "[\"tools:2\"]",
	     "\"node\":\"tools\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"42\"}}");
	feed(fn, f, "messages", "[\"tools:2\"]", "\"node\":\"tools\",\"data\":{\"event\":\"message-finish\"}");
	task(fn, f, TASK_OK("2", "tools"));
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"q\",\"call\",\"42\"]}");
	task(fn, f, TASK("3", "agent"));
	feed(fn, f, "messages", "[\"agent:3\"]", MSG_START("ai", "m3"));
	feed(fn, f, "messages", "[\"agent:3\"]", BLOCK_START_TEXT);
	feed(fn, f, "messages", "[\"agent:3\"]", TEXT_DELTA("It is "));
	feed(fn, f, "messages", "[\"agent:3\"]", TEXT_DELTA("42."));
	feed(fn, f, "messages", "[\"agent:3\"]", BLOCK_FINISH_TEXT("It is 42."));
	feed(fn, f, "messages", "[\"agent:3\"]", MSG_FINISH);
	feed(fn, f, "custom", "[\"agent:3\"]", "\"data\":{\"name\":\"progress\",\"payload\":{\"done\":1}}");
	task(fn, f, TASK_OK("3", "agent"));
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"q\",\"call\",\"42\",\"It is 42.\"],\"n\":1}");
	return feed(fn, f, end[0] == '{' ? "lifecycle" : end, "[]", end[0] == '{' ? end + 1 : "\"data\":{}");
}

/* ---- seed 004 ---- */

static bool ends004(struct sink *s)
{
	return count(s->text, "data: {\"type\":\"end\"}\n\n") + count(s->text, "data: {\"type\":\"fail\"") == 1;
}

/* Every chunk the run makes, in order, numbered from 1, then the end sentinel. */
static void s004_completed(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", "agent", false, 0, collect, &s);
	assert_string_equal(tc_run_chunks_status(f), "active");
	assert_true(whole_run(tc_run_chunks_ops.event, f, "{\"data\":{\"event\":\"completed\"}"));
	const char *want =
		"id: 1\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"state_patch\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1005,\"patches\":[{\"op\":\"add\",\"path\":\"/messages\",\"value\":[\"q\"]}]},\"sequence\":1}\n\n"
		"id: 2\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"thinking\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1008,\"content\":\"hmm\",\"isComplete\":false},\"sequence\":2}\n\n"
		"id: 3\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"thinking\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1009,\"content\":\"\",\"isComplete\":true},\"sequence\":3}\n\n"
		"id: 4\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"state_patch\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1016,\"patches\":[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":\"call\"}]},\"sequence\":4}\n\n"
		"id: 5\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"tool_start\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1017,\"toolCallId\":\"c1\",\"toolName\":\"search\",\"arguments\":{\"q\":\"x\"}},\"sequence\":5}\n\n"
		"id: 6\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"tool_end\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1019,\"toolCallId\":\"c1\",\"result\":{\"content\":\"42\",\"type\":\"tool\"},\"success\":true},\"sequence\":6}\n\n"
		"id: 7\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"state_patch\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1023,\"patches\":[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":\"42\"}]},\"sequence\":7}\n\n"
		"id: 8\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"text_delta\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1026,\"delta\":\"It is \"},\"sequence\":8}\n\n"
		"id: 9\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"text_delta\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1027,\"delta\":\"42.\"},\"sequence\":9}\n\n"
		"id: 10\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"custom\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1030,\"eventName\":\"progress\",\"data\":{\"done\":1}},\"sequence\":10}\n\n"
		"id: 11\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"state_patch\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1031,\"patches\":[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":\"It is 42.\"},{\"op\":\"add\",\"path\":\"/n\",\"value\":1}]},\"sequence\":11}\n\n"
		"id: 12\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"output\",\"agentId\":\"r1\",\"agentType\":\"agent\",\"timestamp\":1032,\"output\":{\"messages\":[\"q\",\"call\",\"42\",\"It is 42.\"],\"n\":1}},\"sequence\":12}\n\n"
		"id: 13\ndata: {\"type\":\"end\"}\n\n";
	assert_string_equal(s.text, want);
	assert_string_equal(tc_run_chunks_status(f), "ended");
	assert_int_equal(tc_run_chunks_sequence(f), 13);
	/* after the end: nothing, whatever comes */
	assert_true(feed(tc_run_chunks_ops.event, f, "values", "[]", "\"data\":{\"n\":2}"));
	tc_run_chunks_finish(f, "late");
	assert_int_equal(s.units, 13);
	tc_run_chunks_free(f);
}

/* A failed run: an error chunk, then the fail sentinel, once. */
static void s004_failed(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", NULL, false, 0, collect, &s);
	assert_true(whole_run(tc_run_chunks_ops.event, f, "{\"data\":{\"event\":\"failed\",\"error\":\"boom\"}"));
	assert_non_null(strstr(
		s.text,
		"\"chunk\":{\"type\":\"error\",\"agentId\":\"r1\",\"timestamp\":1032,\"error\":\"boom\",\"recoverable\":false,\"step\":0},\"sequence\":12}\n\n"
		"id: 13\ndata: {\"type\":\"fail\",\"error\":\"boom\"}\n\n"));
	assert_null(strstr(s.text, "\"output\""));
	assert_true(ends004(&s));
	assert_string_equal(tc_run_chunks_status(f), "failed");
	tc_run_chunks_free(f);
}

/* Stopped at an interrupt: a custom "interrupt" chunk, the output with "__interrupt__", end. */
static void s004_interrupted(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", NULL, true, 0, collect, &s);
	seq = 0;
	feed(tc_run_chunks_ops.event, f, "values", "[]", "\"data\":{\"n\":1}");
	feed(tc_run_chunks_ops.event, f, "checkpoints", "[]", "\"data\":{\"id\":\"k\",\"step\":3,\"source\":\"loop\"}");
	feed(tc_run_chunks_ops.event, f, "input.requested", "[]",
	     "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"ask\":\"ok?\"}}");
	assert_true(feed(tc_run_chunks_ops.event, f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	assert_non_null(strstr(
		s.text,
		"\"type\":\"custom\",\"agentId\":\"r1\",\"timestamp\":1003,\"eventName\":\"interrupt\",\"data\":{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}"));
	assert_non_null(strstr(
		s.text,
		"\"output\":{\"n\":1,\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}},\"sequence\":3}\n\nid: 4\ndata: {\"type\":\"end\"}\n\n"));
	assert_true(ends004(&s));
	tc_run_chunks_free(f);
}

/* Another run's start cuts the stream: a fail sentinel; the caller's finish adds nothing. */
static void s004_cut_and_finish(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", NULL, false, 0, collect, &s);
	assert_true(whole_run(tc_run_chunks_ops.event, f, "{\"data\":{\"event\":\"started\",\"run_id\":\"r2\"}"));
	assert_string_equal(tc_run_chunks_status(f), "failed");
	tc_run_chunks_finish(f, "closing");
	assert_true(ends004(&s));
	assert_non_null(strstr(
		s.text,
		"id: 12\ndata: {\"type\":\"fail\",\"error\":\"the run's events ended without its end: another run started\"}\n\n"));
	tc_run_chunks_free(f);

	/* the gateway gives up on a run still going: one fail, then nothing */
	memset(&s, 0, sizeof(s));
	f = tc_run_chunks_new("r1", NULL, true, 0, collect, &s);
	seq = 0;
	feed(tc_run_chunks_ops.event, f, "custom", "[]", "\"data\":{\"payload\":1}");
	tc_run_chunks_finish(f, "stream_timeout");
	tc_run_chunks_finish(f, "again");
	assert_true(feed(tc_run_chunks_ops.event, f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	assert_int_equal(s.units, 2);
	assert_true(ends004(&s));
	assert_non_null(strstr(s.text, "id: 2\ndata: {\"type\":\"fail\",\"error\":\"stream_timeout\"}\n\n"));
	tc_run_chunks_free(f);
}

/* Resumed after sequence k (the run read from its start again): exactly what followed k. */
static void s004_resume(void **state)
{
	static struct sink all, part;
	memset(&all, 0, sizeof(all));
	struct tc_run_chunks *f = tc_run_chunks_new("r1", "agent", false, 0, collect, &all);
	whole_run(tc_run_chunks_ops.event, f, "{\"data\":{\"event\":\"completed\"}");
	tc_run_chunks_free(f);
	for (uint64_t k = 0; k <= 13; k++) {
		memset(&part, 0, sizeof(part));
		f = tc_run_chunks_new("r1", "agent", false, k, collect, &part);
		whole_run(tc_run_chunks_ops.event, f, "{\"data\":{\"event\":\"completed\"}");
		char id[32];
		snprintf(id, sizeof(id), "id: %llu\n", (unsigned long long)k + 1);
		const char *from = k == 0 ? all.text : strstr(all.text, id);
		if (k == 13)
			from = all.text + all.len;
		assert_non_null(from);
		assert_string_equal(part.text, from);
		assert_int_equal(part.units, 13 - (int)k);
		tc_run_chunks_free(f);
	}
}

/* Subgraphs are sub-agents: their start and end, their chunks under their own agentId. */
static void s004_subagents(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", "supervisor", true, 0, collect, &s);
	seq = 0;
	feed(tc_run_chunks_ops.event, f, "lifecycle", "[\"tools:4\",\"researcher:7\"]",
	     "\"data\":{\"event\":\"started\",\"graph_name\":\"researcher\",\"cause\":{\"type\":\"toolCall\",\"tool_call_id\":\"c9\"}}");
	feed(tc_run_chunks_ops.event, f, "messages", "[\"tools:4\",\"researcher:7\",\"model:1\"]",
	     MSG_START("ai", "m5"));
	feed(tc_run_chunks_ops.event, f, "messages", "[\"tools:4\",\"researcher:7\",\"model:1\"]", TEXT_DELTA("found"));
	feed(tc_run_chunks_ops.event, f, "values", "[\"tools:4\",\"researcher:7\"]", "\"data\":{\"notes\":[\"a\"]}");
	feed(tc_run_chunks_ops.event, f, "lifecycle", "[\"tools:4\",\"researcher:7\"]",
	     "\"data\":{\"event\":\"completed\"}");
	const char *sub = "\"agentId\":\"r1/tools:4|researcher:7\",\"agentType\":\"researcher\"";
	assert_non_null(strstr(
		s.text,
		"id: 1\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"subagent_start\",\"agentId\":\"r1\",\"agentType\":\"supervisor\",\"timestamp\":1001,\"step\":0,\"subAgentType\":\"researcher\",\"subSessionId\":\"r1/tools:4|researcher:7\",\"callId\":\"c9\"}"));
	assert_non_null(strstr(s.text, "id: 2\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"text_delta\","));
	assert_int_equal(count(s.text, sub), 2); /* the text and the state patch */
	assert_non_null(strstr(
		s.text,
		"id: 4\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"subagent_end\",\"agentId\":\"r1\",\"agentType\":\"supervisor\",\"timestamp\":1005,\"step\":0,\"subAgentType\":\"researcher\",\"subSessionId\":\"r1/tools:4|researcher:7\",\"callId\":\"c9\",\"result\":{\"notes\":[\"a\"]}}"));
	assert_string_equal(tc_run_chunks_status(f), "active"); /* a subgraph's end is not the run's */
	tc_run_chunks_free(f);
}

/* Tool errors, model errors, removed and replaced state, pointer escaping. */
static void s004_errors_and_patches(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", NULL, true, 0, collect, &s);
	seq = 0;
	feed(tc_run_chunks_ops.event, f, "tools", "[]",
	     "\"data\":{\"event\":\"tool-error\",\"tool_call_id\":\"c2\",\"message\":\"nope\"}");
	feed(tc_run_chunks_ops.event, f, "messages", "[]",
	     "\"data\":{\"event\":\"error\",\"message\":\"overloaded\",\"code\":\"provider_overloaded\"}");
	feed(tc_run_chunks_ops.event, f, "values", "[]", "\"data\":{\"a/b\":1,\"c~\":[1,2],\"gone\":true}");
	feed(tc_run_chunks_ops.event, f, "values", "[]", "\"data\":{\"a/b\":2,\"c~\":[2]}");
	feed(tc_run_chunks_ops.event, f, "values", "[]", "\"data\":{\"a/b\":2,\"c~\":[2]}"); /* no change: no chunk */
	assert_int_equal(s.units, 4);
	assert_non_null(strstr(s.text, "\"toolCallId\":\"c2\",\"result\":null,\"success\":false,\"error\":\"nope\""));
	assert_non_null(strstr(
		s.text,
		"\"type\":\"error\",\"agentId\":\"r1\",\"timestamp\":1002,\"error\":\"overloaded\",\"code\":\"provider_overloaded\",\"recoverable\":false,\"step\":0"));
	assert_non_null(strstr(
		s.text,
		"[{\"op\":\"add\",\"path\":\"/a~1b\",\"value\":1},{\"op\":\"add\",\"path\":\"/c~0\",\"value\":[1,2]},{\"op\":\"add\",\"path\":\"/gone\",\"value\":true}]"));
	assert_non_null(strstr(
		s.text,
		"[{\"op\":\"remove\",\"path\":\"/gone\"},{\"op\":\"replace\",\"path\":\"/a~1b\",\"value\":2},{\"op\":\"replace\",\"path\":\"/c~0\",\"value\":[2]}]"));
	tc_run_chunks_free(f);
}

/* Garbage in: ignored, nothing emitted, nothing leaked. */
static const char *const garbage_frames[] = {
	"",
	"{",
	"[]",
	"null",
	"{\"method\":1}",
	"{\"method\":\"values\"}",
	"{\"method\":\"values\",\"params\":{\"namespace\":{}}}",
	"{\"method\":\"values\",\"params\":{\"namespace\":[],\"data\":5}}",
	"{\"method\":\"messages\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"content-block-delta\"}}}",
	"{\"method\":\"messages\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"content-block-start\",\"content\":7}}}",
	"{\"method\":\"tools\",\"params\":{\"namespace\":[1,{}],\"data\":{\"event\":\"tool-started\"}}}",
	"{\"method\":\"lifecycle\",\"params\":{\"namespace\":[],\"data\":{\"event\":5}}}",
	"{\"method\":\"lifecycle\",\"params\":{\"namespace\":[\"x\"],\"data\":{\"event\":\"bogus\"}}}",
	"{\"method\":\"custom\",\"params\":{\"namespace\":[]}}",
};

static void s004_garbage(void **state)
{
	struct sink s = { 0 };
	struct tc_run_chunks *f = tc_run_chunks_new("r1", NULL, true, 0, collect, &s);
	for (size_t i = 0; i < sizeof(garbage_frames) / sizeof(garbage_frames[0]); i++)
		assert_false(feed_frame(tc_run_chunks_ops.event, f, garbage_frames[i], strlen(garbage_frames[i])));
	/* only the custom event without data says anything: a chunk with null data */
	assert_int_equal(s.units, 1);
	assert_non_null(strstr(s.text, "\"eventName\":\"\",\"data\":null"));
	tc_run_chunks_free(f);
}

/* ---- seed 002 ---- */

/*
 * A compact trace of seed 002 events: "event[:stage:index]" each, the index
 * the blockIndex of a start or stop, the deltaIndex of a delta. Checks that
 * each unit is "id: N\nevent: X\ndata: {…"event":"X"…}\n\n", the ids
 * consecutive.
 */
static void trace002(const char *text, char *out, size_t cap)
{
	out[0] = '\0';
	unsigned long long last = 0;
	for (const char *p = text; *p;) {
		const char *end = strstr(p, "\n\n");
		assert_non_null(end);
		char *after;
		assert_true(strncmp(p, "id: ", 4) == 0);
		unsigned long long id = strtoull(p + 4, &after, 10);
		assert_true(*after == '\n' && (!last || id == last + 1));
		last = id;
		p = after + 1;
		assert_true(strncmp(p, "event: ", 7) == 0);
		const char *data = strstr(p, "\ndata: ");
		assert_true(data && data < end);
		cJSON *j = cJSON_ParseWithLength(data + 7, (size_t)(end - data - 7));
		assert_non_null(j);
		const char *ev = cJSON_GetObjectItem(j, "event")->valuestring;
		assert_true(strncmp(p + 7, ev, strlen(ev)) == 0);
		assert_string_equal(cJSON_GetObjectItem(j, "requestId")->valuestring, "req-1");
		assert_non_null(cJSON_GetObjectItem(j, "timestamp"));
		const cJSON *st = cJSON_GetObjectItem(j, "stage");
		size_t n = strlen(out);
		if (st) {
			const cJSON *ix =
				cJSON_GetObjectItem(j, !strcmp(st->valuestring, "delta") ? "deltaIndex" : "blockIndex");
			assert_non_null(ix);
			snprintf(out + n, cap - n, "%s%s:%s:%d", n ? " " : "", ev, st->valuestring, ix->valueint);
		} else {
			snprintf(out + n, cap - n, "%s%s", n ? " " : "", ev);
		}
		cJSON_Delete(j);
		p = end + 2;
	}
}

static int terminals002(const char *text)
{
	return count(text, "event: done\n") + count(text, "event: error\n") + count(text, "event: aborted\n");
}

/* The stage pattern, indexes, usage, the content of done. */
static void s002_completed(void **state)
{
	struct sink s = { 0 };
	char tr[2048];
	struct tc_run_agent_events *f = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
	assert_true(whole_run(tc_run_agent_events_ops.event, f, "{\"data\":{\"event\":\"completed\"}"));
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata thinking:start:0 thinking:delta:0 thinking:stop:0 "
				"tool_call:start:1 tool_call:delta:0 tool_call:delta:1 tool_call:stop:1 "
				"tool_result:start:2 tool_result:delta:0 tool_result:stop:2 "
				"text:start:3 text:delta:0 text:delta:1 text:stop:3 done");
	assert_ptr_equal(
		strstr(s.text,
		       "id: 1\nevent: metadata\ndata: {\"event\":\"metadata\",\"requestId\":\"req-1\",\"threadId\":\"th-1\",\"agentId\":\"agent\",\"runId\":\"r1\",\"timestamp\":\"1970-01-01T00:00:01.004Z\"}\n\n"),
		s.text);
	assert_non_null(strstr(
		s.text,
		"{\"event\":\"text\",\"requestId\":\"req-1\",\"messageId\":\"m3\",\"blockId\":\"b3\",\"stage\":\"delta\",\"delta\":\"It is \",\"deltaIndex\":0,"));
	assert_non_null(strstr(s.text, "\"stage\":\"stop\",\"blockIndex\":3,\"text\":\"It is 42.\""));
	assert_non_null(strstr(
		s.text,
		"{\"event\":\"tool_call\",\"requestId\":\"req-1\",\"messageId\":\"m1\",\"blockId\":\"b1\",\"stage\":\"stop\",\"toolCallId\":\"c1\",\"toolName\":\"search\",\"blockIndex\":1,\"input\":{\"q\":\"x\"}"));
	assert_non_null(strstr(
		s.text,
		"\"stage\":\"stop\",\"toolCallId\":\"c1\",\"toolName\":\"search\",\"blockIndex\":2,\"status\":\"success\",\"summary\":\"42\""));
	assert_non_null(strstr(
		s.text,
		"event: done\ndata: {\"event\":\"done\",\"requestId\":\"req-1\",\"messageId\":\"m3\",\"threadId\":\"th-1\",\"content\":["
		"{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
		"{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"search\",\"input\":{\"q\":\"x\"}},"
		"{\"type\":\"tool_result\",\"toolCallId\":\"c1\",\"toolName\":\"search\",\"status\":\"success\",\"summary\":\"42\"},"
		"{\"type\":\"text\",\"text\":\"It is 42.\"}],"
		"\"usage\":{\"inputTokens\":20,\"outputTokens\":8,\"totalTokens\":28},\"finishReason\":\"stop\","));
	assert_int_equal(terminals002(s.text), 1);
	tc_run_agent_events_finish(f, NULL, NULL); /* after the end: nothing */
	assert_true(feed(tc_run_agent_events_ops.event, f, "values", "[]", "\"data\":{}"));
	assert_int_equal(terminals002(s.text), 1);
	tc_run_agent_events_free(f);
}

/* Exactly one terminal whatever the end: failed, cancelled, cut, interrupted, the caller's. */
static void s002_terminals(void **state)
{
	static const struct {
		const char *end;
		const char *want;
	} cases[] = {
		{ "{\"data\":{\"event\":\"failed\",\"error\":\"boom\"}",
		  "event: error\ndata: {\"event\":\"error\",\"requestId\":\"req-1\",\"code\":\"agent_error\",\"message\":\"boom\",\"retryable\":false," },
		{ "{\"data\":{\"event\":\"failed\",\"error\":\"cancelled\"}",
		  "event: aborted\ndata: {\"event\":\"aborted\",\"requestId\":\"req-1\",\"reason\":\"cancelled\"," },
		{ "{\"data\":{\"event\":\"interrupted\",\"cancelled\":true}",
		  "event: aborted\ndata: {\"event\":\"aborted\",\"requestId\":\"req-1\",\"reason\":\"cancelled\"," },
		{ "{\"data\":{\"event\":\"started\",\"run_id\":\"r2\"}",
		  "event: error\ndata: {\"event\":\"error\",\"requestId\":\"req-1\",\"code\":\"internal_error\",\"message\":\"the run's events ended without its end: another run started\",\"retryable\":true," },
		{ "{\"data\":{\"event\":\"interrupted\"}", "\"finishReason\":\"action_required\"" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sink s = { 0 };
		struct tc_run_agent_events *f =
			tc_run_agent_events_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
		assert_true(whole_run(tc_run_agent_events_ops.event, f, cases[i].end));
		tc_run_agent_events_finish(f, "stream_timeout", "late");
		char tr[2048];
		trace002(s.text, tr, sizeof(tr));
		assert_non_null(strstr(s.text, cases[i].want));
		assert_int_equal(terminals002(s.text), 1);
		tc_run_agent_events_free(f);
	}
	/* the caller's: a client cancel mid-block closes the block, then aborted */
	struct sink s = { 0 };
	struct tc_run_agent_events *f = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", true, 0, collect, &s);
	seq = 0;
	feed(tc_run_agent_events_ops.event, f, "messages", "[]", MSG_START("ai", "m1"));
	feed(tc_run_agent_events_ops.event, f, "messages", "[]",
	     TEXT_DELTA("par")); /* no block start seen: opened by the delta */
	tc_run_agent_events_finish(f, NULL, NULL);
	tc_run_agent_events_finish(f, "internal_error", "x");
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata text:start:0 text:delta:0 text:stop:0 aborted");
	assert_non_null(strstr(s.text, "\"reason\":\"client_cancelled\""));
	tc_run_agent_events_free(f);
	/* nothing of the run yet: metadata, then the error */
	memset(&s, 0, sizeof(s));
	f = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
	tc_run_agent_events_finish(f, "stream_timeout", "no events");
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata error");
	assert_non_null(strstr(s.text, "\"code\":\"stream_timeout\",\"message\":\"no events\",\"retryable\":true"));
	tc_run_agent_events_free(f);
}

/* An interrupt: continuation {actionId, kind, payload}, then done with action_required. */
static void s002_continuation(void **state)
{
	struct sink s = { 0 };
	struct tc_run_agent_events *f = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", true, 0, collect, &s);
	seq = 0;
	feed(tc_run_agent_events_ops.event, f, "input.requested", "[\"tools:1\"]",
	     "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"kind\":\"approval\",\"tool\":\"rm\"}}");
	feed(tc_run_agent_events_ops.event, f, "input.requested", "[]",
	     "\"data\":{\"interrupt_id\":\"i2\",\"payload\":\"name?\"}");
	assert_true(feed(tc_run_agent_events_ops.event, f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata continuation continuation done");
	assert_non_null(strstr(
		s.text,
		"{\"event\":\"continuation\",\"requestId\":\"req-1\",\"actionId\":\"i1\",\"kind\":\"approval\",\"payload\":{\"kind\":\"approval\",\"tool\":\"rm\"},"));
	assert_non_null(strstr(s.text, "\"actionId\":\"i2\",\"kind\":\"input\",\"payload\":\"name?\""));
	assert_non_null(strstr(
		s.text,
		"\"content\":[],\"usage\":{\"inputTokens\":0,\"outputTokens\":0,\"totalTokens\":0},\"finishReason\":\"action_required\""));
	tc_run_agent_events_free(f);
}

/* Resumed after each id: exactly what followed it, ids and all. */
static void s002_resume(void **state)
{
	static struct sink all, part;
	struct tc_run_agent_events *f =
		tc_run_agent_events_new("r1", "req-1", "th-1", "agent", false, 0, collect, &all);
	assert_true(whole_run(tc_run_agent_events_ops.event, f, "{\"data\":{\"event\":\"completed\"}"));
	tc_run_agent_events_free(f);
	int units = count(all.text, "\n\n");
	assert_true(units > 10);
	const char *from = all.text;
	for (int k = 0; k <= units; k++) {
		memset(&part, 0, sizeof(part));
		f = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", false, (uint64_t)k, collect, &part);
		whole_run(tc_run_agent_events_ops.event, f, "{\"data\":{\"event\":\"completed\"}");
		tc_run_agent_events_free(f);
		assert_string_equal(part.text, from);
		if (*from)
			from = strstr(from, "\n\n") + 2;
	}
}

/* A message whose blocks overlap (a tool call starts before its text finishes, as LangChain streams them). */
static void overlapping(feed_fn *fn, void *f)
{
	seq = 0;
	feed(fn, f, "lifecycle", "[]", STARTED("r1"));
	feed(fn, f, "messages", "[\"agent:1\"]", MSG_START("ai", "m1"));
	feed(fn, f, "messages", "[\"agent:1\"]", BLOCK_START_TEXT);
	feed(fn, f, "messages", "[\"agent:1\"]", TEXT_DELTA("Looking"));
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":1,\"content\":{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]", BLOCK_FINISH_TEXT("Looking"));
	feed(fn, f, "messages", "[\"agent:1\"]",
	     "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":1,\"content\":{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"search\",\"args\":{\"q\":1}}}");
	feed(fn, f, "messages", "[\"agent:1\"]", MSG_FINISH);
	feed(fn, f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}");
}

static void overlapping_blocks(void **state)
{
	static struct sink s;
	memset(&s, 0, sizeof(s));
	struct tc_run_chunks *a = tc_run_chunks_new("r1", "agent", false, 0, collect, &s);
	overlapping(tc_run_chunks_ops.event, a);
	tc_run_chunks_free(a);
	assert_int_equal(count(s.text, "\"text_delta\""), 1); /* the text once, not again at its finish */
	memset(&s, 0, sizeof(s));
	struct tc_run_agent_events *b = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
	overlapping(tc_run_agent_events_ops.event, b);
	tc_run_agent_events_free(b);
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr,
			    "metadata text:start:0 text:delta:0 text:stop:0 tool_call:start:1 tool_call:stop:1 done");
	assert_non_null(strstr(s.text, "\"input\":{\"q\":1}"));
}

/* The seed's HTTP statuses and retry guidance. */
static void s002_codes(void **state)
{
	assert_int_equal(tc_agent_events_http_status("invalid_message_format"), 400);
	assert_int_equal(tc_agent_events_http_status("invalid_action_id"), 400);
	assert_int_equal(tc_agent_events_http_status("auth_failed"), 401);
	assert_int_equal(tc_agent_events_http_status("thread_access_denied"), 403);
	assert_int_equal(tc_agent_events_http_status("thread_not_found"), 404);
	assert_int_equal(tc_agent_events_http_status("message_too_large"), 413);
	assert_int_equal(tc_agent_events_http_status("rate_limit_exceeded"), 429);
	assert_int_equal(tc_agent_events_http_status("internal_error"), 500);
	assert_int_equal(tc_agent_events_http_status("stream_timeout"), 504);
	assert_int_equal(tc_agent_events_http_status("nope"), 500);
	assert_true(tc_agent_events_retryable("rate_limit_exceeded"));
	assert_false(tc_agent_events_retryable("auth_failed"));
}

static void s002_garbage(void **state)
{
	struct sink s = { 0 };
	struct tc_run_agent_events *f = tc_run_agent_events_new("r1", "req-1", "th-1", "agent", true, 0, collect, &s);
	for (size_t i = 0; i < sizeof(garbage_frames) / sizeof(garbage_frames[0]); i++)
		assert_false(
			feed_frame(tc_run_agent_events_ops.event, f, garbage_frames[i], strlen(garbage_frames[i])));
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata"); /* events of the run, none of them ours */
	tc_run_agent_events_free(f);
}

/* ---- seed 003 ---- */

/*
 * Checks a seed 003 stream whole: every unit one JSON object on one line,
 * session_id "th-1" on each, event_ids first_id, first_id + 1, …, a reply
 * line last and only last. With spans (a stream from the run's start whose
 * nodes run one at a time): node_enter and node_exit pair up with one
 * node_id, which every line between them carries. Returns the lines.
 */
static int check003(const char *text, double first_id, bool spans)
{
	int n = 0;
	bool replied = false;
	char open_span[256] = "";
	for (const char *p = text; *p; n++) {
		const char *nl = strchr(p, '\n');
		assert_non_null(nl);
		cJSON *j = cJSON_ParseWithLength(p, (size_t)(nl - p));
		assert_true(cJSON_IsObject(j));
		assert_false(replied); /* nothing after the reply */
		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "session_id")), "th-1");
		const cJSON *eid = cJSON_GetObjectItem(j, "event_id");
		assert_true(cJSON_IsNumber(eid) && eid->valuedouble == first_id + n);
		const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
		const char *node = cJSON_GetStringValue(cJSON_GetObjectItem(j, "node_id"));
		if (!type) {
			assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "reply")));
			const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(j, "status"));
			assert_true(st &&
				    (!strcmp(st, "completed") || !strcmp(st, "interrupted") || !strcmp(st, "failed")));
			assert_true((strcmp(st, "failed") == 0) == cJSON_IsString(cJSON_GetObjectItem(j, "error")));
			replied = true;
		} else if (spans && !strcmp(type, "node_enter")) {
			assert_string_equal(open_span, "");
			assert_non_null(node);
			snprintf(open_span, sizeof(open_span), "%s", node);
		} else if (spans && !strcmp(type, "node_exit")) {
			assert_non_null(node);
			assert_string_equal(node, open_span);
			open_span[0] = '\0';
		} else if (spans && open_span[0]) {
			assert_non_null(node);
			assert_string_equal(node, open_span);
		} else if (spans) {
			assert_null(node);
		}
		cJSON_Delete(j);
		p = nl + 1;
	}
	assert_true(replied);
	if (spans)
		assert_string_equal(open_span, "");
	return n;
}

/* Every line the run makes, in order, its nodes as spans, then the reply. */
static void s003_completed(void **state)
{
	struct sink s = { 0 };
	struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", "agent", "what is it?", false, 0, collect, &s);
	assert_true(whole_run(tc_run_ndjson_ops.event, f, "{\"data\":{\"event\":\"completed\"}"));
	const char *want =
		"{\"session_id\":\"th-1\",\"event_id\":1,\"type\":\"run_start\",\"run_id\":\"r1\",\"agent\":\"agent\",\"message\":\"what is it?\"}\n"
		"{\"session_id\":\"th-1\",\"event_id\":2,\"type\":\"values\",\"state\":{\"messages\":[\"q\"]}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":3,\"type\":\"node_enter\",\"id\":\"agent\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":4,\"type\":\"tool_call_chunk\",\"call_id\":\"c1\",\"name\":\"search\",\"arguments_delta\":\"{\\\"q\\\":\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":5,\"type\":\"tool_call_chunk\",\"call_id\":\"c1\",\"name\":\"search\",\"arguments_delta\":\"\\\"x\\\"}\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":6,\"type\":\"tool_call\",\"call_id\":\"c1\",\"name\":\"search\",\"arguments\":{\"q\":\"x\"}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":7,\"type\":\"usage\",\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":8,\"type\":\"updates\",\"id\":\"agent\",\"state\":{\"messages\":[\"call\"]}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":9,\"type\":\"node_exit\",\"id\":\"agent\",\"result\":\"Ok\"}\n"
		"{\"session_id\":\"th-1\",\"event_id\":10,\"type\":\"values\",\"state\":{\"messages\":[\"q\",\"call\"]}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:tools:2\",\"event_id\":11,\"type\":\"node_enter\",\"id\":\"tools\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:tools:2\",\"event_id\":12,\"type\":\"tool_start\",\"call_id\":\"c1\",\"name\":\"search\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:tools:2\",\"event_id\":13,\"type\":\"tool_output\",\"call_id\":\"c1\",\"name\":\"search\",\"content\":\"work\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:tools:2\",\"event_id\":14,\"type\":\"tool_end\",\"call_id\":\"c1\",\"name\":\"search\",\"result\":\"42\",\"is_error\":false}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:tools:2\",\"event_id\":15,\"type\":\"node_exit\",\"id\":\"tools\",\"result\":\"Ok\"}\n"
		"{\"session_id\":\"th-1\",\"event_id\":16,\"type\":\"values\",\"state\":{\"messages\":[\"q\",\"call\",\"42\"]}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":17,\"type\":\"node_enter\",\"id\":\"agent\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":18,\"type\":\"message_chunk\",\"content\":\"It is \",\"id\":\"agent\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":19,\"type\":\"message_chunk\",\"content\":\"42.\",\"id\":\"agent\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":20,\"type\":\"usage\",\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":21,\"type\":\"custom\",\"name\":\"progress\",\"value\":{\"done\":1}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":22,\"type\":\"node_exit\",\"id\":\"agent\",\"result\":\"Ok\"}\n"
		"{\"session_id\":\"th-1\",\"event_id\":23,\"type\":\"values\",\"state\":{\"messages\":[\"q\",\"call\",\"42\",\"It is 42.\"],\"n\":1}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":24,\"reply\":\"It is 42.\",\"status\":\"completed\"}\n";
	assert_string_equal(s.text, want);
	assert_int_equal(check003(s.text, 1, true), 24);
	assert_int_equal(tc_run_ndjson_event_id(f), 24);
	/* after the end: nothing, whatever comes */
	assert_true(feed(tc_run_ndjson_ops.event, f, "values", "[]", "\"data\":{\"n\":2}"));
	tc_run_ndjson_finish(f, "late");
	assert_int_equal(s.units, 24);
	assert_int_equal(tc_run_ndjson_event_id(f), 24);
	tc_run_ndjson_free(f);
}

/* Exactly one reply line whatever the end, last; nothing after it. */
static void s003_endings(void **state)
{
	static const struct {
		const char *end;
		const char *want;
	} cases[] = {
		{ "{\"data\":{\"event\":\"failed\",\"error\":\"boom\"}",
		  "{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:3\",\"event_id\":24,\"reply\":\"It is 42.\",\"status\":\"failed\",\"error\":\"boom\"}\n" },
		{ "{\"data\":{\"event\":\"failed\"}",
		  "\"event_id\":24,\"reply\":\"It is 42.\",\"status\":\"failed\",\"error\":\"the run failed\"}\n" },
		{ "{\"data\":{\"event\":\"interrupted\"}",
		  "\"event_id\":24,\"reply\":\"It is 42.\",\"status\":\"interrupted\"}\n" },
		{ "{\"data\":{\"event\":\"started\",\"run_id\":\"r2\"}",
		  "\"event_id\":24,\"reply\":\"It is 42.\",\"status\":\"failed\",\"error\":\"the run's events ended without its end: another run started\"}\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sink s = { 0 };
		struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, false, 0, collect, &s);
		assert_true(whole_run(tc_run_ndjson_ops.event, f, cases[i].end));
		tc_run_ndjson_finish(f, "late");
		assert_true(feed(tc_run_ndjson_ops.event, f, "values", "[]", "\"data\":{\"n\":2}"));
		assert_int_equal(check003(s.text, 1, true), 24);
		assert_int_equal(count(s.text, "\"reply\":"), 1);
		const char *tail = strstr(s.text, cases[i].want);
		assert_non_null(tail);
		assert_string_equal(tail, cases[i].want);  /* the last line */
		assert_null(strstr(s.text, "\"agent\":")); /* no agent, no message: run_start without them */
		assert_non_null(strstr(
			s.text, "{\"session_id\":\"th-1\",\"event_id\":1,\"type\":\"run_start\",\"run_id\":\"r1\"}\n"));
		tc_run_ndjson_free(f);
	}

	/* a failed run with a node running: its node_exit with the error, then the reply */
	struct sink s = { 0 };
	struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, true, 0, collect, &s);
	seq = 0;
	task(tc_run_ndjson_ops.event, f, TASK("7", "model"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"model:7\"]", MSG_START("ai", "m1"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"model:7\"]",
	     TEXT_DELTA("par")); /* no block start: still text */
	assert_true(feed(tc_run_ndjson_ops.event, f, "lifecycle", "[]",
			 "\"data\":{\"event\":\"failed\",\"error\":\"rate limited\"}"));
	assert_int_equal(check003(s.text, 1, true), 4);
	assert_string_equal(
		s.text,
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:model:1\",\"event_id\":1,\"type\":\"node_enter\",\"id\":\"model\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:model:1\",\"event_id\":2,\"type\":\"message_chunk\",\"content\":\"par\",\"id\":\"agent\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:model:1\",\"event_id\":3,\"type\":\"node_exit\",\"id\":\"model\",\"result\":{\"Err\":\"rate limited\"}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:model:1\",\"event_id\":4,\"reply\":\"par\",\"status\":\"failed\",\"error\":\"rate limited\"}\n");
	tc_run_ndjson_free(f);

	/* the caller's finish mid-node: the same, with its error (or a default); once */
	memset(&s, 0, sizeof(s));
	f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, true, 0, collect, &s);
	seq = 0;
	task(tc_run_ndjson_ops.event, f, TASK("7", "model"));
	tc_run_ndjson_finish(f, NULL);
	tc_run_ndjson_finish(f, "again");
	assert_true(feed(tc_run_ndjson_ops.event, f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	assert_int_equal(check003(s.text, 1, true), 3);
	assert_non_null(strstr(
		s.text,
		"\"event_id\":2,\"type\":\"node_exit\",\"id\":\"model\",\"result\":{\"Err\":\"the stream was closed before the run ended\"}}\n"
		"{\"session_id\":\"th-1\",\"event_id\":3,\"reply\":\"\",\"status\":\"failed\",\"error\":\"the stream was closed before the run ended\"}\n"));
	tc_run_ndjson_free(f);

	/* nothing of the run yet: the reply alone */
	memset(&s, 0, sizeof(s));
	f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, false, 0, collect, &s);
	tc_run_ndjson_finish(f, "stream_timeout");
	assert_string_equal(
		s.text,
		"{\"session_id\":\"th-1\",\"event_id\":1,\"reply\":\"\",\"status\":\"failed\",\"error\":\"stream_timeout\"}\n");
	tc_run_ndjson_free(f);
}

/* Resumed after event_id k (the run read from its start again): exactly what followed k. */
static void s003_resume(void **state)
{
	static const char *const ends[] = { "{\"data\":{\"event\":\"completed\"}",
					    "{\"data\":{\"event\":\"started\",\"run_id\":\"r2\"}" };
	static struct sink all, part;
	for (size_t e = 0; e < 2; e++) {
		memset(&all, 0, sizeof(all));
		struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", "agent", "hi", false, 0, collect, &all);
		whole_run(tc_run_ndjson_ops.event, f, ends[e]);
		tc_run_ndjson_free(f);
		assert_int_equal(all.units, 24);
		for (uint64_t k = 0; k <= 24; k++) {
			memset(&part, 0, sizeof(part));
			f = tc_run_ndjson_new("r1", "th-1", "agent", "hi", false, k, collect, &part);
			whole_run(tc_run_ndjson_ops.event, f, ends[e]);
			assert_int_equal(tc_run_ndjson_event_id(f), 24);
			char id[32];
			snprintf(id, sizeof(id), "\"event_id\":%llu,", (unsigned long long)k + 1);
			const char *from = all.text + all.len;
			if (k < 24) {
				from = strstr(all.text, id);
				assert_non_null(from);
				while (from > all.text && from[-1] != '\n')
					from--;
			}
			assert_string_equal(part.text, from);
			assert_int_equal(part.units, 24 - (int)k);
			if (k < 24)
				check003(part.text, (double)k + 1, false);
			tc_run_ndjson_free(f);
		}
	}
}

/*
 * Nodes in parallel (two of one name), a subgraph's events with their
 * namespace, a checkpoint, a tool's error, interrupts as tool approvals, and
 * a node stopped by an interrupt.
 */
static void s003_spans_and_more(void **state)
{
	struct sink s = { 0 };
	struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, true, 0, collect, &s);
	seq = 0;
	task(tc_run_ndjson_ops.event, f, TASK("a", "worker"));
	task(tc_run_ndjson_ops.event, f, TASK("b", "worker"));
	task(tc_run_ndjson_ops.event, f, TASK("a", "worker")); /* again: nothing */
	feed(tc_run_ndjson_ops.event, f, "custom", "[\"worker:a\"]", "\"data\":{\"payload\":\"from a\"}");
	feed(tc_run_ndjson_ops.event, f, "custom", "[\"worker:b\"]", "\"data\":{\"payload\":\"from b\"}");
	feed(tc_run_ndjson_ops.event, f, "updates", "[]",
	     "\"node\":\"worker\",\"data\":{\"values\":{\"x\":1}}");            /* the latest worker */
	feed(tc_run_ndjson_ops.event, f, "values", "[]", "\"data\":{\"x\":1}"); /* no node, two open: none */
	task(tc_run_ndjson_ops.event, f,
	     "{\"id\":\"a\",\"name\":\"worker\",\"result\":{},\"error\":{\"message\":\"bad input\",\"name\":\"Error\"}}");
	task(tc_run_ndjson_ops.event, f,
	     "{\"id\":\"zz\",\"name\":\"worker\",\"result\":{}}");              /* never entered: nothing */
	feed(tc_run_ndjson_ops.event, f, "values", "[]", "\"data\":{\"x\":2}"); /* no node, one open: its */
	feed(tc_run_ndjson_ops.event, f, "checkpoints", "[]",
	     "\"data\":{\"id\":\"ck1\",\"parent_id\":\"ck0\",\"step\":2,\"source\":\"loop\"}");
	feed(tc_run_ndjson_ops.event, f, "lifecycle", "[\"worker:b\",\"research:4\"]",
	     "\"data\":{\"event\":\"started\",\"graph_name\":\"research\"}");
	feed(tc_run_ndjson_ops.event, f, "checkpoints", "[\"worker:b\",\"research:4\"]",
	     "\"data\":{\"id\":\"ck9\",\"step\":0}"); /* a subgraph's: none */
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"worker:b\",\"research:4\",\"model:9\"]",
	     MSG_START("ai", "m7"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"worker:b\",\"research:4\",\"model:9\"]", TEXT_DELTA("deep"));
	feed(tc_run_ndjson_ops.event, f, "tools", "[\"worker:b\",\"research:4\",\"tools:5\"]",
	     "\"data\":{\"event\":\"tool-error\",\"tool_call_id\":\"c3\",\"tool_name\":\"fetch\",\"message\":\"timeout\"}");
	feed(tc_run_ndjson_ops.event, f, "tools", "[\"worker:b\",\"research:4\",\"tools:5\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c4\",\"output\":[1,2]}");
	feed(tc_run_ndjson_ops.event, f, "tools", "[\"worker:b\",\"research:4\",\"tools:5\"]",
	     "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c5\",\"output\":\"plain\"}");
	feed(tc_run_ndjson_ops.event, f, "input.requested", "[\"worker:b\"]",
	     "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"action_request\":{\"action\":\"rm\",\"args\":{\"path\":\"/\"}}}}");
	feed(tc_run_ndjson_ops.event, f, "input.requested", "[]",
	     "\"data\":{\"interrupt_id\":\"i2\",\"payload\":\"name?\"}");
	feed(tc_run_ndjson_ops.event, f, "input.requested", "[]",
	     "\"data\":{\"interrupt_id\":\"i3\",\"payload\":{\"action_requests\":[{\"name\":\"send_email\",\"args\":{}}]}}");
	task(tc_run_ndjson_ops.event, f,
	     "{\"id\":\"b\",\"name\":\"worker\",\"result\":{},\"interrupts\":[{\"value\":1}],\"error\":null}");
	assert_true(feed(tc_run_ndjson_ops.event, f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	const char *want =
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:1\",\"event_id\":1,\"type\":\"node_enter\",\"id\":\"worker\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":2,\"type\":\"node_enter\",\"id\":\"worker\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:1\",\"event_id\":3,\"type\":\"custom\",\"value\":\"from a\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":4,\"type\":\"custom\",\"value\":\"from b\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":5,\"type\":\"updates\",\"id\":\"worker\",\"state\":{\"x\":1}}\n"
		"{\"session_id\":\"th-1\",\"event_id\":6,\"type\":\"values\",\"state\":{\"x\":1}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:1\",\"event_id\":7,\"type\":\"node_exit\",\"id\":\"worker\",\"result\":{\"Err\":\"bad input\"}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":8,\"type\":\"values\",\"state\":{\"x\":2}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":9,\"type\":\"checkpoint\",\"checkpoint_id\":\"ck1\",\"timestamp\":1006,\"step\":2,\"thread_id\":\"th-1\",\"checkpoint_ns\":\"\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":10,\"type\":\"message_chunk\",\"content\":\"deep\",\"id\":\"agent\",\"namespace\":\"worker:b|research:4\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":11,\"type\":\"tool_end\",\"call_id\":\"c3\",\"name\":\"fetch\",\"result\":\"timeout\",\"is_error\":true,\"namespace\":\"worker:b|research:4\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":12,\"type\":\"tool_end\",\"call_id\":\"c4\",\"name\":\"\",\"result\":\"[1,2]\",\"is_error\":false,\"namespace\":\"worker:b|research:4\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":13,\"type\":\"tool_end\",\"call_id\":\"c5\",\"name\":\"\",\"result\":\"plain\",\"is_error\":false,\"namespace\":\"worker:b|research:4\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":14,\"type\":\"tool_approval\",\"call_id\":\"i1\",\"name\":\"rm\",\"arguments\":{\"action_request\":{\"action\":\"rm\",\"args\":{\"path\":\"/\"}}}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":15,\"type\":\"tool_approval\",\"call_id\":\"i2\",\"name\":\"interrupt\",\"arguments\":{\"value\":\"name?\"}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":16,\"type\":\"tool_approval\",\"call_id\":\"i3\",\"name\":\"send_email\",\"arguments\":{\"action_requests\":[{\"name\":\"send_email\",\"args\":{}}]}}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:worker:2\",\"event_id\":17,\"type\":\"node_exit\",\"id\":\"worker\",\"result\":{\"Err\":\"interrupted\"}}\n"
		"{\"session_id\":\"th-1\",\"event_id\":18,\"reply\":\"\",\"status\":\"interrupted\"}\n";
	assert_string_equal(s.text, want);
	check003(s.text, 1, false);
	tc_run_ndjson_free(f);
}

/* Two tasks of one node streaming at once: their messages apart; the reply is the last started. */
static void s003_parallel_reply(void **state)
{
	struct sink s = { 0 };
	struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, true, 0, collect, &s);
	seq = 0;
	task(tc_run_ndjson_ops.event, f, TASK("a", "agent"));
	task(tc_run_ndjson_ops.event, f, TASK("b", "agent"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:a\"]", MSG_START("ai", "m1"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:b\"]", MSG_START("ai", "m2"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:a\"]", TEXT_DELTA("A1"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:b\"]", TEXT_DELTA("B1"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:a\"]", TEXT_DELTA("A2"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:b\"]", TEXT_DELTA("B2"));
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:b\"]", MSG_FINISH);
	feed(tc_run_ndjson_ops.event, f, "messages", "[\"agent:a\"]", MSG_FINISH);
	task(tc_run_ndjson_ops.event, f, TASK_OK("b", "agent"));
	task(tc_run_ndjson_ops.event, f, TASK_OK("a", "agent"));
	assert_true(feed(tc_run_ndjson_ops.event, f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	check003(s.text, 1, false);
	assert_non_null(strstr(
		s.text,
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":5,\"type\":\"message_chunk\",\"content\":\"A2\",\"id\":\"agent\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:2\",\"event_id\":6,\"type\":\"message_chunk\",\"content\":\"B2\",\"id\":\"agent\"}\n"));
	assert_non_null(strstr(
		s.text,
		"\"node_id\":\"r1:agent:2\",\"event_id\":9,\"type\":\"node_exit\",\"id\":\"agent\",\"result\":\"Ok\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:1\",\"event_id\":10,\"type\":\"node_exit\",\"id\":\"agent\",\"result\":\"Ok\"}\n"
		"{\"session_id\":\"th-1\",\"node_id\":\"r1:agent:2\",\"event_id\":11,\"reply\":\"B1B2\",\"status\":\"completed\"}\n"));
	tc_run_ndjson_free(f);
}

/* More nodes at once than it follows: the oldest span ends first; every enter has its exit. */
static void s003_many_spans(void **state)
{
	static struct sink s;
	memset(&s, 0, sizeof(s));
	struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, true, 0, collect, &s);
	seq = 0;
	for (int i = 0; i < 70; i++) {
		char t[128];
		snprintf(t, sizeof(t), "{\"id\":\"t%d\",\"name\":\"n\",\"input\":{}}", i);
		task(tc_run_ndjson_ops.event, f, t);
	}
	tc_run_ndjson_finish(f, "bye");
	assert_int_equal(count(s.text, "\"type\":\"node_enter\""), 70);
	assert_int_equal(count(s.text, "\"type\":\"node_exit\""), 70);
	assert_int_equal(count(s.text, "{\"Err\":\"no longer followed: too many nodes running at once\"}"), 6);
	assert_non_null(strstr(s.text, "\"node_id\":\"r1:n:1\",\"event_id\":65,\"type\":\"node_exit\""));
	check003(s.text, 1, false);
	tc_run_ndjson_free(f);
}

static void s003_garbage(void **state)
{
	struct sink s = { 0 };
	struct tc_run_ndjson *f = tc_run_ndjson_new("r1", "th-1", NULL, NULL, true, 0, collect, &s);
	for (size_t i = 0; i < sizeof(garbage_frames) / sizeof(garbage_frames[0]); i++)
		assert_false(feed_frame(tc_run_ndjson_ops.event, f, garbage_frames[i], strlen(garbage_frames[i])));
	static const char *const more[] = {
		"{\"method\":\"tasks\",\"params\":{\"namespace\":[],\"data\":{\"id\":5}}}",
		"{\"method\":\"tasks\",\"params\":{\"namespace\":[],\"data\":[1]}}",
		"{\"method\":\"checkpoints\",\"params\":{\"namespace\":[],\"data\":{\"step\":1}}}",
		"{\"method\":\"messages\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"message-finish\",\"usage\":{\"input_tokens\":\"x\"}}}}",
		"{\"method\":\"tools\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"tool-output-delta\",\"tool_call_id\":\"c\"}}}",
	};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		assert_false(feed_frame(tc_run_ndjson_ops.event, f, more[i], strlen(more[i])));
	/* only the custom event without data says anything: a line with a null value */
	assert_int_equal(s.units, 1);
	assert_string_equal(s.text, "{\"session_id\":\"th-1\",\"event_id\":1,\"type\":\"custom\",\"value\":null}\n");
	tc_run_ndjson_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(s004_completed),
		cmocka_unit_test(s004_failed),
		cmocka_unit_test(s004_interrupted),
		cmocka_unit_test(s004_cut_and_finish),
		cmocka_unit_test(s004_resume),
		cmocka_unit_test(s004_subagents),
		cmocka_unit_test(s004_errors_and_patches),
		cmocka_unit_test(s004_garbage),
		cmocka_unit_test(s002_completed),
		cmocka_unit_test(s002_terminals),
		cmocka_unit_test(s002_continuation),
		cmocka_unit_test(s002_resume),
		cmocka_unit_test(overlapping_blocks),
		cmocka_unit_test(s002_codes),
		cmocka_unit_test(s002_garbage),
		cmocka_unit_test(s003_completed),
		cmocka_unit_test(s003_endings),
		cmocka_unit_test(s003_resume),
		cmocka_unit_test(s003_spans_and_more),
		cmocka_unit_test(s003_parallel_reply),
		cmocka_unit_test(s003_many_spans),
		cmocka_unit_test(s003_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
