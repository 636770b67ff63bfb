/*
 * sink.h — for the unit tests of the translators (runfmt, seedfmt): what a
 * translator emitted through its callback, one unit (an SSE event, an NDJSON
 * line) after the other. Include after cmocka.h.
 */
#ifndef TC_TEST_SINK_H
#define TC_TEST_SINK_H

#include <string.h>

struct sink {
	char text[32768];
	size_t len;
	int units;
};

static inline void collect(void *ctx, const char *text, size_t len)
{
	struct sink *s = ctx;
	assert_true(s->len + len < sizeof(s->text));
	memcpy(s->text + s->len, text, len);
	s->len += len;
	s->text[s->len] = '\0';
	s->units++;
}

#endif
