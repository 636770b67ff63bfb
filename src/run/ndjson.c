/*
 * run/ndjson.c — a run as seed 003's streaming output (ndjson.h): NDJSON
 * lines {"session_id","node_id"?,"event_id","type",…}: run_start, node spans
 * (node_enter … node_exit, from the root graph's tasks), message and tool
 * call chunks, usage, values, updates, custom, checkpoint, the tools' events
 * and tool approvals; then exactly one reply line {"session_id","node_id"?,
 * "event_id","reply","status","error"?}.
 */
#include "run/ndjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/assemble.h"
#include "run/follow.h"
#include "util.h"

#define OPEN_SPANS 64         /* root nodes running at once */
#define OPEN_TOOLS 32         /* tool calls running at once */
#define REPLY_TEXT (1 << 20)  /* the reply's text */
#define ARGS_TEXT (256 << 10) /* a streamed tool call's arguments */

/* The tool call block a message is streaming. */
struct tool_block {
	char *call, *name; /* its id and name, when given */
	char *args;        /* its arguments so far (text) */
	size_t args_len;
};

/* A node span: a root node's task from its start to its result. */
struct span {
	struct tc_slot slot; /* key: the task id */
	char *name;          /* the node */
	char *id;            /* the span's node_id: run_id ":" node ":" k */
	uint64_t k;          /* the span's number in the stream (1, 2, …) */
};

/* A tool call running (its name is only on its tool-started). */
struct open_tool {
	struct tc_slot slot; /* key: the tool call id */
	char *name;
};

struct tc_run_ndjson {
	struct tc_run_follow fw;
	struct tc_msg_asm msgs;                /* the messages being streamed */
	struct tool_block blocks[TC_MSG_OPEN]; /* each message's tool call block (by tc_msg.no) */
	const struct span *sp;                 /* the span of the messages event being assembled */
	char *session, *agent, *message;
	tc_run_emit *emit;
	void *ctx;
	uint64_t seq, skip;
	bool started, ended;
	uint64_t nspans; /* spans made */
	struct span spans[OPEN_SPANS];
	struct open_tool tools[OPEN_TOOLS];
	uint64_t clock;
	char *reply; /* the text of the root's last AI message */
	size_t reply_len;
	char *reply_key;  /* that message's key (tc_msg.slot: its namespace as sent, "#", its node) */
	char *reply_node; /* the node_id of the span it came in (NULL: none) */
};

/* A line of a type, its envelope filled (node_id: the span's, NULL for none); sent by put_line(). */
static cJSON *line(struct tc_run_ndjson *f, const char *type, const struct span *sp)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "session_id", f->session);
	if (sp)
		cJSON_AddStringToObject(o, "node_id", sp->id);
	cJSON_AddNumberToObject(o, "event_id", (double)(f->seq + 1));
	cJSON_AddStringToObject(o, "type", type);
	return o;
}

/* Gives out a line's event_id; emits it (with "namespace" for a subgraph's) when past the skip. */
static void put_line(struct tc_run_ndjson *f, cJSON *o, const char *ns)
{
	uint64_t n = ++f->seq;
	if (ns && *ns)
		cJSON_AddStringToObject(o, "namespace", ns);
	if (f->emit && n > f->skip) {
		char *json = cJSON_PrintUnformatted(o);
		size_t len = strlen(json);
		char *text = tc_xmalloc(len + 2);
		memcpy(text, json, len);
		text[len] = '\n';
		text[len + 1] = '\0';
		f->emit(f->ctx, n, text, len + 1);
		free(text);
		free(json);
	}
	cJSON_Delete(o);
}

/* ---- spans ---- */

static void span_free(struct span *s)
{
	free(s->name);
	free(s->id);
	s->name = s->id = NULL;
	s->k = 0;
}

