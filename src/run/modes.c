/*
 * run/modes.c — a run's protocol events as the Agent Protocol's run stream (modes.h).
 */
#include "run/modes.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/assemble.h"
#include "run/follow.h"
#include "util.h"

/* A run's events on their way out, as the SDK's stream modes. */
struct tc_run_modes {
	struct tc_run_follow fw;
	struct tc_msg_asm msgs; /* the messages being streamed */
	char *thread;
	unsigned modes;
	bool subgraphs;
	cJSON *values;     /* the latest root values */
	cJSON *interrupts; /* [{value, id}] of the run */
	cJSON *error;      /* {error, message} when the run failed */
	tc_run_emit *emit;
	void *ctx;
	uint64_t cur_seq;  /* the event being formatted */
	unsigned cur_k;    /* events it made so far */
	uint64_t skip_seq; /* resumed: that event's first skip_k + 1 outputs were sent already */
	unsigned skip_k;
};

void tc_run_modes_free(struct tc_run_modes *f)
{
	cJSON_Delete(f->values);
	cJSON_Delete(f->interrupts);
	cJSON_Delete(f->error);
	tc_msg_asm_clear(&f->msgs);
	tc_run_follow_clear(&f->fw);
	free(f->thread);
	free(f);
}

static unsigned mode_bit(const char *m)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
		{ "values", TC_MODE_VALUES },           { "updates", TC_MODE_UPDATES },
		{ "messages", TC_MODE_MESSAGES },       { "messages-tuple", TC_MODE_MESSAGES },
		{ "custom", TC_MODE_CUSTOM },           { "tasks", TC_MODE_TASKS },
		{ "checkpoints", TC_MODE_CHECKPOINTS }, { "debug", TC_MODE_DEBUG },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i].name, m))
			return names[i].bit;
	return 0;
}

/* stream_mode as a string or an array of them; none: values. */
unsigned tc_run_modes_parse(const cJSON *v)
{
	unsigned bits = 0;
	const cJSON *it;
	if (cJSON_IsString(v))
		bits = mode_bit(v->valuestring);
	if (cJSON_IsArray(v))
		cJSON_ArrayForEach(it, v) if (cJSON_IsString(it)) bits |= mode_bit(it->valuestring);
	return v && !cJSON_IsNull(v) ? bits : TC_MODE_VALUES;
}

/*
 * One SSE event for the client, when it streams. Its id is the protocol
 * event's seq times TC_RUN_MODES_IDS plus its place among the events that one
 * made: ids increase, one per event, and say where to resume.
 */
static void emit(struct tc_run_modes *f, const char *mode, const char *ns, const cJSON *data)
{
	unsigned k = f->cur_k < TC_RUN_MODES_IDS - 1 ? f->cur_k++ : TC_RUN_MODES_IDS - 1;
	if (!f->emit || f->cur_seq < f->skip_seq || (f->cur_seq == f->skip_seq && k <= f->skip_k))
		return;
	char id[32];
	size_t len;
	uint64_t n = f->cur_seq * TC_RUN_MODES_IDS + k;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
	char event[256];
	snprintf(event, sizeof(event), "%s%s%.200s", mode, *ns ? "|" : "", ns);
	char *text = tc_sse_event(id, event, data, &len);
	f->emit(f->ctx, n, text, len);
	free(text);
}

static const char *chunk_type(const char *role)
{
	if (!role || !strcmp(role, "ai") || !strcmp(role, "assistant"))
		return "AIMessageChunk";
	if (!strcmp(role, "tool"))
		return "tool";
	if (!strcmp(role, "human") || !strcmp(role, "user"))
		return "human";
	return role;
}

/* The metadata half of a messages-tuple pair. */
static cJSON *tuple_metadata(const struct tc_run_modes *f, const char *ns, const char *node)
{
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "langgraph_node", node);
	cJSON_AddStringToObject(meta, "langgraph_checkpoint_ns", ns);
	cJSON_AddStringToObject(meta, "run_id", f->fw.run_id);
	cJSON_AddStringToObject(meta, "thread_id", f->thread);
	cJSON_AddArrayToObject(meta, "tags");
	return meta;
}

