/*
 * script.c — the reference agent's run, event by event (script.h).
 */
#include "script.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "util.h"

/* A script being built: the run's input, and the checkpoint chain so far. */
struct build {
	struct tc_agent_script *s;
	const char *run_id, *query, *response;
	bool ask;
	long token_delay_ms;
	int step_no, ck_no;
	char ckpt_prev[64]; /* the last checkpoint's id, the next one's parent */
};

static cJSON *ns_root(void)
{
	return cJSON_CreateArray();
}

static cJSON *ns_child(const char *seg)
{
	cJSON *a = cJSON_CreateArray();
	cJSON_AddItemToArray(a, cJSON_CreateString(seg));
	return a;
}

/* Appends a step: the event {method, params: {namespace: ns, data}} after delay ms. */
static void add(struct build *r, long delay, enum tc_agent_step_kind kind, const char *method, cJSON *ns, cJSON *data)
{
	cJSON *ev = cJSON_CreateObject(), *params;
	cJSON_AddStringToObject(ev, "method", method);
	params = cJSON_AddObjectToObject(ev, "params");
	cJSON_AddItemToObject(params, "namespace", ns);
	cJSON_AddItemToObject(params, "data", data);
	r->s->steps = tc_xrealloc(r->s->steps, (size_t)(r->s->nsteps + 1) * sizeof(*r->s->steps));
	r->s->steps[r->s->nsteps++] = (struct tc_agent_step){ tc_agent_print(ev), delay, kind };
}

/* Appends the pause: the run stops there until input.respond resumes it. */
static void add_pause(struct build *r)
{
	r->s->steps = tc_xrealloc(r->s->steps, (size_t)(r->s->nsteps + 1) * sizeof(*r->s->steps));
	r->s->steps[r->s->nsteps++] = (struct tc_agent_step){ NULL, 0, TC_AGENT_STEP_EVENT };
}

static void lifecycle(struct build *r, cJSON *ns, const char *status, const char *graph, const char *cause_call)
{
	cJSON *d = tc_agent_obj("event", status);
	if (graph)
		cJSON_AddStringToObject(d, "graph_name", graph);
	if (cause_call) {
		cJSON *c = cJSON_AddObjectToObject(d, "cause");
		cJSON_AddStringToObject(c, "type", "toolCall");
		cJSON_AddStringToObject(c, "tool_call_id", cause_call);
	}
	add(r, 0, TC_AGENT_STEP_EVENT, "lifecycle", ns, d);
}

/* A streamed text block: start, one text-delta per token, finish. */
static void text_block(struct build *r, cJSON *(*ns)(void), int index, const char *text)
{
	cJSON *d = tc_agent_obj("event", "content-block-start");
	cJSON_AddNumberToObject(d, "index", index);
	cJSON *c = cJSON_AddObjectToObject(d, "content");
	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", "");
	add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns(), d);
	/* Tokens: each word with the space before it. */
	const char *p = text;
	while (*p) {
		const char *q = p;
		while (*q == ' ')
			q++;
		while (*q && *q != ' ')
			q++;
		char *tok = tc_xstrndup(p, (size_t)(q - p));
		d = tc_agent_obj("event", "content-block-delta");
		cJSON_AddNumberToObject(d, "index", index);
		cJSON *delta = cJSON_AddObjectToObject(d, "delta");
		cJSON_AddStringToObject(delta, "type", "text-delta");
		cJSON_AddStringToObject(delta, "text", tok);
		free(tok);
		add(r, r->token_delay_ms, TC_AGENT_STEP_EVENT, "messages", ns(), d);
		p = q;
	}
	d = tc_agent_obj("event", "content-block-finish");
	cJSON_AddNumberToObject(d, "index", index);
	c = cJSON_AddObjectToObject(d, "content");
	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", text);
	add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns(), d);
}

static cJSON *researcher_ns(void)
{
	return ns_child("researcher");
}