/* A span's node_exit; the span is closed. err: NULL for "Ok". */
static void node_exit(struct tc_run_ndjson *f, struct span *s, const char *err)
{
	cJSON *o = line(f, "node_exit", s);
	cJSON_AddStringToObject(o, "id", s->name);
	if (err)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "result"), "Err", err);
	else
		cJSON_AddStringToObject(o, "result", "Ok");
	put_line(f, o, NULL);
	span_free(s);
	tc_slot_clear(&s->slot);
}

static void node_enter(struct tc_run_ndjson *f, const char *task, const char *name)
{
	bool fresh;
	struct span *s = tc_slot_find(f->spans, OPEN_SPANS, sizeof(f->spans[0]), &f->clock, task, false, &fresh);
	if (s)
		return; /* entered already */
	s = tc_slot_find(f->spans, OPEN_SPANS, sizeof(f->spans[0]), &f->clock, task, true, &fresh);
	if (s->name) { /* the oldest span, evicted: it ends here */
		cJSON *o = line(f, "node_exit", s);
		cJSON_AddStringToObject(o, "id", s->name);
		cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "result"), "Err",
					"no longer followed: too many nodes running at once");
		put_line(f, o, NULL);
		span_free(s);
	}
	s->name = tc_xstrdup(name);
	s->k = ++f->nspans;
	size_t n = strlen(f->fw.run_id) + strlen(name) + 24;
	s->id = tc_xmalloc(n);
	snprintf(s->id, n, "%s:%s:%llu", f->fw.run_id, name, (unsigned long long)s->k);
	cJSON *o = line(f, "node_enter", s);
	cJSON_AddStringToObject(o, "id", name);
	put_line(f, o, NULL);
}

/* The latest span open of a node (NULL: none). */
static struct span *span_named(struct tc_run_ndjson *f, const char *name)
{
	struct span *best = NULL;
	for (int i = 0; i < OPEN_SPANS; i++)
		if (f->spans[i].name && !strcmp(f->spans[i].name, name) && (!best || f->spans[i].k > best->k))
			best = &f->spans[i];
	return best;
}

/*
 * The span an event belongs to: the root node task it came from (the first
 * segment of its namespace, "<node>:<task id>"), else the latest span of its
 * node (params.node; an update's data.node); an event of no node (root
 * values, checkpoints, …) is in the span open when there is exactly one.
 */
static struct span *span_of(struct tc_run_ndjson *f, const struct tc_run_ev *ev)
{
	const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ev->params, "namespace"), 0);
	char name[128] = "";
	if (cJSON_IsString(first)) {
		const char *colon = strchr(first->valuestring, ':');
		bool fresh;
		struct span *s = colon ? tc_slot_find(f->spans, OPEN_SPANS, sizeof(f->spans[0]), &f->clock, colon + 1,
						      false, &fresh)
				       : NULL;
		if (s)
			return s;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(first->valuestring, ":"), first->valuestring);
	} else {
		const char *by = ev->node;
		if (!*by && !strcmp(ev->method, "updates") && tc_run_str(ev->data, "node"))
			by = tc_run_str(ev->data, "node");
		snprintf(name, sizeof(name), "%s", by);
	}
	if (*name)
		return span_named(f, name);
	struct span *only = NULL;
	for (int i = 0; i < OPEN_SPANS; i++) {
		if (!f->spans[i].name)
			continue;
		if (only)
			return NULL;
		only = &f->spans[i];
	}
	return only;
}

/* A task's error as text (a string, an error's message, else its JSON); NULL when there is none. */
static char *error_text(const cJSON *e)
{
	if (!e || cJSON_IsNull(e) || cJSON_IsFalse(e))
		return NULL;
	if (cJSON_IsString(e))
		return tc_xstrdup(*e->valuestring ? e->valuestring : "error");
	const char *msg = tc_run_str(e, "message");
	if (msg)
		return tc_xstrdup(msg);
	return cJSON_PrintUnformatted(e);
}

