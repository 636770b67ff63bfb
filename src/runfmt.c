/*
 * runfmt.c — a run's protocol events as the Agent Protocol's run stream (runfmt.h).
 */
#include "runfmt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spell.h"
#include "util.h"

#define OPEN_MESSAGES 32    /* messages assembled at once (one per namespace) */
#define SUBGRAPHS 256       /* subgraph namespaces a run's stream knows */


/* A message being streamed in one namespace. */
struct open_msg {
	char *ns;        /* joined with "|"; NULL: free slot */
	char *id, *role, *node, *tool_call_id;
	bool any_text;   /* text went out in a chunk */
	bool any_tool;   /* a tool call chunk went out */
	uint64_t used;
};

/* A run's events on their way out, as the SDK's stream modes. */
struct tc_runfmt {
	char *run_id, *thread;
	unsigned modes;
	bool subgraphs;
	bool in_run;       /* between the run's root "started" and its end */
	bool ended;
	cJSON *values;     /* the latest root values */
	cJSON *interrupts; /* [{value, id}] of the run */
	cJSON *error;      /* {error, message} when the run failed */
	tc_runfmt_emit *emit;
	void *ctx;
	uint64_t cur_seq;  /* the event being formatted */
	unsigned cur_k;    /* events it made so far */
	uint64_t skip_seq; /* resumed: that event's first skip_k + 1 outputs were sent already */
	unsigned skip_k;
	struct open_msg msgs[OPEN_MESSAGES];
	uint64_t clock;
	char *subgraphs_seen[SUBGRAPHS]; /* joined namespaces with lifecycle events: real subgraphs */
	size_t nsubgraphs;
};

static void msg_clear(struct open_msg *m)
{
	free(m->ns);
	free(m->id);
	free(m->role);
	free(m->node);
	free(m->tool_call_id);
	*m = (struct open_msg){ 0 };
}

void tc_runfmt_free(struct tc_runfmt *t)
{
	cJSON_Delete(t->values);
	cJSON_Delete(t->interrupts);
	cJSON_Delete(t->error);
	for (int i = 0; i < OPEN_MESSAGES; i++) {
		msg_clear(&t->msgs[i]);
	}
	for (size_t i = 0; i < t->nsubgraphs; i++)
		free(t->subgraphs_seen[i]);
	free(t->run_id);
	free(t->thread);
	free(t);
}

static unsigned mode_bit(const char *m)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{ "values", TC_MODE_VALUES }, { "updates", TC_MODE_UPDATES }, { "messages", TC_MODE_MESSAGES },
		{ "messages-tuple", TC_MODE_MESSAGES }, { "custom", TC_MODE_CUSTOM }, { "tasks", TC_MODE_TASKS },
		{ "checkpoints", TC_MODE_CHECKPOINTS }, { "debug", TC_MODE_DEBUG },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i].name, m))
			return names[i].bit;
	return 0;
}

/* stream_mode as a string or an array of them; none: values. */
unsigned tc_runfmt_modes(const cJSON *v)
{
	unsigned bits = 0;
	const cJSON *it;
	if (cJSON_IsString(v))
		bits = mode_bit(v->valuestring);
	if (cJSON_IsArray(v))
		cJSON_ArrayForEach(it, v)
			if (cJSON_IsString(it))
				bits |= mode_bit(it->valuestring);
	return v && !cJSON_IsNull(v) ? bits : TC_MODE_VALUES;
}

