/*
 * Unit tests: replay.c — what subscribe, reconnect and SSE replays owe the
 * client and when they go live — against the scripted Redis of
 * fake_redis.c, with a real hub.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config.h"
#include "fake_redis.h"
#include "hub.h"
#include "replay.h"
#include "util.h"

#define CH "tc:{t1}:live"
/* A replay's read of meta (tc_store_read_meta). */
#define META_READ "HMGET tc:{t1}:meta seq epoch entry_max entry_seq run_seq run_id run_status"

/* The session side of a replay: subscriptions and what the client got. */
struct client {
	struct tc_member m;
	struct tc_filter *fresh, *old; /* NULL: none of that kind */
	struct tc_filter *joined;      /* fresh too: a subscribe that joined the replay */
	struct tc_filter *joining;     /* ... waiting to join at the next gather */
	bool may_hold;                 /* what ops->may_hold answers */
	uint64_t seqs[1100];
	int nframes;
	bool answered, failed, closed, done;
	struct tc_replay_answer answer;
	char *namespaces;
	enum tc_err fail_code;
	int close_code;
	size_t queued; /* what the client has not read */
	struct tc_replay *rp;
};

static bool c_match(void *ctx, const struct tc_event_key *k, enum tc_subs which)
{
	struct client *c = ctx;
	bool f = (c->fresh && tc_filter_match(c->fresh, k)) || (c->joined && tc_filter_match(c->joined, k)),
	     o = c->old && tc_filter_match(c->old, k);
	return which == TC_SUBS_FRESH ? f : which == TC_SUBS_OLD ? o : f || o;
}

static void c_answer(void *ctx, struct tc_replay_answer *a)
{
	struct client *c = ctx;
	assert_false(c->answered);
	assert_int_equal(c->nframes, 0); /* the answer comes first */
	c->answered = true;
	c->answer = *a;
	if (a->namespaces) {
		c->namespaces = cJSON_PrintUnformatted(a->namespaces);
		cJSON_Delete(a->namespaces);
		a->namespaces = NULL;
	}
}

static void c_send(void *ctx, struct tc_buf *b)
{
	struct client *c = ctx;
	cJSON *f = cJSON_ParseWithLength((const char *)tc_buf_data(b), b->len);
	assert_non_null(f);
	assert_true(c->nframes < 1100);
	c->seqs[c->nframes++] = (uint64_t)cJSON_GetObjectItem(f, "seq")->valuedouble;
	c->queued += b->len;
	cJSON_Delete(f);
	tc_buf_unref(b);
}

static size_t c_queued(void *ctx)
{
	return ((struct client *)ctx)->queued;
}

static void c_fail(void *ctx, enum tc_err code, const char *message)
{
	struct client *c = ctx;
	c->failed = true;
	c->fail_code = code;
	tc_replay_free(c->rp);
	c->rp = NULL;
}

static void c_close(void *ctx, enum tc_close code, const char *reason)
{
	struct client *c = ctx;
	c->closed = true;
	c->close_code = (int)code;
}

static void c_done(void *ctx)
{
	struct client *c = ctx;
	c->done = true;
	tc_replay_free(c->rp);
	c->rp = NULL;
}

static bool c_gather(void *ctx)
{
	struct client *c = ctx;
	if (!c->joining)
		return false;
	c->joined = c->joining;
	c->joining = NULL;
	return true;
}

static bool c_may_hold(void *ctx)
{
	return ((struct client *)ctx)->may_hold;
}

static const struct tc_replay_ops c_ops = { .match = c_match,
					    .answer = c_answer,
					    .send = c_send,
					    .queued = c_queued,
					    .fail = c_fail,
					    .close = c_close,
					    .done = c_done,
					    .gather = c_gather,
					    .may_hold = c_may_hold };

static void m_ready(struct tc_member *m)
{
	struct client *c = (struct client *)((char *)m - offsetof(struct client, m));
	if (c->rp)
		tc_replay_ready(c->rp);
}