/*
 * A root task: created {id, name, input, triggers, …} opens its node's
 * span, its result {id, name, result, error, interrupts} closes it.
 */
static void on_tasks(struct tc_run_ndjson *f, const struct tc_run_ev *ev)
{
	const char *id = tc_run_str(ev->data, "id"), *name = tc_run_str(ev->data, "name");
	if (!name)
		return;
	if (!id)
		id = name;
	bool result = tc_run_get(ev->data, "result") || tc_run_get(ev->data, "error");
	if (!result) {
		node_enter(f, id, name);
		return;
	}
	bool fresh;
	struct span *s = tc_slot_find(f->spans, OPEN_SPANS, sizeof(f->spans[0]), &f->clock, id, false, &fresh);
	if (!s)
		return; /* its start was not seen */
	char *err = error_text(tc_run_get(ev->data, "error"));
	const cJSON *intr = tc_run_get(ev->data, "interrupts");
	if (!err && cJSON_GetArraySize(intr) > 0)
		err = tc_xstrdup("interrupted");
	node_exit(f, s, err);
	free(err);
}

/* ---- messages ---- */

static void tool_block_free(struct tool_block *m)
{
	free(m->call);
	free(m->name);
	free(m->args);
	m->call = m->name = m->args = NULL;
	m->args_len = 0;
}

/* The root's AI message in key is the last one: the reply starts over. */
static void reply_start(struct tc_run_ndjson *f, const char *key, const struct span *sp)
{
	free(f->reply_key);
	free(f->reply_node);
	f->reply_key = tc_xstrdup(key);
	f->reply_node = sp ? tc_xstrdup(sp->id) : NULL;
	f->reply_len = 0;
	if (f->reply)
		f->reply[0] = '\0';
}

static void text_chunk(struct tc_run_ndjson *f, const struct tc_run_ev *ev, const struct span *sp, const char *key,
		       const char *text)
{
	cJSON *o = line(f, "message_chunk", sp);
	cJSON_AddStringToObject(o, "content", text);
	cJSON_AddStringToObject(o, "id", ev->node);
	put_line(f, o, ev->ns);
	if (*ev->ns)
		return;
	if (!f->reply_key) /* resumed mid-message */
		reply_start(f, key, sp);
	if (!strcmp(f->reply_key, key))
		tc_run_append(&f->reply, &f->reply_len, text, REPLY_TEXT);
}

/* A tool call block starts (or is seen first): its id and name, when it has them. */
static void tool_block(struct tool_block *m, const cJSON *block, bool start)
{
	const char *s;
	if (start)
		tool_block_free(m);
	if ((s = tc_run_str(block, "id"))) {
		free(m->call);
		m->call = tc_xstrdup(s);
	}
	if ((s = tc_run_str(block, "name"))) {
		free(m->name);
		m->name = tc_xstrdup(s);
	}
}

static void args_chunk(struct tc_run_ndjson *f, const struct tc_run_ev *ev, const struct span *sp, struct tool_block *m,
		       const char *delta)
{
	if (!delta || !*delta)
		return;
	tc_run_append(&m->args, &m->args_len, delta, ARGS_TEXT);
	cJSON *o = line(f, "tool_call_chunk", sp);
	if (m->call)
		cJSON_AddStringToObject(o, "call_id", m->call);
	if (m->name)
		cJSON_AddStringToObject(o, "name", m->name);
	cJSON_AddStringToObject(o, "arguments_delta", delta);
	put_line(f, o, ev->ns);
}

