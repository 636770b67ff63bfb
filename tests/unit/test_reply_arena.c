/* Replies built in a reply arena read as hiredis' own: the same tree, the
 * same strings, whatever the sizes, however the bytes arrive; and a reply
 * left half read, or cut by a protocol error, is given back whole (the
 * sanitizer build checks that nothing leaks or is touched after its free). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reply_arena.h"
#include "util.h"

/* RESP text, grown as it is written. */
struct resp {
	char *s;
	size_t len, cap;
};

static void put(struct resp *o, const void *p, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		o->cap = (o->len + n + 1) * 2;
		o->s = realloc(o->s, o->cap);
		assert_non_null(o->s);
	}
	memcpy(o->s + o->len, p, n);
	o->len += n;
	o->s[o->len] = '\0';
}

static void putf(struct resp *o, const char *fmt, ...)
{
	char line[64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	put(o, line, (size_t)n);
}

static void bulk(struct resp *o, const char *s, size_t n)
{
	putf(o, "$%zu\r\n", n);
	put(o, s, n);
	put(o, "\r\n", 2);
}

/* An XRANGE reply of n entries "<seq>-0" [m messages n "" e <json of json_len bytes>]. */
static void xrange(struct resp *o, unsigned n, size_t json_len)
{
	char *json = tc_xmalloc(json_len);
	memset(json, 'x', json_len);
	putf(o, "*%u\r\n", n);
	for (unsigned i = 1; i <= n; i++) {
		char id[32];
		int idn = snprintf(id, sizeof(id), "%u-0", i);
		put(o, "*2\r\n", 4);
		bulk(o, id, (size_t)idn);
		put(o, "*6\r\n", 4);
		bulk(o, "m", 1);
		bulk(o, "messages", 8);
		bulk(o, "n", 1);
		bulk(o, "", 0);
		bulk(o, "e", 1);
		json[0] = (char)('a' + i % 26);
		bulk(o, json, json_len);
	}
	free(json);
}

static void assert_same(const redisReply *a, const redisReply *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case REDIS_REPLY_ARRAY:
		assert_int_equal(a->elements, b->elements);
		for (size_t i = 0; i < a->elements; i++)
			assert_same(a->element[i], b->element[i]);
		break;
	case REDIS_REPLY_INTEGER:
		assert_int_equal(a->integer, b->integer);
		break;
	case REDIS_REPLY_NIL:
		break;
	default:
		assert_int_equal(a->len, b->len);
		assert_memory_equal(a->str, b->str, a->len);
		assert_int_equal(b->str[b->len], '\0');
	}
}

/* Parses o with hiredis' own objects and with an arena, fed step bytes at a
 * time, and checks the replies are the same. */
static void parse_both(const struct resp *o, size_t step)
{
	struct tc_reply_arena arena = { 0 };
	redisReader *plain = redisReaderCreate(), *carved = redisReaderCreate();
	tc_reply_arena_use(carved, &arena);
	void *want = NULL, *got = NULL;

	assert_int_equal(redisReaderFeed(plain, o->s, o->len), REDIS_OK);
	assert_int_equal(redisReaderGetReply(plain, &want), REDIS_OK);
	assert_non_null(want);
	for (size_t off = 0; off < o->len && !got; off += step) {
		size_t n = o->len - off < step ? o->len - off : step;
		assert_int_equal(redisReaderFeed(carved, o->s + off, n), REDIS_OK);
		assert_int_equal(redisReaderGetReply(carved, &got), REDIS_OK);
	}
	assert_non_null(got);
	assert_same(want, got);
	freeReplyObject(want);
	carved->fn->freeObject(got);
	redisReaderFree(plain);
	redisReaderFree(carved);
	tc_reply_arena_close(&arena);
}

/* A replay's page: 512 entries, more blocks than the first. */
static void a_page_of_entries(void **state)
{
	struct resp o = { 0 };
	xrange(&o, 512, 370);
	parse_both(&o, o.len);
	parse_both(&o, 4096); /* as a socket gives it */
	free(o.s);
}

