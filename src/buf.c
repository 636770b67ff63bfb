#include "buf.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "wsdeflate.h"

struct tc_buf *tc_buf_new(size_t len)
{
	struct tc_buf *b = tc_xmalloc(sizeof(*b) + TC_BUF_HEADROOM + len + 1);
	b->refs = 1;
	b->len = (uint32_t)len;
	b->deflated = NULL;
	/* A NUL after the payload lets text payloads be logged or parsed. */
	b->mem[TC_BUF_HEADROOM + len] = '\0';
	return b;
}

struct tc_buf *tc_buf_copy(const void *data, size_t len)
{
	struct tc_buf *b = tc_buf_new(len);
	memcpy(tc_buf_data(b), data, len);
	return b;
}

void tc_buf_unref(struct tc_buf *b)
{
	if (b && --b->refs == 0) {
		tc_dzout_free(b->deflated);
		free(b);
	}
}

void tc_bufq_push(struct tc_bufq *q, struct tc_buf *b)
{
	if (q->count == q->cap) {
		uint32_t ncap = q->cap ? q->cap * 2 : 8;
		struct tc_buf **n = tc_xmalloc(ncap * sizeof(*n));
		/* Unwrap the ring into the front of the new array. */
		for (uint32_t i = 0; i < q->count; i++)
			n[i] = q->ring[(q->head + i) & (q->cap - 1)];
		free(q->ring);
		q->ring = n;
		q->cap = ncap;
		q->head = 0;
	}
	q->ring[(q->head + q->count) & (q->cap - 1)] = b;
	q->count++;
	q->bytes += b->len;
}

struct tc_buf *tc_bufq_peek(const struct tc_bufq *q)
{
	return q->count ? q->ring[q->head] : NULL;
}

struct tc_buf *tc_bufq_pop(struct tc_bufq *q)
{
	if (!q->count)
		return NULL;
	struct tc_buf *b = q->ring[q->head];
	q->head = (q->head + 1) & (q->cap - 1);
	q->count--;
	q->bytes -= b->len;
	if (q->count == 0 && q->cap > 32) {
		/* A burst is over: give a large ring back so idle stays small. */
		free(q->ring);
		q->ring = NULL;
		q->cap = 0;
		q->head = 0;
	}
	return b;
}

void tc_bufq_clear(struct tc_bufq *q)
{
	struct tc_buf *b;
	while ((b = tc_bufq_pop(q)))
		tc_buf_unref(b);
	free(q->ring);
	memset(q, 0, sizeof(*q));
}
