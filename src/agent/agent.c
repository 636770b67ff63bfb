/*
 * threadcast-agent — the reference agent worker.
 *
 * Consumes runtime commands from the `tc:commands` stream (consumer group
 * `workers`, so several agents share the work), answers each on the
 * gateway's reply channel, and on run.start produces a realistic run
 * through the producer contract (FCALL threadcast_append): lifecycle, a
 * streamed AI message with a streamed tool call, tool events, a subgraph in
 * namespace ["researcher"], updates/values/checkpoints per step,
 * custom:progress, and — when the input asks for it — an input.requested
 * interrupt that input.respond resumes. Per-thread state lives in Redis
 * (agent_state.lua), so whichever agent takes the next command of a thread
 * can answer state.* or resume the run. Commands a dead agent read but never
 * acknowledged are claimed by another (XAUTOCLAIM) after --claim-idle-ms.
 *
 *   threadcast-agent [--redis-url URL] [--name NAME] [--token-delay-ms N]
 *                    [--claim-idle-ms N] [--log-level L] [--stall METHOD]
 *
 * --stall METHOD is fault injection for tests: commands of that method are
 * read and then neither answered nor acknowledged, as by a hung worker.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "log.h"
#include "redis.h"
#include "store.h"
#include "util.h"

extern const char tc_function_source[];
extern const size_t tc_function_source_len;
extern const char tc_agent_state_source[];
extern const size_t tc_agent_state_source_len;

struct agent {
	uv_loop_t *loop;
	struct tc_config cfg;
	struct tc_redis *rd, *wr; /* blocking reads; everything else */
	char *name;
	long token_delay_ms, claim_idle_ms;
	const char *stall;
	bool reading, stopping, registered;
	uv_timer_t claim, retry_read;
	uv_signal_t sigint, sigterm;
	struct run *runs;
	unsigned long run_counter;
};

/* ==== small helpers ====================================================================== */

/* Sends a command built by store.h. */
static int send_cmd(struct tc_redis *r, tc_redis_cb *cb, void *priv, const struct tc_store_cmd *c)
{
	return tc_redis_cmd(r, cb, priv, c->argv);
}

static void ignore_reply(struct tc_redis *r, redisReply *reply, void *priv)
{
	if (reply && reply->type == REDIS_REPLY_ERROR)
		tc_log(TC_LOG_WARN, "redis error", TC_LS("error", reply->str));
}

static char *print(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/* EVAL of agent_state.lua; argv holds the ARGV part. */
static int state_op(struct agent *a, const char *thread, tc_redis_cb *cb, void *priv, int argc,
		    const char **args)
{
	char h[TC_STORE_KEY_MAX], ck[TC_STORE_KEY_MAX];
	const char *argv[16] = { "EVAL", tc_agent_state_source, "2",
				 tc_store_key(h, thread, TC_KEY_AGENT),
				 tc_store_key(ck, thread, TC_KEY_AGENT_CKPTS) };
	for (int i = 0; i < argc && i < 10; i++)
		argv[5 + i] = args[i];
	return tc_redis_cmd(a->wr, cb, priv, argv);
}

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

/* ==== the run script =================================================================== */

/* One step of a run: an event (or NULL: pause for the interrupt) after a delay. */
struct step {
	char *json;
	long delay_ms;
	int kind; /* 0 event, 1 values, 2 checkpoint, 3 interrupt request */
};

struct run {
	struct agent *a;
	struct run *next;
	char *thread, *run_id, *query, *response;
	bool ask;
	struct step *steps;
	int nsteps, k, step_no, ck_no;
	bool pause_recorded;
	uv_timer_t timer;
	char ckpt_prev[64];
	char interrupt_id[64];
};

static void add(struct run *r, long delay, int kind, const char *method, cJSON *ns, cJSON *data)
{
	cJSON *ev = cJSON_CreateObject(), *params;
	cJSON_AddStringToObject(ev, "method", method);
	params = cJSON_AddObjectToObject(ev, "params");
	cJSON_AddItemToObject(params, "namespace", ns);
	cJSON_AddItemToObject(params, "data", data);
	r->steps = tc_xrealloc(r->steps, (size_t)(r->nsteps + 1) * sizeof(*r->steps));
	r->steps[r->nsteps++] = (struct step){ print(ev), delay, kind };
}

static void add_pause(struct run *r)
{
	r->steps = tc_xrealloc(r->steps, (size_t)(r->nsteps + 1) * sizeof(*r->steps));
	r->steps[r->nsteps++] = (struct step){ NULL, 0, 0 };
}

static cJSON *obj(const char *k1, const char *v1)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, k1, v1);
	return o;
}

static void lifecycle(struct run *r, cJSON *ns, const char *status, const char *graph, const char *cause_call)
{
	cJSON *d = obj("event", status);
	if (graph)
		cJSON_AddStringToObject(d, "graph_name", graph);
	if (cause_call) {
		cJSON *c = cJSON_AddObjectToObject(d, "cause");
		cJSON_AddStringToObject(c, "type", "toolCall");
		cJSON_AddStringToObject(c, "tool_call_id", cause_call);
	}
	add(r, 0, 0, "lifecycle", ns, d);
}

