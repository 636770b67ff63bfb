/*
 * run/agent_events.c — a run as seed 002's agent event protocol (agent_events.h): SSE
 * "event: <type>" + data {"event":<type>,"requestId",…,"timestamp"}:
 * metadata, then text / thinking / tool_call / tool_result blocks in the
 * start / delta / stop stages, continuation for an interrupt, and exactly
 * one terminal event: done, error or aborted.
 */
#include "run/agent_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run/assemble.h"
#include "run/follow.h"
#include "util.h"

#define OPEN_TOOLS 32        /* tool results streaming at once */
#define CONTENT_BLOCKS 256   /* blocks done's content keeps */
#define BLOCK_TEXT (1 << 20) /* text a block keeps for its stop and done */

/* A block of the response being streamed. */
struct block {
	bool open;
	int index;     /* blockIndex: its place in done's content */
	int deltas;    /* deltaIndex of the next delta */
	int cindex;    /* the message's content block it is (its "index") */
	char kind[16]; /* "text", "thinking", "tool_call" */
	char *text;    /* text, thinking, or a tool call's arguments as text */
	size_t len;
	char *call, *name; /* a tool call's */
};

/* What a message streaming (tc_msg) has open. */
struct msg_blocks {
	struct block b; /* the block open (a message streams one at a time) */
	uint64_t done;  /* content indexes (< 64) whose block has stopped */
};

struct open_tool {
	char *call; /* NULL: free slot */
	char *name;
	int index, deltas;
};

struct tc_run_agent_events {
	struct tc_run_follow fw;
	struct tc_msg_asm msgs;              /* the messages being streamed */
	struct msg_blocks open[TC_MSG_OPEN]; /* each one's blocks (by tc_msg.no) */
	char *request_id, *thread_id, *agent_id;
	tc_run_emit *emit;
	void *ctx;
	bool meta_sent, ended, continued;
	uint64_t seq, skip; /* units given out; the last one the client has */
	int nblocks;
	double last_ts;
	char *message_id; /* the last AI message's */
	double usage[3];  /* input, output, total tokens */
	bool any_usage;
	cJSON *content;
	struct open_tool tools[OPEN_TOOLS];
};

static const struct {
	const char *code;
	int status;
	bool retryable;
} codes[] = {
	{ "auth_failed", 401, false },          { "thread_not_found", 404, false },
	{ "thread_access_denied", 403, false }, { "invalid_message_format", 400, false },
	{ "message_too_large", 413, false },    { "rate_limit_exceeded", 429, true },
	{ "stream_timeout", 504, true },        { "agent_error", 500, false },
	{ "tool_error", 500, false },           { "internal_error", 500, true },
	{ "invalid_action_id", 400, false },
};

int tc_agent_events_http_status(const char *code)
{
	for (size_t i = 0; code && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (!strcmp(codes[i].code, code))
			return codes[i].status;
	return 500;
}

bool tc_agent_events_retryable(const char *code)
{
	for (size_t i = 0; code && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (!strcmp(codes[i].code, code))
			return codes[i].retryable;
	return false;
}

/* An event's body: event, requestId, then the fields; timestamp is added by send. */
static cJSON *body(struct tc_run_agent_events *f, const char *event)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "event", event);
	cJSON_AddStringToObject(b, "requestId", f->request_id);
	return b;
}

/* ISO 8601 (UTC, milliseconds) of a protocol timestamp in ms. */
static void iso(double ms, char out[32])
{
	if (!(ms >= 0 && ms < 253402300800000.0))
		ms = 0;
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", (int)((long long)ms % 1000));
}

static void put(struct tc_run_agent_events *f, cJSON *b)
{
	char ts[32];
	iso(f->last_ts, ts);
	cJSON_AddStringToObject(b, "timestamp", ts);
	uint64_t n = ++f->seq;
	if (f->emit && n > f->skip) {
		size_t len;
		char id[24];
		snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
		char *text = tc_sse_event(id, cJSON_GetObjectItemCaseSensitive(b, "event")->valuestring, b, &len);
		f->emit(f->ctx, n, text, len);
		free(text);
	}
	cJSON_Delete(b);
}

