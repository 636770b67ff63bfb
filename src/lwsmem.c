#include "lwsmem.h"

#include <libwebsockets.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TC_LWSMEM_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_LWSMEM_OFF 1
#endif
#endif

#ifndef TC_LWSMEM_OFF

/* 8 KiB slots, 32,768 of them: 256 MiB of address space, no memory until
 * touched. More handshakes than that at one time fall back to malloc. */
#define SLOT_SHIFT 13
#define SLOT_SIZE ((size_t)1 << SLOT_SHIFT)
#define NSLOTS 32768u

static unsigned char *region;
static uint32_t used[NSLOTS];  /* bytes asked for; 0 = free */
static uint32_t dirty[NSLOTS]; /* bytes written since its pages were last given back */
static uint32_t free_list[NSLOTS];
static uint32_t nfree, fresh; /* free_list holds nfree slots; [fresh, NSLOTS) never used */
static size_t in_use;
static size_t page_size;

/* The reasons lws gives for its per-request header table (lib/roles/http/parsers.c,
 * the same in 4.1.6 and 4.3.5: lwsver.h). */
static bool is_header_table(const char *reason)
{
	return reason && (!strcmp(reason, "ah struct") || !strcmp(reason, "ah data"));
}

static bool in_region(const void *p)
{
	return region && (const unsigned char *)p >= region &&
	       (const unsigned char *)p < region + (size_t)NSLOTS * SLOT_SIZE;
}

/* The slot's size now, and the most it has written since its pages were last given back. */
static void set_used(uint32_t i, size_t size)
{
	used[i] = (uint32_t)size;
	if (dirty[i] < used[i])
		dirty[i] = used[i];
}

static void *slot_take(size_t size)
{
	uint32_t i;
	if (nfree)
		i = free_list[--nfree];
	else if (fresh < NSLOTS)
		i = fresh++;
	else
		return NULL;
	set_used(i, size);
	in_use++;
	return region + ((size_t)i << SLOT_SHIFT);
}

/* The slot goes on the free list with its pages: the next handshake takes
 * the slot freed last, still resident (no madvise and page faults per
 * handshake in a storm); tc_lwsmem_trim() gives free slots' pages back. */
static void slot_release(unsigned char *p)
{
	uint32_t i = (uint32_t)((size_t)(p - region) >> SLOT_SHIFT);
	used[i] = 0;
	free_list[nfree++] = i;
	in_use--;
}

static void *lws_mem(void *ptr, size_t size, const char *reason)
{
	if (in_region(ptr)) {
		unsigned char *p = ptr;
		uint32_t i = (uint32_t)((size_t)(p - region) >> SLOT_SHIFT);
		if (size && size <= SLOT_SIZE) {
			if (size > used[i])
				set_used(i, size);
			return ptr;
		}
		void *moved = NULL;
		if (size && (moved = malloc(size)))
			memcpy(moved, p, used[i]);
		if (!size || moved)
			slot_release(p);
		return moved;
	}
	if (!ptr && size && size <= SLOT_SIZE && is_header_table(reason)) {
		void *p = slot_take(size);
		if (p)
			return p;
	}
	if (!size) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, size);
}

#endif /* TC_LWSMEM_OFF */

void tc_lwsmem_init(void)
{
#ifndef TC_LWSMEM_OFF
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	void *r = mmap(NULL, (size_t)NSLOTS * SLOT_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return; /* malloc it is */
	region = r;
	lws_set_allocator(lws_mem);
#endif
}

void tc_lwsmem_shutdown(void)
{
#ifndef TC_LWSMEM_OFF
	if (!region)
		return;
	munmap(region, (size_t)NSLOTS * SLOT_SIZE);
	region = NULL;
	nfree = fresh = 0;
	in_use = 0;
	memset(dirty, 0, sizeof(dirty));
#endif
}

size_t tc_lwsmem_trim(void)
{
	size_t given = 0;
#ifndef TC_LWSMEM_OFF
	for (uint32_t k = 0; k < nfree; k++) {
		uint32_t i = free_list[k];
		if (!dirty[i])
			continue;
		size_t bytes = (dirty[i] + page_size - 1) & ~(page_size - 1);
		madvise(region + ((size_t)i << SLOT_SHIFT), bytes, MADV_DONTNEED);
		dirty[i] = 0;
		given += bytes;
	}
#endif
	return given;
}

size_t tc_lwsmem_slots_in_use(void)
{
#ifndef TC_LWSMEM_OFF
	return in_use;
#else
	return 0;
#endif
}
