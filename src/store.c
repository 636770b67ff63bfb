#include "store.h"

#include <stdio.h>
#include <string.h>

static const char *const key_suffix[] = {
	[TC_KEY_EVENTS] = "events",
	[TC_KEY_META] = "meta",
	[TC_KEY_TREE] = "tree",
	[TC_KEY_VALUES] = "values",
	[TC_KEY_LIVE] = "live",
	[TC_KEY_AGENT] = "agent",
	[TC_KEY_INTERRUPTS] = "interrupts",
	[TC_KEY_AGENT_CKPTS] = "agent:ckpts",
};

char *tc_store_key(char buf[TC_STORE_KEY_MAX], const char *thread, enum tc_store_key k)
{
	snprintf(buf, TC_STORE_KEY_MAX, "tc:{%s}:%s", thread, key_suffix[k]);
	return buf;
}

char *tc_store_reply_channel(char buf[TC_STORE_REPLY_MAX], const char *instance)
{
	snprintf(buf, TC_STORE_REPLY_MAX, TC_STORE_REPLY_PREFIX "%s", instance);
	return buf;
}

int tc_store_live_thread(const char *ch, size_t len, char id[TC_THREAD_ID_MAX + 1])
{
	static const char pre[] = TC_STORE_LIVE_PREFIX, post[] = "}:live";
	const size_t plen = sizeof(pre) - 1, slen = sizeof(post) - 1;

	if (len <= plen + slen || len - plen - slen > TC_THREAD_ID_MAX || memcmp(ch, pre, plen) ||
	    memcmp(ch + len - slen, post, slen))
		return -1;
	memcpy(id, ch + plen, len - plen - slen);
	id[len - plen - slen] = '\0';
	return 0;
}

/* Leading decimal digits of s[0..len): how many, or -1 (none, or over 2^53-1). */
static int leading_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (v > ((uint64_t)TC_JS_MAX_SAFE - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0)
		return -1;
	*out = v;
	return (int)i;
}

int tc_store_u64(const char *s, size_t len, uint64_t *out)
{
	if (len > 1 && s[0] == '0')
		return -1; /* one spelling per number */
	return leading_u64(s, len, out) == (int)len && len ? 0 : -1;
}

/* ==== commands ============================================================================ */

/* Fills c->argv from a NULL-terminated list. */
static void set_argv(struct tc_store_cmd *c, const char *const *argv)
{
	c->argc = 0;
	while (argv[c->argc]) {
		c->argv[c->argc] = argv[c->argc];
		c->argc++;
	}
	c->argv[c->argc] = NULL;
}

void tc_store_read_meta(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "HMGET", tc_store_key(c->key, thread, TC_KEY_META), "seq", "epoch", "entry_max",
				      "entry_seq", "run_seq", "run_id", "run_status", NULL });
}

void tc_store_read_head(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "HMGET", tc_store_key(c->key, thread, TC_KEY_META), "seq", "epoch", NULL });
}

void tc_store_read_status(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "HMGET", tc_store_key(c->key, thread, TC_KEY_META), "seq", "epoch", "run_status",
				      "checkpoint", NULL });
}

void tc_store_read_root_values(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "HGET", tc_store_key(c->key, thread, TC_KEY_VALUES), "", NULL });
}

void tc_store_read_epoch(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "HGET", tc_store_key(c->key, thread, TC_KEY_META), "epoch", NULL });
}

void tc_store_read_range(struct tc_store_cmd *c, const char *thread, struct tc_store_range *r,
			 const struct tc_store_bound *b)
{
	r->plain = 0;
	if (b && b->entry_max && r->after < b->head && r->through <= b->head) {
		uint64_t fit = TC_STORE_PLAIN_BYTES / b->entry_max;
		unsigned n = fit < r->count ? (unsigned)fit : r->count;
		if (n >= TC_STORE_PLAIN_MIN || n == r->count)
			r->plain = n;
	}
	if (r->plain) {
		/* Entry ids are <seq>-0: after <after>-0, through <through>-0, where
		 * "to the end" is the bound's head, the end when meta was read. */
		snprintf(c->num[0], sizeof(c->num[0]), "%llu-1", (unsigned long long)r->after);
		snprintf(c->num[1], sizeof(c->num[1]), "%llu-0",
			 (unsigned long long)(r->through ? r->through : b->head));
		snprintf(c->num[2], sizeof(c->num[2]), "%u", r->plain);
		set_argv(c, (const char *[]){ "XRANGE", tc_store_key(c->key, thread, TC_KEY_EVENTS), c->num[0],
					      c->num[1], "COUNT", c->num[2], NULL });
		return;
	}
	snprintf(c->num[0], sizeof(c->num[0]), "%llu", (unsigned long long)r->after);
	snprintf(c->num[1], sizeof(c->num[1]), "%llu", (unsigned long long)r->through);
	snprintf(c->num[2], sizeof(c->num[2]), "%u", r->count);
	/* The key is the thread id itself: the slot of its {thread} keys, as threadcast_append's. */
	snprintf(c->key, sizeof(c->key), "%s", thread);
	set_argv(c, (const char *[]){ "FCALL_RO", "threadcast_range", "1", c->key, c->num[0], c->num[1], c->num[2],
				      TC_STORE_RANGE_BYTES_S, NULL });
}

