/*
 * Unit tests: hub.c — doorbells, gap fill, epochs, subscription state —
 * against the scripted Redis of fake_redis.c. Each test plays one
 * interleaving of Redis replies and pushes and checks what the members got.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fake_redis.h"
#include "hub.h"
#include "util.h"

#define CH "tc:{t1}:live"

/* A member that records what the hub did to it. */
struct rec {
	struct tc_member m;
	uint64_t seqs[64];
	int nsent, nready, nlost;
	const char *channel; /* NULL: every event matches */
};

#define REC(mm) ((struct rec *)((char *)(mm)-offsetof(struct rec, m)))

static bool rec_match(struct tc_member *m, const struct tc_event_key *k)
{
	struct rec *r = REC(m);
	return !r->channel || (k->channel == tc_channel_lookup(r->channel, strlen(r->channel)));
}

static struct rec *sent_to[64]; /* the members sent to, in order, over a test */
static int nsent_to;

static void rec_send(struct tc_member *m, struct tc_event *ev)
{
	struct rec *r = REC(m);
	assert_true(nsent_to < 64);
	sent_to[nsent_to++] = r;
	assert_true(r->nsent < 64);
	r->seqs[r->nsent++] = ev->seq;
}

static void rec_ready(struct tc_member *m)
{
	REC(m)->nready++;
}

static void rec_lost(struct tc_member *m, const char *why)
{
	REC(m)->nlost++;
}

static const struct tc_member_ops rec_ops = { rec_match, rec_send, rec_ready, rec_lost };

struct fixture {
	struct tc_config cfg;
	struct tc_redis *redis;
	struct tc_hub *hub;
	struct rec a, b;
};

static int setup(void **state)
{
	struct fixture *fx = tc_xcalloc(1, sizeof(*fx));
	char err[256];
	char *argv[] = { (char *)"threadcast", (char *)"--auth=off" };
	assert_int_equal(tc_config_load(&fx->cfg, 2, argv, err, sizeof(err)), TC_CONFIG_OK);
	fx->redis = fake_redis_new();
	fx->hub = tc_hub_new(&fx->cfg, fx->redis);
	fx->a.m.ops = fx->b.m.ops = &rec_ops;
	nsent_to = 0;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	tc_hub_detach(fx->hub, &fx->a.m);
	tc_hub_detach(fx->hub, &fx->b.m);
	fake_redis_free(fx->redis); /* answers what is pending with NULL */
	tc_hub_free(fx->hub);
	tc_config_free(&fx->cfg);
	free(fx);
	return 0;
}

static char *doorbell(const char *epoch, uint64_t seq)
{
	static char buf[256];
	snprintf(buf, sizeof(buf), "%s\n%llu\nmessages\n\n{\"method\":\"messages\",\"params\":{\"n\":%llu}}", epoch,
		 (unsigned long long)seq, (unsigned long long)seq);
	return buf;
}

/* A threadcast_range reply of the entries from..to, the end of the range. */
static redisReply *entries(uint64_t from, uint64_t to)
{
	redisReply *r = rr_arr(0);
	r->elements = (size_t)(to - from + 1);
	r->element = tc_xcalloc(r->elements, sizeof(*r->element));
	for (uint64_t s = from; s <= to; s++)
		r->element[s - from] = rr_entry(s, "messages", "", "{\"method\":\"messages\",\"params\":{}}");
	return rr_arr(2, r, rr_int(0));
}

/* Attaches a member, confirms the doorbell and answers the sync with
 * (seq, epoch); then the member catches up to seq and goes live. */
static void attach_live(struct fixture *fx, struct rec *m, uint64_t seq, const char *epoch)
{
	char s[24];
	tc_hub_attach(fx->hub, "t1", &m->m);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	snprintf(s, sizeof(s), "%llu", (unsigned long long)seq);
	fake_reply(fx->redis, rr_arr(2, seq ? rr_str(s) : rr_nil(), epoch ? rr_str(epoch) : rr_nil()));
	assert_int_equal(m->nready, 1);
	if (seq) {
		assert_int_equal(tc_hub_go_live(&m->m), TC_LIVE_BEHIND);
		tc_hub_advance(&m->m, seq);
	}
	assert_int_equal(tc_hub_go_live(&m->m), TC_LIVE);
}