static void message(struct build *r, cJSON *(*ns)(void), const char *id, const char *text, const char *tool_call,
		    const char *tool_args)
{
	cJSON *d = tc_agent_obj("event", "message-start");
	cJSON_AddStringToObject(d, "role", "ai");
	cJSON_AddStringToObject(d, "id", id);
	cJSON *meta = cJSON_AddObjectToObject(d, "metadata");
	cJSON_AddStringToObject(meta, "provider", "threadcast");
	cJSON_AddStringToObject(meta, "model", "reference-agent");
	cJSON_AddStringToObject(meta, "run_id", r->run_id);
	add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns(), d);
	text_block(r, ns, 0, text);
	if (tool_call) {
		d = tc_agent_obj("event", "content-block-start");
		cJSON_AddNumberToObject(d, "index", 1);
		cJSON *c = cJSON_AddObjectToObject(d, "content");
		cJSON_AddStringToObject(c, "type", "tool_call_chunk");
		cJSON_AddStringToObject(c, "id", tool_call);
		cJSON_AddStringToObject(c, "name", "search");
		cJSON_AddStringToObject(c, "args", "");
		add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns(), d);
		/* The arguments stream as partial JSON in three steps. A block-delta
		 * shallow-merges its fields, so each carries the arguments so far. */
		size_t len = strlen(tool_args), part = len / 3 + 1;
		for (size_t off = 0; off < len; off += part) {
			size_t n = len - off < part ? len : off + part;
			char *chunk = tc_xstrndup(tool_args, n);
			d = tc_agent_obj("event", "content-block-delta");
			cJSON_AddNumberToObject(d, "index", 1);
			cJSON *delta = cJSON_AddObjectToObject(d, "delta");
			cJSON_AddStringToObject(delta, "type", "block-delta");
			cJSON *fields = cJSON_AddObjectToObject(delta, "fields");
			cJSON_AddStringToObject(fields, "type", "tool_call_chunk");
			cJSON_AddStringToObject(fields, "args", chunk);
			free(chunk);
			add(r, r->token_delay_ms, TC_AGENT_STEP_EVENT, "messages", ns(), d);
		}
		d = tc_agent_obj("event", "content-block-finish");
		cJSON_AddNumberToObject(d, "index", 1);
		c = cJSON_AddObjectToObject(d, "content");
		cJSON_AddStringToObject(c, "type", "tool_call");
		cJSON_AddStringToObject(c, "id", tool_call);
		cJSON_AddStringToObject(c, "name", "search");
		cJSON_AddItemToObject(c, "args", cJSON_Parse(tool_args));
		add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns(), d);
	}
	d = tc_agent_obj("event", "message-finish");
	cJSON *u = cJSON_AddObjectToObject(d, "usage");
	int words = 1;
	for (const char *p = text; *p; p++)
		words += *p == ' ';
	cJSON_AddNumberToObject(u, "input_tokens", (double)strlen(r->query) / 4 + 1);
	cJSON_AddNumberToObject(u, "output_tokens", words);
	cJSON_AddNumberToObject(u, "total_tokens", (double)strlen(r->query) / 4 + 1 + words);
	add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns(), d);
}

/* The run's input as a complete human message (not streamed: no deltas). */
static void human_message(struct build *r, const char *text)
{
	char id[96];
	snprintf(id, sizeof(id), "msg-%s-0", r->run_id);
	cJSON *d = tc_agent_obj("event", "message-start");
	cJSON_AddStringToObject(d, "role", "human");
	cJSON_AddStringToObject(d, "id", id);
	add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns_root(), d);
	for (int finish = 0; finish < 2; finish++) {
		d = tc_agent_obj("event", finish ? "content-block-finish" : "content-block-start");
		cJSON_AddNumberToObject(d, "index", 0);
		cJSON *c = cJSON_AddObjectToObject(d, "content");
		cJSON_AddStringToObject(c, "type", "text");
		cJSON_AddStringToObject(c, "text", text);
		add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns_root(), d);
	}
	add(r, 0, TC_AGENT_STEP_EVENT, "messages", ns_root(), tc_agent_obj("event", "message-finish"));
}

/* values + checkpoint of one superstep; msgs is the transcript so far. */
static void superstep(struct build *r, const char *node, cJSON *msgs, const char *source)
{
	cJSON *upd = tc_agent_obj("node", node);
	cJSON *vals = cJSON_AddObjectToObject(upd, "values");
	cJSON_AddItemToObject(vals, "messages", cJSON_Duplicate(msgs, 1));
	add(r, 0, TC_AGENT_STEP_EVENT, "updates", ns_root(), upd);

	cJSON *state = cJSON_CreateObject();
	cJSON_AddItemToObject(state, "messages", cJSON_Duplicate(msgs, 1));
	cJSON_AddNumberToObject(state, "step", r->step_no);
	add(r, 0, TC_AGENT_STEP_VALUES, "values", ns_root(), state);

	char id[64];
	snprintf(id, sizeof(id), "ck-%s-%d", r->run_id, r->ck_no++);
	cJSON *ck = tc_agent_obj("id", id);
	if (r->ckpt_prev[0])
		cJSON_AddStringToObject(ck, "parent_id", r->ckpt_prev);
	cJSON_AddNumberToObject(ck, "step", r->step_no - 1);
	cJSON_AddStringToObject(ck, "source", source);
	add(r, 0, TC_AGENT_STEP_CHECKPOINT, "checkpoints", ns_root(), ck);
	snprintf(r->ckpt_prev, sizeof(r->ckpt_prev), "%s", id);
	r->step_no++;
}

static cJSON *msg(const char *role, const char *content)
{
	cJSON *m = tc_agent_obj("role", role);
	cJSON_AddStringToObject(m, "content", content);
	return m;
}

