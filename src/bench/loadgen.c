/*
 * loadgen — many WebSocket subscribers in one libuv process, for benchmarks.
 *
 *   loadgen --port P --thread T --conns N [--host 127.0.0.1] [--sources a,b,…]
 *           [--expect N] [--duration S] [--channels tasks] [--threads K]
 *           [--path /threads/%s/stream] [--subscribe 1] [--hold S] [--command JSON]
 *           [--gaps 1] [--sse-get PATH [--last-event-id ID]]
 *
 * --threads K spreads the connections over threads T-0 … T-(K-1) (connection
 * i watches T-(i mod K)). --path is the request path, %s the thread (nchan:
 * /sub/%s); --subscribe 0 sends no subscribe command (a peer that streams on
 * connect). --hold S keeps the connections open and idle for S seconds once
 * all are upgraded, then prints (idle-memory measurements). --command sends
 * that command instead of the subscribe (a subscription.reconnect, say);
 * given several times (at most 64), every connection sends them all, in
 * order, as soon as it is upgraded (the official SDK's several
 * subscriptions per connection). Replies are counted: "replies" (success)
 * and "errors" (error frames). "event_bytes" sums the event frames' payloads.
 *
 * Each connection upgrades, subscribes, and checks every event: seqs must
 * rise by exactly one (else "missing" / "duplicate"), and when the event's
 * data carries "t":<ns since epoch> (bench/publish does that) the delivery
 * latency is recorded. Stops when every connection has --expect events or
 * after --duration seconds, then prints one JSON object.
 *
 * --deflate 1 offers permessage-deflate as a browser does; when the server
 * accepts, each connection inflates its compressed frames (its own zlib
 * context, kept across messages). "wire_bytes" sums the event frames as
 * they came (headers and compressed payloads), "event_bytes" their JSON.
 *
 * --gaps 1: the subscriptions filter the thread's events, so seqs need only
 * rise (a seq not above the last one is a "duplicate"); with --expect, what
 * a connection still lacks at the end is "missing".
 *
 * --sse-get PATH reads Server-Sent Events instead of WebSockets: each
 * connection sends GET PATH (%s the thread, as --path), with
 * "Last-Event-ID: ID" when --last-event-id is given, and reads the stream
 * (a 200 answer counts as upgraded) until the server ends it. Every block
 * with data is a unit ("received"; "event_bytes" sums its data, "wire_bytes"
 * the stream's bytes); its id must be above the one before on that
 * connection (else, or without an id, a "duplicate"); an "event: error"
 * unit counts in "errors"; data with "t":<ns> gives a latency. Stops when
 * every stream ended (or --duration passed): "ended" counts the streams the
 * server ended (a chunked one, a run's to HTTP/1.1, is decoded; cut before
 * its last chunk it also counts as a "duplicate", a fault), "complete"
 * those that ended with --expect units (without
 * --expect, all that ended), "missing" the units they lacked. A stream ends
 * once every unit before its end is counted: its last units and its last
 * chunk often come in one read (a loaded machine's), and the last stream's
 * end prints the counts.
 * "min_received" / "max_received" are the fewest and most events or units
 * one connection received.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>
#include <zlib.h>

struct conn {
	uv_tcp_t tcp;
	uv_connect_t req;
	char *buf;
	size_t len, cap;
	bool upgraded;
	uint64_t last_seq, received;
	z_stream *zs; /* permessage-deflate accepted: the inflater */
	/* --sse-get: the stream ended; the last unit's id; the block being read */
	bool ended, has_last_id, blk_data, blk_id, blk_error;
	uint64_t last_id, blk_idv;
	/* --sse-get, a chunked body (a run's stream to HTTP/1.1): the body decoded, and where a chunk stands */
	bool chunked;
	char *body;
	size_t body_len, body_cap;
	uint64_t chunk_left; /* data bytes of the current chunk still to come */
	int chunk_state;     /* 0: its size line, 1: its data, 2: the CRLF after it, 3: the last chunk came */
};

