/*
 * run/chunks.c — a run as seed 004's resumable stream of typed chunks
 * (chunks.h): SSE events "id: N" + data {"type":"chunk","chunk":{…},
 * "sequence":N}, then {"type":"end"} or {"type":"fail","error":…}.
 */
#include "run/chunks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/assemble.h"
#include "run/follow.h"
#include "util.h"

#define GRAPHS 64 /* graphs (the root, subgraphs) whose state is kept */

/* A graph of the run (the root: ns ""), its last values and its type. */
struct graph {
	char *ns;
	char *type;
	char *call; /* the tool call that started it (its lifecycle "started" cause) */
	cJSON *values;
};

struct tc_run_chunks {
	struct tc_run_follow fw;
	struct tc_msg_asm msgs; /* the messages being streamed */
	char *agent_type;
	tc_run_emit *emit;
	void *ctx;
	uint64_t seq, skip;
	enum { ACTIVE, ENDED, FAILED } status;
	double step; /* the root's last checkpoint step */
	struct graph graphs[GRAPHS];
	size_t ngraphs;
	cJSON *interrupts; /* [{value, id}] */
};

static void out(struct tc_run_chunks *f, cJSON *body)
{
	uint64_t n = ++f->seq;
	if (f->emit && n > f->skip) {
		char id[24];
		size_t len;
		snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
		char *text = tc_sse_event(id, NULL, body, &len);
		f->emit(f->ctx, n, text, len);
		free(text);
	}
	cJSON_Delete(body);
}

/* The agent (session) id of a graph: the run's for the root, run_id "/" ns for a subgraph. */
static char *agent_id(const struct tc_run_chunks *f, const char *ns)
{
	if (!*ns)
		return tc_xstrdup(f->fw.run_id);
	size_t n = strlen(f->fw.run_id) + strlen(ns) + 2;
	char *s = tc_xmalloc(n);
	snprintf(s, n, "%s/%s", f->fw.run_id, ns);
	return s;
}

static struct graph *graph_of(struct tc_run_chunks *f, const char *ns, bool create)
{
	for (size_t i = 0; i < f->ngraphs; i++)
		if (!strcmp(f->graphs[i].ns, ns))
			return &f->graphs[i];
	if (!create || f->ngraphs == GRAPHS)
		return NULL;
	struct graph *g = &f->graphs[f->ngraphs++];
	*g = (struct graph){ .ns = tc_xstrdup(ns) };
	return g;
}

/* A chunk of a type, with agentId, agentType and timestamp filled for the graph ns. */
static cJSON *chunk(struct tc_run_chunks *f, const char *type, const char *ns, double ts)
{
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "type", type);
	char *aid = agent_id(f, ns);
	cJSON_AddStringToObject(c, "agentId", aid);
	free(aid);
	struct graph *g = graph_of(f, ns, false);
	const char *at = *ns ? (g ? g->type : NULL) : f->agent_type;
	if (at)
		cJSON_AddStringToObject(c, "agentType", at);
	cJSON_AddNumberToObject(c, "timestamp", ts);
	return c;
}

static void out_chunk(struct tc_run_chunks *f, cJSON *c)
{
	cJSON *body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "type", "chunk");
	cJSON_AddItemToObject(body, "chunk", c);
	cJSON_AddNumberToObject(body, "sequence", (double)(f->seq + 1));
	out(f, body);
}

static void text_chunk(struct tc_run_chunks *f, const struct tc_run_ev *ev, const char *text)
{
	cJSON *c = chunk(f, "text_delta", ev->ns, ev->timestamp);
	cJSON_AddStringToObject(c, "delta", text);
	out_chunk(f, c);
}

static void thinking_chunk(struct tc_run_chunks *f, const struct tc_run_ev *ev, const char *text, bool complete)
{
	cJSON *c = chunk(f, "thinking", ev->ns, ev->timestamp);
	cJSON_AddStringToObject(c, "content", text);
	cJSON_AddBoolToObject(c, "isComplete", complete);
	out_chunk(f, c);
}