static bool m_match(struct tc_member *m, const struct tc_event_key *k)
{
	return c_match((char *)m - offsetof(struct client, m), k, TC_SUBS_ANY);
}

static void m_send(struct tc_member *m, struct tc_event *ev)
{
	struct client *c = (struct client *)((char *)m - offsetof(struct client, m));
	c->seqs[c->nframes++] = ev->seq;
}

static void m_lost(struct tc_member *m, const char *why)
{
}

static const struct tc_member_ops m_ops = { m_match, m_send, m_ready, m_lost };

struct fixture {
	struct tc_config cfg;
	struct tc_redis *redis;
	struct tc_hub *hub;
	struct client c;
	uv_loop_t loop;
	struct tc_replay_holds *holds; /* setup_holds: subscribe answers may be held */
	bool holds_stopped;
};

static int setup_with(void **state, const char *max_replay)
{
	struct fixture *fx = tc_xcalloc(1, sizeof(*fx));
	char err[256], opt[64];
	snprintf(opt, sizeof(opt), "--max-replay=%s", max_replay);
	char *argv[] = { (char *)"threadcast", (char *)"--auth=off", opt };
	assert_int_equal(tc_config_load(&fx->cfg, 3, argv, err, sizeof(err)), TC_CONFIG_OK);
	fx->redis = fake_redis_new();
	fx->hub = tc_hub_new(&fx->cfg, fx->redis);
	fx->c.m.ops = &m_ops;
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, "100000");
}

static int setup_small(void **state)
{
	return setup_with(state, "3");
}

static int setup_holds(void **state)
{
	setup_with(state, "100000");
	struct fixture *fx = *state;
	uv_loop_init(&fx->loop);
	fx->holds = tc_replay_holds_new(&fx->loop);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	tc_replay_free(fx->c.rp);
	if (fx->holds) {
		if (!fx->holds_stopped)
			tc_replay_holds_stop(fx->holds);
		uv_run(&fx->loop, UV_RUN_DEFAULT);
		tc_replay_holds_free(fx->holds);
		assert_int_equal(uv_loop_close(&fx->loop), 0);
	}
	tc_hub_detach(fx->hub, &fx->c.m);
	fake_redis_free(fx->redis);
	tc_hub_free(fx->hub);
	tc_filter_free(fx->c.fresh);
	tc_filter_free(fx->c.old);
	tc_filter_free(fx->c.joined);
	tc_filter_free(fx->c.joining);
	free(fx->c.namespaces);
	tc_config_free(&fx->cfg);
	free(fx);
	return 0;
}

static struct tc_filter *filter(const char *json)
{
	struct tc_filter *f;
	struct tc_error err;
	cJSON *p = cJSON_Parse(json);
	assert_int_equal(tc_filter_parse(p, &f, &err), TC_OK);
	cJSON_Delete(p);
	return f;
}

/* Starts a replay for a client that joins the thread now. */
static void start(struct fixture *fx, bool reconnect, const struct tc_replay_from *from)
{
	bool fresh = !fx->c.m.thread;
	if (fresh)
		tc_hub_attach(fx->hub, "t1", &fx->c.m);
	struct tc_replay_start s = { .cfg = &fx->cfg,
				     .redis = fx->redis,
				     .thread = "t1",
				     .member = &fx->c.m,
				     .fresh_member = fresh,
				     .kind = TC_FRAME_WS,
				     .ops = &c_ops,
				     .ctx = &fx->c,
				     .holds = fx->holds,
				     .reconnect = reconnect,
				     .from = from };
	fx->c.rp = tc_replay_start(&s);
	assert_non_null(fx->c.rp);
}

/* Answers the oldest command, which must be `expect`. */
static void expect(struct fixture *fx, const char *cmd, redisReply *reply)
{
	const char *got = fake_peek(fx->redis);
	if (!got || strcmp(got, cmd))
		fail_msg("expected \"%s\", Redis got \"%s\"", cmd, got ? got : "(nothing)");
	fake_reply(fx->redis, reply);
}

