#include "buf.h"

#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "util.h"

struct tc_buf *tc_buf_new(size_t len)
{
	struct tc_buf *b = tc_scratch_alloc(sizeof(*b) + TC_BUF_HEADROOM + len + 1);
	b->refs = 1;
	b->len = (uint32_t)len;
	b->att = NULL;
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
		tc_buf_attach(b, NULL);
		tc_scratch_free(b);
	}
}

void tc_buf_attach(struct tc_buf *b, struct tc_buf_att *a)
{
	if (b->att)
		b->att->dispose(b->att);
	b->att = a;
}

/* The entries' storage and its capacity: the queue's own slots until a ring is needed. */
static struct tc_buf **slots(struct tc_bufq *q)
{
	return q->ring ? q->ring : q->inl;
}
static uint32_t capacity(const struct tc_bufq *q)
{
	return q->ring ? q->cap : TC_BUFQ_INLINE;
}

void tc_bufq_push(struct tc_bufq *q, struct tc_buf *b)
{
	uint32_t cap = capacity(q);
	if (q->count == cap) {
		uint32_t ncap = cap < 8 ? 8 : cap * 2;
		struct tc_buf **n = tc_xmalloc(ncap * sizeof(*n)), **old = slots(q);
		/* Unwrap the entries into the front of the new ring. */
		for (uint32_t i = 0; i < q->count; i++)
			n[i] = old[(q->head + i) & (cap - 1)];
		free(q->ring);
		q->ring = n;
		q->cap = cap = ncap;
		q->head = 0;
	}
	slots(q)[(q->head + q->count) & (cap - 1)] = b;
	q->count++;
	q->bytes += b->len;
	if (q->big_from && b->len >= q->big_from)
		q->big_bytes += b->len;
}

struct tc_buf *tc_bufq_peek(const struct tc_bufq *q)
{
	return q->count ? (q->ring ? q->ring : q->inl)[q->head] : NULL;
}

struct tc_buf *tc_bufq_pop(struct tc_bufq *q)
{
	if (!q->count)
		return NULL;
	struct tc_buf *b = slots(q)[q->head];
	q->head = (q->head + 1) & (capacity(q) - 1);
	q->count--;
	q->bytes -= b->len;
	if (q->big_from && b->len >= q->big_from)
		q->big_bytes -= b->len;
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
	uint32_t big_from = q->big_from;
	memset(q, 0, sizeof(*q));
	q->big_from = big_from;
}
