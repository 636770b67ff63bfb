/* Unit tests: util.c (thread ids, base64url) and buf.c (refcounts, queue). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "redis.h"
#include "slot.h"
#include "util.h"

static void thread_ids(void **state)
{
	char long_id[130];
	memset(long_id, 'a', sizeof(long_id));
	assert_true(tc_thread_id_valid("t1", 2));
	assert_true(tc_thread_id_valid("a.b_c:d-E9", 10));
	assert_true(tc_thread_id_valid(long_id, 128));
	assert_false(tc_thread_id_valid(long_id, 129));
	assert_false(tc_thread_id_valid("", 0));
	assert_false(tc_thread_id_valid("a{b}", 4));
	assert_false(tc_thread_id_valid("a/b", 3));
	assert_false(tc_thread_id_valid("a b", 3));
	assert_false(tc_thread_id_valid("\xc3\xa9", 2));
}

static void base64url_roundtrip(void **state)
{
	/* Every length mod 3, and every byte value. */
	unsigned char data[256];
	for (int i = 0; i < 256; i++)
		data[i] = (unsigned char)i;
	for (size_t len = 0; len <= 256; len++) {
		char *enc = tc_base64url_encode(data, len);
		assert_null(strpbrk(enc, "+/="));
		size_t outlen = 0;
		char *dec = tc_base64url_decode(enc, strlen(enc), &outlen);
		assert_non_null(dec);
		assert_int_equal(outlen, len);
		assert_memory_equal(dec, data, len);
		free(enc);
		free(dec);
	}
}

static void base64url_known_and_bad(void **state)
{
	char *enc = tc_base64url_encode("\xfb\xff", 2);
	assert_string_equal(enc, "-_8");
	free(enc);
	size_t len;
	assert_null(tc_base64url_decode("a", 1, &len));    /* impossible length */
	assert_null(tc_base64url_decode("ab+c", 4, &len)); /* not the url alphabet */
	assert_null(tc_base64url_decode("ab=", 3, &len));  /* no padding */
	assert_null(tc_base64url_decode("-_9", 3, &len));  /* non-zero spare bits */
}

static void buf_refcount(void **state)
{
	struct tc_buf *b = tc_buf_copy("hello", 5);
	assert_int_equal(b->refs, 1);
	assert_int_equal(b->len, 5);
	assert_memory_equal(tc_buf_data(b), "hello", 5);
	assert_int_equal(tc_buf_data(b)[5], '\0');
	assert_ptr_equal(tc_buf_ref(b), b);
	assert_int_equal(b->refs, 2);
	tc_buf_unref(b);
	assert_int_equal(b->refs, 1);
	tc_buf_unref(b); /* freed: ASan/valgrind would flag a double free or leak */
	tc_buf_unref(NULL);
}

static void bufq_fifo_and_bytes(void **state)
{
	struct tc_bufq q = { 0 };
	char s[16];

	assert_null(tc_bufq_peek(&q));
	assert_null(tc_bufq_pop(&q));
	/* Interleave pushes and pops so the ring wraps and grows while wrapped. */
	int next_push = 0, next_pop = 0;
	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < 7; i++) {
			int n = snprintf(s, sizeof(s), "%d", next_push++);
			tc_bufq_push(&q, tc_buf_copy(s, (size_t)n));
		}
		for (int i = 0; i < 5; i++) {
			struct tc_buf *b = tc_bufq_pop(&q);
			snprintf(s, sizeof(s), "%d", next_pop++);
			assert_string_equal((char *)tc_buf_data(b), s);
			tc_buf_unref(b);
		}
	}
	assert_int_equal(q.count, (uint32_t)(next_push - next_pop));
	size_t bytes = 0;
	for (int i = next_pop; i < next_push; i++)
		bytes += (size_t)snprintf(s, sizeof(s), "%d", i);
	assert_int_equal(q.bytes, bytes);
	tc_bufq_clear(&q);
	assert_int_equal(q.count, 0);
	assert_int_equal(q.bytes, 0);
	assert_null(q.ring);
}

static void bufq_shrinks_when_empty(void **state)
{
	struct tc_bufq q = { 0 };
	for (int i = 0; i < 100; i++)
		tc_bufq_push(&q, tc_buf_copy("x", 1));
	assert_true(q.cap >= 100);
	while (q.count)
		tc_buf_unref(tc_bufq_pop(&q));
	assert_int_equal(q.cap, 0); /* an idle connection keeps no big ring */
	assert_null(q.ring);
}

