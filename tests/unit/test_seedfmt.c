/* Unit tests: seedfmt.c, seed004.c, seed002.c, seed003.c — a run in the seeds' wire formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seedfmt.h"
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

/* A translator's event function, whichever format. */
typedef bool feed_fn(void *f, const char *frame, size_t len);

static bool feed004(void *f, const char *fr, size_t len)
{
	return tc_seed004_event(f, fr, len);
}


static bool feed002(void *f, const char *fr, size_t len)
{
	return tc_seed002_event(f, fr, len);
}

static bool feed(feed_fn *fn, void *f, const char *method, const char *ns, const char *params_rest)
{
	char buf[4096];
	size_t n = frame(buf, sizeof(buf), method, ns, params_rest);
	return fn(f, buf, n);
}

#define STARTED(run) "\"data\":{\"event\":\"started\",\"run_id\":\"" run "\"}"
#define MSG_START(role, id) "\"node\":\"agent\",\"data\":{\"event\":\"message-start\",\"role\":\"" role "\",\"id\":\"" id "\"}"
#define BLOCK_START_TEXT "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"\"}}"
#define TEXT_DELTA(t) "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"" t "\"}}"
#define BLOCK_FINISH_TEXT(t) "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"" t "\"}}"
#define MSG_FINISH "\"node\":\"agent\",\"data\":{\"event\":\"message-finish\",\"usage\":{\"input_tokens\":10,\"output_tokens\":4,\"total_tokens\":14}}"

/*
 * A whole run, as the example graph makes it: an earlier run's events, the
 * run's start, reasoning, a tool call, the tool, an answer, values, a
 * custom event, then the end given (completed / failed / interrupted / the
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
	feed(fn, f, "messages", "[\"agent:1\"]", MSG_START("ai", "m1"));
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":0,\"content\":{\"type\":\"reasoning\",\"reasoning\":\"\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"reasoning-delta\",\"reasoning\":\"hmm\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"reasoning\",\"reasoning\":\"hmm\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-start\",\"index\":1,\"content\":{\"type\":\"tool_call_chunk\",\"id\":\"c1\",\"name\":\"search\",\"args\":\"\"}}");
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"block-delta\",\"fields\":{\"type\":\"tool_call_chunk\",\"args\":\"{\\\"q\\\":\"}}}");
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-delta\",\"index\":1,\"delta\":{\"type\":\"block-delta\",\"fields\":{\"type\":\"tool_call_chunk\",\"args\":\"\\\"x\\\"}\"}}}");
	feed(fn, f, "messages", "[\"agent:1\"]", "\"node\":\"agent\",\"data\":{\"event\":\"content-block-finish\",\"index\":1,\"content\":{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"search\",\"args\":{\"q\":\"x\"}}}");
	feed(fn, f, "messages", "[\"agent:1\"]", MSG_FINISH);
	feed(fn, f, "updates", "[]", "\"data\":{\"node\":\"agent\",\"values\":{\"messages\":[\"call\"]}}");
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"q\",\"call\"]}");
	feed(fn, f, "tools", "[\"tools:2\"]", "\"data\":{\"event\":\"tool-started\",\"tool_call_id\":\"c1\",\"tool_name\":\"search\",\"input\":{\"q\":\"x\"}}");
	feed(fn, f, "tools", "[\"tools:2\"]", "\"data\":{\"event\":\"tool-output-delta\",\"tool_call_id\":\"c1\",\"delta\":\"work\"}");
	feed(fn, f, "tools", "[\"tools:2\"]", "\"data\":{\"event\":\"tool-finished\",\"tool_call_id\":\"c1\",\"output\":{\"content\":\"42\",\"type\":\"tool\"}}");
	feed(fn, f, "messages", "[\"tools:2\"]", "\"node\":\"tools\",\"data\":{\"event\":\"message-start\",\"role\":\"tool\",\"id\":\"m2\",\"tool_call_id\":\"c1\"}");
	feed(fn, f, "messages", "[\"tools:2\"]", "\"node\":\"tools\",\"data\":{\"event\":\"content-block-finish\",\"index\":0,\"content\":{\"type\":\"text\",\"text\":\"42\"}}");
	feed(fn, f, "messages", "[\"tools:2\"]", "\"node\":\"tools\",\"data\":{\"event\":\"message-finish\"}");
	feed(fn, f, "values", "[]", "\"data\":{\"messages\":[\"q\",\"call\",\"42\"]}");
	feed(fn, f, "messages", "[\"agent:3\"]", MSG_START("ai", "m3"));
	feed(fn, f, "messages", "[\"agent:3\"]", BLOCK_START_TEXT);
	feed(fn, f, "messages", "[\"agent:3\"]", TEXT_DELTA("It is "));
	feed(fn, f, "messages", "[\"agent:3\"]", TEXT_DELTA("42."));
	feed(fn, f, "messages", "[\"agent:3\"]", BLOCK_FINISH_TEXT("It is 42."));
	feed(fn, f, "messages", "[\"agent:3\"]", MSG_FINISH);
	feed(fn, f, "custom", "[\"agent:3\"]", "\"data\":{\"name\":\"progress\",\"payload\":{\"done\":1}}");
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
	struct tc_seed004 *f = tc_seed004_new("r1", "agent", false, 0, collect, &s);
	assert_string_equal(tc_seed004_status(f), "active");
	assert_true(whole_run(feed004, f, "{\"data\":{\"event\":\"completed\"}"));
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
	assert_string_equal(tc_seed004_status(f), "ended");
	assert_int_equal(tc_seed004_sequence(f), 13);
	/* after the end: nothing, whatever comes */
	assert_true(feed(feed004, f, "values", "[]", "\"data\":{\"n\":2}"));
	tc_seed004_finish(f, "late");
	assert_int_equal(s.units, 13);
	tc_seed004_free(f);
}

