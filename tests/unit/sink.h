/*
 * sink.h — for the unit tests of the translators (runfmt, seedfmt): what a
 * translator emitted through its callback, one unit (an SSE event, an NDJSON
 * line) after the other. Include after cmocka.h.
 */
#ifndef TC_TEST_SINK_H
#define TC_TEST_SINK_H

#include <stdint.h>
#include <string.h>

struct sink {
	char text[32768];
	size_t len;
	int units;
	uint64_t last_id;
};

static inline void collect(void *ctx, uint64_t id, const char *text, size_t len)
{
	struct sink *s = ctx;
	assert_true(s->units == 0 || id > s->last_id); /* ids increase */
	s->last_id = id;
	assert_true(s->len + len < sizeof(s->text));
	memcpy(s->text + s->len, text, len);
	s->len += len;
	s->text[s->len] = '\0';
	s->units++;
}

#endif