/* A streamed text block: start, one text-delta per token, finish. */
static void text_block(struct run *r, cJSON *(*ns)(void), int index, const char *text)
{
	cJSON *d = obj("event", "content-block-start");
	cJSON_AddNumberToObject(d, "index", index);
	cJSON *c = cJSON_AddObjectToObject(d, "content");
	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", "");
	add(r, 0, 0, "messages", ns(), d);
	/* Tokens: each word with the space before it. */
	const char *p = text;
	while (*p) {
		const char *q = p;
		while (*q == ' ')
			q++;
		while (*q && *q != ' ')
			q++;
		char *tok = tc_xstrndup(p, (size_t)(q - p));
		d = obj("event", "content-block-delta");
		cJSON_AddNumberToObject(d, "index", index);
		cJSON *delta = cJSON_AddObjectToObject(d, "delta");
		cJSON_AddStringToObject(delta, "type", "text-delta");
		cJSON_AddStringToObject(delta, "text", tok);
		free(tok);
		add(r, r->a->token_delay_ms, 0, "messages", ns(), d);
		p = q;
	}
	d = obj("event", "content-block-finish");
	cJSON_AddNumberToObject(d, "index", index);
	c = cJSON_AddObjectToObject(d, "content");
	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", text);
	add(r, 0, 0, "messages", ns(), d);
}

static cJSON *researcher_ns(void)
{
	return ns_child("researcher");
}

static void message(struct run *r, cJSON *(*ns)(void), const char *id, const char *text,
		    const char *tool_call, const char *tool_args)
{
	cJSON *d = obj("event", "message-start");
	cJSON_AddStringToObject(d, "role", "ai");
	cJSON_AddStringToObject(d, "id", id);
	cJSON *meta = cJSON_AddObjectToObject(d, "metadata");
	cJSON_AddStringToObject(meta, "provider", "threadcast");
	cJSON_AddStringToObject(meta, "model", "reference-agent");
	cJSON_AddStringToObject(meta, "run_id", r->run_id);
	add(r, 0, 0, "messages", ns(), d);
	text_block(r, ns, 0, text);
	if (tool_call) {
		d = obj("event", "content-block-start");
		cJSON_AddNumberToObject(d, "index", 1);
		cJSON *c = cJSON_AddObjectToObject(d, "content");
		cJSON_AddStringToObject(c, "type", "tool_call_chunk");
		cJSON_AddStringToObject(c, "id", tool_call);
		cJSON_AddStringToObject(c, "name", "search");
		cJSON_AddStringToObject(c, "args", "");
		add(r, 0, 0, "messages", ns(), d);
		/* The arguments stream as partial JSON in three steps. A block-delta
		 * shallow-merges its fields, so each carries the arguments so far. */
		size_t len = strlen(tool_args), part = len / 3 + 1;
		for (size_t off = 0; off < len; off += part) {
			size_t n = len - off < part ? len : off + part;
			char *chunk = tc_xstrndup(tool_args, n);
			d = obj("event", "content-block-delta");
			cJSON_AddNumberToObject(d, "index", 1);
			cJSON *delta = cJSON_AddObjectToObject(d, "delta");
			cJSON_AddStringToObject(delta, "type", "block-delta");
			cJSON *fields = cJSON_AddObjectToObject(delta, "fields");
			cJSON_AddStringToObject(fields, "type", "tool_call_chunk");
			cJSON_AddStringToObject(fields, "args", chunk);
			free(chunk);
			add(r, r->a->token_delay_ms, 0, "messages", ns(), d);
		}
		d = obj("event", "content-block-finish");
		cJSON_AddNumberToObject(d, "index", 1);
		c = cJSON_AddObjectToObject(d, "content");
		cJSON_AddStringToObject(c, "type", "tool_call");
		cJSON_AddStringToObject(c, "id", tool_call);
		cJSON_AddStringToObject(c, "name", "search");
		cJSON_AddItemToObject(c, "args", cJSON_Parse(tool_args));
		add(r, 0, 0, "messages", ns(), d);
	}
	d = obj("event", "message-finish");
	cJSON *u = cJSON_AddObjectToObject(d, "usage");
	int words = 1;
	for (const char *p = text; *p; p++)
		words += *p == ' ';
	cJSON_AddNumberToObject(u, "input_tokens", (double)strlen(r->query) / 4 + 1);
	cJSON_AddNumberToObject(u, "output_tokens", words);
	cJSON_AddNumberToObject(u, "total_tokens", (double)strlen(r->query) / 4 + 1 + words);
	add(r, 0, 0, "messages", ns(), d);
}

/* The run's input as a complete human message (not streamed: no deltas). */
static void human_message(struct run *r, const char *text)
{
	char id[96];
	snprintf(id, sizeof(id), "msg-%s-0", r->run_id);
	cJSON *d = obj("event", "message-start");
	cJSON_AddStringToObject(d, "role", "human");
	cJSON_AddStringToObject(d, "id", id);
	add(r, 0, 0, "messages", ns_root(), d);
	for (int finish = 0; finish < 2; finish++) {
		d = obj("event", finish ? "content-block-finish" : "content-block-start");
		cJSON_AddNumberToObject(d, "index", 0);
		cJSON *c = cJSON_AddObjectToObject(d, "content");
		cJSON_AddStringToObject(c, "type", "text");
		cJSON_AddStringToObject(c, "text", text);
		add(r, 0, 0, "messages", ns_root(), d);
	}
	add(r, 0, 0, "messages", ns_root(), obj("event", "message-finish"));
}

/* values + checkpoint of one superstep; msgs is the transcript so far. */
static void superstep(struct run *r, const char *node, cJSON *msgs, const char *source)
{
	cJSON *upd = obj("node", node);
	cJSON *vals = cJSON_AddObjectToObject(upd, "values");
	cJSON_AddItemToObject(vals, "messages", cJSON_Duplicate(msgs, 1));
	add(r, 0, 0, "updates", ns_root(), upd);

	cJSON *state = cJSON_CreateObject();
	cJSON_AddItemToObject(state, "messages", cJSON_Duplicate(msgs, 1));
	cJSON_AddNumberToObject(state, "step", r->step_no);
	add(r, 0, 1, "values", ns_root(), state);

	char id[64];
	snprintf(id, sizeof(id), "ck-%s-%d", r->run_id, r->ck_no++);
	cJSON *ck = obj("id", id);
	if (r->ckpt_prev[0])
		cJSON_AddStringToObject(ck, "parent_id", r->ckpt_prev);
	cJSON_AddNumberToObject(ck, "step", r->step_no - 1);
	cJSON_AddStringToObject(ck, "source", source);
	add(r, 0, 2, "checkpoints", ns_root(), ck);
	snprintf(r->ckpt_prev, sizeof(r->ckpt_prev), "%s", id);
	r->step_no++;
}