/* The next seq is delivered from the doorbell itself, without a Redis read. */
static void next_seq_from_doorbell(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	size_t sent = fake_sent(fx->redis);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 4));
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 5));
	assert_int_equal(fx->a.nsent, 2);
	assert_int_equal(fx->a.seqs[0], 4);
	assert_int_equal(fx->a.seqs[1], 5);
	assert_int_equal(fake_sent(fx->redis), sent);
	/* A repeated doorbell is not delivered twice. */
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 5));
	assert_int_equal(fx->a.nsent, 2);
}

/* A doorbell that skips seqs makes the hub read the gap before anything newer. */
static void skipped_seqs_are_filled_in_order(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 6));
	assert_int_equal(fx->a.nsent, 0); /* 4 and 5 first */
	assert_string_equal(fake_peek(fx->redis), "FCALL_RO threadcast_range 1 t1 3 0 512 1048576");
	/* A doorbell during the fill waits for it too. */
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 7));
	assert_int_equal(fx->a.nsent, 0);
	fake_reply(fx->redis, entries(4, 6));
	assert_int_equal(fx->a.nsent, 3);
	/* Seq 7 rang during the read: another read gets it. */
	assert_string_equal(fake_peek(fx->redis), "FCALL_RO threadcast_range 1 t1 6 0 512 1048576");
	fake_reply(fx->redis, entries(7, 7));
	assert_int_equal(fx->a.nsent, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fx->a.seqs[i], 4 + i);
	assert_int_equal(fake_pending(fx->redis), 0);
	/* And the doorbell path works again. */
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 8));
	assert_int_equal(fx->a.nsent, 5);
	assert_int_equal(fx->a.seqs[4], 8);
}

/* A thin doorbell (the events were too big to ring with) is a gap: the stream is read. */
static void thin_doorbell_reads_the_stream(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	fake_push(fx->redis, "smessage", CH, "#e1\n5\n");
	assert_int_equal(fx->a.nsent, 0);
	assert_string_equal(fake_peek(fx->redis), "FCALL_RO threadcast_range 1 t1 3 0 512 1048576");
	fake_reply(fx->redis, entries(4, 5));
	assert_int_equal(fx->a.nsent, 2);
	assert_int_equal(fx->a.seqs[1], 5);
	assert_int_equal(fake_pending(fx->redis), 0);
	/* One already delivered asks for nothing; one of another epoch is a new history. */
	fake_push(fx->redis, "smessage", CH, "#e1\n5\n");
	assert_int_equal(fake_pending(fx->redis), 0);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 6));
	assert_int_equal(fx->a.nsent, 3);
	/* The very next seq, thin, is read too: the doorbell has nothing to deliver. */
	fake_push(fx->redis, "smessage", CH, "#e1\n7\n");
	assert_int_equal(fx->a.nsent, 3);
	assert_string_equal(fake_peek(fx->redis), "FCALL_RO threadcast_range 1 t1 6 0 512 1048576");
	fake_reply(fx->redis, entries(7, 7));
	assert_int_equal(fx->a.nsent, 4);
	fake_push(fx->redis, "smessage", CH, "#e2\n1\n");
	assert_int_equal(fx->a.nsent, 4);
	assert_true(fx->a.nlost > 0);
}

/* A new epoch means Redis lost the history: every member is told, nothing is delivered. */
static void epoch_change_loses_members(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	tc_hub_attach(fx->hub, "t1", &fx->b.m); /* catching up, not live */
	fake_push(fx->redis, "smessage", CH, doorbell("e2", 1));
	assert_int_equal(fx->a.nsent, 0);
	assert_int_equal(fx->a.nlost, 1);
	assert_int_equal(fx->b.nlost, 1);
	/* The hub starts over from what Redis holds now. */
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	fake_reply(fx->redis, rr_arr(2, rr_str("1"), rr_str("e2")));
	assert_string_equal(tc_thread_epoch(fx->a.m.thread), "e2");
	assert_int_equal(tc_thread_head(fx->a.m.thread), 1);
}

/* A sync that finds another epoch (or none) than the one delivered from also loses members. */
static void resync_after_link_loss_detects_new_epoch(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	fake_sub_link(fx->redis, false);
	fake_sub_link(fx->redis, true);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	fake_reply(fx->redis, rr_arr(2, rr_str("2"), rr_str("e9")));
	assert_int_equal(fx->a.nlost, 1);
	assert_int_equal(fx->a.nsent, 0);
}

