#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "log.h"
#include "metrics.h"
#include "protocol.h"
#include "util.h"

/* Stream entries per replay round trip, and the prefetch budget of the
 * counting pass (a replay that fits is read from Redis only once). */
#define SCAN_BATCH 512
#define PREFETCH_BYTES (256 * 1024)
/* Frames a client may pipeline while a replay runs, beyond which it is cut. */
#define MAX_PENDING 256

struct subscription {
	char *id;
	struct tc_filter *filter;
	bool fresh; /* added by the command being served */
};

/* A command frame that arrived while another command was being served. */
struct pending {
	struct pending *next;
	size_t len;
	char data[];
};

enum job_kind { JOB_SUBSCRIBE, JOB_RECONNECT, JOB_TREE };

/* What the job does next; advance() issues it. */
enum step {
	ST_META,   /* HMGET meta */
	ST_VALUES, /* HGETALL values (subscribe: the baseline) */
	ST_FIRST,  /* XRANGE - + COUNT 1 (reconnect: oldest seq kept) */
	ST_TREE,   /* HGETALL tree (reconnect, agent.getTree) */
	ST_COUNT,  /* XRANGE over the replay range, counting (subscribe) */
	ST_EPOCH,  /* HGET meta epoch: the thread got its first event meanwhile */
	ST_SCAN,   /* XRANGE (pos, +], sending */
	ST_LIVE,   /* caught up: wait for the hub, then go live */
};

/*
 * The command being served. Subscribe and reconnect replay from the stream:
 *   events with seq <= hist_end  were already accounted for on this
 *                                connection: sent only if they match a
 *                                fresh subscription and no older one;
 *   hist_end < seq < start       before the replay range: older
 *                                subscriptions only;
 *   seq >= start                 any subscription.
 */
struct job {
	enum job_kind kind;
	enum step step;
	uint64_t cmd_id;
	bool responded;   /* the command's reply has been sent */
	bool in_flight;   /* a Redis command of this job is out */
	bool wait_drain;  /* frames wait in out until the transport drains */
	uint64_t hist_end, start, end, pos;
	uint64_t counted; /* subscribe: replayedEvents */
	uint64_t skipped; /* events before start left out by --max-replay */
	uint64_t run_seq, head, first;
	char epoch[40];   /* the thread's epoch per meta */
	char *run_id;
	bool fresh_member;       /* the connection joined the thread with this job */
	struct tc_bufq out;      /* frames ready for the client, paced */
	struct tc_bufq baseline; /* subscribe: values snapshots, sent after the reply */
	struct tc_bufq prefetch; /* subscribe: the whole replay, when small */
	bool prefetch_ok;
	bool stream;      /* an SSE stream: stream_started() instead of a reply */
	/* reconnect */
	bool has_last;
	bool last_any_epoch; /* SSE `since`: a bare seq of the current epoch */
	uint64_t last_seq;
	char last_epoch[40];
	/* agent.getTree */
	char *want_run;
	cJSON *result;
};

struct tc_session {
	const struct tc_session_env *env;
	const struct tc_session_io *io;
	void *ctx;
	char *thread_id;
	struct subscription *subs;
	size_t nsubs, capsubs;
	uint64_t next_nonce;
	struct tc_member member;
	struct tc_bridge_caller caller; /* runtime commands waiting for workers */
	size_t inflight;                /* how many */
	bool may_command;               /* runtime commands allowed */
	unsigned refs;   /* the transport's + one per Redis reply or command in flight */
	bool closed;
	struct tc_redis_waiter waiter;
	struct pending *pending, *pending_tail;
	size_t npending;
	bool reading;
	double tokens;          /* command rate limit: a token bucket */
	uint64_t refilled_ns;
	unsigned rejected;      /* commands refused in a row */
	struct job *job; /* the command being served, NULL between commands */
};

static void advance(struct tc_session *s);
static void run_pending(struct tc_session *s);

/* ==== lifetime ============================================================================ */

#define SESSION_OF(m) ((struct tc_session *)((char *)(m) - offsetof(struct tc_session, member)))

/* The job is over: everything it holds goes. (An idle session holds no job:
 * its 300-odd bytes are only spent while a command is served.) */
static void job_end(struct tc_session *s)
{
	struct job *j = s->job;
	if (!j)
		return;
	tc_bufq_clear(&j->out);
	tc_bufq_clear(&j->baseline);
	tc_bufq_clear(&j->prefetch);
	free(j->run_id);
	free(j->want_run);
	cJSON_Delete(j->result);
	free(j);
	s->job = NULL;
}

static void session_free(struct tc_session *s)
{
	for (size_t i = 0; i < s->nsubs; i++) {
		free(s->subs[i].id);
		tc_filter_free(s->subs[i].filter);
	}
	tc_metrics.subscriptions -= s->nsubs;
	free(s->subs);
	job_end(s);
	while (s->pending) {
		struct pending *p = s->pending;
		s->pending = p->next;
		free(p);
	}
	free(s->thread_id);
	free(s);
}

/* Drops one reference; true when the session is closed (maybe freed). */
static bool release(struct tc_session *s)
{
	s->refs--;
	if (!s->closed)
		return false;
	if (!s->refs)
		session_free(s);
	return true;
}

void tc_session_close(struct tc_session *s)
{
	if (!s || s->closed)
		return;
	s->closed = true;
	tc_hub_detach(s->env->hub, &s->member);
	tc_redis_wait_cancel(s->env->redis, &s->waiter);
	release(s);
}

void tc_session_allow_commands(struct tc_session *s, bool allowed)
{
	s->may_command = allowed;
}

const char *tc_session_thread(const struct tc_session *s)
{
	return s->thread_id;
}

size_t tc_session_subscriptions(const struct tc_session *s)
{
	return s->nsubs;
}

