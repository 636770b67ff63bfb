/*
 * Replays the fuzz corpus (tests/fuzz/corpus) through every fuzz target in
 * the normal suite, so inputs the fuzzers found interesting — and crashes
 * turned into regression inputs — are checked on every run, sanitizers on.
 * A target aborts when a property fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fuzz_command_entry(const uint8_t *data, size_t size);
int fuzz_stream_entry(const uint8_t *data, size_t size);
int fuzz_store_entry(const uint8_t *data, size_t size);
int fuzz_spell_entry(const uint8_t *data, size_t size);
int fuzz_run_modes_entry(const uint8_t *data, size_t size);
int fuzz_run_formats_entry(const uint8_t *data, size_t size);

static int replay(const char *sub, int (*entry)(const uint8_t *, size_t))
{
	char dir[1024], path[2048];
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", TC_SOURCE_ROOT, sub);
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		static uint8_t buf[1 << 20];
		size_t len = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		assert_int_equal(entry(buf, len), 0);
		n++;
	}
	closedir(d);
	return n;
}

static void command_corpus(void **state)
{
	assert_true(replay("command", fuzz_command_entry) >= 5);
}

static void stream_corpus(void **state)
{
	assert_true(replay("stream", fuzz_stream_entry) >= 3);
}

static void store_corpus(void **state)
{
	assert_true(replay("store", fuzz_store_entry) >= 3);
}

static void spell_corpus(void **state)
{
	assert_true(replay("spell", fuzz_spell_entry) >= 3);
}

static void run_modes_corpus(void **state)
{
	assert_true(replay("run_modes", fuzz_run_modes_entry) >= 3);
}

static void run_formats_corpus(void **state)
{
	assert_true(replay("run_formats", fuzz_run_formats_entry) >= 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(command_corpus),   cmocka_unit_test(stream_corpus),
		cmocka_unit_test(store_corpus),     cmocka_unit_test(spell_corpus),
		cmocka_unit_test(run_modes_corpus), cmocka_unit_test(run_formats_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