/* After the link comes back, the sync's seq makes the hub fill what it missed. */
static void resync_after_link_loss_fills_the_gap(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	fake_sub_link(fx->redis, false);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 4)); /* lost: not subscribed */
	fake_sub_link(fx->redis, true);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	fake_reply(fx->redis, rr_arr(2, rr_str("5"), rr_str("e1")));
	assert_string_equal(fake_peek(fx->redis), "FCALL_RO threadcast_range 1 t1 3 0 512 1048576");
	fake_reply(fx->redis, entries(4, 5));
	assert_int_equal(fx->a.nsent, 2);
	assert_int_equal(fx->a.seqs[0], 4);
	assert_int_equal(fx->a.seqs[1], 5);
	assert_int_equal(fx->a.nlost, 0);
}

/* A fill that finds the stream trimmed past undelivered events tells the live members. */
static void trimmed_history_loses_live_members(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	tc_hub_attach(fx->hub, "t1", &fx->b.m); /* not live: its replay will notice itself */
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 9));
	fake_reply(fx->redis, entries(7, 9)); /* 4..6 were trimmed away */
	assert_int_equal(fx->a.nlost, 1);
	assert_int_equal(fx->b.nlost, 0);
}

/* Members that are not live, or already past a seq, get nothing from the fan-out. */
static void fanout_respects_live_and_cursor(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	tc_hub_attach(fx->hub, "t1", &fx->b.m);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 4));
	assert_int_equal(fx->a.nsent, 1);
	assert_int_equal(fx->b.nsent, 0);
	/* b catches up past 5 through its replay, then goes live. */
	tc_hub_advance(&fx->b.m, 5);
	assert_int_equal(tc_hub_go_live(&fx->b.m), TC_LIVE);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 5));
	assert_int_equal(fx->a.nsent, 2);
	assert_int_equal(fx->b.nsent, 0);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 6));
	assert_int_equal(fx->b.nsent, 1);
	assert_int_equal(fx->b.seqs[0], 6);
	/* A member whose filter does not match is still moved past the event. */
	fx->a.channel = "values";
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 7));
	assert_int_equal(fx->a.nsent, 3);
	assert_int_equal(fx->a.m.cursor, 7);
}

/* An event goes to the members in the order they attached: the first is not served last. */
static void fanout_in_attach_order(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 3, "e1");
	tc_hub_attach(fx->hub, "t1", &fx->b.m);
	tc_hub_advance(&fx->b.m, 3);
	assert_int_equal(tc_hub_go_live(&fx->b.m), TC_LIVE);
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 4));
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 5));
	assert_int_equal(nsent_to, 4);
	assert_ptr_equal(sent_to[0], &fx->a);
	assert_ptr_equal(sent_to[1], &fx->b);
	assert_ptr_equal(sent_to[2], &fx->a);
	assert_ptr_equal(sent_to[3], &fx->b);
}

/* A member catching up while the hub moves on is told to read on. */
static void go_live_waits_for_the_hub(void **state)
{
	struct fixture *fx = *state;
	tc_hub_attach(fx->hub, "t1", &fx->a.m);
	assert_int_equal(tc_hub_go_live(&fx->a.m), TC_LIVE_WAIT); /* not synced */
	fake_take_sub(fx->redis);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	fake_reply(fx->redis, rr_arr(2, rr_str("2"), rr_str("e1")));
	assert_int_equal(fx->a.nready, 1);
	assert_int_equal(tc_hub_go_live(&fx->a.m), TC_LIVE_BEHIND);
	tc_hub_advance(&fx->a.m, 2);
	assert_int_equal(tc_hub_go_live(&fx->a.m), TC_LIVE);
}

/* The last member leaving unsubscribes; one coming back before Redis
 * confirms waits for the confirmation, then subscribes again. */
