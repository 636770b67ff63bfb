/* Unit tests: chunked.c — Transfer-Encoding: chunked request bodies, strictly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "chunked.h"

/* Decodes text fed in pieces of step bytes: the rc of the last call, the data in out. */
static enum tc_chunked_rc feed(const char *text, size_t step, char *out, size_t *out_len, size_t *rest, uint64_t max)
{
	struct tc_chunked d = { 0 };
	size_t len = strlen(text), at = 0;
	char piece[256];
	enum tc_chunked_rc rc = TC_CHUNKED_MORE;
	*out_len = 0;
	*rest = 0;
	while (at < len && rc == TC_CHUNKED_MORE) {
		size_t n = len - at < step ? len - at : step, wrote, used;
		memcpy(piece, text + at, n);
		rc = tc_chunked_decode(&d, piece, n, out + *out_len, &wrote, &used, max);
		if (rc < 0)
			return rc;
		*out_len += wrote;
		at += used;
	}
	*rest = len - at;
	return rc;
}

static const char BODY[] = "5;name=value\r\nhello\r\n"
			   "7\r\n, world\r\n"
			   "000\r\n"
			   "X-Checksum: 1\r\n"
			   "Another: 2\r\n"
			   "\r\n"
			   "GET /next"; /* a pipelined request: not the body */

/* Whatever the pieces, the same data, and the body ends where its framing does. */
static void pieces_make_no_difference(void **state)
{
	for (size_t step = 1; step <= sizeof(BODY); step++) {
		char out[sizeof(BODY)];
		size_t n, rest;
		assert_int_equal(feed(BODY, step, out, &n, &rest, 1000), TC_CHUNKED_DONE);
		assert_int_equal(n, 12);
		assert_memory_equal(out, "hello, world", 12);
		assert_int_equal(rest, strlen("GET /next"));
	}
}

/* The decoder may write over its own input (the data is never longer than its framing). */
static void in_place(void **state)
{
	char buf[] = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
	struct tc_chunked d = { 0 };
	size_t n, used;
	assert_int_equal(tc_chunked_decode(&d, buf, strlen(buf), buf, &n, &used, 100), TC_CHUNKED_DONE);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "abcde", 5);
	assert_int_equal(used, strlen("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
}

static void unfinished_bodies_want_more(void **state)
{
	const char *partial[] = { "", "5", "5\r", "5\r\nhel", "5\r\nhello", "5\r\nhello\r", "0\r\n", "0\r\nX: 1\r\n" };
	for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++) {
		char out[64];
		size_t n, rest;
		if (feed(partial[i], 3, out, &n, &rest, 100) != TC_CHUNKED_MORE)
			fail_msg("partial body %zu", i);
	}
}

static void malformed_bodies_are_refused(void **state)
{
	const char *bad[] = {
		"x\r\n",                 /* not hex */
		";a\r\n",                /* no size */
		"5\nhello\r\n0\r\n\r\n", /* a bare LF after the size */
		"5\r\nhello\n0\r\n\r\n", /* and after the data */
		"5\r\nhelloX\r\n",       /* data longer than said */
		"5;a\nb\r\n",            /* a LF inside an extension */
		"0\r\nX: 1\n\r\n",       /* a bare LF ending a trailer */
		"0\r\n\n",               /* and ending the body */
		"0\r\n\rX",              /* a CR not followed by LF */
		" 5\r\n",                /* white space before the size */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char out[64];
		size_t n, rest;
		if (feed(bad[i], 2, out, &n, &rest, 100) != TC_CHUNKED_BAD)
			fail_msg("accepted malformed body %zu: %s", i, bad[i]);
	}
}

/* A chunk larger than the limit is refused from its size line, before any of it arrives. */
static void sizes_past_the_limit(void **state)
{
	char out[64];
	size_t n, rest;
	assert_int_equal(feed("65\r\n", 1, out, &n, &rest, 100), TC_CHUNKED_TOO_BIG);
	assert_int_equal(feed("64\r\n", 1, out, &n, &rest, 100), TC_CHUNKED_MORE);
	assert_int_equal(feed("ffffffffffffffffffff\r\n", 4, out, &n, &rest, UINT64_MAX), TC_CHUNKED_TOO_BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pieces_make_no_difference),   cmocka_unit_test(in_place),
		cmocka_unit_test(unfinished_bodies_want_more), cmocka_unit_test(malformed_bodies_are_refused),
		cmocka_unit_test(sizes_past_the_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