/* A failed run: an error chunk, then the fail sentinel, once. */
static void s004_failed(void **state)
{
	struct sink s = { 0 };
	struct tc_seed004 *f = tc_seed004_new("r1", NULL, false, 0, collect, &s);
	assert_true(whole_run(feed004, f, "{\"data\":{\"event\":\"failed\",\"error\":\"boom\"}"));
	assert_non_null(strstr(s.text, "\"chunk\":{\"type\":\"error\",\"agentId\":\"r1\",\"timestamp\":1032,\"error\":\"boom\",\"recoverable\":false,\"step\":0},\"sequence\":12}\n\n"
				       "id: 13\ndata: {\"type\":\"fail\",\"error\":\"boom\"}\n\n"));
	assert_null(strstr(s.text, "\"output\""));
	assert_true(ends004(&s));
	assert_string_equal(tc_seed004_status(f), "failed");
	tc_seed004_free(f);
}

/* Stopped at an interrupt: a custom "interrupt" chunk, the output with "__interrupt__", end. */
static void s004_interrupted(void **state)
{
	struct sink s = { 0 };
	struct tc_seed004 *f = tc_seed004_new("r1", NULL, true, 0, collect, &s);
	seq = 0;
	feed(feed004, f, "values", "[]", "\"data\":{\"n\":1}");
	feed(feed004, f, "checkpoints", "[]", "\"data\":{\"id\":\"k\",\"step\":3,\"source\":\"loop\"}");
	feed(feed004, f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"ask\":\"ok?\"}}");
	assert_true(feed(feed004, f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	assert_non_null(strstr(s.text, "\"type\":\"custom\",\"agentId\":\"r1\",\"timestamp\":1003,\"eventName\":\"interrupt\",\"data\":{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}"));
	assert_non_null(strstr(s.text, "\"output\":{\"n\":1,\"__interrupt__\":[{\"value\":{\"ask\":\"ok?\"},\"id\":\"i1\"}]}},\"sequence\":3}\n\nid: 4\ndata: {\"type\":\"end\"}\n\n"));
	assert_true(ends004(&s));
	tc_seed004_free(f);
}

/* Another run's start cuts the stream: a fail sentinel; the caller's finish adds nothing. */
static void s004_cut_and_finish(void **state)
{
	struct sink s = { 0 };
	struct tc_seed004 *f = tc_seed004_new("r1", NULL, false, 0, collect, &s);
	assert_true(whole_run(feed004, f, "{\"data\":{\"event\":\"started\",\"run_id\":\"r2\"}"));
	assert_string_equal(tc_seed004_status(f), "failed");
	tc_seed004_finish(f, "closing");
	assert_true(ends004(&s));
	assert_non_null(strstr(s.text, "id: 12\ndata: {\"type\":\"fail\",\"error\":\"the run's events ended without its end: another run started\"}\n\n"));
	tc_seed004_free(f);

	/* the gateway gives up on a run still going: one fail, then nothing */
	memset(&s, 0, sizeof(s));
	f = tc_seed004_new("r1", NULL, true, 0, collect, &s);
	seq = 0;
	feed(feed004, f, "custom", "[]", "\"data\":{\"payload\":1}");
	tc_seed004_finish(f, "stream_timeout");
	tc_seed004_finish(f, "again");
	assert_true(feed(feed004, f, "lifecycle", "[]", "\"data\":{\"event\":\"completed\"}"));
	assert_int_equal(s.units, 2);
	assert_true(ends004(&s));
	assert_non_null(strstr(s.text, "id: 2\ndata: {\"type\":\"fail\",\"error\":\"stream_timeout\"}\n\n"));
	tc_seed004_free(f);
}

/* Resumed after sequence k (the run read from its start again): exactly what followed k. */
static void s004_resume(void **state)
{
	static struct sink all, part;
	memset(&all, 0, sizeof(all));
	struct tc_seed004 *f = tc_seed004_new("r1", "agent", false, 0, collect, &all);
	whole_run(feed004, f, "{\"data\":{\"event\":\"completed\"}");
	tc_seed004_free(f);
	for (uint64_t k = 0; k <= 13; k++) {
		memset(&part, 0, sizeof(part));
		f = tc_seed004_new("r1", "agent", false, k, collect, &part);
		whole_run(feed004, f, "{\"data\":{\"event\":\"completed\"}");
		char id[32];
		snprintf(id, sizeof(id), "id: %llu\n", (unsigned long long)k + 1);
		const char *from = k == 0 ? all.text : strstr(all.text, id);
		if (k == 13)
			from = all.text + all.len;
		assert_non_null(from);
		assert_string_equal(part.text, from);
		assert_int_equal(part.units, 13 - (int)k);
		tc_seed004_free(f);
	}
}

/* Subgraphs are sub-agents: their start and end, their chunks under their own agentId. */
static void s004_subagents(void **state)
{
	struct sink s = { 0 };
	struct tc_seed004 *f = tc_seed004_new("r1", "supervisor", true, 0, collect, &s);
	seq = 0;
	feed(feed004, f, "lifecycle", "[\"tools:4\",\"researcher:7\"]",
	     "\"data\":{\"event\":\"started\",\"graph_name\":\"researcher\",\"cause\":{\"type\":\"toolCall\",\"tool_call_id\":\"c9\"}}");
	feed(feed004, f, "messages", "[\"tools:4\",\"researcher:7\",\"model:1\"]", MSG_START("ai", "m5"));
	feed(feed004, f, "messages", "[\"tools:4\",\"researcher:7\",\"model:1\"]", TEXT_DELTA("found"));
	feed(feed004, f, "values", "[\"tools:4\",\"researcher:7\"]", "\"data\":{\"notes\":[\"a\"]}");
	feed(feed004, f, "lifecycle", "[\"tools:4\",\"researcher:7\"]", "\"data\":{\"event\":\"completed\"}");
	const char *sub = "\"agentId\":\"r1/tools:4|researcher:7\",\"agentType\":\"researcher\"";
	assert_non_null(strstr(s.text, "id: 1\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"subagent_start\",\"agentId\":\"r1\",\"agentType\":\"supervisor\",\"timestamp\":1001,\"step\":0,\"subAgentType\":\"researcher\",\"subSessionId\":\"r1/tools:4|researcher:7\",\"callId\":\"c9\"}"));
	assert_non_null(strstr(s.text, "id: 2\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"text_delta\","));
	assert_int_equal(count(s.text, sub), 2); /* the text and the state patch */
	assert_non_null(strstr(s.text, "id: 4\ndata: {\"type\":\"chunk\",\"chunk\":{\"type\":\"subagent_end\",\"agentId\":\"r1\",\"agentType\":\"supervisor\",\"timestamp\":1005,\"step\":0,\"subAgentType\":\"researcher\",\"subSessionId\":\"r1/tools:4|researcher:7\",\"callId\":\"c9\",\"result\":{\"notes\":[\"a\"]}}"));
	assert_string_equal(tc_seed004_status(f), "active"); /* a subgraph's end is not the run's */
	tc_seed004_free(f);
}

/* Tool errors, model errors, removed and replaced state, pointer escaping. */
static void s004_errors_and_patches(void **state)
{
	struct sink s = { 0 };
	struct tc_seed004 *f = tc_seed004_new("r1", NULL, true, 0, collect, &s);
	seq = 0;
	feed(feed004, f, "tools", "[]", "\"data\":{\"event\":\"tool-error\",\"tool_call_id\":\"c2\",\"message\":\"nope\"}");
	feed(feed004, f, "messages", "[]", "\"data\":{\"event\":\"error\",\"message\":\"overloaded\",\"code\":\"provider_overloaded\"}");
	feed(feed004, f, "values", "[]", "\"data\":{\"a/b\":1,\"c~\":[1,2],\"gone\":true}");
	feed(feed004, f, "values", "[]", "\"data\":{\"a/b\":2,\"c~\":[2]}");
	feed(feed004, f, "values", "[]", "\"data\":{\"a/b\":2,\"c~\":[2]}"); /* no change: no chunk */
	assert_int_equal(s.units, 4);
	assert_non_null(strstr(s.text, "\"toolCallId\":\"c2\",\"result\":null,\"success\":false,\"error\":\"nope\""));
	assert_non_null(strstr(s.text, "\"type\":\"error\",\"agentId\":\"r1\",\"timestamp\":1002,\"error\":\"overloaded\",\"code\":\"provider_overloaded\",\"recoverable\":false,\"step\":0"));
	assert_non_null(strstr(s.text, "[{\"op\":\"add\",\"path\":\"/a~1b\",\"value\":1},{\"op\":\"add\",\"path\":\"/c~0\",\"value\":[1,2]},{\"op\":\"add\",\"path\":\"/gone\",\"value\":true}]"));
	assert_non_null(strstr(s.text, "[{\"op\":\"remove\",\"path\":\"/gone\"},{\"op\":\"replace\",\"path\":\"/a~1b\",\"value\":2},{\"op\":\"replace\",\"path\":\"/c~0\",\"value\":[2]}]"));
	tc_seed004_free(f);
}

/* Garbage in: ignored, nothing emitted, nothing leaked. */
static const char *const garbage_frames[] = {
	"", "{", "[]", "null", "{\"method\":1}", "{\"method\":\"values\"}",
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
	struct tc_seed004 *f = tc_seed004_new("r1", NULL, true, 0, collect, &s);
	for (size_t i = 0; i < sizeof(garbage_frames) / sizeof(garbage_frames[0]); i++)
		assert_false(tc_seed004_event(f, garbage_frames[i], strlen(garbage_frames[i])));
	/* only the custom event without data says anything: a chunk with null data */
	assert_int_equal(s.units, 1);
	assert_non_null(strstr(s.text, "\"eventName\":\"\",\"data\":null"));
	tc_seed004_free(f);
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
			const cJSON *ix = cJSON_GetObjectItem(j, !strcmp(st->valuestring, "delta") ? "deltaIndex" : "blockIndex");
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
	struct tc_seed002 *f = tc_seed002_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
	assert_true(whole_run(feed002, f, "{\"data\":{\"event\":\"completed\"}"));
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata thinking:start:0 thinking:delta:0 thinking:stop:0 "
				"tool_call:start:1 tool_call:delta:0 tool_call:delta:1 tool_call:stop:1 "
				"tool_result:start:2 tool_result:delta:0 tool_result:stop:2 "
				"text:start:3 text:delta:0 text:delta:1 text:stop:3 done");
	assert_ptr_equal(strstr(s.text, "id: 1\nevent: metadata\ndata: {\"event\":\"metadata\",\"requestId\":\"req-1\",\"threadId\":\"th-1\",\"agentId\":\"agent\",\"runId\":\"r1\",\"timestamp\":\"1970-01-01T00:00:01.004Z\"}\n\n"), s.text);
	assert_non_null(strstr(s.text, "{\"event\":\"text\",\"requestId\":\"req-1\",\"messageId\":\"m3\",\"blockId\":\"b3\",\"stage\":\"delta\",\"delta\":\"It is \",\"deltaIndex\":0,"));
	assert_non_null(strstr(s.text, "\"stage\":\"stop\",\"blockIndex\":3,\"text\":\"It is 42.\""));
	assert_non_null(strstr(s.text, "{\"event\":\"tool_call\",\"requestId\":\"req-1\",\"messageId\":\"m1\",\"blockId\":\"b1\",\"stage\":\"stop\",\"toolCallId\":\"c1\",\"toolName\":\"search\",\"blockIndex\":1,\"input\":{\"q\":\"x\"}"));
	assert_non_null(strstr(s.text, "\"stage\":\"stop\",\"toolCallId\":\"c1\",\"toolName\":\"search\",\"blockIndex\":2,\"status\":\"success\",\"summary\":\"42\""));
	assert_non_null(strstr(s.text, "event: done\ndata: {\"event\":\"done\",\"requestId\":\"req-1\",\"messageId\":\"m3\",\"threadId\":\"th-1\",\"content\":["
				       "{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
				       "{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"search\",\"input\":{\"q\":\"x\"}},"
				       "{\"type\":\"tool_result\",\"toolCallId\":\"c1\",\"toolName\":\"search\",\"status\":\"success\",\"summary\":\"42\"},"
				       "{\"type\":\"text\",\"text\":\"It is 42.\"}],"
				       "\"usage\":{\"inputTokens\":20,\"outputTokens\":8,\"totalTokens\":28},\"finishReason\":\"stop\","));
	assert_int_equal(terminals002(s.text), 1);
	tc_seed002_finish(f, NULL, NULL); /* after the end: nothing */
	assert_true(feed(feed002, f, "values", "[]", "\"data\":{}"));
	assert_int_equal(terminals002(s.text), 1);
	tc_seed002_free(f);
}

/* Exactly one terminal whatever the end: failed, cancelled, cut, interrupted, the caller's. */
static void s002_terminals(void **state)
{
	static const struct { const char *end; const char *want; } cases[] = {
		{ "{\"data\":{\"event\":\"failed\",\"error\":\"boom\"}", "event: error\ndata: {\"event\":\"error\",\"requestId\":\"req-1\",\"code\":\"agent_error\",\"message\":\"boom\",\"retryable\":false," },
		{ "{\"data\":{\"event\":\"failed\",\"error\":\"cancelled\"}", "event: aborted\ndata: {\"event\":\"aborted\",\"requestId\":\"req-1\",\"reason\":\"cancelled\"," },
		{ "{\"data\":{\"event\":\"interrupted\",\"cancelled\":true}", "event: aborted\ndata: {\"event\":\"aborted\",\"requestId\":\"req-1\",\"reason\":\"cancelled\"," },
		{ "{\"data\":{\"event\":\"started\",\"run_id\":\"r2\"}", "event: error\ndata: {\"event\":\"error\",\"requestId\":\"req-1\",\"code\":\"internal_error\",\"message\":\"the run's events ended without its end: another run started\",\"retryable\":true," },
		{ "{\"data\":{\"event\":\"interrupted\"}", "\"finishReason\":\"action_required\"" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sink s = { 0 };
		struct tc_seed002 *f = tc_seed002_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
		assert_true(whole_run(feed002, f, cases[i].end));
		tc_seed002_finish(f, "stream_timeout", "late");
		char tr[2048];
		trace002(s.text, tr, sizeof(tr));
		assert_non_null(strstr(s.text, cases[i].want));
		assert_int_equal(terminals002(s.text), 1);
		tc_seed002_free(f);
	}
	/* the caller's: a client cancel mid-block closes the block, then aborted */
	struct sink s = { 0 };
	struct tc_seed002 *f = tc_seed002_new("r1", "req-1", "th-1", "agent", true, 0, collect, &s);
	seq = 0;
	feed(feed002, f, "messages", "[]", MSG_START("ai", "m1"));
	feed(feed002, f, "messages", "[]", TEXT_DELTA("par")); /* no block start seen: opened by the delta */
	tc_seed002_finish(f, NULL, NULL);
	tc_seed002_finish(f, "internal_error", "x");
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata text:start:0 text:delta:0 text:stop:0 aborted");
	assert_non_null(strstr(s.text, "\"reason\":\"client_cancelled\""));
	tc_seed002_free(f);
	/* nothing of the run yet: metadata, then the error */
	memset(&s, 0, sizeof(s));
	f = tc_seed002_new("r1", "req-1", "th-1", "agent", false, 0, collect, &s);
	tc_seed002_finish(f, "stream_timeout", "no events");
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata error");
	assert_non_null(strstr(s.text, "\"code\":\"stream_timeout\",\"message\":\"no events\",\"retryable\":true"));
	tc_seed002_free(f);
}

/* An interrupt: continuation {actionId, kind, payload}, then done with action_required. */
static void s002_continuation(void **state)
{
	struct sink s = { 0 };
	struct tc_seed002 *f = tc_seed002_new("r1", "req-1", "th-1", "agent", true, 0, collect, &s);
	seq = 0;
	feed(feed002, f, "input.requested", "[\"tools:1\"]", "\"data\":{\"interrupt_id\":\"i1\",\"payload\":{\"kind\":\"approval\",\"tool\":\"rm\"}}");
	feed(feed002, f, "input.requested", "[]", "\"data\":{\"interrupt_id\":\"i2\",\"payload\":\"name?\"}");
	assert_true(feed(feed002, f, "lifecycle", "[]", "\"data\":{\"event\":\"interrupted\"}"));
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata continuation continuation done");
	assert_non_null(strstr(s.text, "{\"event\":\"continuation\",\"requestId\":\"req-1\",\"actionId\":\"i1\",\"kind\":\"approval\",\"payload\":{\"kind\":\"approval\",\"tool\":\"rm\"},"));
	assert_non_null(strstr(s.text, "\"actionId\":\"i2\",\"kind\":\"input\",\"payload\":\"name?\""));
	assert_non_null(strstr(s.text, "\"content\":[],\"usage\":{\"inputTokens\":0,\"outputTokens\":0,\"totalTokens\":0},\"finishReason\":\"action_required\""));
	tc_seed002_free(f);
}

/* Resumed after each id: exactly what followed it, ids and all. */
static void s002_resume(void **state)
{
	static struct sink all, part;
	struct tc_seed002 *f = tc_seed002_new("r1", "req-1", "th-1", "agent", false, 0, collect, &all);
	assert_true(whole_run(feed002, f, "{\"data\":{\"event\":\"completed\"}"));
	tc_seed002_free(f);
	int units = count(all.text, "\n\n");
	assert_true(units > 10);
	const char *from = all.text;
	for (int k = 0; k <= units; k++) {
		memset(&part, 0, sizeof(part));
		f = tc_seed002_new("r1", "req-1", "th-1", "agent", false, (uint64_t)k, collect, &part);
		whole_run(feed002, f, "{\"data\":{\"event\":\"completed\"}");
		tc_seed002_free(f);
		assert_string_equal(part.text, from);
		if (*from)
			from = strstr(from, "\n\n") + 2;
	}
}

/* The seed's HTTP statuses and retry guidance. */
static void s002_codes(void **state)
{
	assert_int_equal(tc_seed002_http_status("invalid_message_format"), 400);
	assert_int_equal(tc_seed002_http_status("invalid_action_id"), 400);
	assert_int_equal(tc_seed002_http_status("auth_failed"), 401);
	assert_int_equal(tc_seed002_http_status("thread_access_denied"), 403);
	assert_int_equal(tc_seed002_http_status("thread_not_found"), 404);
	assert_int_equal(tc_seed002_http_status("message_too_large"), 413);
	assert_int_equal(tc_seed002_http_status("rate_limit_exceeded"), 429);
	assert_int_equal(tc_seed002_http_status("internal_error"), 500);
	assert_int_equal(tc_seed002_http_status("stream_timeout"), 504);
	assert_int_equal(tc_seed002_http_status("nope"), 500);
	assert_true(tc_seed002_retryable("rate_limit_exceeded"));
	assert_false(tc_seed002_retryable("auth_failed"));
	assert_string_equal(TC_SEED002_HEARTBEAT, ": heartbeat\n\n");
}

static void s002_garbage(void **state)
{
	struct sink s = { 0 };
	struct tc_seed002 *f = tc_seed002_new("r1", "req-1", "th-1", "agent", true, 0, collect, &s);
	for (size_t i = 0; i < sizeof(garbage_frames) / sizeof(garbage_frames[0]); i++)
		assert_false(tc_seed002_event(f, garbage_frames[i], strlen(garbage_frames[i])));
	char tr[512];
	trace002(s.text, tr, sizeof(tr));
	assert_string_equal(tr, "metadata"); /* events of the run, none of them ours */
	tc_seed002_free(f);
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
		cmocka_unit_test(s002_codes),
		cmocka_unit_test(s002_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
