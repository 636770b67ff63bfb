#include "pslink.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tls.h"
#include "util.h"

#define READ_CHUNK 16384

/* A command waiting for its answer. */
struct expect {
	const char *verb; /* "AUTH", "SELECT", "PING" or a (S)(UN)SUBSCRIBE verb */
	char *channel;    /* NULL for the handshake */
	struct expect *next;
};

enum state { S_RESOLVING, S_CONNECTING, S_HANDSHAKE, S_UP, S_DEAD };

struct tc_pslink {
	uv_loop_t *loop;
	const struct tc_pslink_ops *ops;
	void *ctx;
	enum state state;
	bool closed; /* the owner let go: no more callbacks */
	int handles; /* libuv requests/handles still to call back */
	char *host, *unix_path, *user, *password;
	int port, db;
	uv_getaddrinfo_t gai;
	uv_connect_t conn;
	union {
		uv_stream_t stream;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} h;
	bool h_inited;
	const struct tc_tls *tls; /* NULL: plain */
	struct tc_tls_pump *pump; /* with tls, once TCP connected */
	uv_pipe_t plain;          /* with tls: our end of the pump's socketpair */
	bool plain_inited;
	uv_stream_t *s; /* what RESP is read from and written to: &h.stream or &plain */
	redisReader *reader;
	char *rbuf;
	struct expect *head, **tail;
};

struct write_req {
	uv_write_t req;
	char *cmd;
};

static void release(struct tc_pslink *p)
{
	if (!p->closed || p->handles)
		return;
	while (p->head) {
		struct expect *e = p->head;
		p->head = e->next;
		free(e->channel);
		free(e);
	}
	if (p->reader)
		redisReaderFree(p->reader);
	free(p->rbuf);
	free(p->host);
	free(p->unix_path);
	free(p->user);
	free(p->password);
	free(p);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct tc_pslink *p = h->data;
	p->handles--;
	release(p);
}

static void shut(struct tc_pslink *p)
{
	if (p->h_inited && !uv_is_closing((uv_handle_t *)&p->h.stream))
		uv_close((uv_handle_t *)&p->h.stream, on_handle_closed);
	if (p->plain_inited && !uv_is_closing((uv_handle_t *)&p->plain))
		uv_close((uv_handle_t *)&p->plain, on_handle_closed);
	tc_tls_pump_close(p->pump);
	p->pump = NULL;
}

/* The connection is unusable: say so once, then wait for the owner to close. */
static void fail(struct tc_pslink *p, const char *why)
{
	if (p->state == S_DEAD)
		return;
	p->state = S_DEAD;
	shut(p);
	if (!p->closed)
		p->ops->down(p->ctx, why);
}

static void on_written(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct tc_pslink *p = req->data;
	redisFreeCommand(w->cmd);
	free(w);
	p->handles--;
	if (status && status != UV_ECANCELED)
		fail(p, uv_strerror(status));
	release(p);
}

static int send_argv(struct tc_pslink *p, int argc, const char **argv, const char *verb, const char *channel)
{
	size_t lens[4];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	struct write_req *w = tc_xmalloc(sizeof(*w));
	int n = redisFormatCommandArgv(&w->cmd, argc, argv, lens);
	if (n < 0) {
		free(w);
		return -1;
	}
	uv_buf_t b = uv_buf_init(w->cmd, (unsigned)n);
	w->req.data = p;
	if (uv_write(&w->req, p->s, &b, 1, on_written)) {
		redisFreeCommand(w->cmd);
		free(w);
		return -1;
	}
	p->handles++;
	struct expect *e = tc_xmalloc(sizeof(*e));
	*e = (struct expect){ .verb = verb, .channel = channel ? tc_xstrdup(channel) : NULL };
	*p->tail = e;
	p->tail = &e->next;
	return 0;
}

static struct expect *pop(struct tc_pslink *p)
{
	struct expect *e = p->head;
	if (e && !(p->head = e->next))
		p->tail = &p->head;
	return e;
}

static bool is_push_kind(const char *k)
{
	static const char *const kinds[] = { "smessage",  "message",      "ssubscribe",
					     "subscribe", "sunsubscribe", "unsubscribe" };
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(k, kinds[i]))
			return true;
	return false;
}