/* A tool call block's finish: the whole call, its arguments an object (the block's, else the deltas'). */
static void tool_call(struct tc_run_ndjson *f, const struct tc_run_ev *ev, const struct span *sp, struct tool_block *m,
		      const cJSON *block)
{
	tool_block(m, block, false);
	const cJSON *args = tc_run_get(block, "args");
	cJSON *a = cJSON_IsObject(args)   ? cJSON_Duplicate(args, true)
		   : cJSON_IsString(args) ? cJSON_Parse(args->valuestring)
					  : NULL;
	if (!cJSON_IsObject(a)) {
		cJSON_Delete(a);
		a = m->args ? cJSON_Parse(m->args) : NULL;
	}
	if (!cJSON_IsObject(a)) {
		cJSON_Delete(a);
		a = cJSON_CreateObject();
	}
	cJSON *o = line(f, "tool_call", sp);
	if (m->call)
		cJSON_AddStringToObject(o, "call_id", m->call);
	cJSON_AddStringToObject(o, "name", m->name ? m->name : "");
	cJSON_AddItemToObject(o, "arguments", a);
	put_line(f, o, ev->ns);
	tool_block_free(m);
}

static void usage(struct tc_run_ndjson *f, const struct tc_run_ev *ev, const struct span *sp, const cJSON *u)
{
	const cJSON *in = tc_run_get(u, "input_tokens"), *out = tc_run_get(u, "output_tokens");
	const cJSON *total = tc_run_get(u, "total_tokens");
	if (!cJSON_IsNumber(in) && !cJSON_IsNumber(out) && !cJSON_IsNumber(total))
		return;
	double i = cJSON_IsNumber(in) ? in->valuedouble : 0, o = cJSON_IsNumber(out) ? out->valuedouble : 0;
	cJSON *l = line(f, "usage", sp);
	cJSON_AddNumberToObject(l, "prompt_tokens", i);
	cJSON_AddNumberToObject(l, "completion_tokens", o);
	cJSON_AddNumberToObject(l, "total_tokens", cJSON_IsNumber(total) ? total->valuedouble : i + o);
	put_line(f, l, ev->ns);
}

/*
 * One messages event, assembled (assemble.h): an AI message's text and tool
 * calls (chunks as they stream, then the whole call), its usage; the root's
 * AI messages make the reply.
 */
static void msg_part(void *ctx, struct tc_msg *m, const struct tc_msg_part *p, const struct tc_run_ev *ev)
{
	struct tc_run_ndjson *f = ctx;
	struct tool_block *t = &f->blocks[m->no];
	const struct span *sp = f->sp;
	bool finish = p->kind == TC_MSG_BLOCK_FINISH;

	switch (p->kind) {
	case TC_MSG_START:
		if (m->ai && !*ev->ns)
			reply_start(f, m->slot.key, sp);
		return;
	case TC_MSG_FINISH:
		if (m->ai)
			usage(f, ev, sp, p->usage);
		return;
	case TC_MSG_ERROR:
		return;
	case TC_MSG_BLOCK_DELTA:
		if (!m->ai)
			return;
		if (p->block == TC_BLOCK_TEXT && p->text && *p->text) {
			text_chunk(f, ev, sp, m->slot.key, p->text);
		} else if (p->type && !strcmp(p->type, "tool_call_chunk")) {
			tool_block(t, p->content, false);
			args_chunk(f, ev, sp, t, tc_run_str(p->content, "args"));
		}
		return;
	case TC_MSG_BLOCK_START:
	case TC_MSG_BLOCK_FINISH:
		if (!m->ai)
			return;
		if (p->block == TC_BLOCK_TEXT) {
			/* its text when it has some no delta gave (chunks.c's rule) */
			if (p->text && *p->text && (!finish || !p->had))
				text_chunk(f, ev, sp, m->slot.key, p->text);
		} else if (p->block == TC_BLOCK_TOOL && !finish) {
			tool_block(t, p->content, true);
			const cJSON *args = tc_run_get(p->content, "args");
			if (cJSON_IsString(args))
				args_chunk(f, ev, sp, t, args->valuestring);
		} else if (p->block == TC_BLOCK_TOOL) {
			tool_call(f, ev, sp, t, p->content);
		}
		return;
	}
}