static void out_of_order_confirmations(void **state)
{
	struct fixture *fx = *state;
	tc_hub_attach(fx->hub, "t1", &fx->a.m);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	tc_hub_detach(fx->hub, &fx->a.m); /* before the SSUBSCRIBE was confirmed */
	assert_string_equal(fake_take_sub(fx->redis), "SUNSUBSCRIBE " CH);
	assert_int_equal(tc_hub_threads(fx->hub), 1); /* kept until Redis confirms */
	tc_hub_attach(fx->hub, "t1", &fx->b.m);
	assert_null(fake_take_sub(fx->redis));        /* nothing crosses the UNSUBSCRIBE */
	fake_push(fx->redis, "ssubscribe", CH, NULL); /* confirms the first: ignored */
	assert_int_equal(fake_pending(fx->redis), 0);
	assert_int_equal(fx->b.nready, 0);
	fake_push(fx->redis, "sunsubscribe", CH, NULL);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	fake_reply(fx->redis, rr_arr(2, rr_nil(), rr_nil()));
	assert_int_equal(fx->b.nready, 1);
	tc_hub_detach(fx->hub, &fx->b.m);
	fake_push(fx->redis, "sunsubscribe", CH, NULL);
	assert_int_equal(tc_hub_threads(fx->hub), 0);
}

/* Redis dropping a shard channel unasked (its slot moved) makes the hub subscribe again. */
static void unasked_unsubscribe_resubscribes(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 1, "e1");
	fake_push(fx->redis, "sunsubscribe", CH, NULL);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	fake_reply(fx->redis, rr_arr(2, rr_str("1"), rr_str("e1")));
	fake_push(fx->redis, "smessage", CH, doorbell("e1", 2));
	assert_int_equal(fx->a.nsent, 1);
}

/* The thread's very first event brings its epoch. */
static void first_event_adopts_epoch(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 0, NULL);
	assert_string_equal(tc_thread_epoch(fx->a.m.thread), "");
	fake_push(fx->redis, "smessage", CH, doorbell("e7", 1));
	assert_int_equal(fx->a.nsent, 1);
	assert_string_equal(tc_thread_epoch(fx->a.m.thread), "e7");
	assert_int_equal(fx->a.nlost, 0);
}

/*
 * The thread begins while the hub reads where it stands: the read finds no
 * history, the first doorbell came before it. The hub must learn the epoch
 * (read again) rather than fill from the stream without one, or the next
 * doorbell looks like a new history (found by the REST run streams).
 */
static void thread_begins_during_the_first_sync(void **state)
{
	struct fixture *fx = *state;
	struct rec *m = &fx->a;
	tc_hub_attach(fx->hub, "t1", &m->m);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	fake_push(fx->redis, "smessage", CH, doorbell("e5", 1)); /* before the read's answer */
	fake_reply(fx->redis, rr_arr(2, rr_nil(), rr_nil()));    /* read before the first append */
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	fake_reply(fx->redis, rr_arr(2, rr_str("1"), rr_str("e5")));
	assert_int_equal(m->nready, 1);
	assert_string_equal(tc_thread_epoch(m->m.thread), "e5");
	assert_int_equal(tc_hub_go_live(&m->m), TC_LIVE_BEHIND); /* it reads seq 1 from the stream itself */
	tc_hub_advance(&m->m, 1);
	assert_int_equal(tc_hub_go_live(&m->m), TC_LIVE);
	fake_push(fx->redis, "smessage", CH, doorbell("e5", 2));
	assert_int_equal(m->nlost, 0);
	assert_int_equal(m->nsent, 1);
	assert_int_equal(m->seqs[0], 2);
}

/* A thread that began and was deleted during the first sync: read once more,
 * then the hub is ready with no history (no loop of reads). */
static void thread_begins_and_goes_during_the_first_sync(void **state)
{
	struct fixture *fx = *state;
	struct rec *m = &fx->a;
	tc_hub_attach(fx->hub, "t1", &m->m);
	assert_string_equal(fake_take_sub(fx->redis), "SSUBSCRIBE " CH);
	fake_push(fx->redis, "ssubscribe", CH, NULL);
	fake_push(fx->redis, "smessage", CH, doorbell("e5", 1));
	fake_reply(fx->redis, rr_arr(2, rr_nil(), rr_nil()));
	assert_string_equal(fake_peek(fx->redis), "HMGET tc:{t1}:meta seq epoch");
	fake_reply(fx->redis, rr_arr(2, rr_nil(), rr_nil()));
	assert_null(fake_peek(fx->redis));
	assert_int_equal(m->nready, 1);
	assert_int_equal(m->nlost, 0);
}

/* A batch doorbell (one append call, several events) delivers each in order,
 * skips what was already delivered, and fills a gap before it. */