/* ==== matching =================================================================================== */

enum which { ANY, FRESH, OLD };

static bool match_subs(const struct tc_session *s, const struct tc_event_key *k, enum which w)
{
	for (size_t i = 0; i < s->nsubs; i++) {
		if ((w == FRESH && !s->subs[i].fresh) || (w == OLD && s->subs[i].fresh))
			continue;
		if (tc_filter_match(s->subs[i].filter, k))
			return true;
	}
	return false;
}

/* Whether the job sends the event with this seq (see struct job). */
static bool job_wants(const struct tc_session *s, const struct tc_event_key *k, uint64_t seq)
{
	const struct job *j = s->job;
	if (seq <= j->hist_end)
		return match_subs(s, k, FRESH) && !match_subs(s, k, OLD);
	if (seq < j->start)
		return match_subs(s, k, OLD);
	return match_subs(s, k, ANY);
}

/* ==== hub member ========================================================================== */

static bool member_match(struct tc_member *m, const struct tc_event_key *k)
{
	return match_subs(SESSION_OF(m), k, ANY);
}

static void member_send(struct tc_member *m, struct tc_event *ev)
{
	struct tc_session *s = SESSION_OF(m);
	tc_metrics.events_delivered++;
	s->io->send(s->ctx, tc_buf_ref(tc_event_frame(ev, s->io->kind)));
}

static void member_ready(struct tc_member *m)
{
	struct tc_session *s = SESSION_OF(m);
	if (s->job && s->job->step == ST_LIVE)
		advance(s);
}

static void member_lost(struct tc_member *m, const char *why)
{
	struct tc_session *s = SESSION_OF(m);
	s->io->close(s->ctx, TC_CLOSE_HISTORY_RESET, why);
}

static const struct tc_member_ops member_ops = {
	.match = member_match, .send = member_send, .ready = member_ready, .lost = member_lost,
};

/* ==== replies ===================================================================================== */

static void send_error(struct tc_session *s, bool has_id, uint64_t id, const struct tc_error *err)
{
	tc_metrics.command_errors++;
	s->io->send(s->ctx, tc_response_error(has_id, id, err->code, err->message));
}

static void send_success(struct tc_session *s, uint64_t id, cJSON *result, int64_t seq)
{
	s->io->send(s->ctx, tc_response_success(id, result, seq));
}

static void remove_sub(struct tc_session *s, size_t i)
{
	tc_metrics.subscriptions--;
	free(s->subs[i].id);
	tc_filter_free(s->subs[i].filter);
	s->subs[i] = s->subs[--s->nsubs];
}

/* The job is over: fresh subscriptions become ordinary, queued commands run. */
static void job_done(struct tc_session *s)
{
	for (size_t i = 0; i < s->nsubs; i++)
		s->subs[i].fresh = false;
	job_end(s);
	run_pending(s);
}

/* The job fails before its reply: undo its subscriptions and answer. */
static void job_fail(struct tc_session *s, enum tc_err code, const char *message)
{
	struct tc_error err;
	for (size_t i = s->nsubs; i-- > 0;)
		if (s->subs[i].fresh)
			remove_sub(s, i);
	tc_error_set(&err, code, "%s", message);
	if (s->job->stream)
		s->io->close(s->ctx, TC_CLOSE_INTERNAL, TC_MSG_REDIS_DOWN);
	else
		send_error(s, true, s->job->cmd_id, &err);
	job_done(s);
}

/* ==== Redis plumbing ============================================================================= */

static void on_redis_back(struct tc_redis_waiter *w)
{
	struct tc_session *s = (struct tc_session *)((char *)w - offsetof(struct tc_session, waiter));
	advance(s);
}

/* A reply was lost with the link. Before the command's reply the client is
 * told to retry; after it, the job resumes where it was once Redis is back. */
static void redis_failed(struct tc_session *s)
{
	if (!s->job->responded) {
		job_fail(s, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN);
		return;
	}
	tc_redis_wait_ready(s->env->redis, &s->waiter);
}

static void job_command(struct tc_session *s, tc_redis_cb *cb, int argc, const char **argv)
{
	size_t lens[8];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	if (tc_redis_command(s->env->redis, cb, s, argc, argv, lens)) {
		redis_failed(s);
		return;
	}
	s->refs++;
	s->job->in_flight = true;
}

/* Common head of every job reply callback: false when it must stop here. */
static bool job_reply(struct tc_session *s, redisReply *reply, int type)
{
	s->job->in_flight = false;
	if (release(s))
		return false;
	if (!reply) {
		redis_failed(s);
		return false;
	}
	if (reply->type != type) {
		tc_log(TC_LOG_ERROR, "unexpected Redis reply", TC_LS("thread", s->thread_id),
		       TC_LS("error", reply->type == REDIS_REPLY_ERROR ? reply->str : NULL));
		if (!s->job->responded)
			job_fail(s, TC_ERR_UNKNOWN_ERROR, "the event store answered unexpectedly");
		else
			s->io->close(s->ctx, TC_CLOSE_INTERNAL, "internal error while replaying");
		return false;
	}
	return true;
}

static uint64_t reply_u64(const redisReply *r)
{
	uint64_t v = 0;
	if (r->type == REDIS_REPLY_STRING)
		for (size_t i = 0; i < r->len && r->str[i] >= '0' && r->str[i] <= '9'; i++)
			v = v * 10 + (uint64_t)(r->str[i] - '0');
	return v;
}

/* ==== pacing ========================================================================================== */

/* Moves frames to the transport while it has room. True when out is empty. */
static bool pump(struct tc_session *s)
{
	const size_t room = (size_t)s->env->cfg->max_queue_bytes / 2;
	struct tc_buf *b;
	while ((b = tc_bufq_peek(&s->job->out)) && s->io->queued(s->ctx) < room)
		s->io->send(s->ctx, tc_bufq_pop(&s->job->out));
	if (!s->job->out.count)
		return true;
	s->job->wait_drain = true;
	return false;
}

