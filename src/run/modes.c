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

#define IDS_MAX 65536 /* message ids a set keeps (past it, new ids are not remembered) */

/* A set of message ids (open addressing, FNV-1a). */
struct idset {
	char **slots;
	size_t cap, n;
};

/* A message being streamed, as messages/partial shows it so far (by assembler entry). */
struct partial {
	char *text;   /* the text so far */
	size_t len;   /* of text */
	cJSON *calls; /* [{index, id, name, args}] its tool call chunks so far */
	bool shown;   /* its messages/metadata went out */
};

/* A run's events on their way out, as the SDK's stream modes. */
struct tc_run_modes {
	struct tc_run_follow fw;
	struct tc_msg_asm msgs; /* the messages being streamed */
	struct partial partials[TC_MSG_OPEN];
	char *thread;
	unsigned modes;
	bool subgraphs;
	cJSON *values;          /* the last root values event's data (the wait's result) */
	cJSON *error;           /* {error, message} when the run failed */
	cJSON *failure;         /* the worker's {error, message} for the failure, when it said */
	bool markers;           /* the worker gives LangGraph's own {"__interrupt__"} values and updates */
	cJSON *tools;           /* {tool_call_id: tool name}, for the tools mode */
	struct idset shown;     /* ids of messages the run showed (streamed, or in its values) */
	struct idset completed; /* ids messages/complete sent */
	bool rendered;          /* the run's worker renders its stream (its started said so) */
	cJSON *given;           /* the stream modes the stream was given (a rendered run's filter; NULL: none) */
	tc_run_emit *emit;
	void *ctx;
	uint64_t n;    /* events made so far: the last one's id */
	uint64_t skip; /* resumed: events up to this id were sent */
};

/* ==== ids and sets ============================================================================= */

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool idset_has(const struct idset *s, const char *id)
{
	if (!s->cap)
		return false;
	for (size_t i = hash(id) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->slots[i])
			return false;
		if (!strcmp(s->slots[i], id))
			return true;
	}
}

static void idset_put(struct idset *s, const char *id)
{
	if (idset_has(s, id) || s->n >= IDS_MAX)
		return;
	if ((s->n + 1) * 2 > s->cap) {
		struct idset g = { .cap = s->cap ? s->cap * 2 : 64 };
		g.slots = tc_xcalloc(g.cap, sizeof(*g.slots));
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slots[i])
				continue;
			size_t j = hash(s->slots[i]) & (g.cap - 1);
			while (g.slots[j])
				j = (j + 1) & (g.cap - 1);
			g.slots[j] = s->slots[i];
		}
		free(s->slots);
		g.n = s->n;
		*s = g;
	}
	size_t j = hash(id) & (s->cap - 1);
	while (s->slots[j])
		j = (j + 1) & (s->cap - 1);
	s->slots[j] = tc_xstrdup(id);
	s->n++;
}

static void idset_clear(struct idset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slots[i]);
	free(s->slots);
	*s = (struct idset){ 0 };
}

static void partial_clear(struct partial *p)
{
	free(p->text);
	cJSON_Delete(p->calls);
	*p = (struct partial){ 0 };
}