/* A string member by its protocol name, in either spelling. */
static const char *str_field(const cJSON *o, const char *name)
{
	const cJSON *v = tc_spell_get(o, name, TC_SPELL_021);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "a|b" from ["a", "b"] (caller frees). */
static char *ns_join(const cJSON *ns)
{
	size_t n = 1;
	const cJSON *it;
	cJSON_ArrayForEach(it, ns)
		if (cJSON_IsString(it))
			n += strlen(it->valuestring) + 1;
	char *s = tc_xmalloc(n), *p = s;
	*p = '\0';
	cJSON_ArrayForEach(it, ns) {
		if (!cJSON_IsString(it))
			continue;
		if (p != s)
			*p++ = '|';
		size_t l = strlen(it->valuestring);
		memcpy(p, it->valuestring, l);
		p += l;
		*p = '\0';
	}
	return s;
}

static bool is_subgraph(const struct tc_runfmt *f, const char *ns)
{
	for (size_t i = 0; i < f->nsubgraphs; i++)
		if (!strcmp(f->subgraphs_seen[i], ns))
			return true;
	return false;
}

/*
 * A namespace as the SDK's stream modes name it: only real subgraphs (those
 * with lifecycle events) count; the node task an event came from within one
 * ("model:<task>") is dropped, and *node is its name when there was one.
 */
static char *graph_ns(const struct tc_runfmt *f, char *joined, char node[128])
{
	node[0] = '\0';
	for (;;) {
		if (!*joined || is_subgraph(f, joined))
			return joined;
		char *bar = strrchr(joined, '|');
		char *seg = bar ? bar + 1 : joined;
		if (!node[0])
			snprintf(node, 128, "%.*s", (int)strcspn(seg, ":"), seg);
		if (bar)
			*bar = '\0';
		else
			*joined = '\0';
	}
}

char *tc_runfmt_sse(const char *id, const char *mode, const char *ns, const cJSON *data, size_t *len)
{
	char *json = data ? cJSON_PrintUnformatted(data) : tc_xstrdup("null");
	size_t cap = strlen(json) + strlen(mode) + (ns ? strlen(ns) : 0) + (id ? strlen(id) : 0) + 40;
	char *buf = tc_xmalloc(cap);
	int n = snprintf(buf, cap, "%s%s%sevent: %s%s%s\ndata: %s\n\n", id ? "id: " : "", id ? id : "",
			 id ? "\n" : "", mode, ns && *ns ? "|" : "", ns && *ns ? ns : "", json);
	free(json);
	*len = (size_t)n;
	return buf;
}

/*
 * One SSE event for the client, when it streams. Its id is the protocol
 * event's seq times TC_RUNFMT_IDS plus its place among the events that one
 * made: ids increase, one per event, and say where to resume.
 */
static void emit(struct tc_runfmt *f, const char *mode, const char *ns, const cJSON *data)
{
	unsigned k = f->cur_k < TC_RUNFMT_IDS - 1 ? f->cur_k++ : TC_RUNFMT_IDS - 1;
	if (!f->emit || f->cur_seq < f->skip_seq || (f->cur_seq == f->skip_seq && k <= f->skip_k))
		return;
	char id[32];
	size_t len;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)(f->cur_seq * TC_RUNFMT_IDS + k));
	char *text = tc_runfmt_sse(id, mode, ns, data, &len);
	f->emit(f->ctx, text, len);
	free(text);
}

static struct open_msg *msg_slot(struct tc_runfmt *t, const char *ns, bool create)
{
	struct open_msg *free_slot = NULL, *oldest = &t->msgs[0];
	for (int i = 0; i < OPEN_MESSAGES; i++) {
		struct open_msg *m = &t->msgs[i];
		if (m->ns && !strcmp(m->ns, ns)) {
			m->used = ++t->clock;
			return m;
		}
		if (!m->ns && !free_slot)
			free_slot = m;
		if (m->used < oldest->used)
			oldest = m;
	}
	if (!create)
		return NULL;
	struct open_msg *m = free_slot ? free_slot : oldest;
	msg_clear(m);
	*m = (struct open_msg){ .ns = tc_xstrdup(ns), .used = ++t->clock };
	return m;
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
static cJSON *tuple_metadata(const struct tc_runfmt *f, const char *ns, const char *node)
{
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "langgraph_node", node);
	cJSON_AddStringToObject(meta, "langgraph_checkpoint_ns", ns);
	cJSON_AddStringToObject(meta, "run_id", f->run_id);
	cJSON_AddStringToObject(meta, "thread_id", f->thread);
	cJSON_AddArrayToObject(meta, "tags");
	return meta;
}