/* Stream entries from..to; the method of each is `messages` unless listed in values. */
static redisReply *entries(uint64_t from, uint64_t to)
{
	redisReply *r = rr_arr(0);
	r->elements = to >= from ? (size_t)(to - from + 1) : 0;
	r->element = tc_xcalloc(r->elements + 1, sizeof(*r->element));
	for (uint64_t s = from; s <= to; s++)
		r->element[s - from] = rr_entry(s, s % 2 ? "messages" : "values", "",
						s % 2 ? "{\"method\":\"messages\",\"params\":{}}"
						      : "{\"method\":\"values\",\"params\":{}}");
	return r;
}

/* A threadcast_range reply of the entries from..to: more may follow when it is a full batch of 512. */
static redisReply *range(uint64_t from, uint64_t to)
{
	return rr_arr(2, entries(from, to), rr_int(to >= from && to - from + 1 == 512));
}

static redisReply *meta_status(const char *seq, const char *epoch, const char *run_seq, const char *status)
{
	return rr_arr(7, seq ? rr_str(seq) : rr_nil(), epoch ? rr_str(epoch) : rr_nil(), rr_nil(), rr_nil(),
		      run_seq ? rr_str(run_seq) : rr_nil(), rr_str("run-1"), rr_str(status));
}

static redisReply *meta(const char *seq, const char *epoch, const char *run_seq)
{
	return meta_status(seq, epoch, run_seq, "running");
}

/* meta of a history whose largest entry through entry_seq is entry_max bytes. */
static redisReply *meta_measured(const char *seq, const char *epoch, const char *run_seq, const char *entry_max,
				 const char *entry_seq)
{
	return rr_arr(7, rr_str(seq), rr_str(epoch), rr_str(entry_max), rr_str(entry_seq), rr_str(run_seq),
		      rr_str("run-1"), rr_str("running"));
}

/* ... every entry measured (the history was only ever appended by this version). */
static redisReply *meta_max(const char *seq, const char *epoch, const char *run_seq, const char *entry_max)
{
	return meta_measured(seq, epoch, run_seq, entry_max, seq);
}

/* The hub's doorbell subscription is confirmed: it reads where the thread stands. */
static void hub_confirmed(struct fixture *fx)
{
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
}

/* ... and is synced at (seq, epoch): its read is the oldest command. */
static void hub_sync(struct fixture *fx, const char *seq, const char *epoch)
{
	expect(fx, "HMGET tc:{t1}:meta seq epoch", rr_arr(2, rr_str(seq), rr_str(epoch)));
}

static void hub_synced(struct fixture *fx, const char *seq, const char *epoch)
{
	hub_confirmed(fx);
	hub_sync(fx, seq, epoch);
}

static void assert_seqs(const struct client *c, int n, ...)
{
	va_list ap;
	va_start(ap, n);
	if (c->nframes != n) {
		char got[512] = "";
		for (int i = 0; i < c->nframes && strlen(got) < 480; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%llu ", (unsigned long long)c->seqs[i]);
		fail_msg("expected %d frames, got %d: %s", n, c->nframes, got);
	}
	for (int i = 0; i < n; i++)
		assert_int_equal(c->seqs[i], va_arg(ap, int));
	va_end(ap);
}

/* subscribe: the values baseline older than the run, then the run, then live. */
static void subscribe_replays_baseline_and_run(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, false, NULL);
	expect(fx, META_READ, meta("6", "e1", "3"));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(2, rr_str(""), rr_str("2\n{\"method\":\"values\",\"params\":{}}")));
	expect(fx, "FCALL_RO threadcast_range 1 t1 2 6 512 1048576", range(3, 6));
	assert_true(fx->c.answered);
	assert_int_equal(fx->c.answer.replayed, 5); /* the baseline and 3..6 */
	assert_int_equal(fx->c.answer.applied, 6);
	assert_false(fx->c.answer.has_missed);
	assert_seqs(&fx->c, 5, 2, 3, 4, 5, 6); /* prefetched: no second read of 3..6 */
	expect(fx, "FCALL_RO threadcast_range 1 t1 6 0 512 1048576", range(1, 0));
	assert_false(fx->c.done); /* the hub is not ready yet */
	hub_synced(fx, "6", "e1");
	assert_true(fx->c.done);
	assert_true(fx->c.m.live);
	fake_push(fx->redis, "smessage", CH, "e1\n7\nmessages\n\n{\"method\":\"messages\",\"params\":{}}");
	assert_seqs(&fx->c, 6, 2, 3, 4, 5, 6, 7);
}