/* One messages event, assembled (assemble.h): an AI message's text and reasoning as chunks; a model error. */
static void msg_part(void *ctx, struct tc_msg *m, const struct tc_msg_part *p, const struct tc_run_ev *ev)
{
	struct tc_run_chunks *f = ctx;
	bool finish = p->kind == TC_MSG_BLOCK_FINISH;

	if (p->kind == TC_MSG_ERROR) {
		const char *msg = tc_run_str(ev->data, "message");
		const char *code = tc_run_str(ev->data, "code");
		cJSON *c = chunk(f, "error", ev->ns, ev->timestamp);
		cJSON_AddStringToObject(c, "error", msg ? msg : "error");
		if (code)
			cJSON_AddStringToObject(c, "code", code);
		cJSON_AddBoolToObject(c, "recoverable", false);
		cJSON_AddNumberToObject(c, "step", f->step);
		out_chunk(f, c);
		return;
	}
	if (!m->ai || p->kind == TC_MSG_START || p->kind == TC_MSG_FINISH)
		return;
	if (p->kind == TC_MSG_BLOCK_DELTA) {
		if (p->text && *p->text && p->block == TC_BLOCK_TEXT)
			text_chunk(f, ev, p->text);
		else if (p->text && *p->text && p->block == TC_BLOCK_REASONING)
			thinking_chunk(f, ev, p->text, false);
		return;
	}
	/* a block's start, or its finish: its text when none went out before */
	if (p->block == TC_BLOCK_TEXT && p->text && *p->text && (!finish || !p->had))
		text_chunk(f, ev, p->text);
	else if (p->block == TC_BLOCK_REASONING && !finish && p->text && *p->text)
		thinking_chunk(f, ev, p->text, false);
	else if (p->block == TC_BLOCK_REASONING && finish) /* the end: its text, or an empty completion */
		thinking_chunk(f, ev, !p->had && p->text ? p->text : "", true);
}

static const struct tc_msg_ops msg_ops = { .part = msg_part };

static void on_tools(struct tc_run_chunks *f, const struct tc_run_ev *ev)
{
	const char *e = tc_run_str(ev->data, "event");
	const char *call = tc_run_str(ev->data, "tool_call_id");
	if (!e || !call)
		return;
	if (!strcmp(e, "tool-started")) {
		const char *name = tc_run_str(ev->data, "tool_name");
		const cJSON *input = tc_run_get(ev->data, "input");
		cJSON *c = chunk(f, "tool_start", ev->ns, ev->timestamp);
		cJSON_AddStringToObject(c, "toolCallId", call);
		cJSON_AddStringToObject(c, "toolName", name ? name : "");
		/* the arguments as an object, also when the tool's input came as JSON text */
		cJSON *args = cJSON_IsString(input) ? cJSON_Parse(input->valuestring) : NULL;
		if (!cJSON_IsObject(args)) {
			cJSON_Delete(args);
			args = input ? cJSON_Duplicate(input, true) : cJSON_CreateNull();
		}
		cJSON_AddItemToObject(c, "arguments", args);
		out_chunk(f, c);
	} else if (!strcmp(e, "tool-finished") || !strcmp(e, "tool-error")) {
		bool ok = e[5] == 'f';
		const cJSON *output = tc_run_get(ev->data, "output");
		cJSON *c = chunk(f, "tool_end", ev->ns, ev->timestamp);
		cJSON_AddStringToObject(c, "toolCallId", call);
		cJSON_AddItemToObject(c, "result", ok && output ? cJSON_Duplicate(output, true) : cJSON_CreateNull());
		cJSON_AddBoolToObject(c, "success", ok);
		if (!ok) {
			const char *msg = tc_run_str(ev->data, "message");
			cJSON_AddStringToObject(c, "error", msg ? msg : "the tool failed");
		}
		out_chunk(f, c);
	}
}

