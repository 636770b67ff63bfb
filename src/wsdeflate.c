/*
 * wsdeflate.c — permessage-deflate for threadcast's own frames (wsdeflate.h).
 */
#include "wsdeflate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "buf.h"
#include "util.h"

/*
 * Each deflater's zlib state lives in one mapping of its own, served in
 * order to zlib's few allocations and unmapped whole when it goes: freed
 * contexts return to the kernel at once instead of leaving holes in the
 * heap that idle connections' memory would sit among (10,000 connections
 * that each got a reply compressed kept ~10 KiB of RSS apiece that way).
 */
#define REGION TC_DEFLATE_MAPPED

struct tc_deflater {
	z_stream z;
	unsigned char *region;
	size_t used;
};

static size_t memory; /* bytes mapped for all deflaters (one loop per process) */

static voidpf zalloc(voidpf opaque, uInt items, uInt size)
{
	struct tc_deflater *d = opaque;
	size_t n = ((size_t)items * size + 15) & ~(size_t)15;
	if (n > REGION - d->used)
		return Z_NULL; /* (deflateInit2 then fails: TC_DEFLATE_CONTEXT_MAX is too small) */
	void *p = d->region + d->used;
	d->used += n;
	return p;
}

static void zfree(voidpf opaque, voidpf address)
{
	(void)opaque;
	(void)address; /* the region goes whole */
}

struct tc_deflater *tc_deflater_new(int level)
{
	struct tc_deflater *d = tc_xcalloc(1, sizeof(*d));
	d->region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (d->region == MAP_FAILED) {
		free(d);
		return NULL;
	}
	memory += REGION;
	d->z.zalloc = zalloc;
	d->z.zfree = zfree;
	d->z.opaque = d;
	/* negative window bits: raw deflate, no zlib header (RFC 7692) */
	if (deflateInit2(&d->z, level, Z_DEFLATED, -TC_DEFLATE_WBITS, TC_DEFLATE_MEMLEVEL, Z_DEFAULT_STRATEGY) !=
	    Z_OK) {
		tc_deflater_free(d);
		return NULL;
	}
	return d;
}

void tc_deflater_free(struct tc_deflater *d)
{
	if (!d)
		return;
	deflateEnd(&d->z); /* (a deflater that failed to start has nothing to end: a no-op) */
	munmap(d->region, REGION);
	memory -= REGION;
	free(d);
}

size_t tc_deflate_memory(void)
{
	return memory;
}

/*
 * zlib's bound for any window and memLevel (deflateBound's conservative
 * one), the sync flush's empty stored block and bits left over (6 bytes
 * and some slack), the 10-byte header.
 */
size_t tc_deflate_frame_max(size_t n)
{
	return 10 + n + ((n + 7) >> 3) + ((n + 63) >> 6) + 5 + 16;
}