void tc_session_on_drained(struct tc_session *s)
{
	if (s->closed || !s->job || !s->job->wait_drain)
		return;
	s->job->wait_drain = false;
	advance(s);
}

static void queue_frame(struct tc_session *s, struct tc_buf *b)
{
	tc_metrics.events_delivered++;
	tc_metrics.replayed_events++;
	tc_bufq_push(&s->job->out, b);
}

/* A replayed event framed for this session's transport (one reference). */
static struct tc_buf *replay_frame(struct tc_session *s, uint64_t seq, const char *method,
				   size_t mlen, const char *json, size_t jlen)
{
	struct tc_event ev = { .epoch = s->job->epoch, .seq = seq, .method = method,
			       .method_len = mlen, .json = json, .json_len = jlen };
	struct tc_buf *b = tc_buf_ref(tc_event_frame(&ev, s->io->kind));
	tc_event_release(&ev);
	return b;
}

/* ==== job steps ======================================================================================= */

/*
 * Bounds the work one request can ask for: a replay from start to end that
 * is longer than --max-replay begins at the newest --max-replay events
 * instead; what it leaves out is counted in j->skipped.
 */
static void cap_replay(struct tc_session *s)
{
	struct job *j = s->job;
	const uint64_t max = (uint64_t)s->env->cfg->max_replay;
	if (j->end < j->start || j->end - j->start < max)
		return;
	uint64_t start = j->end - max + 1;
	j->skipped += start - j->start;
	j->start = start;
	tc_metrics.replays_capped++;
}

static void on_meta(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;
	struct job *j = s->job;

	if (!job_reply(s, reply, REDIS_REPLY_ARRAY) || reply->elements != 4)
		return;
	j->head = reply_u64(reply->element[0]);
	snprintf(j->epoch, sizeof(j->epoch), "%s",
		 reply->element[1]->type == REDIS_REPLY_STRING ? reply->element[1]->str : "");
	j->run_seq = reply_u64(reply->element[2]);
	if (!j->run_seq)
		j->run_seq = 1;
	free(j->run_id);
	j->run_id = reply->element[3]->type == REDIS_REPLY_STRING ? tc_xstrdup(reply->element[3]->str) : NULL;
	j->end = j->head;
	switch (j->kind) {
	case JOB_SUBSCRIBE:
		j->start = j->run_seq;
		cap_replay(s);
		if (j->fresh_member)
			j->hist_end = j->start - 1;
		j->pos = j->start - 1;
		j->step = ST_VALUES;
		break;
	case JOB_RECONNECT:
		j->step = ST_FIRST;
		break;
	default:
		j->step = ST_TREE;
		break;
	}
	advance(s);
}

struct snapshot {
	uint64_t seq;
	const char *json;
	size_t len;
};