static void metadata(struct tc_run_agent_events *f)
{
	if (f->meta_sent)
		return;
	f->meta_sent = true;
	cJSON *b = body(f, "metadata");
	cJSON_AddStringToObject(b, "threadId", f->thread_id);
	cJSON_AddStringToObject(b, "agentId", f->agent_id);
	cJSON_AddStringToObject(b, "runId", f->fw.run_id);
	put(f, b);
}

static void add_content(struct tc_run_agent_events *f, cJSON *block)
{
	if (cJSON_GetArraySize(f->content) < CONTENT_BLOCKS)
		cJSON_AddItemToArray(f->content, block);
	else
		cJSON_Delete(block);
}

/* A stage event of a block (text, thinking, tool_call). */
static cJSON *stage(struct tc_run_agent_events *f, const struct tc_msg *m, const char *st)
{
	const struct block *blk = &f->open[m->no].b;
	cJSON *b = body(f, blk->kind);
	if (m->id)
		cJSON_AddStringToObject(b, "messageId", m->id);
	char id[24];
	snprintf(id, sizeof(id), "b%d", blk->index);
	cJSON_AddStringToObject(b, "blockId", id);
	cJSON_AddStringToObject(b, "stage", st);
	if (!strcmp(blk->kind, "tool_call")) {
		cJSON_AddStringToObject(b, "toolCallId", blk->call ? blk->call : "");
		cJSON_AddStringToObject(b, "toolName", blk->name ? blk->name : "");
	}
	return b;
}

static void block_start(struct tc_run_agent_events *f, const struct tc_msg *m, const char *kind, const cJSON *content,
			int cindex)
{
	struct block *b = &f->open[m->no].b;
	*b = (struct block){ .open = true, .index = f->nblocks++, .cindex = cindex };
	snprintf(b->kind, sizeof(b->kind), "%s", kind);
	const char *s;
	if ((s = tc_run_str(content, "id")))
		b->call = tc_xstrdup(s);
	if ((s = tc_run_str(content, "name")))
		b->name = tc_xstrdup(s);
	cJSON *e = stage(f, m, "start");
	cJSON_AddNumberToObject(e, "blockIndex", b->index);
	put(f, e);
}

static void block_delta(struct tc_run_agent_events *f, const struct tc_msg *m, const char *text)
{
	struct block *b = &f->open[m->no].b;
	if (!text || !*text)
		return;
	tc_run_append(&b->text, &b->len, text, BLOCK_TEXT);
	cJSON *e = stage(f, m, "delta");
	cJSON_AddStringToObject(e, "delta", text);
	cJSON_AddNumberToObject(e, "deltaIndex", b->deltas++);
	put(f, e);
}

/* A block's stop, with its final data; its content block for done. final: the finished block, if any. */
static void block_stop(struct tc_run_agent_events *f, const struct tc_msg *m, const cJSON *final)
{
	struct msg_blocks *o = &f->open[m->no];
	struct block *b = &o->b;
	if (!b->open)
		return;
	cJSON *e = stage(f, m, "stop");
	cJSON_AddNumberToObject(e, "blockIndex", b->index);
	cJSON *c = cJSON_CreateObject();
	const char *text = b->text ? b->text : "";
	if (!strcmp(b->kind, "tool_call")) {
		const cJSON *args = tc_run_get(final, "args");
		cJSON *input = cJSON_IsObject(args) ? cJSON_Duplicate(args, true) : cJSON_Parse(text);
		if (!input)
			input = cJSON_CreateObject();
		cJSON_AddItemToObject(e, "input", cJSON_Duplicate(input, true));
		cJSON_AddStringToObject(c, "type", "tool_use");
		cJSON_AddStringToObject(c, "id", b->call ? b->call : "");
		cJSON_AddStringToObject(c, "name", b->name ? b->name : "");
		cJSON_AddItemToObject(c, "input", input);
	} else {
		const char *key = !strcmp(b->kind, "text") ? "text" : "thinking";
		cJSON_AddStringToObject(e, key, text);
		cJSON_AddStringToObject(c, "type", key);
		cJSON_AddStringToObject(c, key, text);
	}
	put(f, e);
	add_content(f, c);
	if (b->cindex >= 0 && b->cindex < 64)
		o->done |= 1ull << b->cindex;
	free(b->text);
	free(b->call);
	free(b->name);
	*b = (struct block){ 0 };
}