static struct {
	const char *host, *thread, *channels, *path, *commands[64], *sse_path, *last_event_id;
	int port, nconns, nsources, nthreads, subscribe, ncommands, deflate, gaps;
	double hold;
	char **sources;
	uint64_t expect;
	double duration;
	struct conn *conns;
	uint64_t missing, dups, received, done, connected, failed, replies, errors, event_bytes, wire_bytes, ended;
	uint32_t *lat_us;
	size_t nlat, caplat;
	uint64_t t_start, t_connected;
	uv_timer_t stop_timer;
	uv_loop_t *loop;
} g;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct conn *c = h->data;
	/* Small to start (idle-memory runs hold 50,000 of these), doubling on demand. */
	if (c->cap - c->len < 4096) {
		c->cap = c->cap ? c->cap * 2 : 8192;
		c->buf = realloc(c->buf, c->cap);
	}
	*b = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void write_done(uv_write_t *w, int status)
{
	free(w->data);
	free(w);
}

static void send_raw(struct conn *c, const void *data, size_t len)
{
	uv_write_t *w = malloc(sizeof(*w));
	char *copy = malloc(len);
	memcpy(copy, data, len);
	w->data = copy;
	uv_buf_t b = uv_buf_init(copy, (unsigned)len);
	uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, write_done);
}

/*
 * A text message compressed alone (the server asks client_no_context_takeover),
 * as a browser sends it: one shared deflater, reset for each. Returns its
 * length in out (RFC 7692's 00 00 ff ff tail left off).
 */
static size_t deflate_alone(const char *p, size_t n, unsigned char *out, size_t cap)
{
	static z_stream z;
	static bool init;
	if (!init) {
		if (deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			abort();
		init = true;
	}
	deflateReset(&z);
	z.next_in = (Bytef *)(uintptr_t)p;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_SYNC_FLUSH) != Z_OK || z.avail_in || !z.avail_out)
		abort();
	return cap - z.avail_out - 4;
}

/* A masked client frame (mask 0: the bytes stay as they are); compressed when deflate was accepted. */
static void send_frame(struct conn *c, int opcode, const char *p, size_t n)
{
	unsigned char h[14], z[16384];
	size_t hl = 2;
	bool rsv1 = false;
	if (c->zs && opcode == 1 && n + 64 < sizeof(z)) {
		n = deflate_alone(p, n, z, sizeof(z));
		p = (const char *)z;
		rsv1 = true;
	}
	h[0] = (unsigned char)(0x80 | (rsv1 ? 0x40 : 0) | opcode);
	if (n < 126) {
		h[1] = (unsigned char)(0x80 | n);
	} else {
		h[1] = 0x80 | 126;
		h[2] = (unsigned char)(n >> 8);
		h[3] = (unsigned char)n;
		hl = 4;
	}
	memset(h + hl, 0, 4);
	hl += 4;
	char *f = malloc(hl + n);
	memcpy(f, h, hl);
	memcpy(f + hl, p, n);
	send_raw(c, f, hl + n);
	free(f);
}

static void finish(void);
static void on_stop(uv_timer_t *t);

/* Once every connection upgraded or failed: with --hold, say so and idle. */
static void settled(void)
{
	if (g.connected + g.failed != (uint64_t)g.nconns || g.hold <= 0)
		return;
	uv_timer_stop(&g.stop_timer);
	uv_timer_start(&g.stop_timer, on_stop, (uint64_t)(g.hold * 1000), 0);
	printf("{\"ready\":%llu,\"failed\":%llu}\n", (unsigned long long)g.connected,
	       (unsigned long long)g.failed); /* scripts/bench measures now */
	fflush(stdout);
}

/* The delivery latency of an event or unit whose data carries "t":<ns since epoch>. */
static void latency(const char *p, size_t n)
{
	const char *t = memmem(p, n, "\"t\":", 4);
	if (!t)
		return;
	/* A number a translator re-printed may come as 1.7957060095250992e+18: read as a double
	 * (to 256 ns near today's time, plenty for a latency in µs). */
	uint64_t sent = (uint64_t)strtod(t + 4, NULL), now = now_ns();
	if (g.nlat == g.caplat) {
		g.caplat = g.caplat ? g.caplat * 2 : 1 << 20;
		g.lat_us = realloc(g.lat_us, g.caplat * sizeof(*g.lat_us));
	}
	g.lat_us[g.nlat++] = now > sent ? (uint32_t)((now - sent) / 1000) : 0;
}

static void on_event(struct conn *c, const char *p, size_t n)
{
	const char *s = memmem(p, n < 120 ? n : 120, "\"seq\":", 6);
	if (!s)
		return;
	uint64_t seq = strtoull(s + 6, NULL, 10);
	if (c->last_seq && seq != c->last_seq + 1) {
		if (seq <= c->last_seq)
			g.dups++;
		else if (!g.gaps)
			g.missing += seq - c->last_seq - 1;
	}
	if (seq > c->last_seq)
		c->last_seq = seq;
	c->received++;
	g.received++;
	latency(p, n);
	if (g.expect && c->received == g.expect && ++g.done == (uint64_t)g.nconns)
		finish();
}