static int cmp_snapshot(const void *a, const void *b)
{
	const struct snapshot *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Values snapshots older than the replay that the fresh subscription wants. */
static void on_values(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;
	struct job *j = s->job;

	if (!job_reply(s, reply, REDIS_REPLY_ARRAY))
		return;
	struct snapshot *base = tc_xcalloc(reply->elements / 2 + 1, sizeof(*base));
	size_t nbase = 0;
	for (size_t i = 0; i + 1 < reply->elements; i += 2) {
		const redisReply *k = reply->element[i], *v = reply->element[i + 1];
		struct tc_event_key key;
		uint64_t seq = reply_u64(v);
		const char *nl = v->type == REDIS_REPLY_STRING ? memchr(v->str, '\n', v->len) : NULL;
		if (!nl || !seq || seq >= j->start || seq > j->hist_end || k->type != REDIS_REPLY_STRING ||
		    tc_event_key_init(&key, "values", 6, k->str, k->len))
			continue;
		if (!match_subs(s, &key, FRESH) || match_subs(s, &key, OLD))
			continue;
		size_t len = v->len - (size_t)(nl + 1 - v->str);
		if (len < 2 || nl[1] != '{')
			continue;
		base[nbase++] = (struct snapshot){ seq, nl + 1, len };
	}
	/* Oldest first, so the connection's seqs still rise. */
	qsort(base, nbase, sizeof(*base), cmp_snapshot);
	for (size_t i = 0; i < nbase; i++)
		tc_bufq_push(&j->baseline, replay_frame(s, base[i].seq, "values", 6, base[i].json, base[i].len));
	j->counted += nbase;
	free(base);
	j->step = ST_COUNT;
	j->prefetch_ok = j->hist_end + 1 >= j->start;
	advance(s);
}

/* The count is known: reply, then baseline, then the replay, then live. */
static void respond_subscribe(struct tc_session *s)
{
	struct job *j = s->job;
	struct tc_buf *b;

	if (j->stream) {
		s->io->stream_started(s->ctx, !j->skipped, j->skipped != 0, j->skipped);
	} else {
		cJSON *res = cJSON_CreateObject();
		cJSON_AddStringToObject(res, "subscriptionId", s->subs[s->nsubs - 1].id);
		cJSON_AddNumberToObject(res, "replayedEvents", (double)j->counted);
		/* An extension (the result is Extensible): the run's first events
		 * were left out of the replay by --max-replay. */
		if (j->skipped)
			cJSON_AddNumberToObject(res, "missedEvents", (double)j->skipped);
		send_success(s, j->cmd_id, res, (int64_t)j->end);
	}
	j->responded = true;
	while ((b = tc_bufq_pop(&j->baseline)))
		queue_frame(s, b);
	if (j->prefetch_ok) {
		while ((b = tc_bufq_pop(&j->prefetch)))
			queue_frame(s, b);
		j->pos = j->end;
		if (j->end > j->hist_end && j->end > s->member.cursor)
			s->member.cursor = j->end;
	} else {
		j->pos = (j->hist_end + 1 < j->start ? j->hist_end + 1 : j->start) - 1;
	}
	j->step = ST_SCAN;
	advance(s);
}

static void on_count(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;
	struct job *j = s->job;

	if (!job_reply(s, reply, REDIS_REPLY_ARRAY))
		return;
	for (size_t i = 0; i < reply->elements; i++) {
		struct tc_stream_entry e;
		struct tc_event_key key;
		if (tc_stream_entry_parse(reply->element[i], &e) || e.seq > j->end)
			continue;
		j->pos = e.seq;
		if (tc_event_key_init(&key, e.method, e.method_len, e.ns, e.ns_len))
			continue;
		bool wanted = job_wants(s, &key, e.seq);
		if (wanted && match_subs(s, &key, FRESH))
			j->counted++;
		if (!j->prefetch_ok || !wanted)
			continue;
		if (j->prefetch.bytes + e.json_len > PREFETCH_BYTES || reply->elements == SCAN_BATCH) {
			/* Too big to hold: the sending pass reads it again. */
			tc_bufq_clear(&j->prefetch);
			j->prefetch_ok = false;
			continue;
		}
		tc_bufq_push(&j->prefetch, replay_frame(s, e.seq, e.method, e.method_len, e.json, e.json_len));
	}
	if (reply->elements == SCAN_BATCH && j->pos < j->end) {
		advance(s); /* more to count */
		return;
	}
	respond_subscribe(s);
}

static void on_scan(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;
	struct job *j = s->job;
	const size_t budget = (size_t)s->env->cfg->max_queue_bytes / 2;
	bool stopped = false;

	if (!job_reply(s, reply, REDIS_REPLY_ARRAY))
		return;
	if (!j->epoch[0] && reply->elements) {
		/* The thread had no history when the job read meta: learn the
		 * epoch of the one that began since, then read this batch again. */
		j->step = ST_EPOCH;
		advance(s);
		return;
	}
	for (size_t i = 0; i < reply->elements; i++) {
		struct tc_stream_entry e;
		struct tc_event_key key;
		if (tc_stream_entry_parse(reply->element[i], &e) || e.seq <= j->pos)
			continue;
		if (j->out.bytes >= budget) {
			stopped = true; /* the rest is read again after the client drains */
			break;
		}
		j->pos = e.seq;
		if (e.seq > j->hist_end && e.seq > s->member.cursor)
			s->member.cursor = e.seq;
		if (!tc_event_key_init(&key, e.method, e.method_len, e.ns, e.ns_len) &&
		    job_wants(s, &key, e.seq))
			queue_frame(s, replay_frame(s, e.seq, e.method, e.method_len, e.json, e.json_len));
	}
	if (!stopped && reply->elements < SCAN_BATCH)
		j->step = ST_LIVE;
	advance(s);
}

/* currentNamespaces / agent.getTree need the namespace of each tree entry. */
static cJSON *tree_entry(const redisReply *k, const redisReply *v, const char **status,
			 size_t *slen, const char **graph, size_t *glen)
{
	const char *nl = memchr(v->str, '\n', v->len);
	*status = v->str;
	*slen = nl ? (size_t)(nl - v->str) : v->len;
	*graph = nl ? nl + 1 : "";
	*glen = nl ? v->len - *slen - 1 : 0;
	return tc_namespace_decode(k->str, k->len);
}

static cJSON *make_str(const char *s, size_t len)
{
	char *c = tc_xstrndup(s, len);
	cJSON *o = cJSON_CreateString(c);
	free(c);
	return o;
}

static int cmp_reply_keys(const void *a, const void *b)
{
	const redisReply *x = *(const redisReply *const *)a, *y = *(const redisReply *const *)b;
	int c = memcmp(x->str, y->str, x->len < y->len ? x->len : y->len);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Builds agent.getTree's tree: each namespace under its longest present prefix. */
static cJSON *build_tree(redisReply *reply)
{
	size_t n = reply->elements / 2;
	const redisReply **keys = tc_xcalloc(n ? n : 1, sizeof(*keys));
	cJSON **nodes = tc_xcalloc(n ? n : 1, sizeof(*nodes));
	cJSON *root = NULL;

	for (size_t i = 0; i < n; i++)
		keys[i] = reply->element[2 * i];
	/* Sorted keys put every prefix before what it prefixes. */
	qsort(keys, n, sizeof(*keys), cmp_reply_keys);
	for (size_t i = 0; i < n; i++) {
		const redisReply *k = keys[i], *v = NULL;
		for (size_t x = 0; x < n; x++)
			if (reply->element[2 * x] == k)
				v = reply->element[2 * x + 1];
		const char *st, *gr;
		size_t sl, gl;
		cJSON *node = cJSON_CreateObject();
		cJSON_AddItemToObject(node, "namespace", tree_entry(k, v, &st, &sl, &gr, &gl));
		cJSON_AddItemToObject(node, "status", make_str(st, sl));
		cJSON_AddItemToObject(node, "graphName", make_str(gr, gl));
		nodes[i] = node;
		if (k->len == 0) {
			root = node;
			continue;
		}
		/* Parent: the longest earlier key that is a segment prefix. */
		cJSON *parent = NULL;
		for (size_t p = i; p-- > 0;) {
			const redisReply *pk = keys[p];
			if (pk->len < k->len && !memcmp(pk->str, k->str, pk->len) && k->str[pk->len] == '/') {
				parent = nodes[p];
				break;
			}
		}
		if (!parent)
			parent = root;
		if (!parent) {
			cJSON_Delete(node);
			nodes[i] = NULL;
			continue;
		}
		cJSON *children = cJSON_GetObjectItemCaseSensitive(parent, "children");
		if (!children)
			children = cJSON_AddArrayToObject(parent, "children");
		cJSON_AddItemToArray(children, node);
	}
	free(keys);
	free(nodes);
	return root;
}

static void on_tree(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;
	struct job *j = s->job;

	if (!job_reply(s, reply, REDIS_REPLY_ARRAY))
		return;
	if (j->kind == JOB_TREE) {
		cJSON *tree = reply->elements ? build_tree(reply) : NULL;
		if (!tree || (j->want_run && (!j->run_id || strcmp(j->want_run, j->run_id)))) {
			cJSON_Delete(tree);
			struct tc_error err;
			tc_error_set(&err, TC_ERR_NO_SUCH_RUN, j->want_run ?
				     "run \"%.64s\" is not this thread's current run" :
				     "thread \"%s\" has no run", j->want_run ? j->want_run : s->thread_id);
			send_error(s, true, j->cmd_id, &err);
			job_done(s);
			return;
		}
		cJSON *res = cJSON_CreateObject();
		cJSON_AddItemToObject(res, "tree", tree);
		send_success(s, j->cmd_id, res, (int64_t)j->head);
		job_done(s);
		return;
	}

	/* subscription.reconnect: decide, answer, then replay. */
	cJSON *res = cJSON_CreateObject();
	bool restored = true;
	if (j->last_any_epoch)
		snprintf(j->last_epoch, sizeof(j->last_epoch), "%s", j->epoch);
	if (j->has_last) {
		if (!j->epoch[0] || strcmp(j->epoch, j->last_epoch)) {
			/* Redis lost the history the client knew: the count is unknowable. */
			restored = false;
			j->start = j->first ? j->first : 1;
		} else if (j->last_seq + 1 < j->first) {
			restored = false;
			cJSON_AddNumberToObject(res, "missedEvents", (double)(j->first - j->last_seq - 1));
			j->start = j->first;
		} else {
			j->start = j->last_seq + 1;
		}
	} else {
		j->start = j->run_seq;
	}
	cap_replay(s);
	if (j->skipped) {
		/* Too far behind to replay all of it: the newest --max-replay events
		 * come, the rest is missed (added to what trimming took, if known). */
		cJSON *missed = cJSON_GetObjectItemCaseSensitive(res, "missedEvents");
		if (missed)
			cJSON_SetNumberValue(missed, missed->valuedouble + (double)j->skipped);
		else if (restored)
			cJSON_AddNumberToObject(res, "missedEvents", (double)j->skipped);
		restored = false;
	}
	cJSON_AddBoolToObject(res, "restored", restored);
	cJSON *cur = cJSON_AddArrayToObject(res, "currentNamespaces");
	const redisReply **keys = tc_xcalloc(reply->elements / 2 + 1, sizeof(*keys));
	for (size_t i = 0; i + 1 < reply->elements; i += 2)
		keys[i / 2] = reply->element[i];
	qsort(keys, reply->elements / 2, sizeof(*keys), cmp_reply_keys);
	for (size_t i = 0; i < reply->elements / 2; i++) {
		const redisReply *v = NULL;
		for (size_t x = 0; x + 1 < reply->elements; x += 2)
			if (reply->element[x] == keys[i])
				v = reply->element[x + 1];
		const char *st, *gr;
		size_t sl, gl;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToObject(e, "namespace", tree_entry(keys[i], v, &st, &sl, &gr, &gl));
		cJSON_AddItemToObject(e, "status", make_str(st, sl));
		cJSON_AddItemToArray(cur, e);
	}
	free(keys);
	if (j->fresh_member)
		j->hist_end = j->start - 1;
	j->pos = (j->hist_end + 1 < j->start ? j->hist_end + 1 : j->start) - 1;
	if (j->stream) {
		const cJSON *missed = cJSON_GetObjectItemCaseSensitive(res, "missedEvents");
		s->io->stream_started(s->ctx, restored, missed != NULL,
				      missed ? (uint64_t)missed->valuedouble : 0);
		cJSON_Delete(res);
	} else {
		send_success(s, j->cmd_id, res, (int64_t)j->head);
	}
	j->responded = true;
	j->step = ST_SCAN;
	advance(s);
}

static void on_epoch(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;

	if (!job_reply(s, reply, reply && reply->type == REDIS_REPLY_NIL ? REDIS_REPLY_NIL : REDIS_REPLY_STRING))
		return;
	if (reply->type != REDIS_REPLY_STRING) {
		/* Events without meta: someone deleted it; the history is unusable. */
		s->io->close(s->ctx, TC_CLOSE_HISTORY_RESET, "the thread's history is inconsistent; reconnect");
		return;
	}
	snprintf(s->job->epoch, sizeof(s->job->epoch), "%s", reply->str);
	s->job->step = ST_SCAN;
	advance(s);
}

static void on_first(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_session *s = priv;
	struct tc_stream_entry e;

	if (!job_reply(s, reply, REDIS_REPLY_ARRAY))
		return;
	s->job->first = reply->elements && !tc_stream_entry_parse(reply->element[0], &e) ?
			       e.seq : s->job->head + 1;
	s->job->step = ST_TREE;
	advance(s);
}

/* Issues the job's next Redis command, or goes live. */
static void advance(struct tc_session *s)
{
	struct job *j = s->job;
	char key[TC_THREAD_ID_MAX + 32], from[32], to[32], count[16];

	if (s->closed || !j || j->in_flight || !pump(s))
		return;
	snprintf(count, sizeof(count), "%d", SCAN_BATCH);
	switch (j->step) {
	case ST_META:
		tc_thread_key(key, sizeof(key), s->thread_id, "meta");
		job_command(s, on_meta, 6, (const char *[]){ "HMGET", key, "seq", "epoch", "run_seq", "run_id" });
		break;
	case ST_VALUES:
		tc_thread_key(key, sizeof(key), s->thread_id, "values");
		job_command(s, on_values, 2, (const char *[]){ "HGETALL", key });
		break;
	case ST_FIRST:
		tc_thread_key(key, sizeof(key), s->thread_id, "events");
		job_command(s, on_first, 6, (const char *[]){ "XRANGE", key, "-", "+", "COUNT", "1" });
		break;
	case ST_TREE:
		tc_thread_key(key, sizeof(key), s->thread_id, "tree");
		job_command(s, on_tree, 2, (const char *[]){ "HGETALL", key });
		break;
	case ST_COUNT:
		tc_thread_key(key, sizeof(key), s->thread_id, "events");
		snprintf(from, sizeof(from), "%llu-0", (unsigned long long)j->pos + 1);
		snprintf(to, sizeof(to), "%llu-0", (unsigned long long)j->end);
		if (j->pos >= j->end) {
			respond_subscribe(s); /* empty range: nothing to count */
			break;
		}
		job_command(s, on_count, 6, (const char *[]){ "XRANGE", key, from, to, "COUNT", count });
		break;
	case ST_EPOCH:
		tc_thread_key(key, sizeof(key), s->thread_id, "meta");
		job_command(s, on_epoch, 3, (const char *[]){ "HGET", key, "epoch" });
		break;
	case ST_SCAN:
		tc_thread_key(key, sizeof(key), s->thread_id, "events");
		snprintf(from, sizeof(from), "%llu-0", (unsigned long long)j->pos + 1);
		job_command(s, on_scan, 6, (const char *[]){ "XRANGE", key, from, "+", "COUNT", count });
		break;
	case ST_LIVE: {
		const struct tc_thread *t = s->member.thread;
		if (!t || !tc_thread_ready(t))
			return; /* member_ready() calls again */
		if (s->member.cursor < tc_thread_head(t)) {
			j->step = ST_SCAN; /* the hub moved on while we read: read on */
			advance(s);
			return;
		}
		s->member.live = true;
		job_done(s);
		break;
	}
	}
}

/* ==== commands ================================================================================== */

/* Prepares the job of a command; the caller fills its fields, then job_begin(). */
static struct job *job_new(struct tc_session *s, enum job_kind kind, uint64_t id)
{
	struct job *j = s->job = tc_xcalloc(1, sizeof(*j));
	j->kind = kind;
	j->cmd_id = id;
	j->step = ST_META;
	if (kind != JOB_TREE) {
		tc_metrics.replay_requests++;
		if (!s->member.thread) {
			s->member.cursor = 0;
			tc_hub_attach(s->env->hub, s->thread_id, &s->member);
			j->fresh_member = true;
		}
		/* Until caught up again, what the hub fans out is read from the
		 * stream instead; everything up to the cursor is accounted for. */
		j->hist_end = s->member.cursor;
		s->member.live = false;
	}
	return j;
}

static void job_begin(struct tc_session *s)
{
	if (!tc_redis_cmd_up(s->env->redis)) {
		job_fail(s, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN);
		return;
	}
	advance(s);
}

static struct subscription *find_sub(struct tc_session *s, const char *id)
{
	for (size_t i = 0; i < s->nsubs; i++)
		if (!strcmp(s->subs[i].id, id))
			return &s->subs[i];
	return NULL;
}

static enum tc_err add_sub(struct tc_session *s, struct tc_filter *f, const char *given_id,
			   struct tc_error *err)
{
	if (s->nsubs >= (size_t)s->env->cfg->max_subscriptions) {
		tc_filter_free(f);
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "this connection already holds %zu subscriptions, the limit; "
				    "unsubscribe one first", s->nsubs);
	}
	if (s->nsubs == s->capsubs) {
		s->capsubs = s->capsubs ? s->capsubs * 2 : 1; /* most connections hold one */
		s->subs = tc_xrealloc(s->subs, s->capsubs * sizeof(*s->subs));
	}
	char *id;
	if (given_id) {
		id = tc_xstrdup(given_id);
	} else {
		/* Ids restored by subscription.reconnect may use any nonce: skip them. */
		while (find_sub(s, id = tc_subscription_id(f, s->next_nonce++)))
			free(id);
	}
	s->subs[s->nsubs++] = (struct subscription){ .id = id, .filter = f, .fresh = true };
	tc_metrics.subscriptions++;
	return TC_OK;
}

static enum tc_err do_subscribe(struct tc_session *s, const struct tc_command *cmd,
				struct tc_error *err)
{
	struct tc_filter *f;

	if (!cmd->params)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	if (tc_filter_parse(cmd->params, &f, err) || add_sub(s, f, NULL, err))
		return err->code;
	job_new(s, JOB_SUBSCRIBE, cmd->id);
	job_begin(s);
	return TC_OK;
}

static enum tc_err do_unsubscribe(struct tc_session *s, const struct tc_command *cmd,
				  struct tc_error *err)
{
	if (!cmd->params)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd->params, "subscriptionId");
	if (!id)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.subscriptionId is required");
	if (!cJSON_IsString(id))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "params.subscriptionId must be a string");
	struct subscription *sub = find_sub(s, id->valuestring);
	if (!sub) {
		size_t len = strlen(id->valuestring);
		return tc_error_set(err, TC_ERR_NO_SUCH_SUBSCRIPTION,
				    "no subscription \"%.*s%s\" on this connection",
				    (int)tc_utf8_prefix(id->valuestring, len, 48), id->valuestring,
				    len > 48 ? "…" : "");
	}
	remove_sub(s, (size_t)(sub - s->subs));
	send_success(s, cmd->id, NULL, s->member.thread ? (int64_t)s->member.cursor : -1);
	return TC_OK;
}