/* The kind of stream block a content block (or a delta) is, NULL: none of ours. */
static const char *kind_of(enum tc_block_kind k)
{
	switch (k) {
	case TC_BLOCK_TEXT:
		return "text";
	case TC_BLOCK_REASONING:
		return "thinking";
	case TC_BLOCK_TOOL:
		return "tool_call";
	default:
		return NULL;
	}
}

static void usage_add(struct tc_run_agent_events *f, const cJSON *u)
{
	static const char *const names[3][2] = { { "input_tokens", "inputTokens" },
						 { "output_tokens", "outputTokens" },
						 { "total_tokens", "totalTokens" } };
	for (int i = 0; i < 3; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(u, names[i][0]);
		if (!v)
			v = cJSON_GetObjectItemCaseSensitive(u, names[i][1]);
		if (cJSON_IsNumber(v)) {
			f->usage[i] += v->valuedouble;
			f->any_usage = true;
		}
	}
}

/* One root messages event, assembled (assemble.h): an AI message's blocks in their stages. */
static void msg_part(void *ctx, struct tc_msg *m, const struct tc_msg_part *p, const struct tc_run_ev *ev)
{
	struct tc_run_agent_events *f = ctx;
	struct msg_blocks *o = &f->open[m->no];

	switch (p->kind) {
	case TC_MSG_START:
		if (m->ai && m->id) {
			free(f->message_id);
			f->message_id = tc_xstrdup(m->id);
		}
		return;
	case TC_MSG_FINISH:
	case TC_MSG_ERROR:
		if (m->ai)
			usage_add(f, p->usage);
		block_stop(f, m, NULL);
		return;
	default:
		break;
	}
	if (!m->ai)
		return;
	/*
	 * A message's content blocks may overlap (a tool call starts before the
	 * text before it finishes): a block starting stops the one open, and
	 * what comes later for a stopped block is dropped.
	 */
	int cindex = p->index;
	bool stopped = cindex >= 0 && cindex < 64 && (o->done >> cindex & 1);
	bool this_one = o->b.open && o->b.cindex == cindex;
	const char *kind = kind_of(p->block);
	if (p->kind == TC_MSG_BLOCK_START || p->kind == TC_MSG_BLOCK_FINISH) {
		bool finish = p->kind == TC_MSG_BLOCK_FINISH;
		if (!kind || (finish && stopped && !this_one))
			return;
		if (!finish || !this_one || strcmp(o->b.kind, kind)) { /* a finish alone: the whole block */
			block_stop(f, m, NULL);
			block_start(f, m, kind, p->content, cindex);
		}
		if (!strcmp(kind, "tool_call")) {
			const cJSON *args = tc_run_get(p->content, "args");
			if (cJSON_IsString(args) && (!finish || !o->b.deltas))
				block_delta(f, m, args->valuestring);
		} else if (!finish || !o->b.deltas) {
			block_delta(f, m, p->text);
		}
		if (finish)
			block_stop(f, m, p->content);
	} else {
		if (!kind || (stopped && !this_one))
			return;
		if (!this_one || strcmp(o->b.kind, kind)) { /* resumed mid-block */
			block_stop(f, m, NULL);
			block_start(f, m, kind, p->wrapped ? p->content : NULL, cindex);
		}
		block_delta(f, m, p->wrapped ? tc_run_str(p->content, "args") : p->text);
	}
}

