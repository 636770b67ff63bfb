#include "event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stored JSON as sp spells it: itself, unless a protocol field needs a new name. */
static void body(struct tc_event *ev, enum tc_spelling sp, const char **json, size_t *len)
{
	if (!ev->spelled[sp]) {
		ev->spelled[sp] = true;
		ev->respelled[sp] =
			tc_spell_event(ev->json, ev->json_len, ev->method, ev->method_len, sp, &ev->respelled_len[sp]);
	}
	*json = ev->respelled[sp] ? ev->respelled[sp] : ev->json;
	*len = ev->respelled[sp] ? ev->respelled_len[sp] : ev->json_len;
}

static struct tc_buf *ws_frame(struct tc_event *ev, enum tc_spelling sp)
{
	char head[112];
	const char *json;
	size_t len;
	int n = snprintf(head, sizeof(head), "{\"type\":\"event\",\"%s\":\"%s:%llu\",\"seq\":%llu,",
			 tc_spell("eventId", sp), ev->epoch, (unsigned long long)ev->seq, (unsigned long long)ev->seq);
	body(ev, sp, &json, &len);
	/* The stored JSON starts with '{' (the function guarantees it). */
	struct tc_buf *b = tc_buf_new((size_t)n + len - 1);
	memcpy(tc_buf_data(b), head, (size_t)n);
	memcpy(tc_buf_data(b) + n, json + 1, len - 1);
	return b;
}

/*
 * SSE: the same envelope as the WebSocket frame, as data lines. A line break
 * inside the stored JSON (whitespace between tokens) starts a new "data:"
 * line; EventSource joins them back with "\n", so the JSON is unchanged.
 */
static struct tc_buf *sse_frame(struct tc_event *ev, enum tc_spelling sp)
{
	struct tc_buf *ws = tc_event_frame(ev, TC_FRAME_WS, sp);
	const unsigned char *p = tc_buf_data(ws), *end = p + ws->len;
	size_t breaks = 0;
	for (const unsigned char *c = p; c < end; c++)
		breaks += *c == '\n' || *c == '\r';
	char head[200];
	int n = snprintf(head, sizeof(head), "id: %s:%llu\nevent: %.*s\ndata: ", ev->epoch, (unsigned long long)ev->seq,
			 (int)ev->method_len, ev->method);
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

/*
 * The parts: the seq and the method's length in a fixed head (host order: the
 * frame never leaves the process), the method, then the stored JSON as it
 * is (no respelling: its reader takes either spelling).
 */
struct parts_head {
	uint64_t seq;
	uint32_t method_len;
	uint32_t magic;
};
#define PARTS_MAGIC 0x70617274u

static struct tc_buf *parts_frame(struct tc_event *ev)
{
	struct parts_head h = { .seq = ev->seq, .method_len = (uint32_t)ev->method_len, .magic = PARTS_MAGIC };
	struct tc_buf *b = tc_buf_new(sizeof(h) + ev->method_len + ev->json_len);
	unsigned char *o = tc_buf_data(b);
	memcpy(o, &h, sizeof(h));
	memcpy(o + sizeof(h), ev->method, ev->method_len);
	memcpy(o + sizeof(h) + ev->method_len, ev->json, ev->json_len);
	return b;
}

int tc_event_parts_read(struct tc_buf *b, struct tc_event_parts *p)
{
	struct parts_head h;
	if (b->len < sizeof(h))
		return -1;
	memcpy(&h, tc_buf_data(b), sizeof(h));
	if (h.magic != PARTS_MAGIC || h.method_len > b->len - sizeof(h))
		return -1;
	p->seq = h.seq;
	p->method = (const char *)tc_buf_data(b) + sizeof(h);
	p->method_len = h.method_len;
	p->json = p->method + h.method_len;
	p->json_len = b->len - sizeof(h) - h.method_len;
	return 0;
}

struct tc_buf *tc_event_frame(struct tc_event *ev, enum tc_frame_kind kind, enum tc_spelling sp)
{
	if (kind == TC_FRAME_PARTS)
		sp = TC_SPELL_SEED; /* one form, whatever the spelling */
	if (!ev->frames[kind][sp])
		ev->frames[kind][sp] = kind == TC_FRAME_WS    ? ws_frame(ev, sp)
				       : kind == TC_FRAME_SSE ? sse_frame(ev, sp)
							      : parts_frame(ev);
	return ev->frames[kind][sp];
}

void tc_event_release(struct tc_event *ev)
{
	for (int k = 0; k < TC_FRAME_KINDS; k++)
		for (int sp = 0; sp < TC_SPELLINGS; sp++) {
			tc_buf_unref(ev->frames[k][sp]);
			ev->frames[k][sp] = NULL;
		}
	for (int sp = 0; sp < TC_SPELLINGS; sp++) {
		free(ev->respelled[sp]);
		ev->respelled[sp] = NULL;
		ev->spelled[sp] = false;
	}
}