static enum tc_err do_reconnect(struct tc_session *s, const struct tc_command *cmd,
				struct tc_error *err)
{
	const cJSON *p = cmd->params, *run, *last, *subs, *it;
	struct tc_filter *filters[256];
	char last_epoch[40] = "";
	uint64_t last_seq = 0;
	size_t n = 0;

	if (!p)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	run = cJSON_GetObjectItemCaseSensitive(p, "runId");
	if (!cJSON_IsString(run))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    run ? "params.runId must be a string" : "params.runId is required");
	last = cJSON_GetObjectItemCaseSensitive(p, "lastEventId");
	if (last && !cJSON_IsNull(last)) {
		if (!cJSON_IsString(last) ||
		    !tc_event_id_parse(last->valuestring, last_epoch, &last_seq))
			return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
					    "params.lastEventId must be an eventId this server sent (\"<epoch>:<seq>\")");
	}
	subs = cJSON_GetObjectItemCaseSensitive(p, "subscriptions");
	if (subs && !cJSON_IsNull(subs) && !cJSON_IsArray(subs))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "params.subscriptions must be an array of subscription ids");
	size_t want = subs ? (size_t)cJSON_GetArraySize(subs) : 0;
	if (s->nsubs + want > (size_t)s->env->cfg->max_subscriptions || want > 256)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "restoring %zu subscriptions would exceed this connection's limit of %lld",
				    want, s->env->cfg->max_subscriptions);
	size_t i = 0;
	cJSON_ArrayForEach(it, subs) {
		if (!cJSON_IsString(it)) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.subscriptions[%zu] must be a string", i);
			goto fail;
		}
		if (tc_subscription_id_parse(it->valuestring, &filters[n], err))
			goto fail;
		if (find_sub(s, it->valuestring)) {
			tc_filter_free(filters[n]);
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				     "params.subscriptions[%zu] is already active on this connection", i);
			goto fail;
		}
		n++;
		i++;
	}
	i = 0;
	cJSON_ArrayForEach(it, subs)
		add_sub(s, filters[i++], it->valuestring, err);
	struct job *j = job_new(s, JOB_RECONNECT, cmd->id);
	j->has_last = last && cJSON_IsString(last);
	j->last_seq = last_seq;
	memcpy(j->last_epoch, last_epoch, sizeof(last_epoch));
	job_begin(s);
	return TC_OK;
