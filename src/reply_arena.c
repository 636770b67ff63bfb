#include "reply_arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A block of one reply's chain. The reply's root is the first object of the
 * first block: freeing the root finds the chain from it. */
struct tc_reply_block {
	struct tc_reply_block *next;
	struct tc_reply_arena *owner;
	size_t cap, used;
	max_align_t data[];
};

#define ALIGN(n) (((n) + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1))
/* Blocks of one size, under malloc's mmap threshold (128 KiB: a bigger
 * block would be fresh pages, a page fault each, every reply), kept for the
 * next reply up to SPARE_MAX of them; an object over BIG gets a block of its
 * own size (an event may be 16 MiB), freed with its reply. */
#define BLOCK (64u << 10)
#define BIG (BLOCK / 4)
#define SPARE_MAX 16

static struct tc_reply_block *new_block(struct tc_reply_arena *a, size_t cap)
{
	struct tc_reply_block *b;
	if (cap == BLOCK && a->spare) {
		b = a->spare;
		a->spare = b->next;
		a->nspare--;
	} else {
		b = tc_xmalloc(sizeof(*b) + cap);
		b->owner = a;
		b->cap = cap;
	}
	b->next = NULL;
	b->used = 0;
	return b;
}

/* The new block nb goes after b in its chain (the order is of no matter). */
static void link_after(struct tc_reply_block *b, struct tc_reply_block *nb)
{
	nb->next = b->next;
	b->next = nb;
}

/* size bytes of the reply task belongs to; a reply's root object (and only
 * it: not its array of elements) starts a chain of its own. */
static void *carve(const redisReadTask *task, size_t size, bool root)
{
	struct tc_reply_arena *a = task->privdata;
	struct tc_reply_block *b = a->tail;

	size = ALIGN(size);
	if (root) {
		b = a->tail = new_block(a, size > BIG ? size : BLOCK);
	} else if (size > BIG) {
		struct tc_reply_block *own = new_block(a, size);
		link_after(b, own);
		own->used = size;
		return own->data;
	} else if (b->cap - b->used < size) {
		struct tc_reply_block *nb = new_block(a, BLOCK);
		link_after(b, nb);
		b = a->tail = nb;
	}
	void *p = (char *)b->data + b->used;
	b->used += size;
	return p;
}

/* A reply object of type, linked into its parent as hiredis' own are. */
static redisReply *object(const redisReadTask *task, int type, size_t extra)
{
	redisReply *r = carve(task, sizeof(*r) + extra, !task->parent);
	memset(r, 0, sizeof(*r));
	r->type = type;
	if (task->parent) {
		redisReply *parent = task->parent->obj;
		parent->element[task->idx] = r;
	}
	return r;
}

/* A string object: the bytes right after the struct, NUL-terminated. */
static redisReply *string_object(const redisReadTask *task, int type, const char *str, size_t len)
{
	redisReply *r = object(task, type, ALIGN(sizeof(redisReply)) - sizeof(redisReply) + len + 1);
	r->str = (char *)r + ALIGN(sizeof(redisReply));
	memcpy(r->str, str, len);
	r->str[len] = '\0';
	r->len = len;
	return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
#if HIREDIS_MAJOR >= 1
	/* hiredis 1.x: a verbatim string's first 4 bytes are its type ("txt:"). */
	if (task->type == REDIS_REPLY_VERB) {
		if (len < 4)
			return NULL;
		redisReply *r = string_object(task, task->type, str + 4, len - 4);
		memcpy(r->vtype, str, 3);
		r->vtype[3] = '\0';
		return r;
	}
#endif
	return string_object(task, task->type, str, len);
}

static void *create_array(const redisReadTask *task, size_t elements)
{
	redisReply *r = object(task, task->type, 0);
	if (elements) {
		r->element = carve(task, elements * sizeof(*r->element), false);
		memset(r->element, 0, elements * sizeof(*r->element));
	}
	r->elements = elements;
	return r;
}

#if HIREDIS_MAJOR >= 1
static void *create_array_1(const redisReadTask *task, size_t elements)
{
	return create_array(task, elements);
}
#else
/* hiredis 0.14 counts elements in an int (never negative here: a nil array is a nil). */
static void *create_array_0(const redisReadTask *task, int elements)
{
	return create_array(task, elements > 0 ? (size_t)elements : 0);
}
#endif

static void *create_integer(const redisReadTask *task, long long value)
{
	redisReply *r = object(task, REDIS_REPLY_INTEGER, 0);
	r->integer = value;
	return r;
}

static void *create_nil(const redisReadTask *task)
{
	return object(task, REDIS_REPLY_NIL, 0);
}

#if HIREDIS_MAJOR >= 1
static void *create_double(const redisReadTask *task, double value, char *str, size_t len)
{
	redisReply *r = string_object(task, REDIS_REPLY_DOUBLE, str, len);
	r->dval = value;
	return r;
}

static void *create_bool(const redisReadTask *task, int value)
{
	redisReply *r = object(task, REDIS_REPLY_BOOL, 0);
	r->integer = value != 0;
	return r;
}
#endif

/* The root's free: its whole chain, blocks kept for the next reply while the
 * link is open. */
static void free_reply(void *reply)
{
	if (!reply)
		return;
	struct tc_reply_block *b = (struct tc_reply_block *)((char *)reply - offsetof(struct tc_reply_block, data));
	while (b) {
		struct tc_reply_block *next = b->next;
		struct tc_reply_arena *a = b->owner;
		if (b->cap == BLOCK && !a->closed && a->nspare < SPARE_MAX) {
			b->next = a->spare;
			a->spare = b;
			a->nspare++;
		} else {
			free(b);
		}
		b = next;
	}
}

static redisReplyObjectFunctions arena_functions = {
	.createString = create_string,
#if HIREDIS_MAJOR >= 1
	.createArray = create_array_1,
	.createDouble = create_double,
	.createBool = create_bool,
#else
	.createArray = create_array_0,
#endif
	.createInteger = create_integer,
	.createNil = create_nil,
	.freeObject = free_reply,
};

void tc_reply_arena_use(redisReader *r, struct tc_reply_arena *a)
{
	a->tail = NULL;
	r->fn = &arena_functions;
	r->privdata = a;
}

void tc_reply_arena_close(struct tc_reply_arena *a)
{
	a->closed = true;
	while (a->spare) {
		struct tc_reply_block *b = a->spare;
		a->spare = b->next;
		free(b);
	}
	a->nspare = 0;
}