/* A messages-tuple chunk: [message chunk, metadata]. content: text; tool: one tool call chunk. */
static void emit_chunk(struct tc_runfmt *f, const char *ns, struct open_msg *m,
		       const char *text, cJSON *tool)
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

static void tr_messages(struct tc_runfmt *f, const char *ns, const char *node_hint, const cJSON *params,
			const cJSON *data)
{
	struct tc_runfmt *t = f;
	const char *ev = str_field(data, "event");
	if (!ev)
		return;
	if (!strcmp(ev, "message-start")) {
		struct open_msg *m = msg_slot(t, ns, true);
		const char *s;
		/* A new message in a namespace replaces the one that did not finish. */
		char *keep = m->ns;
		m->ns = NULL;
		msg_clear(m);
		m->ns = keep;
		m->used = ++t->clock;
		m->id = (s = str_field(data, "id")) ? tc_xstrdup(s) : NULL;
		m->role = (s = str_field(data, "role")) ? tc_xstrdup(s) : NULL;
		s = str_field(params, "node");
		m->node = s ? tc_xstrdup(s) : *node_hint ? tc_xstrdup(node_hint) : NULL;
		m->tool_call_id = (s = str_field(data, "tool_call_id")) ? tc_xstrdup(s) : NULL;
		return;
	}
	struct open_msg *m = msg_slot(t, ns, false);
	if (!m) {
		m = msg_slot(t, ns, true); /* resumed mid-message: what started it is not known */
		const char *s = str_field(params, "node");
		m->node = s ? tc_xstrdup(s) : *node_hint ? tc_xstrdup(node_hint) : NULL;
	}
	const cJSON *idx = cJSON_GetObjectItemCaseSensitive(data, "index");
	int index = cJSON_IsNumber(idx) ? idx->valueint : 0;
	if (!strcmp(ev, "content-block-start") || !strcmp(ev, "content-block-finish")) {
		bool finish = ev[14] == 'f';
		const cJSON *block = cJSON_GetObjectItemCaseSensitive(data, "content");
		const char *type = str_field(block, "type");
		if (!type)
			return;
		if (!strcmp(type, "text")) {
			const char *text = str_field(block, "text");
			if (text && *text && (!finish || !m->any_text)) {
				m->any_text = true;
				emit_chunk(f, ns, m, text, NULL);
			}
		} else if (!strcmp(type, "tool_call_chunk") || (!strcmp(type, "tool_call") && (!finish || !m->any_tool))) {
			if (finish && m->any_tool)
				return;
			m->any_tool = true;
			emit_chunk(f, ns, m, NULL, tool_chunk(block, index));
		}
	} else if (!strcmp(ev, "content-block-delta")) {
		const cJSON *delta = cJSON_GetObjectItemCaseSensitive(data, "delta");
		const char *type = str_field(delta, "type");
		if (!type)
			return;
		if (!strcmp(type, "text-delta")) {
			const char *text = str_field(delta, "text");
			if (text && *text) {
				m->any_text = true;
				emit_chunk(f, ns, m, text, NULL);
			}
		} else if (!strcmp(type, "block-delta")) {
			const cJSON *fields = cJSON_GetObjectItemCaseSensitive(delta, "fields");
			const char *ft = str_field(fields, "type");
			if (ft && !strcmp(ft, "tool_call_chunk")) {
				m->any_tool = true;
				emit_chunk(f, ns, m, NULL, tool_chunk(fields, index));
			}
		}
	} else if (!strcmp(ev, "message-finish")) {
		msg_clear(m);
	}
}