static cJSON *msg(const char *role, const char *content)
{
	cJSON *m = obj("role", role);
	cJSON_AddStringToObject(m, "content", content);
	return m;
}

/*
 * The whole run, deterministic in (query, run id, ask, response) so any agent
 * can rebuild it and resume at a step index.
 */
static void build_run(struct run *r)
{
	char text[1024], call[80], args[600];
	cJSON *msgs = cJSON_CreateArray();

	r->step_no = 0;
	r->ck_no = 0;
	r->ckpt_prev[0] = '\0';
	snprintf(call, sizeof(call), "call-%s", r->run_id);
	lifecycle(r, ns_root(), "started", "agent", NULL);
	human_message(r, r->query);
	cJSON_AddItemToArray(msgs, msg("human", r->query));
	superstep(r, "__start__", msgs, "input");
	lifecycle(r, ns_root(), "running", NULL, NULL);

	snprintf(text, sizeof(text), "Let me look into \"%.200s\" for you.", r->query);
	cJSON *qa = cJSON_CreateObject();
	cJSON_AddStringToObject(qa, "query", r->query);
	char *qjson = print(qa);
	snprintf(args, sizeof(args), "%s", qjson);
	free(qjson);
	char mid[80];
	snprintf(mid, sizeof(mid), "msg-%s-1", r->run_id);
	message(r, ns_root, mid, text, call, args);
	cJSON_AddItemToArray(msgs, msg("ai", text));
	superstep(r, "agent", msgs, "loop");

	cJSON *in = cJSON_CreateObject();
	cJSON_AddStringToObject(in, "query", r->query);
	cJSON *d = obj("event", "tool-started");
	cJSON_AddStringToObject(d, "tool_call_id", call);
	cJSON_AddStringToObject(d, "tool_name", "search");
	cJSON_AddItemToObject(d, "input", in);
	add(r, 0, 0, "tools", ns_root(), d);

	lifecycle(r, researcher_ns(), "started", "researcher", call);
	lifecycle(r, researcher_ns(), "running", NULL, NULL);
	snprintf(mid, sizeof(mid), "msg-%s-r", r->run_id);
	message(r, researcher_ns, mid, "Searching the knowledge base.", NULL, NULL);
	for (int pct = 25; pct <= 100; pct += 25) {
		cJSON *p = obj("name", "progress");
		cJSON *pl = cJSON_AddObjectToObject(p, "payload");
		cJSON_AddNumberToObject(pl, "pct", pct);
		add(r, r->a->token_delay_ms, 0, "custom:progress", researcher_ns(), p);
	}
	lifecycle(r, researcher_ns(), "completed", NULL, NULL);

	const char *chunks[] = { "Found 2 results", " about the query." };
	for (int i = 0; i < 2; i++) {
		d = obj("event", "tool-output-delta");
		cJSON_AddStringToObject(d, "tool_call_id", call);
		cJSON_AddStringToObject(d, "delta", chunks[i]);
		add(r, 0, 0, "tools", ns_root(), d);
	}
	d = obj("event", "tool-finished");
	cJSON_AddStringToObject(d, "tool_call_id", call);
	cJSON *out = cJSON_AddObjectToObject(d, "output");
	cJSON *res = cJSON_AddArrayToObject(out, "results");
	cJSON_AddItemToArray(res, cJSON_CreateString("result one"));
	cJSON_AddItemToArray(res, cJSON_CreateString("result two"));
	add(r, 0, 0, "tools", ns_root(), d);

	if (r->ask) {
		snprintf(r->interrupt_id, sizeof(r->interrupt_id), "int-%s", r->run_id);
		lifecycle(r, ns_root(), "interrupted", NULL, NULL);
		d = obj("interrupt_id", r->interrupt_id);
		cJSON *pl = cJSON_AddObjectToObject(d, "payload");
		cJSON_AddStringToObject(pl, "question", "Shall I write the final answer?");
		/* Recorded as interrupted before anyone can see the request
		 * (kind 3), so an input.respond can never arrive too early. */
		add(r, 0, 3, "input.requested", ns_root(), d);
		add_pause(r);
		lifecycle(r, ns_root(), "running", NULL, NULL);
	}

	if (r->response && *r->response)
		snprintf(text, sizeof(text), "Here is what I found about \"%.200s\". You answered: %.200s.",
			 r->query, r->response);
	else
		snprintf(text, sizeof(text), "Here is what I found about \"%.200s\".", r->query);
	snprintf(mid, sizeof(mid), "msg-%s-2", r->run_id);
	message(r, ns_root, mid, text, NULL, NULL);
	cJSON_AddItemToArray(msgs, msg("ai", text));
	superstep(r, "agent", msgs, "loop");
	lifecycle(r, ns_root(), "completed", "agent", NULL);
	cJSON_Delete(msgs);
}

/* ==== running ============================================================================= */

static void run_closed(uv_handle_t *h)
{
	struct run *r = h->data;
	for (int i = 0; i < r->nsteps; i++)
		free(r->steps[i].json);
	free(r->steps);
	free(r->thread);
	free(r->run_id);
	free(r->query);
	free(r->response);
	free(r);
}