/* What the filter does not want is neither counted nor sent. */
static void subscribe_filters(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\"]}");
	start(fx, false, NULL);
	expect(fx, META_READ, meta("6", "e1", "1"));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 6 512 1048576", range(1, 6));
	assert_int_equal(fx->c.answer.replayed, 3);
	assert_seqs(&fx->c, 3, 1, 3, 5);
}

/* The hub moved on while the replay read: the replay reads on before going live. */
static void subscribe_catches_up_with_the_hub(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, false, NULL);
	hub_confirmed(fx);
	expect(fx, META_READ, meta("2", "e1", "1"));
	hub_sync(fx, "2", "e1");
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	fake_push(fx->redis, "smessage", CH, "e1\n3\nmessages\n\n{\"method\":\"messages\",\"params\":{}}");
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 2 512 1048576", range(1, 2));
	expect(fx, "FCALL_RO threadcast_range 1 t1 2 0 512 1048576", range(1, 0));
	/* Seq 3 went out from the hub meanwhile (to nobody live): read it. */
	expect(fx, "FCALL_RO threadcast_range 1 t1 2 0 512 1048576", range(3, 3));
	assert_true(fx->c.done);
	assert_seqs(&fx->c, 3, 1, 2, 3);
}

/* --max-replay: the newest events of a long run, the rest reported as missed. */
static void subscribe_capped(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, false, NULL);
	expect(fx, META_READ, meta("10", "e1", "1"));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "FCALL_RO threadcast_range 1 t1 7 10 512 1048576", range(8, 10));
	assert_true(fx->c.answer.has_missed);
	assert_int_equal(fx->c.answer.missed, 7);
	assert_seqs(&fx->c, 3, 8, 9, 10);
}

/* reconnect: everything after lastEventId, restored, with the tree's namespaces. */
static void reconnect_restored(void **state)
{
	struct fixture *fx = *state;
	struct tc_replay_from from = { .seq = 4, .epoch = "e1" };
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, true, &from);
	expect(fx, META_READ, meta("7", "e1", "1"));
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree",
	       rr_arr(4, rr_str("/researcher"), rr_str("running\nr"), rr_str(""), rr_str("running\nagent")));
	assert_true(fx->c.answer.restored);
	assert_false(fx->c.answer.has_missed);
	assert_int_equal(fx->c.answer.applied, 7);
	assert_string_equal(fx->c.namespaces, "[{\"namespace\":[],\"status\":\"running\"},"
					      "{\"namespace\":[\"researcher\"],\"status\":\"running\"}]");
	expect(fx, "FCALL_RO threadcast_range 1 t1 4 0 512 1048576", range(5, 7));
	assert_seqs(&fx->c, 3, 5, 6, 7);
}

/* reconnect behind a trimmed history: not restored, the gap counted. */
static void reconnect_trimmed(void **state)
{
	struct fixture *fx = *state;
	struct tc_replay_from from = { .seq = 2, .epoch = "e1" };
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, true, &from);
	expect(fx, META_READ, meta("8", "e1", "1"));
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(6, 6));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
	assert_false(fx->c.answer.restored);
	assert_true(fx->c.answer.has_missed);
	assert_int_equal(fx->c.answer.missed, 3); /* 3, 4, 5 */
	expect(fx, "FCALL_RO threadcast_range 1 t1 5 0 512 1048576", range(6, 8));
	assert_seqs(&fx->c, 3, 6, 7, 8);
}

