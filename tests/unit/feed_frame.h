/*
 * feed_frame.h — for the tests and fuzz targets of the run wing's
 * translators (src/run/): feeds one event written as the gateway frames it
 * for a WebSocket client ({"type":"event","seq":N,"method":…,"params":…}):
 * its seq (0 when it has none), the event parsed and its text, as
 * run/feed.c hands them over.
 */
#ifndef TC_TEST_FEED_FRAME_H
#define TC_TEST_FEED_FRAME_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** A translator's event function (tc_run_fmt_ops.event). */
typedef bool tc_event_fn(void *f, uint64_t seq, const cJSON *event, const char *json, size_t len);

static inline bool feed_frame(tc_event_fn *fn, void *f, const char *frame, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(frame, len);
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(j, "seq");
	uint64_t n = cJSON_IsNumber(seq) && seq->valuedouble >= 0 && seq->valuedouble <= 9007199254740991.0
			     ? (uint64_t)seq->valuedouble
			     : 0;
	bool end = fn(f, n, j, frame, len);
	cJSON_Delete(j);
	return end;
}

#endif