/* A message leaves: its open block stops; what it held is freed. */
static void msg_drop(void *ctx, struct tc_msg *m, bool finished)
{
	struct tc_run_agent_events *f = ctx;
	struct msg_blocks *o = &f->open[m->no];
	block_stop(f, m, NULL);
	free(o->b.text);
	free(o->b.call);
	free(o->b.name);
	*o = (struct msg_blocks){ 0 };
}

static const struct tc_msg_ops msg_ops = { .part = msg_part, .drop = msg_drop };

static struct open_tool *tool_slot(struct tc_run_agent_events *f, const char *call, bool create)
{
	for (int i = 0; i < OPEN_TOOLS; i++)
		if (f->tools[i].call && !strcmp(f->tools[i].call, call))
			return &f->tools[i];
	if (!create)
		return NULL;
	for (int i = 0; i < OPEN_TOOLS; i++)
		if (!f->tools[i].call)
			return &f->tools[i];
	return NULL;
}

static cJSON *tool_stage(struct tc_run_agent_events *f, const struct open_tool *t, const char *st)
{
	cJSON *b = body(f, "tool_result");
	char id[24];
	snprintf(id, sizeof(id), "b%d", t->index);
	cJSON_AddStringToObject(b, "blockId", id);
	cJSON_AddStringToObject(b, "stage", st);
	cJSON_AddStringToObject(b, "toolCallId", t->call);
	cJSON_AddStringToObject(b, "toolName", t->name ? t->name : "");
	return b;
}

/* The summary of a tool's output: its text (a message's content), at most 200 bytes. */
static char *summary(const cJSON *out)
{
	const cJSON *c = cJSON_IsObject(out) ? cJSON_GetObjectItemCaseSensitive(out, "content") : out;
	char *text = cJSON_IsString(c) ? tc_xstrdup(c->valuestring) : c ? cJSON_PrintUnformatted(c) : tc_xstrdup("");
	char *s = NULL;
	size_t len = 0;
	tc_run_append(&s, &len, text, 200);
	free(text);
	return s;
}

static void on_tools(struct tc_run_agent_events *f, const struct tc_run_ev *ev)
{
	const char *e = tc_run_str(ev->data, "event");
	const char *call = tc_run_str(ev->data, "tool_call_id");
	if (!e || !call)
		return;
	bool started = !strcmp(e, "tool-started");
	bool end = !strcmp(e, "tool-finished") || !strcmp(e, "tool-error");
	struct open_tool *t = tool_slot(f, call, started || end);
	if (!t)
		return;
	if (!t->call) {
		const char *name = tc_run_str(ev->data, "tool_name");
		*t = (struct open_tool){ .call = tc_xstrdup(call),
					 .name = name ? tc_xstrdup(name) : NULL,
					 .index = f->nblocks++ };
		cJSON *b = tool_stage(f, t, "start");
		cJSON_AddNumberToObject(b, "blockIndex", t->index);
		put(f, b);
	}
	if (!strcmp(e, "tool-output-delta")) {
		const char *d = tc_run_str(ev->data, "delta");
		if (d && *d) {
			cJSON *b = tool_stage(f, t, "delta");
			cJSON_AddStringToObject(b, "delta", d);
			cJSON_AddNumberToObject(b, "deltaIndex", t->deltas++);
			put(f, b);
		}
	} else if (end) {
		bool ok = e[5] == 'f';
		char *sum = ok ? summary(tc_run_get(ev->data, "output")) : NULL;
		const char *msg = tc_run_str(ev->data, "message");
		cJSON *b = tool_stage(f, t, "stop");
		cJSON_AddNumberToObject(b, "blockIndex", t->index);
		cJSON_AddStringToObject(b, "status", ok ? "success" : "error");
		cJSON_AddStringToObject(b, "summary", ok ? sum : msg ? msg : "the tool failed");
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "type", "tool_result");
		cJSON_AddStringToObject(c, "toolCallId", t->call);
		cJSON_AddStringToObject(c, "toolName", t->name ? t->name : "");
		cJSON_AddStringToObject(c, "status", ok ? "success" : "error");
		cJSON_AddStringToObject(c, "summary", ok ? sum : msg ? msg : "the tool failed");
		put(f, b);
		add_content(f, c);
		free(sum);
		free(t->call);
		free(t->name);
		*t = (struct open_tool){ 0 };
	}
}

