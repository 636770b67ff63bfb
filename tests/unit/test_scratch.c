/* Unit tests: scratch.c — request-lived objects in size-class chunks, apart from the heap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"

#define N 6000

static uint32_t rng = 12345;
static uint32_t next_rand(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

/* Random sizes, each object filled with its own byte, freed in random
 * order while more are made: no two objects overlap, none is disturbed. */
static void objects_keep_their_bytes(void **state)
{
	(void)state;
	tc__scratch_init_always();
	static unsigned char *obj[N];
	static size_t len[N];
	for (int i = 0; i < N; i++) {
		len[i] = next_rand() % (TC_SCRATCH_MAX + 1);
		obj[i] = tc_scratch_alloc(len[i]);
		memset(obj[i], i & 0xff, len[i]);
	}
	assert_int_equal(tc_scratch_objects(), N);
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < N / 2; k++) {
			int i = (int)(next_rand() % N);
			for (size_t j = 0; j < len[i]; j++)
				assert_int_equal(obj[i][j], i & 0xff);
			tc_scratch_free(obj[i]);
			len[i] = next_rand() % (TC_SCRATCH_MAX + 1);
			obj[i] = tc_scratch_zalloc(len[i]);
			for (size_t j = 0; j < len[i]; j++)
				assert_int_equal(obj[i][j], 0);
			memset(obj[i], i & 0xff, len[i]);
		}
	}
	for (int i = 0; i < N; i++) {
		for (size_t j = 0; j < len[i]; j++)
			assert_int_equal(obj[i][j], i & 0xff);
		tc_scratch_free(obj[i]);
	}
	assert_int_equal(tc_scratch_objects(), 0);
	/* Every class keeps at most its one empty chunk. */
	assert_true(tc_scratch_chunks() <= TC_SCRATCH_MAX / 16);
	tc_scratch_shutdown();
}

/* A class's chunks go back when emptied, but for one; a new storm reuses them. */
static void empty_chunks_go_back(void **state)
{
	(void)state;
	tc__scratch_init_always();
	static void *obj[N];
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++)
			obj[i] = tc_scratch_alloc(400); /* 163 per chunk: 37 chunks */
		size_t full = tc_scratch_chunks();
		assert_true(full >= N / (65536 / 400));
		for (int i = 0; i < N; i += 2)
			tc_scratch_free(obj[i]); /* every chunk half empty: none released */
		assert_int_equal(tc_scratch_chunks(), full);
		for (int i = 1; i < N; i += 2)
			tc_scratch_free(obj[i]);
		assert_int_equal(tc_scratch_chunks(), 1);
		assert_int_equal(tc_scratch_objects(), 0);
	}
	tc_scratch_shutdown();
}

/* Larger than TC_SCRATCH_MAX, or before init: malloc's, and freed by the same call. */
static void large_and_uninitialized_are_malloc(void **state)
{
	(void)state;
	void *before = tc_scratch_alloc(100); /* no region yet */
	assert_int_equal(tc_scratch_objects(), 0);
	tc__scratch_init_always();
	void *big = tc_scratch_alloc(TC_SCRATCH_MAX + 1);
	void *small = tc_scratch_alloc(TC_SCRATCH_MAX);
	assert_int_equal(tc_scratch_objects(), 1);
	memset(big, 1, TC_SCRATCH_MAX + 1);
	tc_scratch_free(big);
	tc_scratch_free(before);
	tc_scratch_free(NULL);
	tc_scratch_free(small);
	assert_int_equal(tc_scratch_objects(), 0);
	tc_scratch_shutdown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(objects_keep_their_bytes),
		cmocka_unit_test(empty_chunks_go_back),
		cmocka_unit_test(large_and_uninitialized_are_malloc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
