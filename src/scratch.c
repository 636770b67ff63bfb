#include "scratch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define TC_SCRATCH_CHECKED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_SCRATCH_CHECKED_BUILD 1
#endif
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

/* 64 KiB chunks, 16,384 of them: 1 GiB of address space, memory only where touched. */
#define CHUNK_SHIFT 16
#define CHUNK_SIZE ((size_t)1 << CHUNK_SHIFT)
#define NCHUNKS 16384u
#define HEADER 64 /* a chunk's first bytes: its struct chunk */
#define NCLASSES (TC_SCRATCH_MAX / 16)

struct chunk {
	struct chunk *next, *prev; /* on its class's list while it has room */
	void *free;                /* freed objects, linked through their first word */
	uint32_t cls;              /* its objects are (cls + 1) * 16 bytes */
	uint32_t used;             /* objects handed out and not freed */
	uint32_t bump;             /* offset of the first object never handed out */
};
_Static_assert(sizeof(struct chunk) <= HEADER, "a chunk's header fits before its objects");

static void *mapping; /* what mmap returned; region is it aligned to CHUNK_SIZE */
static unsigned char *region;
static uint32_t fresh; /* chunks [fresh, NCHUNKS) never used */
static uint32_t free_chunks[NCHUNKS], nfree_chunks;
static struct chunk *room[NCLASSES];
static size_t objects, chunks;

static bool in_region(const void *p)
{
	return region && (const unsigned char *)p >= region &&
	       (const unsigned char *)p < region + (size_t)NCHUNKS * CHUNK_SIZE;
}

static uint32_t object_size(const struct chunk *c)
{
	return (c->cls + 1) * 16;
}

/* Whether it has no room: nothing freed to reuse, no object left never handed out. */
static bool full(const struct chunk *c)
{
	return !c->free && c->bump + object_size(c) > CHUNK_SIZE;
}

static void list(struct chunk *c)
{
	c->prev = NULL;
	c->next = room[c->cls];
	if (c->next)
		c->next->prev = c;
	room[c->cls] = c;
}

static void unlist(struct chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		room[c->cls] = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static struct chunk *chunk_new(uint32_t cls)
{
	uint32_t i;
	if (nfree_chunks)
		i = free_chunks[--nfree_chunks];
	else if (fresh < NCHUNKS)
		i = fresh++;
	else
		return NULL;
	struct chunk *c = (struct chunk *)(region + ((size_t)i << CHUNK_SHIFT));
	*c = (struct chunk){ .cls = cls, .bump = HEADER };
	list(c);
	chunks++;
	return c;
}

/* Its pages go back to the kernel (they read as zeros when touched again). */
static void chunk_release(struct chunk *c)
{
	unlist(c);
	uint32_t i = (uint32_t)(((unsigned char *)c - region) >> CHUNK_SHIFT);
	madvise(c, CHUNK_SIZE, MADV_DONTNEED);
	free_chunks[nfree_chunks++] = i;
	chunks--;
}

void *tc_scratch_alloc(size_t size)
{
	if (!region || size > TC_SCRATCH_MAX)
		return tc_xmalloc(size);
	uint32_t cls = size ? (uint32_t)((size - 1) >> 4) : 0;
	struct chunk *c = room[cls];
	if (!c && !(c = chunk_new(cls)))
		return tc_xmalloc(size); /* the region is full */
	void *p;
	if (c->free) {
		p = c->free;
		c->free = *(void **)p;
	} else {
		p = (unsigned char *)c + c->bump;
		c->bump += object_size(c);
	}
	c->used++;
	objects++;
	if (full(c))
		unlist(c);
	return p;
}

void *tc_scratch_zalloc(size_t size)
{
	void *p = tc_scratch_alloc(size);
	memset(p, 0, size);
	return p;
}

char *tc_scratch_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(tc_scratch_alloc(n), s, n);
}

void tc_scratch_free(void *p)
{
	if (!in_region(p)) {
		free(p);
		return;
	}
	struct chunk *c = (struct chunk *)((uintptr_t)p & ~(uintptr_t)(CHUNK_SIZE - 1));
	if (full(c))
		list(c); /* it has room again */
	*(void **)p = c->free;
	c->free = p;
	c->used--;
	objects--;
	/* Empty: released, unless no other chunk of its class has room. */
	if (c->used == 0 && (room[c->cls] != c || c->next))
		chunk_release(c);
}

void tc__scratch_init_always(void)
{
	if (region)
		return;
	void *m = mmap(NULL, (size_t)(NCHUNKS + 1) * CHUNK_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return; /* malloc it is */
	mapping = m;
	region = (unsigned char *)(((uintptr_t)m + CHUNK_SIZE - 1) & ~(uintptr_t)(CHUNK_SIZE - 1));
}

void tc_scratch_init(void)
{
#ifdef TC_SCRATCH_CHECKED_BUILD
	return; /* ASan sees each object only from malloc */
#else
#ifdef RUNNING_ON_VALGRIND
	if (RUNNING_ON_VALGRIND)
		return; /* so does memcheck */
#endif
	tc__scratch_init_always();
#endif
}

void tc_scratch_shutdown(void)
{
	if (!region)
		return;
	if (objects) {
		/* A leak; their frees would come after the unmap. Left mapped, and said. */
		fprintf(stderr, "threadcast: %zu scratch objects were never freed\n", objects);
		return;
	}
	munmap(mapping, (size_t)(NCHUNKS + 1) * CHUNK_SIZE);
	mapping = NULL;
	region = NULL;
	fresh = nfree_chunks = 0;
	chunks = 0;
	memset(room, 0, sizeof(room));
}

size_t tc_scratch_objects(void)
{
	return objects;
}

size_t tc_scratch_chunks(void)
{
	return chunks;
}
