/*
 * scratch — memory for what lives as long as a request, apart from the heap
 * that holds the connections.
 *
 * A connection's setup allocates more for a moment than it keeps: the
 * handshake, a parsed command, the replay, the Redis commands and the
 * frames of its answer. From one heap, a storm of connections interleaves
 * those with the connection objects that stay, and when they are freed the
 * holes between the survivors stay resident (0.8 KiB per idle WebSocket
 * after 10,000 clients at once, with malloc_trim). Scratch objects come from
 * 64 KiB chunks of one size class each, in a reserved region; a chunk whose
 * objects are all gone goes back to the kernel (one empty chunk per class
 * is kept, so a quiet server does not map and unmap on every request).
 *
 * Single-threaded, like the loop. Before tc_scratch_init(), with
 * AddressSanitizer, under valgrind, for sizes over TC_SCRATCH_MAX or when
 * the region is full, the functions are malloc and free, so the sanitizers
 * see every object. tc_scratch_free() takes either kind of pointer.
 */
#ifndef TC_SCRATCH_H
#define TC_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

/** Largest object served from chunks; larger ones are malloc's. */
#define TC_SCRATCH_MAX 2048

/** Reserves the region, unless the build or the run checks memory (ASan, valgrind). */
void tc_scratch_init(void);
/** Reserves the region whatever checks memory (the unit tests of this file). */
void tc__scratch_init_always(void);
/** Unmaps the region; every scratch object must have been freed. */
void tc_scratch_shutdown(void);

/** size bytes (never NULL: out of memory aborts, as tc_xmalloc). */
void *tc_scratch_alloc(size_t size);
/** size bytes, zeroed. */
void *tc_scratch_zalloc(size_t size);
/** A copy of the string s. */
char *tc_scratch_strdup(const char *s);
/** Frees p from tc_scratch_alloc() (or from malloc); NULL is ignored. */
void tc_scratch_free(void *p);

/** Objects served from chunks and not yet freed. */
size_t tc_scratch_objects(void);
/** Chunks mapped (holding objects, or the one kept empty per class). */
size_t tc_scratch_chunks(void);

#endif