int tc_store_range_parse(const redisReply *reply, const struct tc_store_range *r, const redisReply **entries,
			 bool *more)
{
	if (r && r->plain) {
		if (reply->type != REDIS_REPLY_ARRAY)
			return -1;
		*entries = reply;
		*more = reply->elements >= r->plain;
		return 0;
	}
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_ARRAY ||
	    reply->element[1]->type != REDIS_REPLY_INTEGER)
		return -1;
	*entries = reply->element[0];
	*more = reply->element[1]->integer != 0;
	return 0;
}

void tc_store_read_first(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "XRANGE", tc_store_key(c->key, thread, TC_KEY_EVENTS), "-", "+", "COUNT", "1",
				      NULL });
}

void tc_store_read_index(struct tc_store_cmd *c, const char *thread, enum tc_store_key index)
{
	set_argv(c, (const char *[]){ "HGETALL", tc_store_key(c->key, thread, index), NULL });
}

/* The MAXLEN/TTL/RUN options that are set, appended at argv[argc]. */
static int append_opts(const char **argv, int argc, const struct tc_store_append_opts *o)
{
	const char *opt[][2] = { { "MAXLEN", o ? o->maxlen : NULL },
				 { "TTL", o ? o->ttl : NULL },
				 { "RUN", o ? o->run : NULL } };
	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
		if (!opt[i][1])
			continue;
		argv[argc++] = opt[i][0];
		argv[argc++] = opt[i][1];
	}
	argv[argc] = NULL;
	return argc;
}

void tc_store_append(struct tc_store_cmd *c, const char *thread, const char *json, const struct tc_store_append_opts *o)
{
	set_argv(c, (const char *[]){ "FCALL", "threadcast_append", "1", thread, json, NULL });
	c->argc = append_opts(c->argv, c->argc, o);
}

int tc_store_append_batch(const char **argv, char count[24], const char *thread, const char *const *json, unsigned n,
			  const struct tc_store_append_opts *o)
{
	int argc = 0;
	snprintf(count, 24, "%u", n);
	argv[argc++] = "FCALL";
	argv[argc++] = "threadcast_append_batch";
	argv[argc++] = "1";
	argv[argc++] = thread;
	argv[argc++] = count;
	for (unsigned i = 0; i < n; i++)
		argv[argc++] = json[i];
	return append_opts(argv, argc, o);
}

void tc_store_submit(struct tc_store_cmd *c, const struct tc_store_command *m)
{
	snprintf(c->route[0], sizeof(c->route[0]), TC_STORE_BRIDGE ":w:%s", m->assistant);
	snprintf(c->route[1], sizeof(c->route[1]), TC_STORE_BRIDGE ":a:%s", m->assistant);
	set_argv(c, (const char *[]){ "FCALL", "threadcast_submit", "4", TC_STORE_COMMANDS, TC_STORE_BRIDGE ":w:*",
				      c->route[0], c->route[1], m->assistant, m->thread, m->method, m->params, m->corr,
				      m->reply, m->deadline, NULL });
}

void tc_store_register(struct tc_store_cmd *c, const char *assistant, const char *worker, long live_ms)
{
	snprintf(c->route[0], sizeof(c->route[0]), TC_STORE_BRIDGE ":w:%s", assistant);
	snprintf(c->num[0], sizeof(c->num[0]), "%ld", live_ms);
	set_argv(c, (const char *[]){ "FCALL", "threadcast_register", "2", c->route[0], TC_STORE_BRIDGE ":assistants",
				      assistant, worker, c->num[0], NULL });
}

