#include "util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void oom(size_t n)
{
	fprintf(stderr, "threadcast: out of memory allocating %zu bytes\n", n);
	abort();
}

void *tc_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *tc_xcalloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		oom(count * size);
	return p;
}

void *tc_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *tc_xstrdup(const char *s)
{
	return tc_xstrndup(s, strlen(s));
}

char *tc_xstrndup(const char *s, size_t len)
{
	char *p = tc_xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

static void *cjson_malloc(size_t n)
{
	return tc_xmalloc(n);
}

void tc_cjson_init(void)
{
	cJSON_Hooks hooks = { .malloc_fn = cjson_malloc, .free_fn = free };
	cJSON_InitHooks(&hooks);
}

int64_t tc_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool tc_thread_id_valid(const char *s, size_t len)
{
	if (len == 0 || len > TC_THREAD_ID_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

int tc_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *tc_base64url_encode(const void *data, size_t len)
{
	const unsigned char *in = data;
	char *out = tc_xmalloc((len + 2) / 3 * 4 + 1);
	size_t o = 0, i = 0;

	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
		out[o++] = b64url[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
	}
	out[o] = '\0';
	return out;
}

static int b64url_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

char *tc_base64url_decode(const char *s, size_t len, size_t *out_len)
{
	if (len % 4 == 1)
		return NULL;
	char *out = tc_xmalloc(len / 4 * 3 + 3);
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < len; i++) {
		int v = b64url_value((unsigned char)s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)(acc >> bits & 0xff);
		}
	}
	/* Leftover bits must be zero, or two encodings would decode alike. */
	if (acc & ((1u << bits) - 1)) {
		free(out);
		return NULL;
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}

void tc_random_bytes(void *buf, size_t n)
{
	unsigned char *b = buf;
	if (getrandom(b, n, 0) == (ssize_t)n)
		return;
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)rand();
}

void tc_uuid4(char out[37])
{
	unsigned char b[16];
	tc_random_bytes(b, sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