void tc_run_modes_free(struct tc_run_modes *f)
{
	cJSON_Delete(f->values);
	cJSON_Delete(f->error);
	cJSON_Delete(f->failure);
	cJSON_Delete(f->tools);
	cJSON_Delete(f->given);
	idset_clear(&f->shown);
	idset_clear(&f->completed);
	for (unsigned i = 0; i < TC_MSG_OPEN; i++)
		partial_clear(&f->partials[i]);
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
		{ "messages", TC_MODE_MESSAGES },       { "messages-tuple", TC_MODE_MESSAGES_TUPLE },
		{ "custom", TC_MODE_CUSTOM },           { "tasks", TC_MODE_TASKS },
		{ "checkpoints", TC_MODE_CHECKPOINTS }, { "debug", TC_MODE_DEBUG },
		{ "events", TC_MODE_EVENTS },           { "tools", TC_MODE_TOOLS },
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

char *tc_run_modes_given(const cJSON *v)
{
	cJSON *names = NULL;
	if (cJSON_IsString(v) && v->valuestring[0] == '[') {
		names = cJSON_Parse(v->valuestring);
		if (!cJSON_IsArray(names)) {
			cJSON_Delete(names);
			names = NULL;
		}
	}
	if (!names && cJSON_IsString(v) && v->valuestring[0]) {
		names = cJSON_CreateArray();
		cJSON_AddItemToArray(names, cJSON_CreateString(v->valuestring));
	}
	if (!names && cJSON_IsArray(v))
		names = cJSON_Duplicate(v, true);
	char *text = cJSON_GetArraySize(names) ? cJSON_PrintUnformatted(names) : NULL;
	cJSON_Delete(names);
	return text;
}

void tc_run_modes_set_given(struct tc_run_modes *f, const char *given)
{
	cJSON_Delete(f->given);
	f->given = given ? cJSON_Parse(given) : NULL;
	if (!cJSON_GetArraySize(f->given)) {
		cJSON_Delete(f->given);
		f->given = NULL;
	}
}

/*
 * One SSE event for the client, when it streams: "<event>" (with "|<ns>"
 * for a subgraph's), its id the next one, 1 up (0 is the stream's
 * metadata). A resumed stream makes the events it already sent again, and
 * sends only those after.
 */
static void emit(struct tc_run_modes *f, const char *event, const char *ns, const cJSON *data)
{
	uint64_t n = ++f->n;
	if (!f->emit || n <= f->skip)
		return;
	char id[24];
	size_t len;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
	char name[256];
	snprintf(name, sizeof(name), "%s%s%.200s", event, *ns ? "|" : "", ns);
	char *text = tc_sse_event(id, name, data, &len);
	f->emit(f->ctx, n, text, len);
	free(text);
}

/* ==== messages-tuple and messages ============================================================== */

static const char *chunk_type(const char *role)
{
	if (!role || !strcmp(role, "ai") || !strcmp(role, "assistant"))
		return "ai";
	if (!strcmp(role, "user"))
		return "human";
	return role;
}

/* The metadata of a message (a tuple's second half; messages/metadata's). */
static cJSON *msg_metadata(const struct tc_run_modes *f, const char *ns, const char *node)
{
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "langgraph_node", node);
	cJSON_AddStringToObject(meta, "langgraph_checkpoint_ns", ns);
	cJSON_AddStringToObject(meta, "run_id", f->fw.run_id);
	cJSON_AddStringToObject(meta, "thread_id", f->thread);
	cJSON_AddArrayToObject(meta, "tags");
	return meta;
}

/* A tuple [message, metadata]: "messages" (for a subgraph's, "messages|<ns>"); takes msg. */
static void emit_tuple(struct tc_run_modes *f, const char *ns, const char *node, cJSON *msg)
{
	cJSON *pair = cJSON_CreateArray();
	cJSON_AddItemToArray(pair, msg);
	cJSON_AddItemToArray(pair, msg_metadata(f, ns, node));
	emit(f, "messages", ns, pair);
	cJSON_Delete(pair);
}

/* A message chunk of a tuple: text; tool: one tool call chunk (taken). */
static void emit_chunk(struct tc_run_modes *f, const char *ns, const struct tc_msg *m, const char *text, cJSON *tool)
{
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
	emit_tuple(f, ns, m->node ? m->node : "", msg);
}

static cJSON *str_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* A block's args as text: a string as it is, anything else as JSON, none as "". */
static char *args_text(const cJSON *v)
{
	if (cJSON_IsString(v))
		return tc_xstrdup(v->valuestring);
	return v && !cJSON_IsNull(v) ? cJSON_PrintUnformatted(v) : tc_xstrdup("");
}

/* A tool call chunk {type, id, name, args, index}; id or name NULL: null. */
static cJSON *tool_chunk(const char *id, const char *name, const char *args, int index)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "type", "tool_call_chunk");
	cJSON_AddItemToObject(t, "id", str_or_null(id));
	cJSON_AddItemToObject(t, "name", str_or_null(name));
	cJSON_AddStringToObject(t, "args", args);
	cJSON_AddNumberToObject(t, "index", index);
	return t;
}

/* What a message event adds to a tool call: its args text (delta or block), else NULL. */
static const char *tool_args(const struct tc_msg_part *p)
{
	if (p->type && !strcmp(p->type, "tool-call-delta"))
		return tc_run_str(p->content, "args");
	return p->block == TC_BLOCK_TOOL ? p->text : NULL;
}