/* A confirmation of the command at the head: same verb (case aside) and channel. */
static bool confirms(const struct expect *e, const char *kind, const redisReply *ch)
{
	return e && e->channel && !strcasecmp(e->verb, kind) && strlen(e->channel) == ch->len &&
	       !memcmp(e->channel, ch->str, ch->len);
}

static void on_push(struct tc_pslink *p, const redisReply *r)
{
	const char *kind = r->element[0]->str;
	const redisReply *ch = r->element[1];
	bool message = !strcmp(kind, "smessage") || !strcmp(kind, "message");

	if (!message && confirms(p->head, kind, ch)) {
		struct expect *e = pop(p);
		free(e->channel);
		free(e);
	}
	const redisReply *d = r->element[2];
	if (message && d->type != REDIS_REPLY_STRING)
		return;
	p->ops->push(p->ctx, kind, ch->str, ch->len, message ? d->str : NULL, message ? d->len : 0);
}

/* Any other reply answers the oldest command. Returns -1 to drop the link. */
static int on_reply(struct tc_pslink *p, const redisReply *r)
{
	struct expect *e = pop(p);
	int rc = 0;

	if (!e) {
		fail(p, "unexpected reply from Redis");
		return -1;
	}
	if (e->channel) {
		if (r->type == REDIS_REPLY_ERROR)
			p->ops->refused(p->ctx, e->verb, e->channel, r->str);
	} else if (r->type == REDIS_REPLY_ERROR) {
		char why[160];
		snprintf(why, sizeof(why), "%s: %s", e->verb, r->str);
		fail(p, why);
		rc = -1;
	} else if (!strcmp(e->verb, "PING")) {
		p->state = S_UP;
		p->ops->up(p->ctx);
	}
	free(e->channel);
	free(e);
	return rc;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct tc_pslink *p = h->data;
	*buf = uv_buf_init(p->rbuf, READ_CHUNK);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct tc_pslink *p = s->data;

	if (n < 0) {
		/* Over TLS, the pump closing its end says nothing: it knows why. */
		const char *tls_err = tc_tls_pump_error(p->pump);
		fail(p, tls_err ? tls_err : n == UV_EOF ? "connection closed by Redis" : uv_strerror((int)n));
		return;
	}
	if (n == 0 || p->state == S_DEAD)
		return;
	if (redisReaderFeed(p->reader, buf->base, (size_t)n) != REDIS_OK) {
		fail(p, "cannot buffer the reply");
		return;
	}
	/* Callbacks may close the link; p stays allocated until we return
	 * (the stream handle is ours), but stop once it is dead. */
	while (p->state != S_DEAD) {
		void *reply = NULL;
		if (redisReaderGetReply(p->reader, &reply) != REDIS_OK) {
			fail(p, "protocol error in a reply from Redis");
			return;
		}
		if (!reply)
			return;
		redisReply *r = reply;
		if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && r->element[0]->type == REDIS_REPLY_STRING &&
		    r->element[1]->type == REDIS_REPLY_STRING && is_push_kind(r->element[0]->str)) {
			if (!p->closed)
				on_push(p, r);
		} else {
			on_reply(p, r);
		}
		freeReplyObject(r);
	}
}

/*
 * TCP is connected: from here on RESP goes through a TLS pump (tls.h). The
 * TCP handle is closed (epoll forgets its file) after its socket was
 * dup()ed; the pump goes under the copy, which we then open as a pipe. The
 * handshake commands written next wait in the pair until TLS is up.
 * 0, or -1 after fail().
 */