static void msg_drop(void *ctx, struct tc_msg *m, bool finished)
{
	struct tc_run_ndjson *f = ctx;
	tool_block_free(&f->blocks[m->no]);
}

static const struct tc_msg_ops msg_ops = { .part = msg_part, .drop = msg_drop };

/* ---- tools ---- */

/* A tool's output as text: a string's value, a tool message's content, else its JSON text. */
static char *output_text(const cJSON *out)
{
	if (!out)
		return tc_xstrdup("");
	if (cJSON_IsString(out))
		return tc_xstrdup(out->valuestring);
	const cJSON *c = cJSON_IsObject(out) ? cJSON_GetObjectItemCaseSensitive(out, "content") : NULL;
	if (cJSON_IsString(c))
		return tc_xstrdup(c->valuestring);
	return cJSON_PrintUnformatted(out);
}

static void on_tools(struct tc_run_ndjson *f, const struct tc_run_ev *ev, const struct span *sp)
{
	const char *e = tc_run_str(ev->data, "event");
	const char *call = tc_run_str(ev->data, "tool_call_id");
	if (!e || !call)
		return;
	bool started = !strcmp(e, "tool-started"), delta = !strcmp(e, "tool-output-delta");
	bool end = !strcmp(e, "tool-finished") || !strcmp(e, "tool-error");
	if (!started && !delta && !end)
		return;
	bool fresh;
	struct open_tool *t = tc_slot_find(f->tools, OPEN_TOOLS, sizeof(f->tools[0]), &f->clock, call, started, &fresh);
	const char *tn = tc_run_str(ev->data, "tool_name");
	if (t && fresh) {
		free(t->name);
		t->name = NULL;
	}
	if (t && tn && !t->name)
		t->name = tc_xstrdup(tn);
	const char *name = t && t->name ? t->name : tn ? tn : "";
	cJSON *o;
	if (started) {
		o = line(f, "tool_start", sp);
		cJSON_AddStringToObject(o, "call_id", call);
		cJSON_AddStringToObject(o, "name", name);
	} else if (delta) {
		const char *d = tc_run_str(ev->data, "delta");
		if (!d || !*d)
			return;
		o = line(f, "tool_output", sp);
		cJSON_AddStringToObject(o, "call_id", call);
		cJSON_AddStringToObject(o, "name", name);
		cJSON_AddStringToObject(o, "content", d);
	} else {
		bool ok = e[5] == 'f';
		const char *msg = tc_run_str(ev->data, "message");
		char *text =
			ok ? output_text(tc_run_get(ev->data, "output")) : tc_xstrdup(msg ? msg : "the tool failed");
		o = line(f, "tool_end", sp);
		cJSON_AddStringToObject(o, "call_id", call);
		cJSON_AddStringToObject(o, "name", name);
		cJSON_AddStringToObject(o, "result", text);
		cJSON_AddBoolToObject(o, "is_error", !ok);
		free(text);
	}
	put_line(f, o, ev->ns);
	if (end && t) {
		free(t->name);
		t->name = NULL;
		tc_slot_clear(&t->slot);
	}
}

/* ---- the rest ---- */

/* The name of what an interrupt asks about: its payload's tool or action, else "interrupt". */
static const char *approval_name(const cJSON *p)
{
	static const char *const direct[] = { "name", "tool", "tool_name", "action" };
	for (size_t i = 0; i < sizeof(direct) / sizeof(direct[0]); i++) {
		const char *s = tc_run_str(p, direct[i]);
		if (s && *s)
			return s;
	}
	const char *s = tc_run_str(tc_run_get(p, "action_request"), "action");
	if (s && *s)
		return s;
	s = tc_run_str(cJSON_GetArrayItem(tc_run_get(p, "action_requests"), 0), "name");
	return s && *s ? s : "interrupt";
}