/* reconnect into another epoch: not restored, the count unknowable, the new history from its start. */
static void reconnect_new_epoch(void **state)
{
	struct fixture *fx = *state;
	struct tc_replay_from from = { .seq = 40, .epoch = "e1" };
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, true, &from);
	expect(fx, META_READ, meta("3", "e2", "1"));
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
	assert_false(fx->c.answer.restored);
	assert_false(fx->c.answer.has_missed);
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 0 512 1048576", range(1, 3));
	assert_seqs(&fx->c, 3, 1, 2, 3);
}

/* reconnect far behind with --max-replay 3: the newest 3, the rest added to missed. */
static void reconnect_capped(void **state)
{
	struct fixture *fx = *state;
	struct tc_replay_from from = { .seq = 2, .epoch = "e1" };
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, true, &from);
	expect(fx, META_READ, meta("10", "e1", "1"));
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
	assert_false(fx->c.answer.restored);
	assert_true(fx->c.answer.has_missed);
	assert_int_equal(fx->c.answer.missed, 5); /* 3..7 */
	expect(fx, "FCALL_RO threadcast_range 1 t1 7 0 512 1048576", range(8, 10));
	assert_seqs(&fx->c, 3, 8, 9, 10);
}

/* A reconnect at the head of a quiet thread has nothing to replay and goes
 * live at once (it used to read the stream again and again: issue 15, bug 1). */
static void reconnect_at_the_head_goes_live(void **state)
{
	struct fixture *fx = *state;
	struct tc_replay_from from = { .seq = 5, .epoch = "e1" };
	fx->c.fresh = filter("{\"channels\":[\"messages\"]}");
	start(fx, true, &from);
	hub_confirmed(fx);
	expect(fx, META_READ, meta("5", "e1", "1"));
	hub_sync(fx, "5", "e1");
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
	assert_true(fx->c.answer.restored);
	expect(fx, "FCALL_RO threadcast_range 1 t1 5 0 512 1048576", range(1, 0));
	assert_true(fx->c.done);
	assert_int_equal(fake_pending(fx->redis), 0);
	assert_int_equal(fx->c.nframes, 0);
	fake_push(fx->redis, "smessage", CH, "e1\n6\nmessages\n\n{\"method\":\"messages\",\"params\":{}}");
	assert_seqs(&fx->c, 1, 6);
}

/* An SSE `since` names a seq of whatever history is current. */
static void stream_since_any_epoch(void **state)
{
	struct fixture *fx = *state;
	struct tc_replay_from from = { .seq = 1, .any_epoch = true };
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, true, &from);
	expect(fx, META_READ, meta("3", "e5", "1"));
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
	assert_true(fx->c.answer.restored);
	expect(fx, "FCALL_RO threadcast_range 1 t1 1 0 512 1048576", range(2, 3));
	assert_seqs(&fx->c, 2, 2, 3);
}

/* A subscription added to a connection that already has events: only what
 * no older subscription took, from the run's start. */
static void late_subscription_gets_only_its_own(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\"]}");
	start(fx, false, NULL);
	hub_confirmed(fx);
	expect(fx, META_READ, meta("4", "e1", "1"));
	hub_sync(fx, "4", "e1");
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 4 512 1048576", range(1, 4));
	expect(fx, "FCALL_RO threadcast_range 1 t1 4 0 512 1048576", range(1, 0));
	assert_true(fx->c.done);
	assert_seqs(&fx->c, 2, 1, 3);
	/* Now the connection subscribes to values and messages. */
	fx->c.old = fx->c.fresh;
	fx->c.fresh = filter("{\"channels\":[\"values\",\"messages\"]}");
	fx->c.answered = false;
	fx->c.nframes = 0;
	start(fx, false, NULL);
	expect(fx, META_READ, meta("4", "e1", "1"));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 4 512 1048576", range(1, 4));
	assert_int_equal(fx->c.answer.replayed, 2);
	/* Only the values events, below the connection's position: the
	 * messages were sent already, for the older subscription. */
	assert_seqs(&fx->c, 2, 2, 4);
	expect(fx, "FCALL_RO threadcast_range 1 t1 4 0 512 1048576", range(1, 0));
	assert_true(fx->c.done);
}