static int start_tls(struct tc_pslink *p)
{
	uv_os_fd_t fd;
	int copy = -1;
	char err[160];

	if (uv_fileno((uv_handle_t *)&p->h.stream, &fd) || (copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		fail(p, "TLS handshake failed: cannot copy the socket");
		return -1;
	}
	uv_close((uv_handle_t *)&p->h.stream, on_handle_closed);
	if (!(p->pump = tc_tls_pump_over(p->loop, p->tls, copy, p->host, err, sizeof(err)))) {
		close(copy);
		fail(p, err);
		return -1;
	}
	uv_pipe_init(p->loop, &p->plain, 0);
	p->plain_inited = true;
	p->handles++;
	p->plain.data = p;
	if (uv_pipe_open(&p->plain, copy)) {
		close(copy);
		fail(p, "TLS handshake failed: cannot open the socketpair");
		return -1;
	}
	p->s = (uv_stream_t *)&p->plain;
	return 0;
}

static void on_connected(uv_connect_t *req, int status)
{
	struct tc_pslink *p = req->data;
	p->handles--;
	if (p->closed || p->state == S_DEAD) {
		release(p);
		return;
	}
	if (status) {
		fail(p, uv_strerror(status));
		return;
	}
	if (p->tls && start_tls(p))
		return;
	p->state = S_HANDSHAKE;
	uv_read_start(p->s, on_alloc, on_read);
	int ok = 0;
	char db[16];
	if (p->password && p->user)
		ok |= send_argv(p, 3, (const char *[]){ "AUTH", p->user, p->password }, "AUTH", NULL);
	else if (p->password)
		ok |= send_argv(p, 2, (const char *[]){ "AUTH", p->password }, "AUTH", NULL);
	if (p->db) {
		snprintf(db, sizeof(db), "%d", p->db);
		ok |= send_argv(p, 2, (const char *[]){ "SELECT", db }, "SELECT", NULL);
	}
	ok |= send_argv(p, 1, (const char *[]){ "PING" }, "PING", NULL);
	if (ok)
		fail(p, "cannot write to Redis");
}

static void start_connect(struct tc_pslink *p, const struct sockaddr *sa)
{
	int rc;
	p->state = S_CONNECTING;
	p->conn.data = p;
	if (p->unix_path) {
		uv_pipe_init(p->loop, &p->h.pipe, 0);
		p->h_inited = true;
		p->handles++;
		p->h.stream.data = p;
		uv_pipe_connect(&p->conn, &p->h.pipe, p->unix_path, on_connected);
		p->handles++;
		return;
	}
	uv_tcp_init(p->loop, &p->h.tcp);
	p->h_inited = true;
	p->handles++;
	p->h.stream.data = p;
	uv_tcp_nodelay(&p->h.tcp, 1);
	if ((rc = uv_tcp_connect(&p->conn, &p->h.tcp, sa, on_connected))) {
		fail(p, uv_strerror(rc));
		return;
	}
	p->handles++;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct tc_pslink *p = req->data;
	p->handles--;
	if (p->closed) {
		uv_freeaddrinfo(res);
		release(p);
		return;
	}
	if (status || !res) {
		uv_freeaddrinfo(res);
		fail(p, status ? uv_strerror(status) : "no address");
		return;
	}
	start_connect(p, res->ai_addr);
	uv_freeaddrinfo(res);
}

struct tc_pslink *tc_pslink_open(uv_loop_t *loop, const struct tc_pslink_addr *a, const struct tc_pslink_ops *ops,
				 void *ctx)
{
	struct tc_pslink *p = tc_xcalloc(1, sizeof(*p));
	p->loop = loop;
	p->ops = ops;
	p->ctx = ctx;
	p->tail = &p->head;
	p->host = a->host ? tc_xstrdup(a->host) : NULL;
	p->unix_path = a->unix_path ? tc_xstrdup(a->unix_path) : NULL;
	p->user = a->user ? tc_xstrdup(a->user) : NULL;
	p->password = a->password ? tc_xstrdup(a->password) : NULL;
	p->port = a->port;
	p->db = a->db;
	p->tls = a->unix_path ? NULL : a->tls;
	p->s = &p->h.stream;
	p->reader = redisReaderCreate();
	p->rbuf = tc_xmalloc(READ_CHUNK);
	if (p->unix_path) {
		start_connect(p, NULL);
		return p;
	}
	char port[8];
	snprintf(port, sizeof(port), "%d", p->port);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	p->state = S_RESOLVING;
	p->gai.data = p;
	/* A synchronous failure leaves the link dead without down(): the
	 * owner's connect timeout notices that it never came up. */
	if (uv_getaddrinfo(loop, &p->gai, on_resolved, p->host, port, &hints))
		p->state = S_DEAD;
	else
		p->handles++;
	return p;
}

int tc_pslink_send(struct tc_pslink *p, const char *verb, const char *channel)
{
	if (p->state != S_UP || p->closed)
		return -1;
	return send_argv(p, 2, (const char *[]){ verb, channel }, verb, channel);
}

void tc_pslink_close(struct tc_pslink *p)
{
	if (!p || p->closed)
		return;
	if (p->state == S_RESOLVING)
		uv_cancel((uv_req_t *)&p->gai);
	p->closed = true;
	p->state = S_DEAD;
	shut(p);
	release(p);
}