/* A JSON Pointer to a top-level member (RFC 6901: "~" as "~0", "/" as "~1"). */
static char *pointer(const char *key, const char *suffix)
{
	size_t n = 2 + strlen(suffix);
	for (const char *p = key; *p; p++)
		n += *p == '~' || *p == '/' ? 2 : 1;
	char *s = tc_xmalloc(n), *q = s;
	*q++ = '/';
	for (const char *p = key; *p; p++) {
		if (*p == '~' || *p == '/') {
			*q++ = '~';
			*q++ = *p == '~' ? '0' : '1';
		} else {
			*q++ = *p;
		}
	}
	strcpy(q, suffix);
	return s;
}

static void patch(cJSON *patches, const char *op, const char *key, const char *suffix, const cJSON *value)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "op", op);
	char *path = pointer(key, suffix);
	cJSON_AddStringToObject(p, "path", path);
	free(path);
	if (value)
		cJSON_AddItemToObject(p, "value", cJSON_Duplicate(value, true));
	cJSON_AddItemToArray(patches, p);
}

/*
 * The RFC 6902 patches from a graph's previous values to new ones, member
 * by member: removed members "remove", new ones "add", changed ones
 * "replace" — but an array that only grew gets an "add" at "/-" per new
 * item (a message list's appends).
 */
static cJSON *diff(const cJSON *old, const cJSON *now)
{
	cJSON *patches = cJSON_CreateArray();
	const cJSON *it;
	cJSON_ArrayForEach(it, old) if (it->string && !cJSON_GetObjectItemCaseSensitive(now, it->string))
		patch(patches, "remove", it->string, "", NULL);
	cJSON_ArrayForEach(it, now)
	{
		if (!it->string)
			continue;
		const cJSON *was = cJSON_IsObject(old) ? cJSON_GetObjectItemCaseSensitive(old, it->string) : NULL;
		if (!was) {
			patch(patches, "add", it->string, "", it);
		} else if (!cJSON_Compare(was, it, true)) {
			int n = cJSON_GetArraySize(was), m = cJSON_GetArraySize(it);
			bool grew = cJSON_IsArray(was) && cJSON_IsArray(it) && m > n;
			for (int i = 0; grew && i < n; i++)
				grew = cJSON_Compare(cJSON_GetArrayItem(was, i), cJSON_GetArrayItem(it, i), true);
			if (grew) {
				for (int i = n; i < m; i++)
					patch(patches, "add", it->string, "/-", cJSON_GetArrayItem(it, i));
			} else {
				patch(patches, "replace", it->string, "", it);
			}
		}
	}
	return patches;
}

static void on_values(struct tc_run_chunks *f, const struct tc_run_ev *ev)
{
	if (!cJSON_IsObject(ev->data))
		return;
	struct graph *g = graph_of(f, ev->ns, true);
	cJSON *patches = diff(g ? g->values : NULL, ev->data);
	if (g) {
		cJSON_Delete(g->values);
		g->values = cJSON_Duplicate(ev->data, true);
	}
	if (cJSON_GetArraySize(patches) == 0) {
		cJSON_Delete(patches);
		return;
	}
	cJSON *c = chunk(f, "state_patch", ev->ns, ev->timestamp);
	cJSON_AddItemToObject(c, "patches", patches);
	out_chunk(f, c);
}

