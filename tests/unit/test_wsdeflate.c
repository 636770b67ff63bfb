/* Unit tests: wsdeflate.c — permessage-deflate frames threadcast writes itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "buf.h"
#include "wsdeflate.h"

/* A client's inflater: raw deflate, the largest window, kept across messages. */
struct client {
	z_stream z;
};

static void client_init(struct client *c)
{
	memset(c, 0, sizeof(*c));
	assert_int_equal(inflateInit2(&c->z, -15), Z_OK);
}

/* Parses one server frame (FIN, RSV1, text, unmasked) and inflates it as RFC 7692 says: tail appended. */
static size_t client_read(struct client *c, const unsigned char *f, size_t n, char *out, size_t cap)
{
	assert_true(n >= 2);
	assert_int_equal(f[0], 0xC1);
	assert_int_equal(f[1] & 0x80, 0); /* server frames are not masked */
	size_t len = f[1] & 0x7f, hl = 2;
	if (len == 126) {
		len = (size_t)f[2] << 8 | f[3];
		hl = 4;
	} else if (len == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | f[2 + i];
		hl = 10;
	}
	assert_int_equal(hl + len, n);
	unsigned char *in = malloc(len + 4);
	memcpy(in, f + hl, len);
	memcpy(in + len, "\x00\x00\xff\xff", 4);
	c->z.next_in = in;
	c->z.avail_in = (uInt)(len + 4);
	c->z.next_out = (Bytef *)out;
	c->z.avail_out = (uInt)cap;
	int rc = inflate(&c->z, Z_SYNC_FLUSH);
	assert_true(rc == Z_OK || rc == Z_BUF_ERROR);
	assert_int_equal(c->z.avail_in, 0);
	free(in);
	return cap - c->z.avail_out;
}

static size_t token_event(char *buf, size_t cap, int i)
{
	return (size_t)snprintf(
		buf, cap,
		"{\"type\":\"event\",\"eventId\":\"ep:%d\",\"seq\":%d,\"method\":\"messages\",\"params\":"
		"{\"namespace\":[\"model:9938e864\"],\"timestamp\":%d,\"node\":\"model\",\"data\":{\"event\":"
		"\"content-block-delta\",\"index\":0,\"delta\":{\"type\":\"text-delta\",\"text\":\"word%d \"}}}}",
		i, i, 1000 + i, i % 17);
}

/* A stream of token events: each decodes to itself, and the running context makes them small. */
static void running_context(void **state)
{
	struct tc_deflater *d = tc_deflater_new(1);
	assert_non_null(d);
	struct client c;
	client_init(&c);
	size_t raw = 0, wire = 0;
	for (int i = 1; i <= 500; i++) {
		char ev[512], got[1024];
		unsigned char frame[1024];
		size_t n = token_event(ev, sizeof(ev), i);
		assert_true(tc_deflate_frame_max(n) <= sizeof(frame));
		size_t m = tc_deflate_frame(d, ev, n, frame);
		assert_true(m > 0 && m <= tc_deflate_frame_max(n));
		assert_int_equal(client_read(&c, frame, m, got, sizeof(got)), n);
		assert_memory_equal(got, ev, n);
		raw += n;
		wire += m;
		/* a new deflater (the old one freed after a quiet while): the same client reads on */
		if (i == 250) {
			tc_deflater_free(d);
			assert_int_equal(tc_deflate_memory(), 0);
			d = tc_deflater_new(1);
		}
		assert_int_equal(tc_deflate_memory(), TC_DEFLATE_MAPPED); /* one deflater, whole in its mapping */
	}
	assert_true(wire * 4 < raw); /* (measured: about 12%) */
	tc_deflater_free(d);
	inflateEnd(&c.z);
	assert_int_equal(tc_deflate_memory(), 0);
}

/* Incompressible and large payloads fit tc_deflate_frame_max, with 16- and 64-bit lengths. */
static void bounds(void **state)
{
	struct tc_deflater *d = tc_deflater_new(9);
	struct client c;
	client_init(&c);
	static const size_t sizes[] = { 1, 125, 126, 65535, 65536, 300000 };
	uint32_t x = 12345;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		unsigned char *p = malloc(n), *frame = malloc(tc_deflate_frame_max(n));
		char *got = malloc(n + 16);
		for (size_t i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			p[i] = (unsigned char)(x >> 16);
		}
		size_t m = tc_deflate_frame(d, p, n, frame);
		assert_true(m > 0);
		assert_int_equal(client_read(&c, frame, m, got, n + 16), n);
		assert_memory_equal(got, p, n);
		free(p);
		free(frame);
		free(got);
	}
	tc_deflater_free(d);
	inflateEnd(&c.z);
	tc_deflater_free(NULL);
}