static void run_end(struct run *r)
{
	struct run **p = &r->a->runs;
	while (*p != r)
		p = &(*p)->next;
	*p = r->next;
	uv_close((uv_handle_t *)&r->timer, run_closed);
}

static void emit(struct run *r);

static void on_timer(uv_timer_t *t)
{
	emit(t->data);
}

static void next_step(struct run *r, long delay)
{
	uv_timer_start(&r->timer, on_timer, (uint64_t)(delay > 0 ? delay : 0), 0);
}

static void on_appended(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct run *r = priv;
	if (r->a->stopping)
		return; /* the run is being closed; its memory goes in run_closed */
	if (!reply) {
		next_step(r, 200); /* Redis away: the same event again, later */
		return;
	}
	if (reply->type == REDIS_REPLY_ERROR)
		tc_log(TC_LOG_ERROR, "event refused", TC_LS("thread", r->thread), TC_LS("error", reply->str));
	struct step *s = &r->steps[r->k];
	if ((s->kind == 1 || s->kind == 2) && reply->type == REDIS_REPLY_INTEGER) {
		/* Remember state for state.get / state.listCheckpoints / state.fork. */
		cJSON *ev = cJSON_Parse(s->json);
		cJSON *data = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "params"), "data");
		char *vals = NULL, *ck = NULL;
		if (s->kind == 1) {
			vals = cJSON_PrintUnformatted(data);
		} else {
			cJSON *sum = cJSON_CreateObject();
			char ts[32];
			time_t now = time(NULL);
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
			cJSON_AddItemToObject(sum, "id", cJSON_Duplicate(cJSON_GetObjectItem(data, "id"), 1));
			cJSON_AddStringToObject(sum, "timestamp", ts);
			cJSON *step = cJSON_GetObjectItem(data, "step");
			cJSON_AddNumberToObject(sum, "step", step && step->valuedouble >= 0 ? step->valuedouble : 0);
			cJSON_AddStringToObject(sum, "node_name", "agent");
			ck = print(sum);
		}
		const char *args[] = { "record", vals ? vals : "", ck ? ck : "" };
		state_op(r->a, r->thread, ignore_reply, NULL, 3, args);
		free(vals);
		free(ck);
		cJSON_Delete(ev);
	}
	r->k++;
	next_step(r, r->k < r->nsteps ? r->steps[r->k].delay_ms : 0);
}

static void on_paused(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct run *r = priv;
	if (r->a->stopping)
		return;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		next_step(r, 200); /* try recording again */
		return;
	}
	r->pause_recorded = true;
	emit(r);
}

static void emit(struct run *r)
{
	if (r->a->stopping)
		return;
	if (r->k >= r->nsteps) {
		const char *args[] = { "finish" };
		state_op(r->a, r->thread, ignore_reply, NULL, 1, args);
		tc_log(TC_LOG_INFO, "run completed", TC_LS("thread", r->thread), TC_LS("run", r->run_id));
		run_end(r);
		return;
	}
	struct step *s = &r->steps[r->k];
	if (!s->json) {
		tc_log(TC_LOG_INFO, "run interrupted", TC_LS("thread", r->thread), TC_LS("run", r->run_id));
		run_end(r);
		return;
	}
	if (s->kind == 3 && !r->pause_recorded) {
		char phase[16];
		snprintf(phase, sizeof(phase), "%d", r->k + 2); /* after the request and the pause */
		const char *args[] = { "pause", phase, r->interrupt_id };
		if (state_op(r->a, r->thread, on_paused, r, 3, args))
			next_step(r, 200);
		return;
	}
	struct tc_store_cmd c;
	/* The run's first event names it. */
	tc_store_append(&c, r->thread, s->json, &(struct tc_store_append_opts){
		.run = r->k == 0 ? r->run_id : NULL });
	if (send_cmd(r->a->wr, on_appended, r, &c))
		next_step(r, 200);
}

static void run_begin(struct agent *a, const char *thread, const char *run_id, const char *query,
		      bool ask, const char *response, int phase)
{
	struct run *r = tc_xcalloc(1, sizeof(*r));
	r->a = a;
	r->thread = tc_xstrdup(thread);
	r->run_id = tc_xstrdup(run_id);
	r->query = tc_xstrdup(query);
	r->response = response ? tc_xstrdup(response) : NULL;
	r->ask = ask;
	build_run(r);
	r->k = phase < r->nsteps ? phase : r->nsteps;
	uv_timer_init(a->loop, &r->timer);
	r->timer.data = r;
	r->next = a->runs;
	a->runs = r;
	next_step(r, 0);
}

/* ==== commands ================================================================================ */

struct request {
	struct agent *a;
	char *stream_id, *thread, *method, *corr, *reply;
	cJSON *params;
	char *query; /* run.start / state.fork */
	bool ask;
};

static void request_free(struct request *q)
{
	free(q->stream_id);
	free(q->thread);
	free(q->method);
	free(q->corr);
	free(q->reply);
	free(q->query);
	cJSON_Delete(q->params);
	free(q);
}

/* Publishes the answer, acknowledges the command, frees the request. */
static void answer(struct request *q, cJSON *result, const char *error, const char *message)
{
	cJSON *m = obj("corr", q->corr);
	if (error) {
		cJSON_AddStringToObject(m, "type", "error");
		cJSON_AddStringToObject(m, "error", error);
		cJSON_AddStringToObject(m, "message", message);
		cJSON_Delete(result);
	} else {
		cJSON_AddStringToObject(m, "type", "success");
		cJSON_AddItemToObject(m, "result", result ? result : cJSON_CreateObject());
	}
	char *payload = print(m);
	struct tc_store_cmd c;
	tc_store_worker_answer(&c, q->reply, payload);
	send_cmd(q->a->wr, ignore_reply, NULL, &c);
	free(payload);
	tc_store_worker_ack(&c, q->stream_id);
	send_cmd(q->a->wr, ignore_reply, NULL, &c);
	request_free(q);
}