/* The tool call chunks of messages/partial: index's gets args appended (id, name set when given). */
static void partial_tool(struct partial *pa, int index, const char *id, const char *name, const char *args)
{
	cJSON *it, *c = NULL;
	if (!pa->calls)
		pa->calls = cJSON_CreateArray();
	cJSON_ArrayForEach(it, pa->calls)
	{
		const cJSON *ix = cJSON_GetObjectItemCaseSensitive(it, "index");
		if (cJSON_IsNumber(ix) && (int)ix->valuedouble == index)
			c = it;
	}
	if (!c) {
		if (cJSON_GetArraySize(pa->calls) >= 64)
			return;
		c = tool_chunk(NULL, NULL, "", index);
		cJSON_AddItemToArray(pa->calls, c);
	}
	if (id)
		cJSON_ReplaceItemInObjectCaseSensitive(c, "id", cJSON_CreateString(id));
	if (name)
		cJSON_ReplaceItemInObjectCaseSensitive(c, "name", cJSON_CreateString(name));
	if (args && *args) {
		const char *had = tc_run_str(c, "args");
		size_t n = strlen(had ? had : "") + strlen(args) + 1;
		char *all = tc_xmalloc(n);
		snprintf(all, n, "%s%s", had ? had : "", args);
		cJSON_ReplaceItemInObjectCaseSensitive(c, "args", cJSON_CreateString(all));
		free(all);
	}
}

/* The message so far, as messages/partial shows it: an AI message chunk, its calls parsed. */
static cJSON *partial_message(const struct partial *pa, const struct tc_msg *m)
{
	cJSON *msg = cJSON_CreateObject(), *it;
	cJSON_AddStringToObject(msg, "content", pa->text ? pa->text : "");
	cJSON_AddObjectToObject(msg, "additional_kwargs");
	cJSON_AddObjectToObject(msg, "response_metadata");
	cJSON_AddItemToObject(msg, "tool_call_chunks",
			      pa->calls ? cJSON_Duplicate(pa->calls, true) : cJSON_CreateArray());
	cJSON *calls = cJSON_AddArrayToObject(msg, "tool_calls");
	cJSON_ArrayForEach(it, pa->calls)
	{
		const char *args = tc_run_str(it, "args");
		cJSON *parsed = args && *args ? cJSON_Parse(args) : NULL;
		cJSON *call = cJSON_CreateObject();
		cJSON_AddItemToObject(call, "name",
				      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "name"), true));
		cJSON_AddItemToObject(call, "args", cJSON_IsObject(parsed) ? parsed : cJSON_CreateObject());
		if (!cJSON_IsObject(parsed))
			cJSON_Delete(parsed);
		cJSON_AddItemToObject(call, "id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "id"), true));
		cJSON_AddStringToObject(call, "type", "tool_call");
		cJSON_AddItemToArray(calls, call);
	}
	cJSON_AddStringToObject(msg, "id", m->id);
	cJSON_AddArrayToObject(msg, "invalid_tool_calls");
	cJSON_AddStringToObject(msg, "type", "ai");
	return msg;
}

/* messages mode: an AI message's metadata once, then the message so far at each of its chunks. */
static void partial_event(struct tc_run_modes *f, struct tc_msg *m, const struct tc_msg_part *p,
			  const struct tc_run_ev *e)
{
	struct partial *pa = &f->partials[m->no];
	int index = p->index < 0 ? 0 : p->index;
	bool finish = p->kind == TC_MSG_BLOCK_FINISH, changed = false;
	if (!m->ai || !m->id)
		return;
	if (p->kind == TC_MSG_START) {
		partial_clear(pa);
	} else if (p->block == TC_BLOCK_TEXT && p->text && *p->text && (!finish || !p->had)) {
		/* (the text of a block given whole only at its finish counts once) */
		tc_run_append(&pa->text, &pa->len, p->text, SIZE_MAX);
		changed = true;
	} else if (p->kind != TC_MSG_FINISH && p->kind != TC_MSG_ERROR && (!finish || !p->had)) {
		const char *args = tool_args(p);
		if (p->block == TC_BLOCK_TOOL || args) {
			const char *id = p->block == TC_BLOCK_TOOL ? tc_run_str(p->content, "id") : NULL;
			const char *name = p->block == TC_BLOCK_TOOL ? tc_run_str(p->content, "name") : NULL;
			const cJSON *a =
				p->block == TC_BLOCK_TOOL ? cJSON_GetObjectItemCaseSensitive(p->content, "args") : NULL;
			char *text = args ? tc_xstrdup(args) : args_text(a);
			partial_tool(pa, index, id, name, text);
			changed = *text || p->kind == TC_MSG_BLOCK_DELTA || finish;
			free(text);
		}
	}
	if (!changed)
		return;
	if (!pa->shown) {
		pa->shown = true;
		cJSON *meta = cJSON_CreateObject(), *one = cJSON_AddObjectToObject(meta, m->id);
		cJSON_AddItemToObject(one, "metadata", msg_metadata(f, e->ns, m->node ? m->node : ""));
		emit(f, "messages/metadata", "", meta);
		cJSON_Delete(meta);
	}
	cJSON *list = cJSON_CreateArray();
	cJSON_AddItemToArray(list, partial_message(pa, m));
	emit(f, "messages/partial", "", list);
	cJSON_Delete(list);
}