/* Redis lost before the answer: the command fails; after it, the replay waits and resumes. */
static void redis_loss_before_and_after_answer(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, false, NULL);
	fake_reply(fx->redis, NULL);
	assert_true(fx->c.failed);
	assert_int_equal(fx->c.fail_code, TC_ERR_UNKNOWN_ERROR);

	struct tc_replay_from from = { .seq = 1, .epoch = "e1" };
	fx->c.failed = false;
	start(fx, true, &from);
	expect(fx, META_READ, meta("3", "e1", "1"));
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
	assert_true(fx->c.answered);
	fake_cmd_link(fx->redis, false); /* the scan's reply is lost */
	assert_false(fx->c.failed);
	fake_cmd_link(fx->redis, true);
	/* The connection had joined the thread with the first command (its
	 * cursor is 0): seq 1 is read too, and left out as owed to nobody. */
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 0 512 1048576", range(1, 3));
	assert_seqs(&fx->c, 2, 2, 3);
}

/* A replay freed while its read is out drops the reply without a call. */
static void cancelled_while_in_flight(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\"]}");
	start(fx, false, NULL);
	tc_replay_free(fx->c.rp);
	fx->c.rp = NULL;
	fake_reply(fx->redis, meta("3", "e1", "1"));
	assert_false(fx->c.answered);
	assert_false(fx->c.failed);
	assert_int_equal(fake_pending(fx->redis), 0);
}

/* A reconnect from before the first event of a thread whose meta reads so,
 * answered (its oldest event is seq 1, no namespaces yet): next, the replay reads. */
static void reconnect_from_start(struct fixture *fx, redisReply *meta_reply)
{
	struct tc_replay_from from = { .seq = 0, .epoch = "e1" };
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, true, &from);
	expect(fx, META_READ, meta_reply);
	expect(fx, "XRANGE tc:{t1}:events - + COUNT 1", entries(1, 1));
	expect(fx, "HGETALL tc:{t1}:tree", rr_arr(0));
}

/* A replay is paced by the client: nothing more is read while its queue is full. */
static void paced_by_the_client(void **state)
{
	struct fixture *fx = *state;
	reconnect_from_start(fx, meta("1024", "e1", "1"));
	fx->c.queued = (size_t)fx->cfg.max_queue_bytes; /* the client reads nothing */
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 0 512 1048576", range(1, 512));
	assert_int_equal(fx->c.nframes, 0);
	assert_int_equal(fake_pending(fx->redis), 0); /* waiting for the client */
	fx->c.queued = 0;
	tc_replay_drained(fx->c.rp);
	assert_int_equal(fx->c.nframes, 512);
	expect(fx, "FCALL_RO threadcast_range 1 t1 512 0 512 1048576", range(513, 1024));
	assert_int_equal(fx->c.nframes, 1024);
	for (int i = 0; i < 1024; i++)
		assert_int_equal(fx->c.seqs[i], i + 1);
}

/* With the largest entry known, the history through meta's head is read
 * with plain XRANGEs (a full COUNT may have more after it); what came after
 * that head, with the function. */
static void plain_reads_through_the_head(void **state)
{
	struct fixture *fx = *state;
	reconnect_from_start(fx, meta_max("1024", "e1", "1", "370"));
	expect(fx, "XRANGE tc:{t1}:events 0-1 1024-0 COUNT 512", entries(1, 512));
	assert_int_equal(fx->c.nframes, 512);
	expect(fx, "XRANGE tc:{t1}:events 512-1 1024-0 COUNT 512", entries(513, 1024));
	/* Two events were appended after meta was read. */
	expect(fx, "FCALL_RO threadcast_range 1 t1 1024 0 512 1048576", range(1025, 1026));
	assert_int_equal(fx->c.nframes, 1026);
	for (int i = 0; i < 1026; i++)
		assert_int_equal(fx->c.seqs[i], i + 1);
	assert_int_equal(fake_pending(fx->redis), 0);
}