/* A tool-finished event as the [ToolMessage, metadata] pair LangGraph's messages mode has. */
static void emit_tool_message(struct tc_runfmt *f, const char *ns, const char *node, const cJSON *data)
{
	const cJSON *out = cJSON_GetObjectItemCaseSensitive(data, "output");
	const char *call = str_field(data, "tool_call_id");
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
		snprintf(id, sizeof(id), "tool-%.128s", call ? call : f->run_id);
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
static cJSON *values_with_interrupts(struct tc_runfmt *t)
{
	cJSON *v = t->values && cJSON_IsObject(t->values) ? cJSON_Duplicate(t->values, true) : cJSON_CreateObject();
	if (t->interrupts && cJSON_GetArraySize(t->interrupts))
		cJSON_AddItemToObject(v, "__interrupt__", cJSON_Duplicate(t->interrupts, true));
	return v;
}

/* One protocol event of the thread (its WebSocket frame, spelled 0.0.21). */
bool tc_runfmt_event(struct tc_runfmt *f, const char *frame, size_t len)
{
	struct tc_runfmt *t = f;
	if (t->ended)
		return true;
	cJSON *ev = cJSON_ParseWithLength(frame, len);
	const char *method = str_field(ev, "method");
	const cJSON *seqv = cJSON_GetObjectItemCaseSensitive(ev, "seq");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(ev, "params");
	const cJSON *nsv = cJSON_GetObjectItemCaseSensitive(params, "namespace");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
	if (!method || !cJSON_IsArray(nsv) || !cJSON_IsNumber(seqv) || seqv->valuedouble < 0 ||
	    seqv->valuedouble > (double)TC_JS_MAX_SAFE) {
		cJSON_Delete(ev);
		return false;
	}
	f->cur_seq = (uint64_t)seqv->valuedouble;
	f->cur_k = 0;
	bool root = cJSON_GetArraySize(nsv) == 0;
	const char *status = !strcmp(method, "lifecycle") ? str_field(data, "event") : NULL;
	if (root && status && !strcmp(status, "started")) {
		const char *rid = str_field(data, "run_id");
		if (!t->in_run && rid && !strcmp(rid, f->run_id)) {
			t->in_run = true;
		} else if (t->in_run && rid && strcmp(rid, f->run_id)) {
			t->ended = true; /* the next run began: ours is over */
			cJSON_Delete(ev);
			return true;
		}
	}
	if (status && !root) {
		char *sub = ns_join(nsv);
		if (!is_subgraph(f, sub) && f->nsubgraphs < SUBGRAPHS)
			f->subgraphs_seen[f->nsubgraphs++] = sub;
		else
			free(sub);
	}
	if (!t->in_run) {
		cJSON_Delete(ev);
		return false;
	}
	char *ns = ns_join(nsv), node[128] = "";
	if (!status) {
		graph_ns(f, ns, node);
		root = !*ns;
	}
	bool shown = root || t->subgraphs;
	if (!strcmp(method, "values")) {
		if (root) {
			cJSON_Delete(t->values);
			t->values = cJSON_Duplicate(data, true);
		}
		if (shown && (t->modes & TC_MODE_VALUES))
			emit(f, "values", ns, data);
	} else if (!strcmp(method, "updates")) {
		if (shown && (t->modes & TC_MODE_UPDATES)) {
			const char *by = str_field(data, "node");
			const cJSON *vals = cJSON_GetObjectItemCaseSensitive(data, "values");
			cJSON *u = cJSON_CreateObject();
			if (!by && *node)
				by = node;
			if (by)
				cJSON_AddItemToObject(u, by, cJSON_Duplicate(vals, true));
			emit(f, "updates", ns, by ? u : vals);
			cJSON_Delete(u);
		}
	} else if (!strcmp(method, "messages")) {
		if (shown && (t->modes & TC_MODE_MESSAGES))
			tr_messages(f, ns, node, params, data);
	} else if (!strcmp(method, "tools")) {
		/* A tool's result is a message of its own (a ToolMessage) in LangGraph's messages mode. */
		const char *te = str_field(data, "event");
		if (shown && (t->modes & TC_MODE_MESSAGES) && te && !strcmp(te, "tool-finished"))
			emit_tool_message(f, ns, node, data);
	} else if (!strcmp(method, "custom")) {
		if (shown && (t->modes & TC_MODE_CUSTOM))
			emit(f, "custom", ns, cJSON_GetObjectItemCaseSensitive(data, "payload"));
	} else if (!strcmp(method, "tasks")) {
		if (shown && (t->modes & TC_MODE_TASKS))
			emit(f, "tasks", ns, data);
	} else if (!strcmp(method, "checkpoints")) {
		if (shown && (t->modes & TC_MODE_CHECKPOINTS))
			emit(f, "checkpoints", ns, data);
	} else if (!strcmp(method, "input.requested")) {
		cJSON *i = cJSON_CreateObject();
		const cJSON *payload = cJSON_GetObjectItemCaseSensitive(data, "payload");
		cJSON_AddItemToObject(i, "value", payload ? cJSON_Duplicate(payload, true) : cJSON_CreateNull());
		const char *iid = str_field(data, "interrupt_id");
		if (iid)
			cJSON_AddStringToObject(i, "id", iid);
		if (!t->interrupts)
			t->interrupts = cJSON_CreateArray();
		if (cJSON_GetArraySize(t->interrupts) < 64)
			cJSON_AddItemToArray(t->interrupts, i);
		else
			cJSON_Delete(i);
		if (t->modes & TC_MODE_UPDATES) {
			cJSON *u = cJSON_CreateObject();
			cJSON_AddItemToObject(u, "__interrupt__", cJSON_Duplicate(t->interrupts, true));
			emit(f, "updates", "", u);
			cJSON_Delete(u);
		}
		if (t->modes & TC_MODE_VALUES) {
			cJSON *v = values_with_interrupts(t);
			emit(f, "values", "", v);
			cJSON_Delete(v);
		}
	} else if (root && status &&
		   (!strcmp(status, "completed") || !strcmp(status, "failed") || !strcmp(status, "interrupted"))) {
		if (!strcmp(status, "failed")) {
			const char *e = str_field(data, "error");
			t->error = cJSON_CreateObject();
			cJSON_AddStringToObject(t->error, "error", e && !strcmp(e, "cancelled") ? "CancelledError" : "Error");
			cJSON_AddStringToObject(t->error, "message", e ? e : "the run failed");
			emit(f, "error", "", t->error);
		}
		free(ns);
		cJSON_Delete(ev);
		t->ended = true;
		return true;
	}
	free(ns);
	cJSON_Delete(ev);
	return false;
}

struct tc_runfmt *tc_runfmt_new(const char *run_id, const char *thread_id, unsigned modes, bool subgraphs,
				bool in_run, uint64_t resume_id, tc_runfmt_emit *out, void *ctx)
{
	struct tc_runfmt *f = tc_xcalloc(1, sizeof(*f));
	f->run_id = tc_xstrdup(run_id);
	f->thread = tc_xstrdup(thread_id);
	f->modes = modes;
	f->subgraphs = subgraphs;
	f->in_run = in_run;
	f->skip_seq = resume_id / TC_RUNFMT_IDS;
	f->skip_k = (unsigned)(resume_id % TC_RUNFMT_IDS);
	f->emit = out;
	f->ctx = ctx;
	return f;
}

void tc_runfmt_assume_in_run(struct tc_runfmt *f)
{
	f->in_run = true;
}

bool tc_runfmt_ended(const struct tc_runfmt *f)
{
	return f->ended;
}

cJSON *tc_runfmt_result(const struct tc_runfmt *f)
{
	if (f->error) {
		cJSON *body = cJSON_CreateObject();
		cJSON_AddItemToObject(body, "__error__", cJSON_Duplicate(f->error, true));
		return body;
	}
	return values_with_interrupts((struct tc_runfmt *)f);
}