int tc_store_library_next(const char *src, size_t len, size_t *off, const char **lib, size_t *lib_len)
{
	static const char next[] = "\n#!lua";
	if (*off >= len)
		return 0;
	*lib = src + *off;
	/* A library ends where a line starts the next one (embed.py checks
	 * that no other line starts so). */
	const char *end = memmem(*lib, len - *off, next, sizeof(next) - 1);
	*lib_len = end ? (size_t)(end + 1 - *lib) : len - *off;
	*off += *lib_len;
	return 1;
}

bool tc_store_assistant_valid(const char *s, size_t len)
{
	if (len < 1 || len > TC_STORE_ASSISTANT_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] == 0x7f)
			return false;
	return true;
}

void tc_store_read_rest_run(struct tc_store_cmd *c, const char *run_id)
{
	snprintf(c->key, sizeof(c->key), TC_STORE_BRIDGE ":r:%s", run_id);
	set_argv(c, (const char *[]){ "HMGET", c->key, "thread_id", "after_seq", "kwargs", "status", "assistant_id",
				      "graph_id", "language", NULL });
}

void tc_store_rest_call(struct tc_store_cmd *c, bool store, const char *op, const char *args)
{
	set_argv(c, (const char *[]){ "FCALL", store ? "threadcast_store" : "threadcast_rest", "1",
				      store ? TC_STORE_STORE : TC_STORE_BRIDGE, op, args, NULL });
}

static const redisReply *field(const redisReply *r, size_t i);

void tc_store_read_route(struct tc_store_cmd *c, const char *thread)
{
	set_argv(c, (const char *[]){ "HMGET", tc_store_key(c->key, thread, TC_KEY_META), "seq", "epoch",
				      "assistant_id", NULL });
}

int tc_store_route_parse(const redisReply *r, uint64_t *seq, const char **assistant, size_t *len)
{
	*seq = 0;
	*assistant = "";
	*len = 0;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3)
		return -1;
	const redisReply *s = field(r, 0), *a = field(r, 2);
	if (s && leading_u64(s->str, s->len, seq) < 0)
		*seq = 0;
	if (a && tc_store_assistant_valid(a->str, a->len)) {
		*assistant = a->str;
		*len = a->len;
	}
	return 0;
}

void tc_store_create_group(struct tc_store_cmd *c)
{
	set_argv(c, (const char *[]){ "XGROUP", "CREATE", TC_STORE_COMMANDS, TC_STORE_WORKERS, "$", "MKSTREAM", NULL });
}

void tc_store_worker_read(struct tc_store_cmd *c, const char *consumer, unsigned count, unsigned block_ms)
{
	snprintf(c->num[0], sizeof(c->num[0]), "%u", count);
	snprintf(c->num[1], sizeof(c->num[1]), "%u", block_ms);
	set_argv(c, (const char *[]){ "XREADGROUP", "GROUP", TC_STORE_WORKERS, consumer, "COUNT", c->num[0], "BLOCK",
				      c->num[1], "STREAMS", TC_STORE_COMMANDS, ">", NULL });
}

void tc_store_worker_claim(struct tc_store_cmd *c, const char *consumer, long min_idle_ms, unsigned count)
{
	snprintf(c->num[0], sizeof(c->num[0]), "%ld", min_idle_ms);
	snprintf(c->num[1], sizeof(c->num[1]), "%u", count);
	set_argv(c, (const char *[]){ "XAUTOCLAIM", TC_STORE_COMMANDS, TC_STORE_WORKERS, consumer, c->num[0], "0-0",
				      "COUNT", c->num[1], NULL });
}

void tc_store_worker_ack(struct tc_store_cmd *c, const char *entry_id)
{
	set_argv(c, (const char *[]){ "XACK", TC_STORE_COMMANDS, TC_STORE_WORKERS, entry_id, NULL });
}

void tc_store_worker_answer(struct tc_store_cmd *c, const char *reply, const char *json)
{
	set_argv(c, (const char *[]){ "SPUBLISH", reply, json, NULL });
}

/* ==== replies and messages ================================================================ */

/* A hash field of an HMGET reply: its string, or NULL when missing. */
static const redisReply *field(const redisReply *r, size_t i)
{
	return i < r->elements && r->element[i]->type == REDIS_REPLY_STRING ? r->element[i] : NULL;
}