void tc_agent_script_build(struct tc_agent_script *s, const char *run_id, const char *query, bool ask,
			   const char *response, long token_delay_ms)
{
	struct build b = { .s = s,
			   .run_id = run_id,
			   .query = query,
			   .response = response,
			   .ask = ask,
			   .token_delay_ms = token_delay_ms },
		     *r = &b;
	char text[1024], call[80], args[600];
	cJSON *msgs = cJSON_CreateArray();

	memset(s, 0, sizeof(*s));
	snprintf(call, sizeof(call), "call-%s", r->run_id);
	lifecycle(r, ns_root(), "started", "agent", NULL);
	human_message(r, r->query);
	cJSON_AddItemToArray(msgs, msg("human", r->query));
	superstep(r, "__start__", msgs, "input");
	lifecycle(r, ns_root(), "running", NULL, NULL);

	snprintf(text, sizeof(text), "Let me look into \"%.200s\" for you.", r->query);
	cJSON *qa = cJSON_CreateObject();
	cJSON_AddStringToObject(qa, "query", r->query);
	char *qjson = tc_agent_print(qa);
	snprintf(args, sizeof(args), "%s", qjson);
	free(qjson);
	char mid[80];
	snprintf(mid, sizeof(mid), "msg-%s-1", r->run_id);
	message(r, ns_root, mid, text, call, args);
	cJSON_AddItemToArray(msgs, msg("ai", text));
	superstep(r, "agent", msgs, "loop");

	cJSON *in = cJSON_CreateObject();
	cJSON_AddStringToObject(in, "query", r->query);
	cJSON *d = tc_agent_obj("event", "tool-started");
	cJSON_AddStringToObject(d, "tool_call_id", call);
	cJSON_AddStringToObject(d, "tool_name", "search");
	cJSON_AddItemToObject(d, "input", in);
	add(r, 0, TC_AGENT_STEP_EVENT, "tools", ns_root(), d);

	lifecycle(r, researcher_ns(), "started", "researcher", call);
	lifecycle(r, researcher_ns(), "running", NULL, NULL);
	snprintf(mid, sizeof(mid), "msg-%s-r", r->run_id);
	message(r, researcher_ns, mid, "Searching the knowledge base.", NULL, NULL);
	for (int pct = 25; pct <= 100; pct += 25) {
		cJSON *p = tc_agent_obj("name", "progress");
		cJSON *pl = cJSON_AddObjectToObject(p, "payload");
		cJSON_AddNumberToObject(pl, "pct", pct);
		add(r, r->token_delay_ms, TC_AGENT_STEP_EVENT, "custom:progress", researcher_ns(), p);
	}
	lifecycle(r, researcher_ns(), "completed", NULL, NULL);

	const char *chunks[] = { "Found 2 results", " about the query." };
	for (int i = 0; i < 2; i++) {
		d = tc_agent_obj("event", "tool-output-delta");
		cJSON_AddStringToObject(d, "tool_call_id", call);
		cJSON_AddStringToObject(d, "delta", chunks[i]);
		add(r, 0, TC_AGENT_STEP_EVENT, "tools", ns_root(), d);
	}
	d = tc_agent_obj("event", "tool-finished");
	cJSON_AddStringToObject(d, "tool_call_id", call);
	cJSON *out = cJSON_AddObjectToObject(d, "output");
	cJSON *res = cJSON_AddArrayToObject(out, "results");
	cJSON_AddItemToArray(res, cJSON_CreateString("result one"));
	cJSON_AddItemToArray(res, cJSON_CreateString("result two"));
	add(r, 0, TC_AGENT_STEP_EVENT, "tools", ns_root(), d);

	if (r->ask) {
		snprintf(r->s->interrupt_id, sizeof(r->s->interrupt_id), "int-%s", r->run_id);
		lifecycle(r, ns_root(), "interrupted", NULL, NULL);
		d = tc_agent_obj("interrupt_id", r->s->interrupt_id);
		cJSON *pl = cJSON_AddObjectToObject(d, "payload");
		cJSON_AddStringToObject(pl, "question", "Shall I write the final answer?");
		/* Recorded as interrupted before anyone can see the request
		 * (run.c), so an input.respond can never arrive too early. */
		add(r, 0, TC_AGENT_STEP_INTERRUPT, "input.requested", ns_root(), d);
		add_pause(r);
		lifecycle(r, ns_root(), "running", NULL, NULL);
	}

	if (r->response && *r->response)
		snprintf(text, sizeof(text), "Here is what I found about \"%.200s\". You answered: %.200s.", r->query,
			 r->response);
	else
		snprintf(text, sizeof(text), "Here is what I found about \"%.200s\".", r->query);
	snprintf(mid, sizeof(mid), "msg-%s-2", r->run_id);
	message(r, ns_root, mid, text, NULL, NULL);
	cJSON_AddItemToArray(msgs, msg("ai", text));
	superstep(r, "agent", msgs, "loop");
	lifecycle(r, ns_root(), "completed", "agent", NULL);
	cJSON_Delete(msgs);
}

void tc_agent_script_free(struct tc_agent_script *s)
{
	for (int i = 0; i < s->nsteps; i++)
		free(s->steps[i].json);
	free(s->steps);
}