/*
 * One messages event, assembled (assemble.h). messages-tuple: text and tool
 * call chunks go out as they come; a block's finish only when nothing of it
 * went out before (a block given whole). messages: the message so far.
 */
static void msg_part(void *ctx, struct tc_msg *m, const struct tc_msg_part *p, const struct tc_run_ev *e)
{
	struct tc_run_modes *f = ctx;
	bool finish = p->kind == TC_MSG_BLOCK_FINISH, shown = !*e->ns || f->subgraphs;
	int index = p->index < 0 ? 0 : p->index;

	/* (a subgraph's message not streamed is not shown: the node that ran the subgraph returns it) */
	if (p->kind == TC_MSG_START && m->id && shown)
		idset_put(&f->shown, m->id);
	if (f->modes & TC_MODE_MESSAGES)
		partial_event(f, m, p, e);
	if (!(f->modes & TC_MODE_MESSAGES_TUPLE) || !shown)
		return;
	switch (p->kind) {
	case TC_MSG_BLOCK_START:
	case TC_MSG_BLOCK_FINISH:
		if (p->block == TC_BLOCK_TEXT && p->text && *p->text && (!finish || !p->had)) {
			emit_chunk(f, e->ns, m, p->text, NULL);
		} else if (p->block == TC_BLOCK_TOOL && (!finish || !p->had)) {
			char *args = args_text(cJSON_GetObjectItemCaseSensitive(p->content, "args"));
			emit_chunk(
				f, e->ns, m, NULL,
				tool_chunk(tc_run_str(p->content, "id"), tc_run_str(p->content, "name"), args, index));
			free(args);
		}
		break;
	case TC_MSG_BLOCK_DELTA:
		if (p->block == TC_BLOCK_TEXT && p->text && *p->text) {
			emit_chunk(f, e->ns, m, p->text, NULL);
		} else if (p->block == TC_BLOCK_TOOL && p->type && !strcmp(p->type, "tool_call_chunk")) {
			char *args = args_text(cJSON_GetObjectItemCaseSensitive(p->content, "args"));
			emit_chunk(
				f, e->ns, m, NULL,
				tool_chunk(tc_run_str(p->content, "id"), tc_run_str(p->content, "name"), args, index));
			free(args);
		} else if (tool_args(p)) {
			emit_chunk(f, e->ns, m, NULL, tool_chunk(NULL, NULL, tool_args(p), index));
		}
		break;
	default:
		break;
	}
}

static void msg_drop(void *ctx, struct tc_msg *m, bool finished)
{
	struct tc_run_modes *f = ctx;
	partial_clear(&f->partials[m->no]);
}

static const struct tc_msg_ops msg_ops = { .part = msg_part, .drop = msg_drop };

/* Whether v is a message as state holds it ({type, content, …}). */
static bool is_message(const cJSON *v)
{
	return cJSON_IsObject(v) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "type")) &&
	       cJSON_GetObjectItemCaseSensitive(v, "content");
}

/* The ids of the messages of a values event: shown (a node returning them shows nothing new). */
static void note_messages(struct tc_run_modes *f, const cJSON *values)
{
	const cJSON *it, *msgs = cJSON_GetObjectItemCaseSensitive(values, "messages");
	if (!cJSON_IsArray(msgs))
		return;
	cJSON_ArrayForEach(it, msgs)
	{
		const char *id = tc_run_str(it, "id");
		if (id)
			idset_put(&f->shown, id);
	}
}