fail:
	while (n)
		tc_filter_free(filters[--n]);
	return err->code;
}

static enum tc_err do_get_tree(struct tc_session *s, const struct tc_command *cmd,
			       struct tc_error *err)
{
	const cJSON *run = cmd->params ? cJSON_GetObjectItemCaseSensitive(cmd->params, "runId") : NULL;
	if (run && !cJSON_IsNull(run) && !cJSON_IsString(run))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.runId must be a string");
	struct job *j = job_new(s, JOB_TREE, cmd->id);
	if (cJSON_IsString(run))
		j->want_run = tc_xstrdup(run->valuestring);
	job_begin(s);
	return TC_OK;
}

/* ---- runtime commands: forwarded to agent workers ---------------------------------- */

#define SESSION_OF_CALLER(c) ((struct tc_session *)((char *)(c) - offsetof(struct tc_session, caller)))

static void caller_answer(struct tc_bridge_caller *c, struct tc_buf *frame)
{
	struct tc_session *s = SESSION_OF_CALLER(c);
	if (s->closed)
		tc_buf_unref(frame); /* the client left: the answer goes nowhere */
	else
		s->io->send(s->ctx, frame);
}

static void caller_release(struct tc_bridge_caller *c)
{
	struct tc_session *s = SESSION_OF_CALLER(c);
	s->inflight--;
	release(s);
}