/* A messages-tuple chunk: [message chunk, metadata]. content: text; tool: one tool call chunk. */
static void emit_chunk(struct tc_run_modes *f, const char *ns, const struct tc_msg *m, const char *text, cJSON *tool)
{
	cJSON *pair = cJSON_CreateArray();
	cJSON *msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "content", text ? text : "");
	cJSON_AddObjectToObject(msg, "additional_kwargs");
	cJSON_AddObjectToObject(msg, "response_metadata");
	cJSON_AddStringToObject(msg, "type", chunk_type(m->role));
	cJSON_AddNullToObject(msg, "name");
	if (m->id)
		cJSON_AddStringToObject(msg, "id", m->id);
	else
		cJSON_AddNullToObject(msg, "id");
	if (m->tool_call_id)
		cJSON_AddStringToObject(msg, "tool_call_id", m->tool_call_id);
	cJSON_AddArrayToObject(msg, "tool_calls");
	cJSON_AddArrayToObject(msg, "invalid_tool_calls");
	cJSON *chunks = cJSON_AddArrayToObject(msg, "tool_call_chunks");
	if (tool)
		cJSON_AddItemToArray(chunks, tool);
	cJSON_AddItemToArray(pair, msg);
	cJSON_AddItemToArray(pair, tuple_metadata(f, ns, m->node ? m->node : ""));
	emit(f, "messages", ns, pair);
	cJSON_Delete(pair);
}

/* A tool call chunk from a tool_call / tool_call_chunk block (args as text). */
static cJSON *tool_chunk(const cJSON *block, int index)
{
	cJSON *t = cJSON_CreateObject();
	const cJSON *v;
	cJSON_AddStringToObject(t, "type", "tool_call_chunk");
	v = cJSON_GetObjectItemCaseSensitive(block, "id");
	cJSON_AddItemToObject(t, "id", cJSON_IsString(v) ? cJSON_CreateString(v->valuestring) : cJSON_CreateNull());
	v = cJSON_GetObjectItemCaseSensitive(block, "name");
	cJSON_AddItemToObject(t, "name", cJSON_IsString(v) ? cJSON_CreateString(v->valuestring) : cJSON_CreateNull());
	v = cJSON_GetObjectItemCaseSensitive(block, "args");
	if (cJSON_IsString(v)) {
		cJSON_AddStringToObject(t, "args", v->valuestring);
	} else if (v && !cJSON_IsNull(v)) {
		char *s = cJSON_PrintUnformatted(v);
		cJSON_AddStringToObject(t, "args", s);
		free(s);
	} else {
		cJSON_AddStringToObject(t, "args", "");
	}
	cJSON_AddNumberToObject(t, "index", index);
	return t;
}

/*
 * One messages event, assembled (assemble.h): text and tool call chunks go
 * out as they come; a block's finish only when nothing of it went out
 * before (a block given whole).
 */
static void msg_part(void *ctx, struct tc_msg *m, const struct tc_msg_part *p, const struct tc_run_ev *e)
{
	struct tc_run_modes *f = ctx;
	bool finish = p->kind == TC_MSG_BLOCK_FINISH;
	int index = p->index < 0 ? 0 : p->index;

	switch (p->kind) {
	case TC_MSG_BLOCK_START:
	case TC_MSG_BLOCK_FINISH:
		if (p->block == TC_BLOCK_TEXT && p->text && *p->text && (!finish || !p->had))
			emit_chunk(f, e->ns, m, p->text, NULL);
		else if (p->block == TC_BLOCK_TOOL && (!finish || !p->had))
			emit_chunk(f, e->ns, m, NULL, tool_chunk(p->content, index));
		break;
	case TC_MSG_BLOCK_DELTA:
		if (p->block == TC_BLOCK_TEXT && p->text && *p->text)
			emit_chunk(f, e->ns, m, p->text, NULL);
		else if (p->block == TC_BLOCK_TOOL && p->type && !strcmp(p->type, "tool_call_chunk"))
			emit_chunk(f, e->ns, m, NULL, tool_chunk(p->content, index));
		break;
	default:
		break;
	}
}

static const struct tc_msg_ops msg_ops = { .part = msg_part };