/* After an append by an earlier version (entry_seq behind seq: that entry
 * was not measured), the history is read with the function. */
static void unmeasured_entries_read_with_the_function(void **state)
{
	struct fixture *fx = *state;
	reconnect_from_start(fx, meta_measured("10", "e1", "1", "370", "6"));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 0 512 1048576", range(1, 10));
	assert_seqs(&fx->c, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
}

/* A subscribe counts its run with a plain read, of fewer entries when they
 * may be big (64 KiB: 64 a read), and reads past meta's head with the function. */
static void subscribe_counts_with_plain_reads(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\",\"values\"]}");
	start(fx, false, NULL);
	expect(fx, META_READ, meta_max("6", "e1", "3", "65536"));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "XRANGE tc:{t1}:events 2-1 6-0 COUNT 64", entries(3, 6));
	assert_true(fx->c.answered);
	assert_int_equal(fx->c.answer.replayed, 4);
	assert_seqs(&fx->c, 4, 3, 4, 5, 6);
	expect(fx, "FCALL_RO threadcast_range 1 t1 6 0 512 1048576", range(1, 0));
	hub_synced(fx, "6", "e1");
	assert_true(fx->c.done);
}

/* A range read that stopped at its byte bound says more may follow: the replay reads on, not going live early. */
static void a_short_read_with_more_reads_on(void **state)
{
	struct fixture *fx = *state;
	reconnect_from_start(fx, meta("5", "e1", "1"));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 0 512 1048576", rr_arr(2, entries(1, 2), rr_int(1)));
	assert_int_equal(fx->c.nframes, 2);
	expect(fx, "FCALL_RO threadcast_range 1 t1 2 0 512 1048576", range(3, 5));
	assert_int_equal(fx->c.nframes, 5);
	assert_int_equal(fake_pending(fx->redis), 0);
}

/* A subscribe counted over a run (seqs 1..4) whose root lifecycle is at status. */
static void count_run(struct fixture *fx, const char *status)
{
	start(fx, false, NULL);
	expect(fx, META_READ, meta_status("4", "e1", "1", status));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 4 512 1048576", range(1, 4));
}

/* A subscribe of the held kind, counted over a run that is over: held. */
static void held_subscribe(struct fixture *fx, const char *channels)
{
	fx->c.fresh = filter(channels);
	fx->c.may_hold = true;
	count_run(fx, "completed");
	assert_false(fx->c.answered);
	assert_int_equal(fx->c.nframes, 0);
	assert_int_equal(fake_pending(fx->redis), 0);
}

/* The run is over: the answer waits for a quiet moment, then goes out with the replay. */
static void held_until_quiet_when_the_run_is_over(void **state)
{
	struct fixture *fx = *state;
	held_subscribe(fx, "{\"channels\":[\"messages\"]}");
	uv_run(&fx->loop, UV_RUN_DEFAULT); /* the hold's timer: runs once, then nothing is active */
	assert_true(fx->c.answered);
	assert_int_equal(fx->c.answer.replayed, 2);
	assert_seqs(&fx->c, 2, 1, 3);
}

/* A subscribe that arrives while one is held joins it: counted again for both, one pass. */
static void nudged_hold_gathers_then_answers(void **state)
{
	struct fixture *fx = *state;
	held_subscribe(fx, "{\"channels\":[\"messages\"]}");
	fx->c.joining = filter("{\"channels\":[\"values\"]}");
	tc_replay_nudge(fx->c.rp);
	assert_false(fx->c.answered);
	/* Counted again, for both (count_run's reads, without a second start). */
	expect(fx, META_READ, meta_status("4", "e1", "1", "completed"));
	expect(fx, "HGETALL tc:{t1}:values", rr_arr(0));
	expect(fx, "FCALL_RO threadcast_range 1 t1 0 4 512 1048576", range(1, 4));
	assert_false(fx->c.answered); /* held again: more may follow */
	fx->c.may_hold = false;       /* a frame that does not join: answer now */
	tc_replay_nudge(fx->c.rp);
	assert_true(fx->c.answered);
	assert_int_equal(fx->c.answer.replayed, 4);
	assert_seqs(&fx->c, 4, 1, 2, 3, 4); /* in seq order, whoever wanted them */
}