/* Stops every block still open (a terminal event closes the response). */
static void close_all(struct tc_run_agent_events *f)
{
	TC_MSG_FOR_EACH_OPEN(&f->msgs, m)
	block_stop(f, m, NULL);
	for (int i = 0; i < OPEN_TOOLS; i++) {
		struct open_tool *t = &f->tools[i];
		if (!t->call)
			continue;
		cJSON *b = tool_stage(f, t, "stop");
		cJSON_AddNumberToObject(b, "blockIndex", t->index);
		cJSON_AddStringToObject(b, "status", "error");
		cJSON_AddStringToObject(b, "summary", "the tool did not finish");
		put(f, b);
		free(t->call);
		free(t->name);
		*t = (struct open_tool){ 0 };
	}
}

cJSON *tc_agent_events_error_event(const char *request_id, const char *code, const char *message, double ms)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "event", "error");
	cJSON_AddStringToObject(b, "requestId", request_id);
	cJSON_AddStringToObject(b, "code", code);
	cJSON_AddStringToObject(b, "message", message);
	cJSON_AddBoolToObject(b, "retryable", tc_agent_events_retryable(code));
	char ts[32];
	iso(ms, ts);
	cJSON_AddStringToObject(b, "timestamp", ts);
	return b;
}

static void terminal_error(struct tc_run_agent_events *f, const char *code, const char *message)
{
	metadata(f);
	close_all(f);
	cJSON *b = body(f, "error");
	cJSON_AddStringToObject(b, "code", code);
	cJSON_AddStringToObject(b, "message", message);
	cJSON_AddBoolToObject(b, "retryable", tc_agent_events_retryable(code));
	f->ended = true;
	f->fw.ended = true;
	put(f, b);
}

static void terminal_aborted(struct tc_run_agent_events *f, const char *reason)
{
	metadata(f);
	close_all(f);
	cJSON *b = body(f, "aborted");
	cJSON_AddStringToObject(b, "reason", reason);
	f->ended = true;
	f->fw.ended = true;
	put(f, b);
}

static void terminal_done(struct tc_run_agent_events *f, const char *finish_reason)
{
	close_all(f);
	cJSON *b = body(f, "done");
	if (f->message_id)
		cJSON_AddStringToObject(b, "messageId", f->message_id);
	cJSON_AddStringToObject(b, "threadId", f->thread_id);
	cJSON_AddItemToObject(b, "content", cJSON_Duplicate(f->content, true));
	cJSON *u = cJSON_AddObjectToObject(b, "usage");
	cJSON_AddNumberToObject(u, "inputTokens", f->usage[0]);
	cJSON_AddNumberToObject(u, "outputTokens", f->usage[1]);
	cJSON_AddNumberToObject(u, "totalTokens", f->usage[2] ? f->usage[2] : f->usage[0] + f->usage[1]);
	cJSON_AddStringToObject(b, "finishReason", finish_reason);
	f->ended = true;
	put(f, b);
}

