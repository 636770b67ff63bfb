/*
 * blaster — the do-nothing fan-out server scripts/bench runs as its control.
 *
 *   blaster --port P [--host 127.0.0.1] [--max-conns N] [--max-queue-bytes B]
 *
 * It does the least any gateway must do, so the others' CPU can be read as a
 * multiple of the machine's floor: it upgrades WebSockets on any path naming
 * a thread (/threads/<T>/…, /sub/<T>) and ignores what clients send; it takes
 * events as HTTP POSTs to /pub/<T> (bench/publish --http, the same
 * keep-alive connection nchan is fed on), the body already the frame's
 * payload; it builds each frame once and writes it to every subscriber of
 * the thread, one write per frame and connection (what a gateway that must
 * send each event as it comes does), and answers 201. No Redis, no parsing
 * of the payload, no subscriptions, no replay.
 *
 * Bounds: at most --max-conns connections (more are closed on accept); a
 * request head of 8 KiB and a body of 1 MiB; a subscriber whose unsent
 * frames pass --max-queue-bytes (64 MiB) is closed.
 */
#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#define HEAD_MAX 8192
#define BODY_MAX (1 << 20)
#define BUCKETS 65536

struct topic;

struct conn {
	uv_tcp_t tcp;
	enum { C_HEAD, C_WS, C_PUB } state;
	char *buf; /* the request being read (head and publisher bodies) */
	size_t len, cap;
	struct topic *topic; /* a subscriber's thread, and its place in topic->subs */
	size_t slot;
};

struct topic {
	struct topic *next;
	struct conn **subs;
	size_t nsubs, cap;
	char name[];
};

static struct {
	uv_loop_t *loop;
	uv_tcp_t server;
	struct topic *buckets[BUCKETS];
	long nconns, max_conns;
	size_t max_queue;
	char discard[65536]; /* what subscribers send is read into here and dropped */
} g;

static uint32_t hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h % BUCKETS;
}

static struct topic *topic_get(const char *name, size_t n, bool create)
{
	uint32_t b = hash(name, n);
	for (struct topic *t = g.buckets[b]; t; t = t->next)
		if (strlen(t->name) == n && !memcmp(t->name, name, n))
			return t;
	if (!create)
		return NULL;
	struct topic *t = calloc(1, sizeof(*t) + n + 1);
	memcpy(t->name, name, n);
	t->next = g.buckets[b];
	g.buckets[b] = t;
	return t;
}

static void topic_add(struct topic *t, struct conn *c)
{
	if (t->nsubs == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 4;
		t->subs = realloc(t->subs, t->cap * sizeof(*t->subs));
	}
	c->topic = t;
	c->slot = t->nsubs;
	t->subs[t->nsubs++] = c;
}

static void topic_remove(struct conn *c)
{
	struct topic *t = c->topic;
	if (!t)
		return;
	t->subs[c->slot] = t->subs[--t->nsubs];
	t->subs[c->slot]->slot = c->slot;
	c->topic = NULL;
}

static void on_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	free(c->buf);
	free(c);
	g.nconns--;
}