int tc_store_rest_run_parse(const redisReply *r, struct tc_store_rest_run *out)
{
	memset(out, 0, sizeof(*out));
	out->status = "";
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 7)
		return -1;
	/* In tc_store_read_rest_run's order. */
	const redisReply *thread = field(r, 0), *after = field(r, 1), *kwargs = field(r, 2), *status = field(r, 3),
			 *assistant = field(r, 4), *graph = field(r, 5), *language = field(r, 6);
	out->python = language && language->len == 6 && !memcmp(language->str, "python", 6);
	if (thread) {
		out->thread_id = thread->str;
		out->thread_id_len = thread->len;
	}
	if (after && leading_u64(after->str, after->len, &out->after_seq) < 0)
		out->after_seq = 0;
	if (kwargs) {
		out->kwargs = kwargs->str;
		out->kwargs_len = kwargs->len;
	}
	if (status) {
		out->status = status->str;
		out->status_len = status->len;
	}
	out->active = !strcmp(out->status, "pending") || !strcmp(out->status, "running");
	out->failed = !strcmp(out->status, "error") || !strcmp(out->status, "timeout");
	if (assistant) {
		out->assistant_id = assistant->str;
		out->assistant_id_len = assistant->len;
	}
	if (graph) {
		out->graph_id = graph->str;
		out->graph_id_len = graph->len;
	}
	return 0;
}

int tc_store_meta_parse(const redisReply *r, struct tc_store_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->epoch = "";
	if (!r || r->type != REDIS_REPLY_ARRAY || (r->elements != 2 && r->elements != 7))
		return -1;
	const redisReply *seq = field(r, 0), *epoch = field(r, 1), *entry_max = field(r, 2), *entry_seq = field(r, 3),
			 *run_seq = field(r, 4), *run_id = field(r, 5), *status = field(r, 6);
	/* A garbled number reads as 0, as if absent: the history then starts over. */
	if (seq && leading_u64(seq->str, seq->len, &m->seq) < 0)
		m->seq = 0;
	if (run_seq && leading_u64(run_seq->str, run_seq->len, &m->run_seq) < 0)
		m->run_seq = 0;
	/* Not known unless both are all digits: a bound read wrong could let a read grow unbounded. */
	if (!entry_max || !entry_seq || tc_store_u64(entry_max->str, entry_max->len, &m->entry_max) < 0 ||
	    tc_store_u64(entry_seq->str, entry_seq->len, &m->entry_seq) < 0)
		m->entry_max = m->entry_seq = 0;
	if (epoch && epoch->len < TC_EPOCH_MAX) {
		m->epoch = epoch->str;
		m->epoch_len = epoch->len;
	}
	if (run_id) {
		m->run_id = run_id->str;
		m->run_id_len = run_id->len;
	}
	m->run_over = status && (!strcmp(status->str, "completed") || !strcmp(status->str, "failed") ||
				 !strcmp(status->str, "interrupted"));
	return 0;
}

int tc_store_entry_parse(const redisReply *e, struct tc_stream_entry *out)
{
	memset(out, 0, sizeof(*out));
	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_ARRAY)
		return -1;
	const redisReply *id = e->element[0], *f = e->element[1];
	int n = leading_u64(id->str, id->len, &out->seq);
	if (n < 0 || (size_t)n + 2 != id->len || memcmp(id->str + n, "-0", 2))
		return -1;
	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		const redisReply *k = f->element[i], *v = f->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || k->len != 1)
			continue;
		switch (k->str[0]) {
		case 'm':
			out->method = v->str;
			out->method_len = v->len;
			break;
		case 'n':
			out->ns = v->str;
			out->ns_len = v->len;
			break;
		case 'e':
			out->json = v->str;
			out->json_len = v->len;
			break;
		}
	}
	return out->method && out->ns && out->json && out->json_len >= 2 && out->json[0] == '{' ? 0 : -1;
}

static bool epoch_ok(const char *e, size_t len)
{
	if (!len || len >= TC_EPOCH_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((e[i] >= '0' && e[i] <= '9') || (e[i] >= 'a' && e[i] <= 'z') || (e[i] >= 'A' && e[i] <= 'Z')))
			return false;
	return true;
}

int tc_store_doorbell_parse(const char *p, size_t len, struct tc_doorbell *out)
{
	const char *end = p + len, *f[4];
	size_t flen[4];

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < 4; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return -1;
		f[i] = p;
		flen[i] = (size_t)(nl - p);
		p = nl + 1;
	}
	if (!flen[0] || flen[0] >= TC_EPOCH_MAX || tc_store_u64(f[1], flen[1], &out->seq) || end - p < 2 || *p != '{')
		return -1;
	if (!epoch_ok(f[0], flen[0])) /* an epoch is letters and digits */
		return -1;
	out->epoch = f[0];
	out->epoch_len = flen[0];
	out->method = f[2];
	out->method_len = flen[2];
	out->ns = f[3];
	out->ns_len = flen[3];
	out->json = p;
	out->json_len = (size_t)(end - p);
	return 0;
}