/*
 * messages-tuple: one message a node returned, unless shown already. A
 * LangGraph node's messages have ids by the time its update is read (a new
 * one is given its id as the node ends); one without is taken only when it
 * is a tool's result, with an id its tool call makes unique.
 */
static void returned_message(struct tc_run_modes *f, const char *ns, const char *node, const cJSON *m)
{
	const char *id = tc_run_str(m, "id"), *type = tc_run_str(m, "type"), *call = tc_run_str(m, "tool_call_id");
	char made[192];
	if (!is_message(m))
		return;
	if (!id) {
		if (!type || strcmp(type, "tool") || !call)
			return;
		snprintf(made, sizeof(made), "run-%.64s-tool-%.100s", f->fw.run_id, call);
		id = made;
	}
	if (idset_has(&f->shown, id))
		return;
	idset_put(&f->shown, id);
	cJSON *msg = cJSON_Duplicate(m, true);
	if (id == made)
		cJSON_AddStringToObject(msg, "id", made);
	emit_tuple(f, ns, node, msg);
}

/* messages-tuple: the messages a node's update holds that were not streamed nor shown before. */
static void returned_messages(struct tc_run_modes *f, const char *ns, const char *node, const cJSON *vals)
{
	const cJSON *v, *it;
	if (!cJSON_IsObject(vals))
		return;
	cJSON_ArrayForEach(v, vals)
	{
		if (cJSON_IsArray(v))
			cJSON_ArrayForEach(it, v) returned_message(f, ns, node, it);
		else
			returned_message(f, ns, node, v);
	}
}

/* messages: the root values' messages not sent complete yet, together. */
static void complete_messages(struct tc_run_modes *f, const cJSON *values)
{
	const cJSON *it, *msgs = cJSON_GetObjectItemCaseSensitive(values, "messages");
	if (!cJSON_IsArray(msgs))
		return;
	cJSON *list = cJSON_CreateArray();
	cJSON_ArrayForEach(it, msgs)
	{
		const char *id = tc_run_str(it, "id");
		if (!id || idset_has(&f->completed, id))
			continue;
		idset_put(&f->completed, id);
		cJSON_AddItemToArray(list, cJSON_Duplicate(it, true));
	}
	if (cJSON_GetArraySize(list))
		emit(f, "messages/complete", "", list);
	cJSON_Delete(list);
}

/* ==== the other modes ========================================================================== */

/* A tools event as LangGraph's tools mode has it: {event: "on_tool_…", toolCallId, name, …}. */
static void tool_event(struct tc_run_modes *f, const char *ns, const cJSON *data)
{
	const char *te = tc_run_str(data, "event"), *call = tc_run_str(data, "tool_call_id");
	static const char *const names[][2] = { { "tool-started", "on_tool_start" },
						{ "tool-output-delta", "on_tool_event" },
						{ "tool-finished", "on_tool_end" },
						{ "tool-error", "on_tool_error" } };
	const char *raw = NULL;
	for (size_t i = 0; te && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(te, names[i][0]))
			raw = names[i][1];
	if (!raw)
		return;
	const char *name = tc_run_str(data, "tool_name");
	if (!f->tools)
		f->tools = cJSON_CreateObject();
	if (name && call && !cJSON_GetObjectItemCaseSensitive(f->tools, call) && cJSON_GetArraySize(f->tools) < 1024)
		cJSON_AddStringToObject(f->tools, call, name);
	if (!name && call)
		name = tc_run_str(f->tools, call);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", raw);
	cJSON_AddStringToObject(o, "toolCallId", call ? call : "");
	cJSON_AddStringToObject(o, "name", name ? name : "unknown");
	if (!strcmp(raw, "on_tool_start"))
		cJSON_AddItemToObject(o, "input", cJSON_Duplicate(tc_run_get(data, "input"), true));
	else if (!strcmp(raw, "on_tool_event"))
		cJSON_AddItemToObject(o, "data", cJSON_Duplicate(tc_run_get(data, "delta"), true));
	else if (!strcmp(raw, "on_tool_end"))
		cJSON_AddItemToObject(o, "output", cJSON_Duplicate(tc_run_get(data, "output"), true));
	else
		cJSON_AddItemToObject(o, "error", cJSON_Duplicate(tc_run_get(data, "message"), true));
	emit(f, "tools", ns, o);
	cJSON_Delete(o);
}