static enum tc_err do_runtime(struct tc_session *s, const struct tc_command *cmd,
			      struct tc_error *err)
{
	const struct tc_config *cfg = s->env->cfg;

	if (!s->env->bridge || !cfg->commands_on)
		return tc_error_set(err, TC_ERR_NOT_SUPPORTED,
				    "%s is not available: agent commands are switched off on this gateway",
				    tc_method_name(cmd->method));
	if (tc_params_validate(cmd, err))
		return err->code;
	if (!s->may_command)
		return tc_error_set(err, TC_ERR_PERMISSION_DENIED,
				    "this token may read the thread but not send %s; it needs the "
				    "\"commands\" claim", tc_method_name(cmd->method));
	if (s->inflight >= (size_t)cfg->max_inflight)
		return tc_error_set(err, TC_ERR_UNKNOWN_ERROR,
				    "this connection already has %zu commands waiting for answers, the "
				    "limit; wait for some", s->inflight);
	s->refs++;
	s->inflight++;
	if (tc_bridge_submit(s->env->bridge, &s->caller, s->thread_id, cmd, err)) {
		s->inflight--;
		s->refs--;
		return err->code;
	}
	return TC_OK;
}

enum tc_err tc_session_open_stream(struct tc_session *s, const cJSON *request,
				   const char *last_event_id, struct tc_error *err)
{
	struct tc_filter *f;
	char epoch[40] = "";
	uint64_t seq = 0;
	bool has_since = false;

	if (last_event_id) {
		if (!tc_event_id_parse(last_event_id, epoch, &seq))
			return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
					    "Last-Event-ID must be an eventId this server sent (\"<epoch>:<seq>\")");
		has_since = true;
	} else {
		const cJSON *since = cJSON_GetObjectItemCaseSensitive(request, "since");
		if (since && !cJSON_IsNull(since)) {
			if (!cJSON_IsNumber(since) || since->valuedouble < 0 ||
			    since->valuedouble > (double)TC_JS_MAX_SAFE ||
			    since->valuedouble != (double)(uint64_t)since->valuedouble)
				return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
						    "since must be a non-negative integer (a seq)");
			seq = (uint64_t)since->valuedouble;
			has_since = true;
		}
	}
	if (tc_filter_parse(request, &f, err) || add_sub(s, f, NULL, err))
		return err->code;
	struct job *j = job_new(s, has_since ? JOB_RECONNECT : JOB_SUBSCRIBE, 0);
	j->stream = true;
	if (has_since) {
		j->has_last = true;
		j->last_seq = seq;
		j->last_any_epoch = !last_event_id;
		memcpy(j->last_epoch, epoch, sizeof(epoch));
	}
	/* No commands on a stream: reading stays off, the transport reads none. */
	job_begin(s);
	return TC_OK;
}