/* Never held while the run goes on, nor when the session has more to serve. */
static void not_held_while_running_or_busy(void **state)
{
	struct fixture *fx = *state;
	fx->c.fresh = filter("{\"channels\":[\"messages\"]}");
	fx->c.may_hold = true;
	count_run(fx, "running");
	assert_true(fx->c.answered);
	expect(fx, "FCALL_RO threadcast_range 1 t1 4 0 512 1048576", range(1, 0));
	tc_replay_free(fx->c.rp); /* waiting for the hub */
	fx->c.rp = NULL;

	fx->c.answered = false;
	fx->c.nframes = 0;
	fx->c.may_hold = false;
	count_run(fx, "interrupted");
	assert_true(fx->c.answered);
}

/* Stopping answers what is held at once; a replay freed while held leaves no trace (ASan). */
static void stop_answers_held_and_free_unlinks(void **state)
{
	struct fixture *fx = *state;
	held_subscribe(fx, "{\"channels\":[\"messages\"]}");
	tc_replay_free(fx->c.rp); /* the connection went away while held */
	fx->c.rp = NULL;
	uv_run(&fx->loop, UV_RUN_DEFAULT);
	assert_false(fx->c.answered);

	tc_hub_detach(fx->hub, &fx->c.m);
	tc_filter_free(fx->c.fresh);
	held_subscribe(fx, "{\"channels\":[\"messages\"]}");
	tc_replay_holds_stop(fx->holds);
	fx->holds_stopped = true;
	assert_true(fx->c.answered);
	assert_seqs(&fx->c, 2, 1, 3);
}

int main(void)
{
	tc_cjson_init();
	tc_log_init(TC_LOG_ERROR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(subscribe_replays_baseline_and_run, setup, teardown),
		cmocka_unit_test_setup_teardown(subscribe_filters, setup, teardown),
		cmocka_unit_test_setup_teardown(subscribe_catches_up_with_the_hub, setup, teardown),
		cmocka_unit_test_setup_teardown(subscribe_capped, setup_small, teardown),
		cmocka_unit_test_setup_teardown(reconnect_restored, setup, teardown),
		cmocka_unit_test_setup_teardown(reconnect_trimmed, setup, teardown),
		cmocka_unit_test_setup_teardown(reconnect_new_epoch, setup, teardown),
		cmocka_unit_test_setup_teardown(reconnect_capped, setup_small, teardown),
		cmocka_unit_test_setup_teardown(reconnect_at_the_head_goes_live, setup, teardown),
		cmocka_unit_test_setup_teardown(stream_since_any_epoch, setup, teardown),
		cmocka_unit_test_setup_teardown(late_subscription_gets_only_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(redis_loss_before_and_after_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(cancelled_while_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(paced_by_the_client, setup, teardown),
		cmocka_unit_test_setup_teardown(a_short_read_with_more_reads_on, setup, teardown),
		cmocka_unit_test_setup_teardown(plain_reads_through_the_head, setup, teardown),
		cmocka_unit_test_setup_teardown(subscribe_counts_with_plain_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(unmeasured_entries_read_with_the_function, setup, teardown),
		cmocka_unit_test_setup_teardown(held_until_quiet_when_the_run_is_over, setup_holds, teardown),
		cmocka_unit_test_setup_teardown(nudged_hold_gathers_then_answers, setup_holds, teardown),
		cmocka_unit_test_setup_teardown(not_held_while_running_or_busy, setup_holds, teardown),
		cmocka_unit_test_setup_teardown(stop_answers_held_and_free_unlinks, setup_holds, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
