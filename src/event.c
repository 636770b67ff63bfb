#include "event.h"

#include <stdio.h>
#include <string.h>

static struct tc_buf *ws_frame(const struct tc_event *ev)
{
	char head[96];
	int n = snprintf(head, sizeof(head), "{\"type\":\"event\",\"eventId\":\"%s:%llu\",\"seq\":%llu,",
			 ev->epoch, (unsigned long long)ev->seq, (unsigned long long)ev->seq);
	/* The stored JSON starts with '{' (the function guarantees it). */
	struct tc_buf *b = tc_buf_new((size_t)n + ev->json_len - 1);
	memcpy(tc_buf_data(b), head, (size_t)n);
	memcpy(tc_buf_data(b) + n, ev->json + 1, ev->json_len - 1);
	return b;
}

/*
 * SSE: the same envelope as the WebSocket frame, as data lines. A line break
 * inside the stored JSON (whitespace between tokens) starts a new "data:"
 * line; EventSource joins them back with "\n", so the JSON is unchanged.
 */
static struct tc_buf *sse_frame(struct tc_event *ev)
{
	struct tc_buf *ws = tc_event_frame(ev, TC_FRAME_WS);
	const unsigned char *p = tc_buf_data(ws), *end = p + ws->len;
	size_t breaks = 0;
	for (const unsigned char *c = p; c < end; c++)
		breaks += *c == '\n' || *c == '\r';
	char head[200];
	int n = snprintf(head, sizeof(head), "id: %s:%llu\nevent: %.*s\ndata: ", ev->epoch,
			 (unsigned long long)ev->seq, (int)ev->method_len, ev->method);
	struct tc_buf *b = tc_buf_new((size_t)n + ws->len + breaks * 6 + 2);
	unsigned char *o = tc_buf_data(b);
	memcpy(o, head, (size_t)n);
	o += n;
	for (const unsigned char *c = p; c < end; c++) {
		if (*c == '\r' && c + 1 < end && c[1] == '\n')
			continue; /* CRLF: one break */
		if (*c == '\n' || *c == '\r') {
			memcpy(o, "\ndata: ", 7);
			o += 7;
		} else {
			*o++ = *c;
		}
	}
	*o++ = '\n';
	*o++ = '\n';
	b->len = (uint32_t)(o - tc_buf_data(b));
	return b;
}

struct tc_buf *tc_event_frame(struct tc_event *ev, enum tc_frame_kind kind)
{
	if (!ev->frames[kind])
		ev->frames[kind] = kind == TC_FRAME_WS ? ws_frame(ev) : sse_frame(ev);
	return ev->frames[kind];
}

void tc_event_release(struct tc_event *ev)
{
	for (int i = 0; i < TC_FRAME_KINDS; i++) {
		tc_buf_unref(ev->frames[i]);
		ev->frames[i] = NULL;
	}
}
