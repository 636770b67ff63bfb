/* Unit tests: lwsmem.c — lws' header tables in slots, everything else in malloc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libwebsockets.h>
#include <string.h>

#include "lwsmem.h"

#if defined(__SANITIZE_ADDRESS__)
#define SLOTS_ON 0 /* sanitizer builds keep malloc for everything */
#else
#define SLOTS_ON 1
#endif

static void header_tables_use_slots(void **state)
{
	tc_lwsmem_init();
	unsigned char *data = lws_realloc(NULL, 4096, "ah data");
	void *ah = lws_realloc(NULL, 1000, "ah struct");
	void *other = lws_realloc(NULL, 4096, "wsi");
	void *huge = lws_realloc(NULL, 9000, "ah data");
	assert_non_null(data);
	assert_non_null(ah);
	assert_int_equal(tc_lwsmem_slots_in_use(), SLOTS_ON ? 2 : 0);
	memset(data, 0xab, 4096);
	/* Growing within the slot keeps the block and its bytes. */
	unsigned char *grown = lws_realloc(data, 6000, "ah data");
	assert_int_equal(grown[4095], 0xab);
	if (SLOTS_ON)
		assert_ptr_equal(grown, data);
	/* Growing past the slot moves it to malloc, bytes intact, slot freed. */
	unsigned char *moved = lws_realloc(grown, 20000, "ah data");
	assert_int_equal(moved[0], 0xab);
	assert_int_equal(moved[4095], 0xab);
	assert_int_equal(tc_lwsmem_slots_in_use(), SLOTS_ON ? 1 : 0);
	lws_realloc(moved, 0, "lws_free");
	/* The slot freed last is the next one taken, its pages still resident
	 * (a storm's handshakes reuse a few slots without page faults)... */
	memset(ah, 0xcd, 1000);
	lws_realloc(ah, 0, "lws_free");
	assert_int_equal(tc_lwsmem_slots_in_use(), 0);
	unsigned char *again = lws_realloc(NULL, 4096, "ah data");
	if (SLOTS_ON) {
		assert_ptr_equal(again, ah);
		assert_int_equal(again[999], 0xcd);
	}
	lws_realloc(again, 0, "lws_free");
	/* ...until a trim gives every free slot's pages back: then it reads as zeros. */
	assert_true(SLOTS_ON ? tc_lwsmem_trim() >= 4096 : tc_lwsmem_trim() == 0);
	assert_int_equal(tc_lwsmem_trim(), 0); /* nothing left to give */
	again = lws_realloc(NULL, 4096, "ah data");
	for (size_t i = 0; SLOTS_ON && i < 4096; i++)
		assert_int_equal(again[i], 0);
	assert_int_equal(tc_lwsmem_slots_in_use(), SLOTS_ON ? 1 : 0);
	lws_realloc(again, 0, "lws_free");
	lws_realloc(other, 0, "lws_free");
	lws_realloc(huge, 0, "lws_free");
	assert_int_equal(tc_lwsmem_slots_in_use(), 0);
	tc_lwsmem_shutdown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(header_tables_use_slots),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