/* A tool-finished event as the [ToolMessage, metadata] pair LangGraph's messages mode has. */
static void emit_tool_message(struct tc_run_modes *f, const char *ns, const char *node, const cJSON *data)
{
	const cJSON *out = cJSON_GetObjectItemCaseSensitive(data, "output");
	const char *call = tc_run_str(data, "tool_call_id");
	cJSON *msg = cJSON_IsObject(out) ? cJSON_Duplicate(out, true) : cJSON_CreateObject();
	if (!cJSON_IsObject(out)) {
		if (cJSON_IsString(out)) {
			cJSON_AddStringToObject(msg, "content", out->valuestring);
		} else {
			char *text = out ? cJSON_PrintUnformatted(out) : tc_xstrdup("");
			cJSON_AddStringToObject(msg, "content", text);
			free(text);
		}
	}
	if (!cJSON_GetObjectItemCaseSensitive(msg, "type"))
		cJSON_AddStringToObject(msg, "type", "tool");
	if (!cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id") && call)
		cJSON_AddStringToObject(msg, "tool_call_id", call);
	const cJSON *mid = cJSON_GetObjectItemCaseSensitive(msg, "id");
	if (!cJSON_IsString(mid)) {
		/* Chunks are assembled by id: one the tool call makes unique. */
		char id[160];
		snprintf(id, sizeof(id), "tool-%.128s", call ? call : f->fw.run_id);
		if (mid)
			cJSON_DeleteItemFromObjectCaseSensitive(msg, "id");
		cJSON_AddStringToObject(msg, "id", id);
	}
	cJSON *pair = cJSON_CreateArray();
	cJSON_AddItemToArray(pair, msg);
	cJSON_AddItemToArray(pair, tuple_metadata(f, ns, *node ? node : "tools"));
	emit(f, "messages", ns, pair);
	cJSON_Delete(pair);
}

/* values with the run's interrupts, as LangGraph shows them: "__interrupt__". */
static cJSON *values_with_interrupts(const struct tc_run_modes *f)
{
	cJSON *v = f->values && cJSON_IsObject(f->values) ? cJSON_Duplicate(f->values, true) : cJSON_CreateObject();
	if (f->interrupts && cJSON_GetArraySize(f->interrupts))
		cJSON_AddItemToObject(v, "__interrupt__", cJSON_Duplicate(f->interrupts, true));
	return v;
}

/* The run's end: a failed run says why. */
static void run_end(struct tc_run_modes *f, const struct tc_run_ev *e)
{
	if (strcmp(e->status, "failed"))
		return;
	const char *why = tc_run_str(e->data, "error");
	f->error = cJSON_CreateObject();
	cJSON_AddStringToObject(f->error, "error", why && !strcmp(why, "cancelled") ? "CancelledError" : "Error");
	cJSON_AddStringToObject(f->error, "message", why ? why : "the run failed");
	emit(f, "error", "", f->error);
}

/* An interrupt: kept for the wait's answer, shown as "__interrupt__" in updates and values. */
static void interrupt(struct tc_run_modes *f, const cJSON *data)
{
	cJSON *i = cJSON_CreateObject();
	const cJSON *payload = cJSON_GetObjectItemCaseSensitive(data, "payload");
	cJSON_AddItemToObject(i, "value", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
	const char *iid = tc_run_str(data, "interrupt_id");
	if (iid)
		cJSON_AddStringToObject(i, "id", iid);
	if (!f->interrupts)
		f->interrupts = cJSON_CreateArray();
	if (cJSON_GetArraySize(f->interrupts) < 64)
		cJSON_AddItemToArray(f->interrupts, i);
	else
		cJSON_Delete(i);
	if (f->modes & TC_MODE_UPDATES) {
		cJSON *u = cJSON_CreateObject();
		cJSON_AddItemToObject(u, "__interrupt__", cJSON_Duplicate(f->interrupts, true));
		emit(f, "updates", "", u);
		cJSON_Delete(u);
	}
	if (f->modes & TC_MODE_VALUES) {
		cJSON *v = values_with_interrupts(f);
		emit(f, "values", "", v);
		cJSON_Delete(v);
	}
}

/* One of the run's events (not its end). */
static void run_event(struct tc_run_modes *f, const struct tc_run_ev *e)
{
	const char *method = e->method, *ns = e->ns;
	const cJSON *data = e->data;
	bool root = !*ns, shown = root || f->subgraphs;
	if (!strcmp(method, "values")) {
		if (root) {
			cJSON_Delete(f->values);
			f->values = cJSON_Duplicate(data, true);
		}
		if (shown && (f->modes & TC_MODE_VALUES))
			emit(f, "values", ns, data);
	} else if (!strcmp(method, "updates")) {
		if (shown && (f->modes & TC_MODE_UPDATES)) {
			const char *by = tc_run_str(data, "node");
			const cJSON *vals = cJSON_GetObjectItemCaseSensitive(data, "values");
			cJSON *u = cJSON_CreateObject();
			if (!by && *e->node)
				by = e->node;
			if (by)
				cJSON_AddItemToObject(u, by, cJSON_Duplicate(vals, true));
			emit(f, "updates", ns, by ? u : vals);
			cJSON_Delete(u);
		}
	} else if (!strcmp(method, "messages")) {
		if (shown && (f->modes & TC_MODE_MESSAGES))
			tc_msg_asm_event(&f->msgs, e);
	} else if (!strcmp(method, "tools")) {
		/* A tool's result is a message of its own (a ToolMessage) in LangGraph's messages mode. */
		const char *te = tc_run_str(data, "event");
		if (shown && (f->modes & TC_MODE_MESSAGES) && te && !strcmp(te, "tool-finished"))
			emit_tool_message(f, ns, e->node, data);
	} else if (!strcmp(method, "custom")) {
		if (shown && (f->modes & TC_MODE_CUSTOM))
			emit(f, "custom", ns, cJSON_GetObjectItemCaseSensitive(data, "payload"));
	} else if (!strcmp(method, "tasks")) {
		if (shown && (f->modes & TC_MODE_TASKS))
			emit(f, "tasks", ns, data);
	} else if (!strcmp(method, "checkpoints")) {
		if (shown && (f->modes & TC_MODE_CHECKPOINTS))
			emit(f, "checkpoints", ns, data);
	} else if (!strcmp(method, "input.requested")) {
		interrupt(f, data);
	}
}

/* One event of the thread. */
bool tc_run_modes_event(struct tc_run_modes *f, uint64_t seq, const cJSON *event)
{
	struct tc_run_ev e;
	enum tc_run_step step = tc_run_follow_step(&f->fw, seq, event, &e);
	if (step == TC_RUN_EVENT || step == TC_RUN_END) {
		f->cur_seq = seq;
		f->cur_k = 0;
		if (step == TC_RUN_END)
			run_end(f, &e);
		else
			run_event(f, &e);
	}
	tc_run_ev_clear(&e);
	return f->fw.ended;
}

struct tc_run_modes *tc_run_modes_new(const char *run_id, const char *thread_id, unsigned modes, bool subgraphs,
				      bool in_run, uint64_t resume_id, tc_run_emit *out, void *ctx)
{
	struct tc_run_modes *f = tc_xcalloc(1, sizeof(*f));
	tc_run_follow_init(&f->fw, run_id, in_run);
	tc_msg_asm_init(&f->msgs, &msg_ops, f);
	f->thread = tc_xstrdup(thread_id);
	f->modes = modes;
	f->subgraphs = subgraphs;
	f->skip_seq = resume_id / TC_RUN_MODES_IDS;
	f->skip_k = (unsigned)(resume_id % TC_RUN_MODES_IDS);
	f->emit = out;
	f->ctx = ctx;
	return f;
}

TC_RUN_FMT_OPS(modes, NULL);

bool tc_run_modes_ended(const struct tc_run_modes *f)
{
	return f->fw.ended;
}

cJSON *tc_run_modes_result(const struct tc_run_modes *f)
{
	if (f->error) {
		cJSON *body = cJSON_CreateObject();
		cJSON_AddItemToObject(body, "__error__", cJSON_Duplicate(f->error, true));
		return body;
	}
	return values_with_interrupts(f);
}