static void on_event(struct tc_run_ndjson *f, const struct tc_run_ev *ev)
{
	const char *m = ev->method;
	bool root = !*ev->ns;
	if (!strcmp(m, "lifecycle")) {
		if (root && ev->status && !strcmp(ev->status, "started") && !f->started) {
			f->started = true;
			cJSON *o = line(f, "run_start", NULL);
			cJSON_AddStringToObject(o, "run_id", f->fw.run_id);
			if (f->agent)
				cJSON_AddStringToObject(o, "agent", f->agent);
			if (f->message)
				cJSON_AddStringToObject(o, "message", f->message);
			put_line(f, o, NULL);
		}
		return; /* a subgraph's start and end make no line */
	}
	if (!strcmp(m, "tasks")) {
		if (root)
			on_tasks(f, ev);
		return;
	}
	struct span *sp = span_of(f, ev);
	cJSON *o = NULL;
	if (!strcmp(m, "messages")) {
		f->sp = sp;
		tc_msg_asm_event(&f->msgs, ev);
		f->sp = NULL;
	} else if (!strcmp(m, "tools")) {
		on_tools(f, ev, sp);
	} else if (!strcmp(m, "values")) {
		if (!cJSON_IsObject(ev->data))
			return; /* a state is an object */
		o = line(f, "values", sp);
		cJSON_AddItemToObject(o, "state", cJSON_Duplicate(ev->data, true));
	} else if (!strcmp(m, "updates")) {
		const char *by = tc_run_str(ev->data, "node");
		const cJSON *vals = tc_run_get(ev->data, "values");
		if (!vals)
			vals = ev->data;
		o = line(f, "updates", sp);
		cJSON_AddStringToObject(o, "id", by ? by : ev->node);
		cJSON_AddItemToObject(o, "state", vals ? cJSON_Duplicate(vals, true) : cJSON_CreateNull());
	} else if (!strcmp(m, "custom") || !strncmp(m, "custom:", 7)) {
		const char *name = tc_run_str(ev->data, "name");
		const cJSON *payload = tc_run_get(ev->data, "payload");
		o = line(f, "custom", sp);
		if (name)
			cJSON_AddStringToObject(o, "name", name);
		cJSON_AddItemToObject(o, "value", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
	} else if (!strcmp(m, "checkpoints") && root) {
		const char *id = tc_run_str(ev->data, "id");
		const cJSON *step = tc_run_get(ev->data, "step"), *vals = tc_run_get(ev->data, "values");
		if (!id)
			return;
		o = line(f, "checkpoint", sp);
		cJSON_AddStringToObject(o, "checkpoint_id", id);
		cJSON_AddNumberToObject(o, "timestamp", ev->timestamp);
		cJSON_AddNumberToObject(o, "step", cJSON_IsNumber(step) ? step->valuedouble : 0);
		if (vals)
			cJSON_AddItemToObject(o, "state", cJSON_Duplicate(vals, true));
		cJSON_AddStringToObject(o, "thread_id", f->session);
		cJSON_AddStringToObject(o, "checkpoint_ns", "");
	} else if (!strcmp(m, "input.requested")) {
		const char *iid = tc_run_str(ev->data, "interrupt_id");
		const cJSON *payload = tc_run_get(ev->data, "payload");
		cJSON *args;
		if (cJSON_IsObject(payload)) {
			args = cJSON_Duplicate(payload, true);
		} else {
			args = cJSON_CreateObject();
			cJSON_AddItemToObject(args, "value",
					      payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
		}
		o = line(f, "tool_approval", sp);
		cJSON_AddStringToObject(o, "call_id", iid ? iid : "");
		cJSON_AddStringToObject(o, "name", approval_name(payload));
		cJSON_AddItemToObject(o, "arguments", args);
	}
	if (o)
		put_line(f, o, ev->ns);
}

/*
 * The end: the spans still open exit (err: NULL for "Ok"), then the reply
 * line. status: "completed", "interrupted" or "failed" (error given).
 */
static void reply(struct tc_run_ndjson *f, const char *status, const char *exit_err, const char *error)
{
	for (;;) { /* in the order they were entered */
		struct span *first = NULL;
		for (int i = 0; i < OPEN_SPANS; i++)
			if (f->spans[i].name && (!first || f->spans[i].k < first->k))
				first = &f->spans[i];
		if (!first)
			break;
		node_exit(f, first, exit_err);
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "session_id", f->session);
	if (f->reply_node)
		cJSON_AddStringToObject(o, "node_id", f->reply_node);
	cJSON_AddNumberToObject(o, "event_id", (double)(f->seq + 1));
	cJSON_AddStringToObject(o, "reply", f->reply ? f->reply : "");
	cJSON_AddStringToObject(o, "status", status);
	if (error)
		cJSON_AddStringToObject(o, "error", error);
	f->ended = true;
	f->fw.ended = true;
	put_line(f, o, NULL);
}

static void fail(struct tc_run_ndjson *f, const char *error)
{
	reply(f, "failed", error, error);
}

bool tc_run_ndjson_event(struct tc_run_ndjson *f, uint64_t seq, const cJSON *event)
{
	if (f->ended)
		return true;
	struct tc_run_ev ev;
	enum tc_run_step step = tc_run_follow_step(&f->fw, seq, event, &ev);
	const char *err = step == TC_RUN_END ? tc_run_str(ev.data, "error") : NULL;
	if (step == TC_RUN_CUT)
		fail(f, "the run's events ended without its end: another run started");
	else if (step == TC_RUN_EVENT)
		on_event(f, &ev);
	else if (step == TC_RUN_END && !strcmp(ev.status, "failed"))
		fail(f, err && *err ? err : "the run failed");
	else if (step == TC_RUN_END) /* completed; interrupted: the nodes still open did not finish */
		reply(f, ev.status, !strcmp(ev.status, "interrupted") ? "interrupted" : NULL, NULL);
	tc_run_ev_clear(&ev);
	return f->ended;
}

void tc_run_ndjson_finish(struct tc_run_ndjson *f, const char *error)
{
	if (!f->ended)
		fail(f, error && *error ? error : "the stream was closed before the run ended");
}

uint64_t tc_run_ndjson_event_id(const struct tc_run_ndjson *f)
{
	return f->seq;
}

struct tc_run_ndjson *tc_run_ndjson_new(const char *run_id, const char *session_id, const char *agent,
					const char *message, bool in_run, uint64_t skip_through, tc_run_emit *emit,
					void *ctx)
{
	struct tc_run_ndjson *f = tc_xcalloc(1, sizeof(*f));
	tc_run_follow_init(&f->fw, run_id, in_run);
	tc_msg_asm_init(&f->msgs, &msg_ops, f);
	f->session = tc_xstrdup(session_id ? session_id : "");
	f->agent = agent ? tc_xstrdup(agent) : NULL;
	f->message = message ? tc_xstrdup(message) : NULL;
	f->skip = skip_through;
	f->emit = emit;
	f->ctx = ctx;
	return f;
}

void tc_run_ndjson_free(struct tc_run_ndjson *f)
{
	if (!f)
		return;
	tc_run_follow_clear(&f->fw);
	for (int i = 0; i < OPEN_SPANS; i++) {
		span_free(&f->spans[i]);
		tc_slot_clear(&f->spans[i].slot);
	}
	tc_msg_asm_clear(&f->msgs);
	for (int i = 0; i < TC_MSG_OPEN; i++)
		tool_block_free(&f->blocks[i]);
	for (int i = 0; i < OPEN_TOOLS; i++) {
		free(f->tools[i].name);
		tc_slot_clear(&f->tools[i].slot);
	}
	free(f->reply);
	free(f->reply_key);
	free(f->reply_node);
	free(f->session);
	free(f->agent);
	free(f->message);
	free(f);
}

TC_RUN_FMT_OPS(ndjson, NULL);