static void batch_doorbells(void **state)
{
	struct fixture *fx = *state;
	const char *ev = "{\"method\":\"messages\",\"params\":{}}";
	char bell[512];
	attach_live(fx, &fx->a, 3, "e1");
	snprintf(bell, sizeof(bell), "*e1\n4\n3\nmessages\n\n%zu\n%smessages\n\n%zu\n%smessages\n\n%zu\n%s", strlen(ev),
		 ev, strlen(ev), ev, strlen(ev), ev);
	fake_push(fx->redis, "smessage", CH, bell);
	assert_int_equal(fx->a.nsent, 3);
	assert_int_equal(fx->a.seqs[0], 4);
	assert_int_equal(fx->a.seqs[2], 6);
	assert_int_equal(fake_pending(fx->redis), 0); /* no Redis read */
	/* Overlapping what was delivered: only the new one. */
	snprintf(bell, sizeof(bell), "*e1\n6\n2\nmessages\n\n%zu\n%smessages\n\n%zu\n%s", strlen(ev), ev, strlen(ev),
		 ev);
	fake_push(fx->redis, "smessage", CH, bell);
	assert_int_equal(fx->a.nsent, 4);
	assert_int_equal(fx->a.seqs[3], 7);
	/* Past a gap: the stream first. */
	snprintf(bell, sizeof(bell), "*e1\n10\n2\nmessages\n\n%zu\n%smessages\n\n%zu\n%s", strlen(ev), ev, strlen(ev),
		 ev);
	fake_push(fx->redis, "smessage", CH, bell);
	assert_int_equal(fx->a.nsent, 4);
	assert_string_equal(fake_peek(fx->redis), "FCALL_RO threadcast_range 1 t1 7 0 512 1048576");
	fake_reply(fx->redis, entries(8, 11));
	assert_int_equal(fx->a.nsent, 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(fx->a.seqs[i], 4 + i);
	/* A batch that is malformed anywhere is dropped whole. */
	snprintf(bell, sizeof(bell), "*e1\n12\n2\nmessages\n\n%zu\n%smessages\n\n99\n%s", strlen(ev), ev, ev);
	fake_push(fx->redis, "smessage", CH, bell);
	assert_int_equal(fx->a.nsent, 8);
}

/* Garbage on the channel changes nothing. */
static void malformed_doorbells_are_ignored(void **state)
{
	struct fixture *fx = *state;
	attach_live(fx, &fx->a, 1, "e1");
	const char *bad[] = {
		"", "e1", "e1\n2", "e1\nx\nmessages\n\n{}", "e1\n2\nmessages\n\nnot json", "\n2\nmessages\n\n{}"
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		fake_push(fx->redis, "smessage", CH, bad[i]);
	assert_int_equal(fx->a.nsent, 0);
	assert_int_equal(fx->a.nlost, 0);
	assert_int_equal(fake_pending(fx->redis), 0);
}

int main(void)
{
	tc_cjson_init();
	tc_log_init(TC_LOG_ERROR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(next_seq_from_doorbell, setup, teardown),
		cmocka_unit_test_setup_teardown(skipped_seqs_are_filled_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(thin_doorbell_reads_the_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(epoch_change_loses_members, setup, teardown),
		cmocka_unit_test_setup_teardown(resync_after_link_loss_detects_new_epoch, setup, teardown),
		cmocka_unit_test_setup_teardown(resync_after_link_loss_fills_the_gap, setup, teardown),
		cmocka_unit_test_setup_teardown(trimmed_history_loses_live_members, setup, teardown),
		cmocka_unit_test_setup_teardown(fanout_respects_live_and_cursor, setup, teardown),
		cmocka_unit_test_setup_teardown(fanout_in_attach_order, setup, teardown),
		cmocka_unit_test_setup_teardown(go_live_waits_for_the_hub, setup, teardown),
		cmocka_unit_test_setup_teardown(out_of_order_confirmations, setup, teardown),
		cmocka_unit_test_setup_teardown(unasked_unsubscribe_resubscribes, setup, teardown),
		cmocka_unit_test_setup_teardown(thread_begins_during_the_first_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(thread_begins_and_goes_during_the_first_sync, setup, teardown),
		cmocka_unit_test_setup_teardown(first_event_adopts_epoch, setup, teardown),
		cmocka_unit_test_setup_teardown(batch_doorbells, setup, teardown),
		cmocka_unit_test_setup_teardown(malformed_doorbells_are_ignored, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