static char *query_of(const cJSON *input)
{
	if (cJSON_IsString(input))
		return tc_xstrdup(input->valuestring);
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(input, "messages");
	const cJSON *last = cJSON_IsArray(msgs) ? cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1) : NULL;
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(last, "content");
	if (cJSON_IsString(content))
		return tc_xstrdup(content->valuestring);
	char *s = input ? cJSON_PrintUnformatted(input) : NULL;
	return s ? s : tc_xstrdup("");
}

static bool wants_interrupt(const char *query, const cJSON *params)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(params, "config");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "interrupt")))
		return true;
	for (const char *p = query; *p; p++)
		if (!strncasecmp(p, "interrupt", 9))
			return true;
	return false;
}

static const char *str_at(const redisReply *r, size_t i)
{
	return r && r->type == REDIS_REPLY_ARRAY && i < r->elements &&
			       r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str : NULL;
}

/* Starts or resumes the run an agent_state.lua transition allowed. */
static void begin_from_reply(struct request *q, const redisReply *reply)
{
	const char *st = str_at(reply, 0);
	if (!strcmp(st, "started"))
		run_begin(q->a, q->thread, str_at(reply, 1), q->query, q->ask, NULL, 0);
	else if (!strcmp(st, "resumed"))
		run_begin(q->a, q->thread, str_at(reply, 1), str_at(reply, 2) ? str_at(reply, 2) : "",
			  str_at(reply, 3) && !strcmp(str_at(reply, 3), "1"), str_at(reply, 5),
			  str_at(reply, 4) ? atoi(str_at(reply, 4)) : 0);
}

static void inject_message(struct request *q, const cJSON *ns, const char *role, const char *text);

static void on_start(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct request *q = priv;
	const char *st = str_at(reply, 0);

	if (!st) {
		answer(q, NULL, "unknown_error", "the agent's state store failed");
		return;
	}
	if (!strcmp(st, "no_checkpoint")) {
		answer(q, NULL, "no_such_checkpoint", "no checkpoint with that id on this thread");
		return;
	}
	if (!strcmp(st, "running") && !strcmp(q->method, "state.fork")) {
		answer(q, NULL, "invalid_argument", "the thread has an active run; fork when it ends");
		return;
	}
	cJSON *res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "run_id", str_at(reply, 1) ? str_at(reply, 1) : "");
	if (!strcmp(q->method, "state.fork"))
		cJSON_AddStringToObject(res, "thread_id", q->thread);
	if (!strcmp(st, "running")) {
		/* A run is active: the input joins it (CDDL 4a), it does not start another. */
		cJSON *root = cJSON_CreateArray();
		inject_message(q, root, "human", q->query);
		cJSON_Delete(root);
	} else {
		begin_from_reply(q, reply);
	}
	answer(q, res, NULL, NULL);
}

static void start_run(struct request *q)
{
	struct agent *a = q->a;
	char run_id[96];
	q->query = query_of(cJSON_GetObjectItemCaseSensitive(q->params, "input"));
	q->ask = wants_interrupt(q->query, q->params);
	snprintf(run_id, sizeof(run_id), "run-%s-%lu", a->name, ++a->run_counter);
	const char *ck = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q->params, "checkpoint_id"));
	const char *args[] = { strcmp(q->method, "state.fork") ? "start" : "fork", run_id, q->query,
			       q->ask ? "1" : "0", a->name, ck };
	if (state_op(a, q->thread, on_start, q, ck ? 6 : 5, args))
		answer(q, NULL, "unknown_error", "the agent lost Redis");
}

static void on_resume(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct request *q = priv;
	const char *st = str_at(reply, 0);
	if (!st)
		answer(q, NULL, "unknown_error", "the agent's state store failed");
	else if (!strcmp(st, "none"))
		answer(q, NULL, "no_such_interrupt", "this thread has no interrupted run");
	else if (!strcmp(st, "mismatch"))
		answer(q, NULL, "no_such_interrupt", "the thread's run waits on another interrupt_id");
	else {
		begin_from_reply(q, reply);
		answer(q, cJSON_CreateObject(), NULL, NULL);
	}
}

static void respond(struct request *q)
{
	/* One interrupt at a time in this agent: the first entry decides. */
	const cJSON *p = q->params, *many = cJSON_GetObjectItemCaseSensitive(p, "responses");
	const cJSON *e = cJSON_IsArray(many) ? cJSON_GetArrayItem(many, 0) : p;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "interrupt_id");
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(e, "response");
	char *text = cJSON_IsString(resp) ? tc_xstrdup(resp->valuestring) :
					    (resp ? cJSON_PrintUnformatted(resp) : tc_xstrdup(""));
	const char *args[] = { "resume", cJSON_IsString(id) ? id->valuestring : "", text, q->a->name };
	int rc = state_op(q->a, q->thread, on_resume, q, 4, args);
	free(text);
	if (rc)
		answer(q, NULL, "unknown_error", "the agent lost Redis");
}

/* Appends one event of thread now (pipelined: the events of one call keep their order). */
static void append_now(struct agent *a, const char *thread, cJSON *ns, const char *node,
		       const char *method, cJSON *data)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "method", method);
	cJSON *params = cJSON_AddObjectToObject(ev, "params");
	cJSON_AddItemToObject(params, "namespace", cJSON_Duplicate(ns, 1));
	if (node)
		cJSON_AddStringToObject(params, "node", node);
	cJSON_AddItemToObject(params, "data", data);
	char *json = print(ev);
	struct tc_store_cmd c;
	tc_store_append(&c, thread, json, NULL);
	send_cmd(a->wr, ignore_reply, NULL, &c);
	free(json);
}