/* A subgraph's lifecycle: its start and its end are a sub-agent's. */
static void on_subgraph(struct tc_run_chunks *f, const struct tc_run_ev *ev)
{
	bool start = !strcmp(ev->status, "started");
	bool end =
		!strcmp(ev->status, "completed") || !strcmp(ev->status, "failed") || !strcmp(ev->status, "interrupted");
	if (!start && !end)
		return;
	struct graph *g = graph_of(f, ev->ns, true);
	const char *gname = tc_run_str(ev->data, "graph_name");
	const char *last = strrchr(ev->ns, '|');
	last = last ? last + 1 : ev->ns;
	char type[128];
	snprintf(type, sizeof(type), "%.*s", (int)strcspn(last, ":"), last);
	if (g && !g->type)
		g->type = tc_xstrdup(gname ? gname : type);
	/* the parent: the namespace without its last segment */
	char *parent = tc_xstrndup(ev->ns, (size_t)(last - ev->ns) - (last > ev->ns ? 1 : 0));
	while (*parent && !graph_of(f, parent, false)) { /* node tasks are not graphs */
		char *bar = strrchr(parent, '|');
		*(bar ? bar : parent) = '\0';
	}
	cJSON *c = chunk(f, start ? "subagent_start" : "subagent_end", parent, ev->timestamp);
	if (!cJSON_GetObjectItemCaseSensitive(c, "agentType"))
		cJSON_AddStringToObject(c, "agentType", "");
	free(parent);
	cJSON_AddNumberToObject(c, "step", f->step);
	cJSON_AddStringToObject(c, "subAgentType", g && g->type ? g->type : type);
	char *sub = agent_id(f, ev->ns);
	cJSON_AddStringToObject(c, "subSessionId", sub);
	free(sub);
	const char *call = tc_run_str(tc_run_get(ev->data, "cause"), "tool_call_id");
	if (g && call && !g->call)
		g->call = tc_xstrdup(call);
	cJSON_AddStringToObject(c, "callId", g && g->call ? g->call : call ? call : "");
	if (end) {
		const char *err = tc_run_str(ev->data, "error");
		cJSON *result;
		if (!strcmp(ev->status, "failed")) {
			result = cJSON_CreateObject();
			cJSON_AddStringToObject(result, "error", err ? err : "the subgraph failed");
		} else {
			result = g && g->values ? cJSON_Duplicate(g->values, true) : cJSON_CreateNull();
		}
		cJSON_AddItemToObject(c, "result", result);
	}
	out_chunk(f, c);
}

static void on_event(struct tc_run_chunks *f, const struct tc_run_ev *ev)
{
	const char *m = ev->method;
	if (!strcmp(m, "messages")) {
		tc_msg_asm_event(&f->msgs, ev);
	} else if (!strcmp(m, "tools")) {
		on_tools(f, ev);
	} else if (!strcmp(m, "values")) {
		on_values(f, ev);
	} else if (!strcmp(m, "custom")) {
		const char *name = tc_run_str(ev->data, "name");
		const cJSON *payload = tc_run_get(ev->data, "payload");
		cJSON *c = chunk(f, "custom", ev->ns, ev->timestamp);
		cJSON_AddStringToObject(c, "eventName", name ? name : "");
		cJSON_AddItemToObject(c, "data", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
		out_chunk(f, c);
	} else if (!strcmp(m, "input.requested")) {
		/* An interrupt: a custom "interrupt" chunk, and "__interrupt__" in the output. */
		const char *iid = tc_run_str(ev->data, "interrupt_id");
		const cJSON *payload = tc_run_get(ev->data, "payload");
		cJSON *i = cJSON_CreateObject();
		cJSON_AddItemToObject(i, "value", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
		if (iid)
			cJSON_AddStringToObject(i, "id", iid);
		if (!f->interrupts)
			f->interrupts = cJSON_CreateArray();
		cJSON *c = chunk(f, "custom", ev->ns, ev->timestamp);
		cJSON_AddStringToObject(c, "eventName", "interrupt");
		cJSON_AddItemToObject(c, "data", cJSON_Duplicate(i, true));
		if (cJSON_GetArraySize(f->interrupts) < 64)
			cJSON_AddItemToArray(f->interrupts, i);
		else
			cJSON_Delete(i);
		out_chunk(f, c);
	} else if (!strcmp(m, "checkpoints")) {
		const cJSON *step = tc_run_get(ev->data, "step");
		if (!*ev->ns && cJSON_IsNumber(step))
			f->step = step->valuedouble;
	} else if (!strcmp(m, "lifecycle") && *ev->ns && ev->status) {
		on_subgraph(f, ev);
	}
}

static void fail(struct tc_run_chunks *f, const char *error)
{
	cJSON *body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "type", "fail");
	cJSON_AddStringToObject(body, "error", error);
	f->status = FAILED;
	out(f, body);
}

static void on_end(struct tc_run_chunks *f, const struct tc_run_ev *ev)
{
	if (!strcmp(ev->status, "failed")) {
		const char *err = tc_run_str(ev->data, "error");
		cJSON *c = chunk(f, "error", "", ev->timestamp);
		cJSON_AddStringToObject(c, "error", err ? err : "the run failed");
		cJSON_AddBoolToObject(c, "recoverable", false);
		cJSON_AddNumberToObject(c, "step", f->step);
		out_chunk(f, c);
		fail(f, err ? err : "the run failed");
		return;
	}
	/* completed, or stopped at an interrupt: the root's last values are the output */
	struct graph *root = graph_of(f, "", false);
	cJSON *v = root && root->values ? cJSON_Duplicate(root->values, true) : cJSON_CreateObject();
	if (f->interrupts && cJSON_GetArraySize(f->interrupts))
		cJSON_AddItemToObject(v, "__interrupt__", cJSON_Duplicate(f->interrupts, true));
	cJSON *c = chunk(f, "output", "", ev->timestamp);
	cJSON_AddItemToObject(c, "output", v);
	out_chunk(f, c);
	cJSON *body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "type", "end");
	f->status = ENDED;
	out(f, body);
}