static void conn_close(struct conn *c)
{
	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	topic_remove(c);
	uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void write_done(uv_write_t *w, int status)
{
	free(w->data);
	free(w);
}

/* Writes now what the socket takes; queues a copy of the rest. */
static void send_bytes(struct conn *c, const char *p, size_t n)
{
	uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
	int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
	if (w == (int)n)
		return;
	if (w < 0 && w != UV_EAGAIN) {
		conn_close(c);
		return;
	}
	size_t done = w > 0 ? (size_t)w : 0;
	if (c->tcp.write_queue_size + (n - done) > g.max_queue) { /* a subscriber that does not read */
		conn_close(c);
		return;
	}
	uv_write_t *req = malloc(sizeof(*req));
	req->data = malloc(n - done);
	memcpy(req->data, p + done, n - done);
	b = uv_buf_init(req->data, (unsigned)(n - done));
	if (uv_write(req, (uv_stream_t *)&c->tcp, &b, 1, write_done)) {
		free(req->data);
		free(req);
		conn_close(c);
	}
}

static void publish(struct conn *pub, const char *thread, size_t tn, const char *body, size_t n)
{
	struct topic *t = topic_get(thread, tn, false);
	if (t && t->nsubs) {
		char *f = malloc(n + 10);
		size_t hl = 2;
		f[0] = (char)0x81;
		if (n < 126) {
			f[1] = (char)n;
		} else if (n < 65536) {
			f[1] = 126;
			f[2] = (char)(n >> 8);
			f[3] = (char)n;
			hl = 4;
		} else {
			f[1] = 127;
			for (int i = 0; i < 8; i++)
				f[2 + i] = (char)((uint64_t)n >> (56 - 8 * i));
			hl = 10;
		}
		memcpy(f + hl, body, n);
		/* Backwards: a subscriber closed on the way swaps the last one into its slot. */
		for (size_t i = t->nsubs; i-- > 0;)
			if (i < t->nsubs)
				send_bytes(t->subs[i], f, hl + n);
		free(f);
	}
	static const char ok[] = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
	send_bytes(pub, ok, sizeof(ok) - 1);
}

static const char *header(const char *head, size_t n, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	for (const char *p = memchr(head, '\n', n); p && p + 1 + nl < head + n;
	     p = memchr(p + 1, '\n', (size_t)(head + n - p - 1))) {
		p++; /* the start of a header line */
		if (!strncasecmp(p, name, nl) && p[nl] == ':') {
			const char *v = p + nl + 1, *e;
			while (*v == ' ')
				v++;
			for (e = v; e < head + n && *e != '\r' && *e != '\n'; e++)
				;
			*vlen = (size_t)(e - v);
			return v;
		}
	}
	return NULL;
}

/* The thread a path names: /threads/<T>/… or /sub/<T> or /pub/<T>. */
static const char *path_thread(const char *path, size_t n, size_t *tn)
{
	static const char *prefixes[] = { "/threads/", "/sub/", "/pub/" };
	for (int i = 0; i < 3; i++) {
		size_t pl = strlen(prefixes[i]);
		if (n > pl && !memcmp(path, prefixes[i], pl)) {
			const char *s = path + pl, *e = s;
			while (e < path + n && *e != '/' && *e != '?')
				e++;
			*tn = (size_t)(e - s);
			return *tn ? s : NULL;
		}
	}
	return NULL;
}

static void refuse(struct conn *c, const char *status)
{
	char r[128];
	int n = snprintf(r, sizeof(r), "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);
	send_bytes(c, r, (size_t)n);
	conn_close(c);
}

/* Serves every whole request buffered; false once the connection is gone or upgraded. */
static bool serve(struct conn *c)
{
	while (c->state != C_WS) {
		char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
		if (!end) {
			if (c->len > HEAD_MAX) {
				refuse(c, "431 Request Header Fields Too Large");
				return false;
			}
			return true;
		}
		size_t head = (size_t)(end + 4 - c->buf), vl = 0, tn = 0;
		const char *sp = memchr(c->buf, ' ', head), *path = sp ? sp + 1 : NULL;
		const char *pe = path ? memchr(path, ' ', head - (size_t)(path - c->buf)) : NULL;
		const char *thread = pe ? path_thread(path, (size_t)(pe - path), &tn) : NULL;
		if (!thread) {
			refuse(c, "404 Not Found");
			return false;
		}
		if (!strncmp(c->buf, "POST ", 5)) {
			const char *cl = header(c->buf, head, "Content-Length", &vl);
			size_t body = cl ? strtoul(cl, NULL, 10) : 0;
			if (body > BODY_MAX) {
				refuse(c, "413 Payload Too Large");
				return false;
			}
			if (c->len < head + body)
				return true;
			c->state = C_PUB;
			publish(c, thread, tn, c->buf + head, body);
			if (uv_is_closing((uv_handle_t *)&c->tcp))
				return false;
			memmove(c->buf, c->buf + head + body, c->len - head - body);
			c->len -= head + body;
			continue;
		}
		const char *key = header(c->buf, head, "Sec-WebSocket-Key", &vl);
		if (strncmp(c->buf, "GET ", 4) || !key || vl > 64) {
			refuse(c, "400 Bad Request");
			return false;
		}
		unsigned char in[128], md[SHA_DIGEST_LENGTH];
		char accept[64], resp[256];
		memcpy(in, key, vl);
		memcpy(in + vl, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
		SHA1(in, vl + 36, md);
		EVP_EncodeBlock((unsigned char *)accept, md, SHA_DIGEST_LENGTH);
		int n = snprintf(resp, sizeof(resp),
				 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
				 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
				 accept);
		topic_add(topic_get(thread, tn, true), c);
		c->state = C_WS;
		free(c->buf); /* a subscriber keeps no buffer: what it sends is dropped */
		c->buf = NULL;
		c->len = c->cap = 0;
		send_bytes(c, resp, (size_t)n);
	}
	return false;
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct conn *c = h->data;
	if (c->state == C_WS) {
		*b = uv_buf_init(g.discard, sizeof(g.discard));
		return;
	}
	if (c->cap - c->len < 4096) {
		c->cap = c->cap ? c->cap * 2 : 8192;
		c->buf = realloc(c->buf, c->cap);
	}
	*b = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
	struct conn *c = s->data;
	if (nread < 0) {
		conn_close(c);
		return;
	}
	if (c->state == C_WS)
		return;
	c->len += (size_t)nread;
	if (c->len > HEAD_MAX + BODY_MAX) {
		conn_close(c);
		return;
	}
	serve(c);
}

static void on_connection(uv_stream_t *server, int status)
{
	if (status < 0)
		return;
	struct conn *c = calloc(1, sizeof(*c));
	uv_tcp_init(g.loop, &c->tcp);
	c->tcp.data = c;
	g.nconns++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) || g.nconns > g.max_conns) {
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	int port = 0;
	g.max_conns = 200000;
	g.max_queue = 64u << 20;
	for (int i = 1; i < argc; i += 2) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		long n = v ? strtol(v, &end, 10) : 0;
		if (!v) {
			fprintf(stderr, "blaster: %s needs a value\n", k);
			return 2;
		} else if (!strcmp(k, "--host")) {
			host = v;
		} else if (!strcmp(k, "--port") && *end == '\0' && n > 0 && n < 65536) {
			port = (int)n;
		} else if (!strcmp(k, "--max-conns") && *end == '\0' && n > 0) {
			g.max_conns = n;
		} else if (!strcmp(k, "--max-queue-bytes") && *end == '\0' && n > 0) {
			g.max_queue = (size_t)n;
		} else {
			fprintf(stderr, "blaster: bad option %s %s\n", k, v);
			return 2;
		}
	}
	if (!port) {
		fprintf(stderr, "usage: blaster --port P [--host H] [--max-conns N] [--max-queue-bytes B]\n");
		return 2;
	}
	g.loop = uv_default_loop();
	struct sockaddr_in a;
	int rc = uv_ip4_addr(host, port, &a);
	uv_tcp_init(g.loop, &g.server);
	if (!rc)
		rc = uv_tcp_bind(&g.server, (struct sockaddr *)&a, 0);
	if (!rc)
		rc = uv_listen((uv_stream_t *)&g.server, 65535, on_connection);
	if (rc) {
		fprintf(stderr, "blaster: cannot listen on %s:%d: %s\n", host, port, uv_strerror(rc));
		return 1;
	}
	return uv_run(g.loop, UV_RUN_DEFAULT);
}