/* Handles one frame now; returns with s->job set if it started a job. */
static void handle_frame(struct tc_session *s, const char *data, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;
	enum tc_err rc = tc_command_parse(data, len, &cmd, &err);

	tc_metrics.commands_total++;

	if (rc == TC_OK) {
		switch (cmd.method) {
		case TC_METHOD_SUBSCRIBE:
			rc = do_subscribe(s, &cmd, &err);
			break;
		case TC_METHOD_UNSUBSCRIBE:
			rc = do_unsubscribe(s, &cmd, &err);
			break;
		case TC_METHOD_RECONNECT:
			rc = do_reconnect(s, &cmd, &err);
			break;
		case TC_METHOD_AGENT_GET_TREE:
			rc = do_get_tree(s, &cmd, &err);
			break;
		case TC_METHOD_UNKNOWN: {
			size_t mlen = strlen(cmd.method_name);
			rc = tc_error_set(&err, TC_ERR_UNKNOWN_COMMAND, "unknown method \"%.*s%s\"",
					  (int)tc_utf8_prefix(cmd.method_name, mlen, 64),
					  cmd.method_name, mlen > 64 ? "…" : "");
			break;
		}
		default:
			rc = do_runtime(s, &cmd, &err);
			break;
		}
	}
	if (rc != TC_OK)
		send_error(s, cmd.has_id, cmd.id, &err);
	tc_command_free(&cmd);
}

/* Runs queued frames until one starts a job or none are left. */
static void run_pending(struct tc_session *s)
{
	while (!s->closed && !s->job && s->pending) {
		struct pending *p = s->pending;
		s->pending = p->next;
		if (!s->pending)
			s->pending_tail = NULL;
		s->npending--;
		handle_frame(s, p->data, p->len);
		free(p);
	}
	if (!s->closed && !s->reading && !s->job) {
		s->reading = true;
		s->io->set_reading(s->ctx, true);
	}
}

/* Token bucket: --max-command-burst tokens, refilled at --max-command-rate. */
static bool take_token(struct tc_session *s)
{
	const struct tc_config *cfg = s->env->cfg;
	uint64_t now = uv_hrtime();
	s->tokens += (double)(now - s->refilled_ns) / 1e9 * (double)cfg->max_command_rate;
	if (s->tokens > (double)cfg->max_command_burst)
		s->tokens = (double)cfg->max_command_burst;
	s->refilled_ns = now;
	if (s->tokens < 1)
		return false;
	s->tokens -= 1;
	return true;
}

/* Refuses a command over the rate; a client that keeps going is cut off. */
static void rate_limited(struct tc_session *s, const char *data, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;
	const struct tc_config *cfg = s->env->cfg;

	if (++s->rejected > 100) {
		s->io->close(s->ctx, TC_CLOSE_POLICY, "command rate limit exceeded");
		return;
	}
	tc_command_parse(data, len, &cmd, &err);
	tc_error_set(&err, TC_ERR_UNKNOWN_ERROR,
		     "rate limit exceeded: at most %lld commands per second (bursts of %lld); slow down",
		     cfg->max_command_rate, cfg->max_command_burst);
	send_error(s, cmd.has_id, cmd.id, &err);
	tc_command_free(&cmd);
}

void tc_session_on_frame(struct tc_session *s, const char *data, size_t len)
{
	if (s->closed)
		return;
	if (!take_token(s)) {
		rate_limited(s, data, len);
		return;
	}
	s->rejected = 0;
	if (!s->job) {
		handle_frame(s, data, len);
		return;
	}
	/* A command is being served: this one waits its turn, and the client
	 * is not read from until the queue is empty again. */
	if (s->npending >= MAX_PENDING) {
		s->io->close(s->ctx, TC_CLOSE_POLICY, "too many commands pipelined behind a replay");
		return;
	}
	struct pending *p = tc_xmalloc(sizeof(*p) + len);
	p->next = NULL;
	p->len = len;
	memcpy(p->data, data, len);
	if (s->pending_tail)
		s->pending_tail->next = p;
	else
		s->pending = p;
	s->pending_tail = p;
	s->npending++;
	if (s->reading) {
		s->reading = false;
		s->io->set_reading(s->ctx, false);
	}
}

struct tc_session *tc_session_new(const struct tc_session_env *env, const char *thread_id,
				  const struct tc_session_io *io, void *ctx)
{
	struct tc_session *s = tc_xcalloc(1, sizeof(*s));
	s->env = env;
	s->io = io;
	s->ctx = ctx;
	s->thread_id = tc_xstrdup(thread_id);
	s->next_nonce = 1;
	s->refs = 1;
	s->reading = true;
	s->member.ops = &member_ops;
	s->waiter.fn = on_redis_back;
	s->may_command = true;
	s->tokens = (double)env->cfg->max_command_burst;
	s->refilled_ns = uv_hrtime();
	s->caller.answer = caller_answer;
	s->caller.release = caller_release;
	return s;
}