bool tc_run_chunks_event(struct tc_run_chunks *f, uint64_t seq, const cJSON *event)
{
	if (f->status != ACTIVE)
		return true;
	struct tc_run_ev ev;
	switch (tc_run_follow_step(&f->fw, seq, event, &ev)) {
	case TC_RUN_SKIP:
		return false;
	case TC_RUN_CUT:
		fail(f, "the run's events ended without its end: another run started");
		return true;
	case TC_RUN_EVENT:
		on_event(f, &ev);
		tc_run_ev_clear(&ev);
		return false;
	case TC_RUN_END:
		on_end(f, &ev);
		tc_run_ev_clear(&ev);
		return true;
	}
	return false;
}

void tc_run_chunks_finish(struct tc_run_chunks *f, const char *error)
{
	if (f->status == ACTIVE) {
		f->fw.ended = true;
		fail(f, error ? error : "the stream was closed before the run ended");
	}
}

const char *tc_run_chunks_status(const struct tc_run_chunks *f)
{
	return f->status == ACTIVE ? "active" : f->status == ENDED ? "ended" : "failed";
}

uint64_t tc_run_chunks_sequence(const struct tc_run_chunks *f)
{
	return f->seq;
}

struct tc_run_chunks *tc_run_chunks_new(const char *run_id, const char *agent_type, bool in_run, uint64_t skip_through,
					tc_run_emit *emit, void *ctx)
{
	struct tc_run_chunks *f = tc_xcalloc(1, sizeof(*f));
	tc_run_follow_init(&f->fw, run_id, in_run);
	tc_msg_asm_init(&f->msgs, &msg_ops, f);
	f->agent_type = agent_type ? tc_xstrdup(agent_type) : NULL;
	f->skip = skip_through;
	f->emit = emit;
	f->ctx = ctx;
	return f;
}

void tc_run_chunks_free(struct tc_run_chunks *f)
{
	if (!f)
		return;
	tc_run_follow_clear(&f->fw);
	tc_msg_asm_clear(&f->msgs);
	for (size_t i = 0; i < f->ngraphs; i++) {
		free(f->graphs[i].ns);
		free(f->graphs[i].type);
		free(f->graphs[i].call);
		cJSON_Delete(f->graphs[i].values);
	}
	cJSON_Delete(f->interrupts);
	free(f->agent_type);
	free(f);
}

TC_RUN_FMT_OPS(chunks, NULL);