/*
 * A custom event's chunk as the graph wrote it: LangGraph keeps a chunk
 * with a "name" as the event's data, and wraps any other as {payload}.
 */
static const cJSON *custom_chunk(const cJSON *data)
{
	if (cJSON_IsObject(data) && !cJSON_GetObjectItemCaseSensitive(data, "name"))
		return cJSON_GetObjectItemCaseSensitive(data, "payload");
	return data;
}

/* A root values event: the wait's result; with messages, the messages it completes. */
static void root_values(struct tc_run_modes *f, const cJSON *data)
{
	cJSON_Delete(f->values);
	f->values = cJSON_Duplicate(data, true);
	if ((f->modes & TC_MODE_MESSAGES) && !f->subgraphs)
		complete_messages(f, data);
}

/*
 * An interrupt from a producer that says only input.requested: shown as
 * LangGraph shows one, {"__interrupt__": [{value, id}]} in updates, then values.
 */
static void interrupt(struct tc_run_modes *f, const cJSON *data)
{
	if (f->markers)
		return; /* the worker gave LangGraph's own, in place */
	cJSON *u = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(u, "__interrupt__");
	cJSON *i = cJSON_CreateObject();
	const cJSON *payload = cJSON_GetObjectItemCaseSensitive(data, "payload");
	cJSON_AddItemToObject(i, "value", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
	const char *iid = tc_run_str(data, "interrupt_id");
	if (iid)
		cJSON_AddStringToObject(i, "id", iid);
	cJSON_AddItemToArray(list, i);
	if (f->modes & TC_MODE_UPDATES)
		emit(f, "updates", "", u);
	if (f->modes & TC_MODE_VALUES)
		emit(f, "values", "", u);
	root_values(f, u);
	cJSON_Delete(u);
}

/* A debug chunk (the worker's, for debug and checkpoints): debug as it is; checkpoints {values, metadata, next}. */
static void debug_chunk(struct tc_run_modes *f, const char *ns, const cJSON *data)
{
	if (f->modes & TC_MODE_DEBUG)
		emit(f, "debug", ns, data);
	const char *type = tc_run_str(data, "type");
	if (!(f->modes & TC_MODE_CHECKPOINTS) || !type || strcmp(type, "checkpoint"))
		return;
	const cJSON *payload = cJSON_GetObjectItemCaseSensitive(data, "payload");
	cJSON *c = cJSON_CreateObject();
	static const char *const keep[] = { "values", "metadata", "next" };
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(payload, keep[i]);
		if (v)
			cJSON_AddItemToObject(c, keep[i], cJSON_Duplicate(v, true));
	}
	emit(f, "checkpoints", ns, c);
	cJSON_Delete(c);
}

/*
 * What the worker adds for the stream modes (its side events, protocol/README.md
 * "Run streams"): {mode, data}, mode values or updates (LangGraph's own
 * {"__interrupt__": …}), error (the failure's class), debug, events.
 */
static void side_event(struct tc_run_modes *f, const struct tc_run_ev *e, bool shown)
{
	const char *mode = tc_run_str(e->data, "mode");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(e->data, "data");
	bool root = !*e->ns;
	if (!mode || !data)
		return;
	if (!strcmp(mode, "values")) {
		f->markers = true;
		if (shown && (f->modes & TC_MODE_VALUES))
			emit(f, "values", e->ns, data);
		if (root)
			root_values(f, data);
	} else if (!strcmp(mode, "updates")) {
		f->markers = true;
		if (shown && (f->modes & TC_MODE_UPDATES))
			emit(f, "updates", e->ns, data);
	} else if (!strcmp(mode, "error") && cJSON_IsObject(data)) {
		cJSON_Delete(f->failure);
		f->failure = cJSON_Duplicate(data, true);
	} else if (!strcmp(mode, "debug")) {
		if (shown)
			debug_chunk(f, e->ns, data);
	} else if (!strcmp(mode, "events")) {
		if (f->modes & TC_MODE_EVENTS)
			emit(f, "events", "", data);
	}
}