bool tc_run_agent_events_event(struct tc_run_agent_events *f, uint64_t seq, const cJSON *event)
{
	if (f->ended)
		return true;
	struct tc_run_ev ev;
	enum tc_run_step step = tc_run_follow_step(&f->fw, seq, event, &ev);
	if (step == TC_RUN_SKIP)
		return false;
	if (step == TC_RUN_CUT) {
		terminal_error(f, "internal_error", "the run's events ended without its end: another run started");
		return true;
	}
	f->last_ts = ev.timestamp;
	metadata(f);
	bool root = !*ev.ns;
	if (step == TC_RUN_END) {
		const char *err = tc_run_str(ev.data, "error");
		bool cancelled = (!strcmp(ev.status, "failed") && err && !strcmp(err, "cancelled")) ||
				 cJSON_IsTrue(tc_run_get(ev.data, "cancelled")); /* (a REST cancel: interrupted) */
		if (cancelled)
			terminal_aborted(f, "cancelled");
		else if (!strcmp(ev.status, "failed"))
			terminal_error(f, "agent_error", err ? err : "the run failed");
		else
			terminal_done(f,
				      !strcmp(ev.status, "interrupted") || f->continued ? "action_required" : "stop");
	} else if (root && !strcmp(ev.method, "messages")) {
		tc_msg_asm_event(&f->msgs, &ev);
	} else if (root && !strcmp(ev.method, "tools")) {
		on_tools(f, &ev);
	} else if (!strcmp(ev.method, "input.requested")) {
		const char *iid = tc_run_str(ev.data, "interrupt_id");
		const cJSON *payload = tc_run_get(ev.data, "payload");
		const char *kind = tc_run_str(payload, "kind");
		cJSON *b = body(f, "continuation");
		cJSON_AddStringToObject(b, "actionId", iid ? iid : "");
		cJSON_AddStringToObject(b, "kind", kind ? kind : "input");
		cJSON_AddItemToObject(b, "payload", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
		f->continued = true;
		put(f, b);
	}
	tc_run_ev_clear(&ev);
	return f->ended;
}

void tc_run_agent_events_finish(struct tc_run_agent_events *f, const char *code, const char *message)
{
	if (f->ended)
		return;
	if (code)
		terminal_error(f, code, message ? message : code);
	else
		terminal_aborted(f, message ? message : "client_cancelled");
}

struct tc_run_agent_events *tc_run_agent_events_new(const char *run_id, const char *request_id, const char *thread_id,
						    const char *agent_id, bool in_run, uint64_t skip_through,
						    tc_run_emit *emit, void *ctx)
{
	struct tc_run_agent_events *f = tc_xcalloc(1, sizeof(*f));
	tc_run_follow_init(&f->fw, run_id, in_run);
	tc_msg_asm_init(&f->msgs, &msg_ops, f);
	f->skip = skip_through;
	f->request_id = tc_xstrdup(request_id ? request_id : "");
	f->thread_id = tc_xstrdup(thread_id ? thread_id : "");
	f->agent_id = tc_xstrdup(agent_id ? agent_id : "");
	f->content = cJSON_CreateArray();
	f->emit = emit;
	f->ctx = ctx;
	return f;
}

void tc_run_agent_events_free(struct tc_run_agent_events *f)
{
	if (!f)
		return;
	tc_run_follow_clear(&f->fw);
	tc_msg_asm_clear(&f->msgs);
	for (int i = 0; i < TC_MSG_OPEN; i++) {
		free(f->open[i].b.text);
		free(f->open[i].b.call);
		free(f->open[i].b.name);
	}
	for (int i = 0; i < OPEN_TOOLS; i++) {
		free(f->tools[i].call);
		free(f->tools[i].name);
	}
	cJSON_Delete(f->content);
	free(f->message_id);
	free(f->request_id);
	free(f->thread_id);
	free(f->agent_id);
	free(f);
}

static void ops_finish(void *f, const char *code, const char *message)
{
	tc_run_agent_events_finish(f, code, message);
}

TC_RUN_FMT_OPS(agent_events, ops_finish);