/*
 * Shared compression: connections get events (shared buffers) in their own
 * order, interleaved at random, some only some events, some letting their
 * compressor go now and then; each client's inflater must read exactly its
 * events. With the same events for all, one compression per event.
 */
static void shared(void **state)
{
	enum { K = 6, N = 600 };
	static struct client cl[K];
	struct tc_dzref refs[K];
	memset(refs, 0, sizeof(refs));
	for (int k = 0; k < K; k++)
		client_init(&cl[k]);
	char ev[512], got[1024];

	/* the same events for all, each connection in turn */
	uint64_t before = tc_dz_compressions();
	for (int i = 0; i < 100; i++) {
		size_t n = token_event(ev, sizeof(ev), i);
		struct tc_buf *b = tc_buf_copy(ev, n);
		for (int j = 0; j < K; j++) {
			int k = (i + j) % K;
			size_t m;
			const unsigned char *f = tc_dz_frame(&refs[k], b, 1, &m);
			assert_non_null(f);
			assert_int_equal(client_read(&cl[k], f, m, got, sizeof(got)), n);
			assert_memory_equal(got, ev, n);
		}
		tc_buf_unref(b);
	}
	assert_int_equal(tc_dz_compressions() - before, 100);
	assert_int_equal(tc_dz_count(), 1);

	/* some events for some, queued, read in a random interleaving, compressors let go at random */
	static struct tc_buf *q[K][N];
	int len[K] = { 0 }, at[K] = { 0 };
	srand(7);
	for (int i = 0; i < N; i++) {
		size_t n = token_event(ev, sizeof(ev), 1000 + i);
		struct tc_buf *b = tc_buf_copy(ev, n);
		for (int k = 0; k < K; k++)
			if (rand() % 4) /* three in four */
				q[k][len[k]++] = tc_buf_ref(b);
		tc_buf_unref(b);
	}
	for (;;) {
		int live = 0;
		for (int k = 0; k < K; k++)
			live += at[k] < len[k];
		if (!live)
			break;
		int k = rand() % K;
		if (at[k] == len[k])
			continue;
		for (int burst = rand() % 4; burst >= 0 && at[k] < len[k]; burst--) {
			struct tc_buf *b = q[k][at[k]++];
			size_t m;
			const unsigned char *f = tc_dz_frame(&refs[k], b, 1, &m);
			assert_non_null(f);
			assert_int_equal(client_read(&cl[k], f, m, got, sizeof(got)), b->len);
			assert_memory_equal(got, tc_buf_data(b), b->len);
			tc_buf_unref(b);
		}
		if (rand() % 25 == 0)
			tc_dzref_release(&refs[k]); /* quiet a while: the next frame starts afresh */
	}
	for (int k = 0; k < K; k++) {
		tc_dzref_release(&refs[k]);
		inflateEnd(&cl[k].z);
	}
	assert_int_equal(tc_dz_count(), 0); /* every buffer freed with its compressed form */
	assert_int_equal(tc_deflate_memory(), 0);
}

/* One connection misses an event the other got; the next event they share must not be reused across. */
static void divergence(void **state)
{
	struct tc_dzref a = { 0 }, b = { 0 };
	struct client ca, cb;
	client_init(&ca);
	client_init(&cb);
	char ev[512], got[1024];
	struct tc_buf *e[3];
	for (int i = 0; i < 3; i++) {
		size_t n = token_event(ev, sizeof(ev), 50 + i);
		e[i] = tc_buf_copy(ev, n);
	}
	const int gets[2][3] = { { 1, 1, 1 }, { 1, 0, 1 } }; /* b misses event 1 */
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 2; k++) {
			if (!gets[k][i])
				continue;
			size_t m;
			const unsigned char *f = tc_dz_frame(k ? &b : &a, e[i], 1, &m);
			assert_int_equal(client_read(k ? &cb : &ca, f, m, got, sizeof(got)), e[i]->len);
			assert_memory_equal(got, tc_buf_data(e[i]), e[i]->len);
		}
	}
	assert_ptr_not_equal(a.dz, b.dz); /* b went its own way */
	for (int i = 0; i < 3; i++)
		tc_buf_unref(e[i]);
	tc_dzref_release(&a);
	tc_dzref_release(&b);
	inflateEnd(&ca.z);
	inflateEnd(&cb.z);
	assert_int_equal(tc_dz_count(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(running_context),
		cmocka_unit_test(bounds),
		cmocka_unit_test(shared),
		cmocka_unit_test(divergence),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