/* The next "\n"-terminated field of [*p, end): 0 and the field, or -1. */
static int next_field(const char **p, const char *end, const char **f, size_t *flen)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	if (!nl)
		return -1;
	*f = *p;
	*flen = (size_t)(nl - *p);
	*p = nl + 1;
	return 0;
}

int tc_store_doorbell_open(struct tc_doorbell_reader *r, const char *p, size_t len)
{
	const char *f;
	size_t flen;

	memset(r, 0, sizeof(*r));
	r->end = p + len;
	if (len && *p == '#') { /* thin: the events are only in the stream */
		r->p = p + 1;
		r->left = 1;
		r->thin = true;
		if (next_field(&r->p, r->end, &r->epoch, &r->epoch_len) || !epoch_ok(r->epoch, r->epoch_len) ||
		    next_field(&r->p, r->end, &f, &flen) || tc_store_u64(f, flen, &r->seq) || !r->seq || r->p != r->end)
			return -1;
		return 0;
	}
	if (!len || *p != '*') { /* one event: read whole by tc_store_doorbell_next */
		r->p = p;
		r->left = 1;
		return 0;
	}
	r->batch = true;
	r->p = p + 1;
	if (next_field(&r->p, r->end, &r->epoch, &r->epoch_len) || !epoch_ok(r->epoch, r->epoch_len) ||
	    next_field(&r->p, r->end, &f, &flen) || tc_store_u64(f, flen, &r->seq) || !r->seq ||
	    next_field(&r->p, r->end, &f, &flen) || tc_store_u64(f, flen, &r->left) || !r->left)
		return -1;
	return 0;
}

int tc_store_doorbell_next(struct tc_doorbell_reader *r, struct tc_doorbell *out)
{
	const char *f;
	size_t flen;
	uint64_t jlen;

	if (!r->left)
		return r->p == r->end ? 0 : -1;
	if (r->thin) {
		memset(out, 0, sizeof(*out));
		out->epoch = r->epoch;
		out->epoch_len = r->epoch_len;
		out->seq = r->seq;
		r->left = 0;
		return 1;
	}
	if (!r->batch) {
		r->left = 0;
		if (tc_store_doorbell_parse(r->p, (size_t)(r->end - r->p), out))
			return -1;
		r->p = r->end;
		return 1;
	}
	memset(out, 0, sizeof(*out));
	if (next_field(&r->p, r->end, &out->method, &out->method_len) ||
	    next_field(&r->p, r->end, &out->ns, &out->ns_len) || next_field(&r->p, r->end, &f, &flen) ||
	    tc_store_u64(f, flen, &jlen) || jlen > (uint64_t)(r->end - r->p) || jlen < 2 || *r->p != '{')
		return -1;
	out->epoch = r->epoch;
	out->epoch_len = r->epoch_len;
	out->seq = r->seq++;
	out->json = r->p;
	out->json_len = (size_t)jlen;
	r->p += jlen;
	r->left--;
	return 1;
}

int tc_store_values_parse(const char *v, size_t len, uint64_t *seq, const char **json, size_t *json_len)
{
	const char *nl = memchr(v, '\n', len);
	if (!nl || tc_store_u64(v, (size_t)(nl - v), seq) || !*seq)
		return -1;
	*json = nl + 1;
	*json_len = len - (size_t)(nl + 1 - v);
	return *json_len >= 2 && **json == '{' ? 0 : -1;
}

void tc_store_tree_parse(const char *v, size_t len, struct tc_tree_value *out)
{
	const char *nl = memchr(v, '\n', len);
	out->status = v;
	out->status_len = nl ? (size_t)(nl - v) : len;
	out->graph = nl ? nl + 1 : "";
	out->graph_len = nl ? len - out->status_len - 1 : 0;
}

size_t tc_store_pairs(const redisReply *r, struct tc_store_pair *out)
{
	size_t n = 0;
	if (r->type != REDIS_REPLY_ARRAY)
		return 0;
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		out[n++] = (struct tc_store_pair){ k->str, v->str, k->len, v->len };
	}
	return n;
}