/*
 * A message injected into a running run (input.inject, or run.start while a
 * run is active): a whole message — start, one text block, finish — so that
 * every message assembler sees it begin and end. It arrives while the run
 * may be streaming a message of its own in the same namespace; blocks of one
 * (namespace, node) never interleave, so the injected one has a node of its
 * own, "input".
 */
static void inject_message(struct request *q, const cJSON *ns, const char *role, const char *text)
{
	char id[96];
	snprintf(id, sizeof(id), "inject-%s", q->stream_id);
	cJSON *d = obj("event", "message-start");
	cJSON_AddStringToObject(d, "role", role);
	cJSON_AddStringToObject(d, "id", id);
	append_now(q->a, q->thread, (cJSON *)ns, "input", "messages", d);
	/* One text block: start (empty), the text as one delta, finish. */
	static const char *const phases[][2] = { { "content-block-start", "content" },
						 { "content-block-delta", "delta" },
						 { "content-block-finish", "content" } };
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		d = obj("event", phases[i][0]);
		cJSON_AddNumberToObject(d, "index", 0);
		cJSON *b = cJSON_AddObjectToObject(d, phases[i][1]);
		cJSON_AddStringToObject(b, "type", i == 1 ? "text-delta" : "text");
		cJSON_AddStringToObject(b, "text", i == 0 ? "" : text);
		append_now(q->a, q->thread, (cJSON *)ns, "input", "messages", d);
	}
	d = obj("event", "message-finish");
	cJSON_AddStringToObject(d, "reason", "stop");
	append_now(q->a, q->thread, (cJSON *)ns, "input", "messages", d);
}

/* The namespaces the reference agent's graph has: the root and its researcher. */
static bool known_namespace(const cJSON *ns)
{
	int n = cJSON_GetArraySize(ns);
	const cJSON *seg = cJSON_GetArrayItem(ns, 0);
	return n == 0 || (n == 1 && cJSON_IsString(seg) && !strcmp(seg->valuestring, "researcher"));
}

static void on_state(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct request *q = priv;
	const char *st = str_at(reply, 0);
	if (!st) {
		answer(q, NULL, "unknown_error", "the agent's state store failed");
		return;
	}
	if (!strcmp(q->method, "input.inject")) {
		if (strcmp(st, "running")) {
			answer(q, NULL, "no_such_run", "there is no active run to inject into");
			return;
		}
		/* The injected message shows up on the thread's stream, whole. */
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(q->params, "message");
		const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
		inject_message(q, cJSON_GetObjectItemCaseSensitive(q->params, "namespace"),
			       role && !strcmp(role, "system") ? "system" : "human",
			       cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")));
		answer(q, cJSON_CreateObject(), NULL, NULL);
		return;
	}
	if (!known_namespace(cJSON_GetObjectItemCaseSensitive(q->params, "namespace"))) {
		answer(q, NULL, "no_such_namespace", "this thread's graph has no such namespace "
		       "(it has [] and [\"researcher\"])");
		return;
	}
	cJSON *values = cJSON_Parse(str_at(reply, 1));
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(q->params, "keys");
	if (!cJSON_IsObject(values)) {
		cJSON_Delete(values);
		values = cJSON_CreateObject();
	}
	if (cJSON_IsArray(keys)) {
		cJSON *picked = cJSON_CreateObject(), *k;
		cJSON_ArrayForEach(k, keys) {
			cJSON *v = cJSON_IsString(k) ? cJSON_GetObjectItemCaseSensitive(values, k->valuestring) : NULL;
			if (v)
				cJSON_AddItemToObject(picked, k->valuestring, cJSON_Duplicate(v, 1));
		}
		cJSON_Delete(values);
		values = picked;
	}
	cJSON *res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "values", values);
	cJSON *last = cJSON_Parse(str_at(reply, 2));
	cJSON *lid = cJSON_GetObjectItemCaseSensitive(last, "id");
	if (cJSON_IsString(lid)) {
		cJSON *ref = cJSON_AddObjectToObject(res, "checkpoint");
		cJSON_AddStringToObject(ref, "id", lid->valuestring);
	}
	cJSON_Delete(last);
	answer(q, res, NULL, NULL);
}

static void on_checkpoints(struct tc_redis *rr, redisReply *reply, void *priv)
{
	struct request *q = priv;
	if (!reply || reply->type != REDIS_REPLY_ARRAY) {
		answer(q, NULL, "unknown_error", "the agent's state store failed");
		return;
	}
	const cJSON *limit = cJSON_GetObjectItemCaseSensitive(q->params, "limit");
	const char *before = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q->params, "before"));
	double max = cJSON_IsNumber(limit) ? limit->valuedouble : 1e18;
	bool skipping = before != NULL;
	cJSON *res = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(res, "checkpoints");
	/* Newest first; `before` is the id the previous page ended with. */
	for (size_t i = reply->elements; i-- > 0 && cJSON_GetArraySize(list) < max;) {
		cJSON *c = cJSON_Parse(reply->element[i]->str);
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "id"));
		if (skipping) {
			if (id && !strcmp(id, before))
				skipping = false;
			cJSON_Delete(c);
			continue;
		}
		cJSON_AddItemToArray(list, c);
	}
	answer(q, res, NULL, NULL);
}