/* ---- --sse-get: Server-Sent Events -------------------------------------------------- */

/* Every stream ended or failed: done. */
static void sse_settled(void)
{
	if (g.ended + g.failed == (uint64_t)g.nconns)
		finish();
}

/* One line of the stream (its end of line left off); an empty one ends a block. */
static void sse_line(struct conn *c, const char *p, size_t n)
{
	if (n && p[n - 1] == '\r')
		n--;
	if (!n) {
		if (!c->blk_data) {
			c->blk_id = c->blk_error = false;
			return;
		}
		/* A unit: its id must be above the one before. */
		if (!c->blk_id || (c->has_last_id && c->blk_idv <= c->last_id))
			g.dups++;
		if (c->blk_id) {
			c->last_id = c->blk_idv;
			c->has_last_id = true;
		}
		g.errors += c->blk_error;
		c->received++;
		g.received++;
		c->blk_data = c->blk_id = c->blk_error = false;
		return;
	}
	if (n >= 3 && !memcmp(p, "id:", 3)) {
		char num[32];
		size_t k = n - 3 < sizeof(num) - 1 ? n - 3 : sizeof(num) - 1;
		memcpy(num, p + 3, k);
		num[k] = '\0';
		char *end;
		c->blk_idv = strtoull(num, &end, 10);
		c->blk_id = end != num;
	} else if (n >= 6 && !memcmp(p, "event:", 6)) {
		const char *v = p + 6;
		size_t vn = n - 6;
		if (vn && *v == ' ')
			v++, vn--;
		c->blk_error = vn == 5 && !memcmp(v, "error", 5);
	} else if (n >= 5 && !memcmp(p, "data:", 5)) {
		if (!c->blk_data) /* one latency per unit */
			latency(p + 5, n - 5);
		c->blk_data = true;
		g.event_bytes += n - 5;
	}
	/* ":" comments (heartbeats) and other fields are read past. */
}

/* The stream's bytes from off on: whole lines are read, the rest waits. Returns where it stopped. */
static size_t sse_body(struct conn *c, size_t off)
{
	char *nl;
	while ((nl = memchr(c->buf + off, '\n', c->len - off))) {
		sse_line(c, c->buf + off, (size_t)(nl - (c->buf + off)));
		off = (size_t)(nl + 1 - c->buf);
	}
	return off;
}

/* The stream ended: counted once (by its last chunk, or its connection's end). */
static void sse_ended(struct conn *c)
{
	if (c->ended)
		return;
	c->ended = true;
	g.ended++;
	sse_settled();
}

/*
 * Decodes a chunked body's bytes buf[off..len) onto c->body (RFC 9112 7.1),
 * keeping a size line that is not whole, up to the last chunk (chunk_state
 * 3: the caller ends the stream once it has read the body). Returns where it
 * stopped.
 */
static size_t dechunk(struct conn *c, size_t off)
{
	while (off < c->len && c->chunk_state != 3) {
		if (c->chunk_state == 0) {
			char *nl = memchr(c->buf + off, '\n', c->len - off);
			if (!nl)
				break;
			c->chunk_left = strtoull(c->buf + off, NULL, 16);
			off = (size_t)(nl + 1 - c->buf);
			c->chunk_state = c->chunk_left ? 1 : 3;
		} else if (c->chunk_state == 1) {
			size_t n = c->len - off < c->chunk_left ? c->len - off : (size_t)c->chunk_left;
			if (c->body_len + n > c->body_cap) {
				c->body_cap = (c->body_len + n) * 2;
				c->body = realloc(c->body, c->body_cap);
				if (!c->body)
					abort();
			}
			memcpy(c->body + c->body_len, c->buf + off, n);
			c->body_len += n;
			off += n;
			if (!(c->chunk_left -= n))
				c->chunk_state = 2;
		} else {
			char *nl = memchr(c->buf + off, '\n', c->len - off);
			if (!nl)
				break;
			off = (size_t)(nl + 1 - c->buf);
			c->chunk_state = 0;
		}
	}
	return off;
}