size_t tc_ws_frame_header(unsigned char *h, size_t len, bool compressed)
{
	h[0] = (unsigned char)(0x80 | (compressed ? 0x40 : 0) | 0x1); /* FIN, RSV1 when compressed, text */
	if (len < 126) {
		h[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xffff) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		return 4;
	}
	h[1] = 127;
	for (int i = 0; i < 8; i++)
		h[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
	return 10;
}

size_t tc_deflate_frame(struct tc_deflater *d, const void *p, size_t n, unsigned char *out)
{
	/*
	 * Compressed after a 10-byte gap, then moved behind the header its
	 * length needs: the length is known only once compressed.
	 */
	size_t cap = tc_deflate_frame_max(n) - 10;
	unsigned char *body = out + 10;
	d->z.next_in = (Bytef *)(uintptr_t)p;
	d->z.avail_in = (uInt)n;
	d->z.next_out = body;
	d->z.avail_out = (uInt)cap;
	int rc = deflate(&d->z, Z_SYNC_FLUSH);
	if ((rc != Z_OK && rc != Z_BUF_ERROR) || d->z.avail_in || !d->z.avail_out)
		return 0; /* (avail_out 0: the flush may be incomplete) */
	size_t len = cap - d->z.avail_out;
	/* RFC 7692 7.2.1: the sync flush's 00 00 ff ff tail is not sent */
	if (len < 4 || memcmp(body + len - 4, "\x00\x00\xff\xff", 4))
		return 0;
	len -= 4;
	unsigned char h[10];
	size_t hl = tc_ws_frame_header(h, len, true);
	memmove(out + hl, body, len);
	memcpy(out, h, hl);
	return hl + len;
}

/* ==== shared compression =================================================================== */

struct tc_dz {
	struct tc_deflater *d;
	uint64_t pos;  /* frames compressed so far */
	unsigned refs; /* connections at some place in its stream, and outputs made by it */
};

/* An event's compressed frame, kept on its tc_buf as the buffer's attachment. */
struct tc_dzout {
	struct tc_buf_att att; /* (dispose: dzout_dispose) */
	struct tc_dz *dz;      /* (a reference) */
	uint64_t pos;          /* the compressor's position it was compressed from */
	size_t len;
	unsigned char frame[];
};

static size_t ndz;
static uint64_t ncompressions;

size_t tc_dz_count(void)
{
	return ndz;
}

uint64_t tc_dz_compressions(void)
{
	return ncompressions;
}

static void dz_unref(struct tc_dz *dz)
{
	if (dz && --dz->refs == 0) {
		tc_deflater_free(dz->d);
		free(dz);
		ndz--;
	}
}

/* The buffer went (or is compressed again): its compressed frame goes with it. */
static void dzout_dispose(struct tc_buf_att *a)
{
	struct tc_dzout *o = (struct tc_dzout *)a;
	dz_unref(o->dz);
	free(o);
}

/* b's compressed frame, or NULL when it has none (or another component's attachment). */
static struct tc_dzout *dzout_of(const struct tc_buf *b)
{
	return b->att && b->att->dispose == dzout_dispose ? (struct tc_dzout *)b->att : NULL;
}

void tc_dzref_release(struct tc_dzref *r)
{
	dz_unref(r->dz);
	r->dz = NULL;
	r->pos = 0;
}

const unsigned char *tc_dz_frame(struct tc_dzref *r, struct tc_buf *b, int level, size_t *len)
{
	struct tc_dzout *o = dzout_of(b);
	if (o && r->dz && o->dz == r->dz && o->pos == r->pos) {
		r->pos++; /* compressed from the very state this connection is in */
		*len = o->len;
		return o->frame;
	}
	if (o && !r->dz && o->pos == 0) {
		r->dz = o->dz; /* compressed first thing: from the fresh state this connection starts in */
		r->dz->refs++;
		r->pos = 1;
		*len = o->len;
		return o->frame;
	}
	if (!r->dz || r->dz->pos != r->pos) {
		/* none yet, or its stream went on without this connection: one of its own */
		tc_dzref_release(r);
		struct tc_dz *dz = tc_xcalloc(1, sizeof(*dz));
		if (!(dz->d = tc_deflater_new(level))) {
			free(dz);
			return NULL;
		}
		dz->refs = 1;
		ndz++;
		r->dz = dz;
	}
	struct tc_dzout *n = tc_xmalloc(sizeof(*n) + tc_deflate_frame_max(b->len));
	n->len = tc_deflate_frame(r->dz->d, tc_buf_data(b), b->len, n->frame);
	if (!n->len) {
		free(n);
		r->dz->pos = UINT64_MAX; /* its state is unknown now: nobody is at its place any more */
		tc_dzref_release(r);
		return NULL;
	}
	ncompressions++;
	n->att.dispose = dzout_dispose;
	n->dz = r->dz;
	n->dz->refs++;
	n->pos = r->pos;
	r->dz->pos++;
	r->pos++;
	tc_buf_attach(b, &n->att);
	*len = n->len;
	return n->frame;
}