/* Strings over the block sizes get blocks of their own, root or not. */
static void big_strings(void **state)
{
	struct resp o = { 0 };
	xrange(&o, 3, 100 << 10);
	parse_both(&o, o.len);
	free(o.s);
	o = (struct resp){ 0 };
	xrange(&o, 2, 5 << 20); /* over the largest block */
	parse_both(&o, 1 << 16);
	free(o.s);
	o = (struct resp){ 0 };
	char *big = tc_xmalloc(6 << 20);
	memset(big, 'y', 6 << 20);
	bulk(&o, big, 6 << 20); /* a root string */
	parse_both(&o, o.len);
	free(big);
	free(o.s);
}

/* Every kind of reply, nested, fed a byte at a time. */
static void every_kind(void **state)
{
	static const char *const cases[] = {
		"+OK\r\n",
		"-ERR threadcast: no\r\n",
		":42\r\n",
		"$-1\r\n",
		"*-1\r\n",
		"*0\r\n",
		"$0\r\n\r\n",
		"*3\r\n*0\r\n$-1\r\n*2\r\n:1\r\n*1\r\n+deep\r\n",
		"*2\r\n*3\r\n$3\r\nseq\r\n$5\r\nepoch\r\n$-1\r\n:0\r\n",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resp o = { 0 };
		put(&o, cases[i], strlen(cases[i]));
		parse_both(&o, 1);
		free(o.s);
	}
}

/* Replies one after another on the same reader, each freed before the next. */
static void replies_in_turn(void **state)
{
	struct tc_reply_arena arena = { 0 };
	redisReader *r = redisReaderCreate();
	tc_reply_arena_use(r, &arena);
	struct resp o = { 0 };
	for (unsigned i = 1; i <= 50; i++)
		xrange(&o, i * 7, 50 + i);
	assert_int_equal(redisReaderFeed(r, o.s, o.len), REDIS_OK);
	for (unsigned i = 1; i <= 50; i++) {
		void *got = NULL;
		assert_int_equal(redisReaderGetReply(r, &got), REDIS_OK);
		assert_non_null(got);
		const redisReply *rep = got;
		assert_int_equal(rep->elements, i * 7);
		assert_int_equal(rep->element[i * 7 - 1]->element[1]->element[5]->len, 50 + i);
		r->fn->freeObject(got);
		assert_true(arena.nspare <= 16); /* blocks kept for the next reply, a bounded few */
	}
	assert_true(arena.nspare > 0);
	free(o.s);
	redisReaderFree(r);
	tc_reply_arena_close(&arena);
	assert_int_equal(arena.nspare, 0);
}

/* A reply half read when the link goes, or cut by bytes that are not RESP:
 * the reader gives its part back. */
static void half_read_replies_are_given_back(void **state)
{
	struct tc_reply_arena arena = { 0 };
	struct resp o = { 0 };
	xrange(&o, 512, 370);

	redisReader *r = redisReaderCreate();
	tc_reply_arena_use(r, &arena);
	void *got = NULL;
	assert_int_equal(redisReaderFeed(r, o.s, o.len / 2), REDIS_OK);
	assert_int_equal(redisReaderGetReply(r, &got), REDIS_OK);
	assert_null(got);
	redisReaderFree(r); /* the link went */

	/* Two elements built, then a type byte RESP does not have. */
	r = redisReaderCreate();
	tc_reply_arena_use(r, &arena);
	static const char cut[] = "*3\r\n$1\r\na\r\n*1\r\n:5\r\n?x\r\n";
	assert_int_equal(redisReaderFeed(r, cut, sizeof(cut) - 1), REDIS_OK);
	assert_int_equal(redisReaderGetReply(r, &got), REDIS_ERR);
	assert_null(got);
	redisReaderFree(r);

	/* The link closes while a reply is in its callback: that reply, freed after, gives its blocks to malloc. */
	r = redisReaderCreate();
	tc_reply_arena_use(r, &arena);
	assert_int_equal(redisReaderFeed(r, o.s, o.len), REDIS_OK);
	assert_int_equal(redisReaderGetReply(r, &got), REDIS_OK);
	assert_non_null(got);
	tc_reply_arena_close(&arena);
	r->fn->freeObject(got);
	assert_int_equal(arena.nspare, 0);
	redisReaderFree(r);
	free(o.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_page_of_entries),
		cmocka_unit_test(big_strings),
		cmocka_unit_test(every_kind),
		cmocka_unit_test(replies_in_turn),
		cmocka_unit_test(half_read_replies_are_given_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