/* The decoded body's whole lines, read; the rest waits. */
static void sse_chunked_body(struct conn *c)
{
	size_t off = 0;
	char *nl;
	if (!c->body_len) /* no chunk data yet (a read of size lines only): body may still be NULL */
		return;
	while ((nl = memchr(c->body + off, '\n', c->body_len - off))) {
		sse_line(c, c->body + off, (size_t)(nl - (c->body + off)));
		off = (size_t)(nl + 1 - c->body);
	}
	memmove(c->body, c->body + off, c->body_len - off);
	c->body_len -= off;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
	struct conn *c = s->data;
	if (nread < 0) {
		uv_read_stop(s);
		if (!c->upgraded) { /* closed before the upgrade: the server gave up on it */
			g.failed++; /* once: no read callback follows uv_read_stop */
			settled();
			if (g.sse_path)
				sse_settled();
		} else if (g.sse_path) { /* the server ended the stream (chunked: the last chunk did) */
			if (c->chunked && !c->ended)
				g.dups++; /* cut before its last chunk: counted as a fault */
			sse_ended(c);
		}
		return;
	}
	size_t off = 0, before = c->len;
	c->len += (size_t)nread;
	if (!c->upgraded) {
		char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
		if (!end)
			return;
		off = (size_t)(end + 4 - c->buf);
		/* A stream is read as it comes; a chunked one (a run's) is decoded first. */
		c->chunked = g.sse_path && memmem(c->buf, off, "chunked", 7) != NULL;
		if (strncmp(c->buf, g.sse_path ? "HTTP/1.1 200" : "HTTP/1.1 101", 12)) {
			if (!g.failed)
				fprintf(stderr, "loadgen: answered %.*s\n", (int)strcspn(c->buf, "\r\n"), c->buf);
			g.failed++;
			settled();
			uv_read_stop(s);
			if (g.sse_path)
				sse_settled();
			return;
		}
		c->upgraded = true;
		before = off;
		if (g.deflate && memmem(c->buf, off, "permessage-deflate", 18)) {
			c->zs = calloc(1, sizeof(*c->zs));
			if (inflateInit2(c->zs, -15) != Z_OK)
				abort();
		}
		if (++g.connected == (uint64_t)g.nconns)
			g.t_connected = uv_hrtime();
		if (g.sse_path) {
			/* nothing to send: the stream is the answer */
		} else if (g.ncommands) {
			for (int i = 0; i < g.ncommands; i++)
				send_frame(c, 1, g.commands[i], strlen(g.commands[i]));
		} else if (g.subscribe) {
			char sub[256];
			int n = snprintf(
				sub, sizeof(sub),
				"{\"id\":1,\"method\":\"subscription.subscribe\",\"params\":{\"channels\":[\"%s\"]}}",
				g.channels);
			send_frame(c, 1, sub, (size_t)n);
		}
		settled();
	}
	if (g.sse_path && c->chunked) {
		g.wire_bytes += c->len - before;
		off = dechunk(c, off);
		sse_chunked_body(c);
		memmove(c->buf, c->buf + off, c->len - off);
		c->len -= off;
		/* Only now: the last stream's end prints the counts, which must hold this read's units. */
		if (c->chunk_state == 3)
			sse_ended(c);
		return;
	}
	if (g.sse_path) {
		g.wire_bytes += c->len - before;
		off = sse_body(c, off);
		memmove(c->buf, c->buf + off, c->len - off);
		c->len -= off;
		return;
	}
	for (;;) {
		unsigned char *p = (unsigned char *)c->buf + off;
		size_t avail = c->len - off, hl = 2;
		if (avail < 2)
			break;
		uint64_t plen = p[1] & 0x7f;
		if (plen == 126) {
			if (avail < 4)
				break;
			plen = (uint64_t)p[2] << 8 | p[3];
			hl = 4;
		} else if (plen == 127) {
			if (avail < 10)
				break;
			plen = 0;
			for (int i = 0; i < 8; i++)
				plen = plen << 8 | p[2 + i];
			hl = 10;
		}
		if (avail < hl + plen)
			break;
		int op = p[0] & 0x0f;
		size_t wire = hl + plen, n = plen;
		const unsigned char *pl = p + hl;
		if (op == 1 && (p[0] & 0x40)) { /* compressed: inflated, with the tail RFC 7692 leaves out */
			static unsigned char in[1 << 20], out[4 << 20];
			if (!c->zs || plen + 4 > sizeof(in))
				abort();
			memcpy(in, pl, plen);
			memcpy(in + plen, "\x00\x00\xff\xff", 4);
			c->zs->next_in = in;
			c->zs->avail_in = (uInt)(plen + 4);
			c->zs->next_out = out;
			c->zs->avail_out = sizeof(out);
			int rc = inflate(c->zs, Z_SYNC_FLUSH);
			if ((rc != Z_OK && rc != Z_BUF_ERROR) || c->zs->avail_in)
				abort();
			pl = out;
			n = sizeof(out) - c->zs->avail_out;
		}
		if (op == 1 && n > 16 && !memcmp(pl, "{\"type\":\"event\"", 15)) {
			g.wire_bytes += wire;
			g.event_bytes += n;
			on_event(c, (const char *)pl, n);
		} else if (op == 1 && n > 16 && !memcmp(pl, "{\"type\":\"success\"", 17)) {
			g.replies++;
		} else if (op == 1 && n > 16 && !memcmp(pl, "{\"type\":\"error\"", 15)) {
			g.errors++;
		} else if (op == 9)
			send_frame(c, 10, (const char *)pl, n);
		off += wire;
	}
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
}

