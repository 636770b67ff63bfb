/* Unit tests: metrics.c — histogram buckets and Prometheus rendering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "util.h"

static void histogram_buckets(void **state)
{
	struct tc_hist h = { 0 };
	tc_hist_observe(&h, 0.00005); /* first bucket */
	tc_hist_observe(&h, 0.001);   /* exactly a bound: that bucket */
	tc_hist_observe(&h, 0.0011);  /* next one */
	tc_hist_observe(&h, 99);      /* +Inf */
	assert_int_equal(h.n, 4);
	assert_int_equal(h.counts[0], 1);
	assert_int_equal(h.counts[3], 1); /* le=0.001 */
	assert_int_equal(h.counts[4], 1); /* le=0.0025 */
	assert_int_equal(h.counts[TC_HIST_BUCKETS], 1);
	assert_true(h.sum > 99.002 && h.sum < 99.003);
}

static void render(void **state)
{
	memset(&tc_metrics, 0, sizeof(tc_metrics));
	tc_metrics.events_delivered = 42;
	tc_metrics.subscriptions = 7;
	tc_hist_observe(&tc_metrics.redis_rtt, 0.0003);
	tc_hist_observe(&tc_metrics.redis_rtt, 0.02);
	struct tc_metrics_gauges g = { .websockets = 3, .sse = 2, .threads = 5, .redis_up = 1 };
	char *text = tc_metrics_render(&g);
	assert_non_null(strstr(text, "threadcast_connections{transport=\"websocket\"} 3\n"));
	assert_non_null(strstr(text, "threadcast_connections{transport=\"sse\"} 2\n"));
	assert_non_null(strstr(text, "threadcast_events_delivered_total 42\n"));
	assert_non_null(strstr(text, "# TYPE threadcast_events_delivered_total counter\n"));
	assert_non_null(strstr(text, "threadcast_subscriptions 7\n"));
	assert_non_null(strstr(text, "threadcast_threads_watched 5\n"));
	/* Buckets are cumulative and end with +Inf = count. */
	assert_non_null(strstr(text, "threadcast_redis_rtt_seconds_bucket{le=\"0.0001\"} 0\n"));
	assert_non_null(strstr(text, "threadcast_redis_rtt_seconds_bucket{le=\"0.0005\"} 1\n"));
	assert_non_null(strstr(text, "threadcast_redis_rtt_seconds_bucket{le=\"0.025\"} 2\n"));
	assert_non_null(strstr(text, "threadcast_redis_rtt_seconds_bucket{le=\"+Inf\"} 2\n"));
	assert_non_null(strstr(text, "threadcast_redis_rtt_seconds_count 2\n"));
	free(text);
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(histogram_buckets),
		cmocka_unit_test(render),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