static void handle(struct agent *a, struct request *q)
{
	tc_log(TC_LOG_DEBUG, "command", TC_LS("thread", q->thread), TC_LS("method", q->method),
	       TC_LS("corr", q->corr));
	if (a->stall && !strcmp(q->method, a->stall)) {
		/* Fault injection: hold the command as a hung worker would. */
		request_free(q);
		return;
	}
	if (!strcmp(q->method, "run.start") || !strcmp(q->method, "state.fork")) {
		start_run(q);
	} else if (!strcmp(q->method, "input.respond")) {
		respond(q);
	} else if (!strcmp(q->method, "state.listCheckpoints")) {
		char ck[TC_STORE_KEY_MAX];
		const char *argv[] = { "LRANGE", tc_store_key(ck, q->thread, TC_KEY_AGENT_CKPTS), "0", "-1", NULL };
		if (tc_redis_cmd(a->wr, on_checkpoints, q, argv))
			answer(q, NULL, "unknown_error", "the agent lost Redis");
	} else if (!strcmp(q->method, "state.get") || !strcmp(q->method, "input.inject")) {
		const char *args[] = { "state" };
		if (state_op(a, q->thread, on_state, q, 1, args))
			answer(q, NULL, "unknown_error", "the agent lost Redis");
	} else {
		answer(q, NULL, "not_supported", "threadcast-agent does not handle this method");
	}
}

/* ==== reading commands ============================================================================== */

static const char *field(const redisReply *fields, const char *name)
{
	for (size_t i = 0; i + 1 < fields->elements; i += 2)
		if (fields->element[i]->type == REDIS_REPLY_STRING && !strcmp(fields->element[i]->str, name) &&
		    fields->element[i + 1]->type == REDIS_REPLY_STRING)
			return fields->element[i + 1]->str;
	return NULL;
}

/* One stream entry [id, [field, value, ...]] → a request, or an ack if unusable. */
static void take(struct agent *a, const redisReply *e)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_ARRAY)
		return;
	const redisReply *f = e->element[1];
	const char *thread = field(f, "thread"), *method = field(f, "method"), *params = field(f, "params");
	const char *corr = field(f, "corr"), *reply = field(f, "reply"), *deadline = field(f, "deadline");
	bool late = deadline && atoll(deadline) < tc_wall_ms();
	if (!thread || !method || !corr || !reply || late) {
		/* Malformed, or nobody waits for it any more: acknowledge and move on. */
		struct tc_store_cmd c;
		tc_store_worker_ack(&c, e->element[0]->str);
		send_cmd(a->wr, ignore_reply, NULL, &c);
		return;
	}
	struct request *q = tc_xcalloc(1, sizeof(*q));
	q->a = a;
	q->stream_id = tc_xstrdup(e->element[0]->str);
	q->thread = tc_xstrdup(thread);
	q->method = tc_xstrdup(method);
	q->corr = tc_xstrdup(corr);
	q->reply = tc_xstrdup(reply);
	q->params = cJSON_Parse(params ? params : "{}");
	if (!q->params)
		q->params = cJSON_CreateObject();
	handle(a, q);
}

static void read_next(struct agent *a);

static void on_retry_read(uv_timer_t *t)
{
	read_next(t->data);
}

static void on_group(struct tc_redis *r, redisReply *reply, void *priv)
{
	if (reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "BUSYGROUP", 9))
		tc_log(TC_LOG_WARN, "cannot create the workers group", TC_LS("error", reply->str));
}

static void on_read(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct agent *a = priv;
	a->reading = false;
	if (a->stopping)
		return;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		if (reply && !strncmp(reply->str, "NOGROUP", 7)) {
			struct tc_store_cmd c;
			tc_store_create_group(&c);
			send_cmd(a->wr, on_group, NULL, &c);
		}
		uv_timer_start(&a->retry_read, on_retry_read, 200, 0);
		return;
	}
	/* [[stream, [entries...]]] or nil on timeout. */
	for (size_t s = 0; reply->type == REDIS_REPLY_ARRAY && s < reply->elements; s++) {
		const redisReply *st = reply->element[s];
		if (st->type == REDIS_REPLY_ARRAY && st->elements == 2 && st->element[1]->type == REDIS_REPLY_ARRAY)
			for (size_t i = 0; i < st->element[1]->elements; i++)
				take(a, st->element[1]->element[i]);
	}
	read_next(a);
}

static void read_next(struct agent *a)
{
	if (a->reading || a->stopping)
		return;
	struct tc_store_cmd c;
	tc_store_worker_read(&c, a->name, 32, 500);
	if (send_cmd(a->rd, on_read, a, &c) == 0)
		a->reading = true;
	else
		uv_timer_start(&a->retry_read, on_retry_read, 200, 0);
}

/* Commands read by a worker that died before acknowledging them. */
static void on_claim(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct agent *a = priv;
	if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || a->stopping)
		return;
	const redisReply *entries = reply->element[1];
	for (size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i < entries->elements; i++) {
		tc_log(TC_LOG_INFO, "claimed a command another worker left", TC_LS("agent", a->name));
		take(a, entries->element[i]);
	}
}

/*
 * The registry: this agent serves any assistant ("*", the stream
 * tc:commands), for a while longer at every heartbeat. Gateways refuse at
 * once a command no live worker can take.
 */
static void on_registered(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct agent *a = priv;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		tc_log(TC_LOG_WARN, "cannot register as a worker", TC_LS("error", reply ? reply->str : "no reply"));
		return;
	}
	if (!a->registered)
		tc_log(TC_LOG_INFO, "registered", TC_LS("agent", a->name), TC_LS("assistant", "*"));
	a->registered = true;
}

static void register_worker(struct agent *a)
{
	struct tc_store_cmd c;
	/* Live for three heartbeats: a missed one is no outage. */
	tc_store_register(&c, "*", a->name, 3 * (a->claim_idle_ms / 2 + 1));
	send_cmd(a->wr, on_registered, a, &c);
}