/* Entries of big_from bytes or more are counted apart too; clearing keeps the threshold. */
static void bufq_counts_big_entries_apart(void **state)
{
	struct tc_bufq q = { .big_from = 4 };
	tc_bufq_push(&q, tc_buf_copy("abc", 3));
	tc_bufq_push(&q, tc_buf_copy("abcd", 4));
	tc_bufq_push(&q, tc_buf_copy("abcdefgh", 8));
	assert_int_equal(q.bytes, 15);
	assert_int_equal(q.big_bytes, 12);
	tc_buf_unref(tc_bufq_pop(&q));
	assert_int_equal(q.big_bytes, 12);
	tc_buf_unref(tc_bufq_pop(&q));
	assert_int_equal(q.big_bytes, 8);
	tc_bufq_clear(&q);
	assert_int_equal(q.bytes, 0);
	assert_int_equal(q.big_bytes, 0);
	assert_int_equal(q.big_from, 4);
}

static void bufq_small_queue_allocates_nothing(void **state)
{
	struct tc_bufq q = { 0 };
	char s[16];
	int next_push = 0, next_pop = 0;
	/* Up to TC_BUFQ_INLINE entries, wrapping around: the queue's own slots. */
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < TC_BUFQ_INLINE - (round & 1); i++) {
			int n = snprintf(s, sizeof(s), "%d", next_push++);
			tc_bufq_push(&q, tc_buf_copy(s, (size_t)n));
		}
		assert_null(q.ring);
		while (next_pop < next_push - (round & 1 ? 0 : 1)) {
			struct tc_buf *b = tc_bufq_pop(&q);
			snprintf(s, sizeof(s), "%d", next_pop++);
			assert_string_equal((char *)tc_buf_data(b), s);
			tc_buf_unref(b);
		}
	}
	/* One more than fits: a ring, the order kept across the move. */
	for (int i = 0; i < TC_BUFQ_INLINE + 1; i++) {
		int n = snprintf(s, sizeof(s), "%d", next_push++);
		tc_bufq_push(&q, tc_buf_copy(s, (size_t)n));
	}
	assert_non_null(q.ring);
	while (q.count) {
		struct tc_buf *b = tc_bufq_pop(&q);
		snprintf(s, sizeof(s), "%d", next_pop++);
		assert_string_equal((char *)tc_buf_data(b), s);
		tc_buf_unref(b);
	}
	assert_int_equal(next_pop, next_push);
	tc_bufq_clear(&q);
}

/* Expected slots are what redis-server 7.0 answers to CLUSTER KEYSLOT. */
static void cluster_slots(void **state)
{
	static const struct {
		const char *key;
		unsigned slot;
	} cases[] = {
		{ "123456789", 12739 },                                      /* the CRC16/XMODEM check value */
		{ "foo", 12182 },          { "{user1000}.following", 3443 }, /* only the tag is hashed */
		{ "foo{}{bar}", 8363 },                                      /* empty tag: the whole key */
		{ "foo{{bar}}zap", 4015 },                                   /* tag is "{bar" */
		{ "foo{bar}{zap}", 5061 },                                   /* the first tag only */
		{ "tc:{t1}:live", 8943 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(tc_slot_of(cases[i].key, strlen(cases[i].key)), cases[i].slot);
	/* A thread's keys and doorbell share a slot. */
	assert_int_equal(tc_slot_of("tc:{t1}:events", 14), tc_slot_of("tc:{t1}:live", 12));
	assert_int_equal(tc_slot_of("t1", 2), tc_slot_of("tc:{t1}:meta", 12));
}

/* Version 4 UUIDs: lowercase hex in 8-4-4-4-12, the version and variant bits set, never twice the same. */
static void uuid4s(void **state)
{
	char a[37], b[37];
	tc_uuid4(a);
	tc_uuid4(b);
	assert_int_equal(strlen(a), 36);
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23)
			assert_int_equal(a[i], '-');
		else
			assert_true((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
	}
	assert_int_equal(a[14], '4');
	assert_non_null(strchr("89ab", a[19]));
	assert_string_not_equal(a, b);
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(thread_ids),
		cmocka_unit_test(base64url_roundtrip),
		cmocka_unit_test(base64url_known_and_bad),
		cmocka_unit_test(buf_refcount),
		cmocka_unit_test(bufq_fifo_and_bytes),
		cmocka_unit_test(bufq_shrinks_when_empty),
		cmocka_unit_test(bufq_counts_big_entries_apart),
		cmocka_unit_test(bufq_small_queue_allocates_nothing),
		cmocka_unit_test(cluster_slots),
		cmocka_unit_test(uuid4s),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