/* The run's end: a failed run says why, with the class of its exception when the worker said it. */
static void run_end(struct tc_run_modes *f, const struct tc_run_ev *e)
{
	if (strcmp(e->status, "failed"))
		return;
	const char *why = tc_run_str(e->data, "error");
	const char *cls = tc_run_str(f->failure, "error"), *msg = tc_run_str(f->failure, "message");
	f->error = cJSON_CreateObject();
	if (cls) {
		cJSON_AddStringToObject(f->error, "error", cls);
		cJSON_AddStringToObject(f->error, "message", msg ? msg : why ? why : "");
	} else {
		cJSON_AddStringToObject(f->error, "error",
					why && !strcmp(why, "cancelled") ? "CancelledError" : "Error");
		cJSON_AddStringToObject(f->error, "message", why ? why : "the run failed");
	}
	emit(f, "error", "", f->error);
}

/* One of the run's events (not its end). */
static void run_event(struct tc_run_modes *f, const struct tc_run_ev *e)
{
	const char *method = e->method, *ns = e->ns;
	const cJSON *data = e->data;
	bool root = !*ns, shown = root || f->subgraphs;
	if (!strcmp(method, "values")) {
		if (shown)
			note_messages(f, data);
		if (shown && (f->modes & TC_MODE_VALUES))
			emit(f, "values", ns, data);
		if (root)
			root_values(f, data);
	} else if (!strcmp(method, "updates")) {
		const char *by = tc_run_str(data, "node");
		const cJSON *vals = cJSON_GetObjectItemCaseSensitive(data, "values");
		if (!by && *e->node)
			by = e->node;
		if (shown && (f->modes & TC_MODE_MESSAGES_TUPLE))
			returned_messages(f, ns, by ? by : "", vals);
		if (shown && (f->modes & TC_MODE_UPDATES)) {
			cJSON *u = cJSON_CreateObject();
			if (by)
				cJSON_AddItemToObject(u, by, cJSON_Duplicate(vals, true));
			emit(f, "updates", ns, by ? u : vals);
			cJSON_Delete(u);
		}
	} else if (!strcmp(method, "messages")) {
		if (f->modes & (TC_MODE_MESSAGES | TC_MODE_MESSAGES_TUPLE))
			tc_msg_asm_event(&f->msgs, e);
	} else if (!strcmp(method, "tools")) {
		if (shown && (f->modes & TC_MODE_TOOLS))
			tool_event(f, ns, data);
	} else if (!strcmp(method, "custom")) {
		if (shown && (f->modes & TC_MODE_CUSTOM))
			emit(f, "custom", ns, custom_chunk(data));
	} else if (!strcmp(method, "tasks")) {
		if (shown && (f->modes & TC_MODE_TASKS))
			emit(f, "tasks", ns, data);
	} else if (!strcmp(method, "checkpoints")) {
		/* LangGraph streams its checkpoint envelopes with subgraphs and values (or messages), unless checkpoints was asked. */
		if (shown && f->subgraphs && (f->modes & (TC_MODE_VALUES | TC_MODE_MESSAGES)) &&
		    !(f->modes & TC_MODE_CHECKPOINTS))
			emit(f, "checkpoints", ns, data);
	} else if (!strcmp(method, "input.requested")) {
		interrupt(f, data);
	} else if (!strcmp(method, TC_RUN_MODES_SIDE)) {
		side_event(f, e, shown);
	}
}

/* ==== a run its worker renders =================================================================== */

/* Whether a stream gets a rendered event: as the Python server's run streams and joins decide (modes.h). */
static bool rendered_passes(const struct tc_run_modes *f, const char *name)
{
	const char *bar = strchr(name, '|');
	bool messages = false;
	const cJSON *it;
	if (!f->given)
		return true;
	cJSON_ArrayForEach(it, f->given)
	{
		if (!cJSON_IsString(it))
			continue;
		const char *m = it->valuestring;
		if (!strcmp(m, name) || (bar && strlen(m) == (size_t)(bar - name) && !memcmp(m, name, strlen(m))))
			return true;
		if (!strcmp(m, "messages") || !strcmp(m, "messages-tuple"))
			messages = true;
	}
	return messages && !strncmp(name, "messages", 8);
}

/*
 * The JSON text of a rendered event's data: as it was stored (the worker's
 * bytes, numbers as it wrote them), unless that text is not at hand or would
 * not fit on one data line; then printed from the parse.
 */