static void on_claim_tick(uv_timer_t *t)
{
	struct agent *a = t->data;
	struct tc_store_cmd c;
	register_worker(a);
	tc_store_worker_claim(&c, a->name, a->claim_idle_ms, 32);
	send_cmd(a->wr, on_claim, a, &c);
}

static void on_rd_up(void *ctx)
{
	read_next(ctx);
}

static void on_wr_up(void *ctx)
{
	struct agent *a = ctx;
	struct tc_store_cmd c;
	tc_store_create_group(&c);
	send_cmd(a->wr, on_group, NULL, &c);
	register_worker(a);
}

static const struct tc_redis_listener rd_listener = { .cmd_up = on_rd_up };
static const struct tc_redis_listener wr_listener = { .cmd_up = on_wr_up };

/* ==== main ========================================================================================= */

static void stop(struct agent *a)
{
	if (a->stopping)
		return;
	a->stopping = true;
	tc_log0(TC_LOG_INFO, "agent stopping");
	while (a->runs)
		run_end(a->runs);
	uv_timer_stop(&a->claim);
	uv_timer_stop(&a->retry_read);
	uv_close((uv_handle_t *)&a->claim, NULL);
	uv_close((uv_handle_t *)&a->retry_read, NULL);
	uv_close((uv_handle_t *)&a->sigint, NULL);
	uv_close((uv_handle_t *)&a->sigterm, NULL);
	tc_redis_stop(a->rd);
	tc_redis_stop(a->wr);
}

static void on_signal(uv_signal_t *h, int signum)
{
	stop(h->data);
}

static void usage(void)
{
	fprintf(stderr, "usage: threadcast-agent [--redis-url URL] [--name NAME] [--token-delay-ms N]\n"
			"                        [--claim-idle-ms N] [--log-level L] [--stall METHOD]\n");
}

int main(int argc, char **argv)
{
	struct agent a;
	uv_loop_t loop;
	char err[256], host[64], name[128];
	char *cargv[5] = { argv[0] };
	int cargc = 1;
	const char *url = NULL, *level = "info";

	memset(&a, 0, sizeof(a));
	tc_cjson_init();
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(name, sizeof(name), "%s-%d", host, (int)getpid());
	a.token_delay_ms = 50;
	a.claim_idle_ms = 5000;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--help")) {
			usage();
			return 0;
		}
		if (!v || strncmp(argv[i], "--", 2)) {
			usage();
			return 2;
		}
		i++;
		if (!strcmp(argv[i - 1], "--redis-url"))
			url = v;
		else if (!strcmp(argv[i - 1], "--name"))
			snprintf(name, sizeof(name), "%s", v);
		else if (!strcmp(argv[i - 1], "--token-delay-ms"))
			a.token_delay_ms = atol(v);
		else if (!strcmp(argv[i - 1], "--claim-idle-ms"))
			a.claim_idle_ms = atol(v) > 0 ? atol(v) : 5000;
		else if (!strcmp(argv[i - 1], "--log-level"))
			level = v;
		else if (!strcmp(argv[i - 1], "--stall"))
			a.stall = v;
		else {
			usage();
			return 2;
		}
	}
	/* The agent shares the gateway's config code for Redis settings. */
	char urlarg[1100], lvlarg[64];
	if (url) {
		snprintf(urlarg, sizeof(urlarg), "--redis-url=%s", url);
		cargv[cargc++] = urlarg;
	}
	snprintf(lvlarg, sizeof(lvlarg), "--log-level=%s", level);
	cargv[cargc++] = lvlarg;
	cargv[cargc++] = (char *)"--auth=off"; /* the agent serves no clients */
	if (tc_config_load(&a.cfg, cargc, cargv, err, sizeof(err)) != TC_CONFIG_OK) {
		fprintf(stderr, "threadcast-agent: %s\n", err);
		tc_config_free(&a.cfg);
		return 2;
	}
	tc_log_init(a.cfg.log_threshold);
	signal(SIGPIPE, SIG_IGN);
	a.name = name;
	a.loop = &loop;
	uv_loop_init(&loop);
	a.rd = tc_redis_new(&loop, &a.cfg, tc_function_source, tc_function_source_len, TC_REDIS_NO_PUBSUB);
	a.wr = tc_redis_new(&loop, &a.cfg, tc_function_source, tc_function_source_len, TC_REDIS_NO_PUBSUB);
	tc_redis_add_listener(a.rd, NULL, &rd_listener, &a);
	tc_redis_add_listener(a.wr, NULL, &wr_listener, &a);
	uv_timer_init(&loop, &a.claim);
	uv_timer_init(&loop, &a.retry_read);
	a.claim.data = a.retry_read.data = &a;
	uv_timer_start(&a.claim, on_claim_tick, (uint64_t)a.claim_idle_ms / 2 + 1, (uint64_t)a.claim_idle_ms / 2 + 1);
	uv_signal_init(&loop, &a.sigint);
	uv_signal_init(&loop, &a.sigterm);
	a.sigint.data = a.sigterm.data = &a;
	uv_signal_start(&a.sigint, on_signal, SIGINT);
	uv_signal_start(&a.sigterm, on_signal, SIGTERM);
	tc_log(TC_LOG_INFO, "agent started", TC_LS("name", a.name), TC_LS("redis", a.cfg.redis_url),
	       TC_LI("token_delay_ms", a.token_delay_ms));

	uv_run(&loop, UV_RUN_DEFAULT);

	tc_redis_free(a.rd);
	tc_redis_free(a.wr);
	int rc = uv_loop_close(&loop);
	tc_config_free(&a.cfg);
	return rc ? 1 : 0;
}
