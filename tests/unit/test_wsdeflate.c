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
	return (size_t)snprintf(buf, cap,
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(running_context),
		cmocka_unit_test(bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