static char *rendered_text(const struct tc_run_ev *e, const cJSON *data, size_t *len)
{
	static const char *const path[] = { "params", "data", "data", "data", NULL };
	const char *at;
	size_t n;
	if (e->text && tc_run_json_at(e->text, e->text_len, path, &at, &n)) {
		size_t i = 0;
		while (i < n && at[i] != '\n' && at[i] != '\r' && at[i])
			i++;
		if (i == n) {
			*len = n;
			return tc_xstrndup(at, n);
		}
	}
	char *text = cJSON_PrintUnformatted(data);
	*len = strlen(text);
	return text;
}

/*
 * One event of a rendered run: a side event {mode: "sse", data: {event,
 * data}} is a unit of the stream (when the stream takes it), and "values"
 * and "error" make the wait's result; anything else is nothing.
 */
static void rendered_event(struct tc_run_modes *f, const struct tc_run_ev *e)
{
	if (strcmp(e->method, TC_RUN_MODES_SIDE))
		return;
	const char *mode = tc_run_str(e->data, "mode");
	const cJSON *sse = cJSON_GetObjectItemCaseSensitive(e->data, "data");
	const char *name = tc_run_str(sse, "event");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(sse, "data");
	if (!mode || strcmp(mode, "sse") || !name || !*name || strpbrk(name, "\r\n") || !data)
		return; /* (a name with a line break would end the SSE field) */
	bool out = rendered_passes(f, name), values = !strcmp(name, "values"), error = !strcmp(name, "error");
	uint64_t n = out ? ++f->n : 0;
	bool send = out && f->emit && n > f->skip;
	if (!send && !values && !error)
		return;
	size_t len;
	char *text = rendered_text(e, data, &len);
	if (values || error) {
		cJSON **keep = values ? &f->values : &f->error;
		cJSON_Delete(*keep);
		*keep = cJSON_CreateRaw(text);
	}
	if (send) {
		char id[24];
		size_t unit_len;
		snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
		char *unit = tc_sse_unit(id, name, text, len, &unit_len);
		f->emit(f->ctx, n, unit, unit_len);
		free(unit);
	}
	free(text);
}

/* One event of the thread. */
bool tc_run_modes_event(struct tc_run_modes *f, uint64_t seq, const cJSON *event, const char *json, size_t len)
{
	struct tc_run_ev e;
	enum tc_run_step step = tc_run_follow_step(&f->fw, seq, event, &e);
	e.text = json;
	e.text_len = len;
	if (step == TC_RUN_EVENT && e.status && !strcmp(e.status, "started") && !*e.ns)
		f->rendered = cJSON_IsTrue(tc_run_get(e.data, "rendered"));
	if (step == TC_RUN_END && !f->rendered)
		run_end(f, &e);
	else if (step == TC_RUN_EVENT && f->rendered)
		rendered_event(f, &e);
	else if (step == TC_RUN_EVENT)
		run_event(f, &e);
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
	f->skip = resume_id;
	f->emit = out;
	f->ctx = ctx;
	return f;
}

/* (the ops by hand: the event takes its text) */
static bool ops_event(void *f, uint64_t seq, const cJSON *event, const char *json, size_t len)
{
	return tc_run_modes_event(f, seq, event, json, len);
}

static void ops_assume_in_run(void *f)
{
	((struct tc_run_modes *)f)->fw.in_run = true;
}

static void ops_free(void *f)
{
	tc_run_modes_free(f);
}

const struct tc_run_fmt_ops tc_run_modes_ops = { ops_event, ops_assume_in_run, NULL, ops_free };

bool tc_run_modes_ended(const struct tc_run_modes *f)
{
	return f->fw.ended;
}

bool tc_run_modes_rendered(const struct tc_run_modes *f)
{
	return f->rendered;
}

cJSON *tc_run_modes_result(const struct tc_run_modes *f)
{
	if (f->error) {
		cJSON *body = cJSON_CreateObject();
		cJSON_AddItemToObject(body, "__error__", cJSON_Duplicate(f->error, true));
		return body;
	}
	if (f->rendered && f->values)
		return cJSON_Duplicate(f->values, true);
	return cJSON_IsObject(f->values) ? cJSON_Duplicate(f->values, true) : cJSON_CreateObject();
}