static void on_connect(uv_connect_t *req, int status)
{
	struct conn *c = req->data;
	if (status) {
		g.failed++;
		settled();
		if (g.sse_path)
			sse_settled();
		return;
	}
	char hello[1536], thread[256], path[1024];
	if (g.nthreads > 1)
		snprintf(thread, sizeof(thread), "%s-%ld", g.thread, (long)(c - g.conns) % g.nthreads);
	else
		snprintf(thread, sizeof(thread), "%s", g.thread);
	snprintf(path, sizeof(path), g.sse_path ? g.sse_path : g.path, thread);
	int n;
	if (g.sse_path)
		n = snprintf(hello, sizeof(hello),
			     "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n%s%s%s\r\n", path, g.host,
			     g.last_event_id ? "Last-Event-ID: " : "", g.last_event_id ? g.last_event_id : "",
			     g.last_event_id ? "\r\n" : "");
	else
		n = snprintf(hello, sizeof(hello),
			     "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n",
			     path, g.host,
			     g.deflate ? "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
				       : "");
	send_raw(c, hello, (size_t)n);
	uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void close_all(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void finish(void)
{
	double secs = (double)(uv_hrtime() - g.t_start) / 1e9;
	if (g.nlat) /* (no samples: no buffer either, and qsort takes no NULL) */
		qsort(g.lat_us, g.nlat, sizeof(*g.lat_us), cmp_u32);
	uint32_t p50 = g.nlat ? g.lat_us[g.nlat / 2] : 0, p99 = g.nlat ? g.lat_us[g.nlat * 99 / 100] : 0;
	uint32_t mx = g.nlat ? g.lat_us[g.nlat - 1] : 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < g.nconns; i++) {
		struct conn *c = &g.conns[i];
		if (!c->upgraded)
			continue;
		lo = c->received < lo ? c->received : lo;
		hi = c->received > hi ? c->received : hi;
		/* A filtered or SSE stream shows what it lacks only by its count. */
		if ((g.gaps || g.sse_path) && g.expect && c->received < g.expect)
			g.missing += g.expect - c->received;
		if (g.sse_path && c->ended && (!g.expect || c->received == g.expect))
			g.done++;
	}
	printf("{\"conns\":%d,\"connected\":%llu,\"failed\":%llu,\"received\":%llu,\"missing\":%llu,"
	       "\"duplicates\":%llu,\"complete\":%llu,\"replies\":%llu,\"errors\":%llu,\"event_bytes\":%llu,"
	       "\"wire_bytes\":%llu,\"ended\":%llu,\"min_received\":%llu,\"max_received\":%llu,"
	       "\"seconds\":%.3f,\"connect_seconds\":%.3f,"
	       "\"latency_us\":{\"p50\":%u,\"p99\":%u,\"max\":%u,\"samples\":%zu}}\n",
	       g.nconns, (unsigned long long)g.connected, (unsigned long long)g.failed, (unsigned long long)g.received,
	       (unsigned long long)g.missing, (unsigned long long)g.dups, (unsigned long long)g.done,
	       (unsigned long long)g.replies, (unsigned long long)g.errors, (unsigned long long)g.event_bytes,
	       (unsigned long long)g.wire_bytes, (unsigned long long)g.ended, (unsigned long long)(hi ? lo : 0),
	       (unsigned long long)hi, secs, g.t_connected ? (double)(g.t_connected - g.t_start) / 1e9 : -1.0, p50, p99,
	       mx, g.nlat);
	fflush(stdout);
	uv_walk(g.loop, close_all, NULL);
}

static void on_stop(uv_timer_t *t)
{
	finish();
}

int main(int argc, char **argv)
{
	g.host = "127.0.0.1";
	g.channels = "tasks";
	g.duration = 60;
	g.path = "/threads/%s/stream";
	g.subscribe = 1;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--port"))
			g.port = atoi(v);
		else if (!strcmp(k, "--host"))
			g.host = v;
		else if (!strcmp(k, "--thread"))
			g.thread = v;
		else if (!strcmp(k, "--conns"))
			g.nconns = atoi(v);
		else if (!strcmp(k, "--expect"))
			g.expect = strtoull(v, NULL, 10);
		else if (!strcmp(k, "--duration"))
			g.duration = atof(v);
		else if (!strcmp(k, "--channels"))
			g.channels = v;
		else if (!strcmp(k, "--threads"))
			g.nthreads = atoi(v);
		else if (!strcmp(k, "--path"))
			g.path = v;
		else if (!strcmp(k, "--subscribe"))
			g.subscribe = atoi(v);
		else if (!strcmp(k, "--hold"))
			g.hold = atof(v);
		else if (!strcmp(k, "--deflate"))
			g.deflate = atoi(v);
		else if (!strcmp(k, "--gaps"))
			g.gaps = atoi(v);
		else if (!strcmp(k, "--sse-get"))
			g.sse_path = v;
		else if (!strcmp(k, "--last-event-id"))
			g.last_event_id = v;
		else if (!strcmp(k, "--command")) {
			if (g.ncommands == 64) {
				fprintf(stderr, "loadgen: at most 64 --command\n");
				return 2;
			}
			g.commands[g.ncommands++] = v;
		} else if (!strcmp(k, "--sources")) {
			char *copy = strdup(v);
			for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
				g.sources = realloc(g.sources, (size_t)(g.nsources + 1) * sizeof(char *));
				g.sources[g.nsources++] = tok;
			}
		} else {
			fprintf(stderr, "loadgen: unknown option %s\n", k);
			return 2;
		}
	}
	if (!g.port || !g.thread || g.nconns < 1) {
		fprintf(stderr, "usage: loadgen --port P --thread T --conns N [--expect N] [--duration S]\n");
		return 2;
	}
	g.loop = uv_default_loop();
	g.conns = calloc((size_t)g.nconns, sizeof(*g.conns));
	g.t_start = uv_hrtime();
	struct sockaddr_in dst;
	uv_ip4_addr(g.host, g.port, &dst);
	for (int i = 0; i < g.nconns; i++) {
		struct conn *c = &g.conns[i];
		uv_tcp_init(g.loop, &c->tcp);
		c->tcp.data = c->req.data = c;
		int rc = 0;
		if (g.nsources) {
			struct sockaddr_in src;
			uv_ip4_addr(g.sources[i % g.nsources], 0, &src);
			rc = uv_tcp_bind(&c->tcp, (struct sockaddr *)&src, 0);
		}
		if (!rc)
			rc = uv_tcp_connect(&c->req, &c->tcp, (struct sockaddr *)&dst, on_connect);
		if (rc) { /* e.g. no ephemeral port left on this source address */
			if (!g.failed)
				fprintf(stderr, "loadgen: connection %d: %s\n", i, uv_strerror(rc));
			g.failed++;
		}
	}
	settled();
	uv_timer_init(g.loop, &g.stop_timer);
	uv_timer_start(&g.stop_timer, on_stop, (uint64_t)(g.duration * 1000), 0);
	if (g.sse_path)
		sse_settled(); /* every connection may have failed already */
	uv_run(g.loop, UV_RUN_DEFAULT);
	uv_run(g.loop, UV_RUN_DEFAULT); /* the close callbacks */
	uv_loop_close(g.loop);
	for (int i = 0; i < g.nconns; i++) {
		free(g.conns[i].buf);
		free(g.conns[i].body);
	}
	free(g.conns);
	free(g.lat_us);
	if (g.nsources)
		free(g.sources[0]); /* the strdup'd list the addresses point into */
	free(g.sources);
	return g.missing || g.dups ? 1 : 0;
}
