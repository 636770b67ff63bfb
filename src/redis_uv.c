#include "redis_uv.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "tls.h"
#include "util.h"

struct uv_events {
	redisAsyncContext *ac; /* NULL once hiredis cleaned up */
	uv_poll_t poll;
	int events;
	redisConnectCallback *on_connect; /* the owner's */
	const struct tc_tls *tls;         /* NULL: plain TCP */
	char *host;                       /* the peer's name, with tls */
	struct tc_tls_pump *pump;         /* once TCP connected, with tls */
	char err[256];                    /* why TLS failed, once the pump is gone */
};

static void ev_poll_cb(uv_poll_t *h, int status, int events)
{
	struct uv_events *p = h->data;
	int ev = status ? p->events : events;
	if (p->ac && (ev & UV_READABLE))
		redisAsyncHandleRead(p->ac);
	if (p->ac && (ev & UV_WRITABLE))
		redisAsyncHandleWrite(p->ac);
}

static void ev_update(struct uv_events *p, int add, int del)
{
	p->events = (p->events | add) & ~del;
	if (p->events)
		uv_poll_start(&p->poll, p->events, ev_poll_cb);
	else
		uv_poll_stop(&p->poll);
}

static void ev_add_read(void *d)
{
	ev_update(d, UV_READABLE, 0);
}
static void ev_del_read(void *d)
{
	ev_update(d, 0, UV_READABLE);
}
static void ev_add_write(void *d)
{
	ev_update(d, UV_WRITABLE, 0);
}
static void ev_del_write(void *d)
{
	ev_update(d, 0, UV_WRITABLE);
}

static void ev_closed(uv_handle_t *h)
{
	struct uv_events *p = h->data;
	free(p->host);
	free(p);
}

static void ev_cleanup(void *d)
{
	struct uv_events *p = d;
	p->ac = NULL;
	/* hiredis calls the disconnect callback after this one: keep why. */
	if (tc_tls_pump_error(p->pump))
		snprintf(p->err, sizeof(p->err), "%s", tc_tls_pump_error(p->pump));
	tc_tls_pump_close(p->pump);
	p->pump = NULL;
	uv_close((uv_handle_t *)&p->poll, ev_closed);
}

/*
 * hiredis saw TCP connect: with TLS, the pump goes under its descriptor now,
 * before hiredis writes the commands queued meanwhile (it writes them right
 * after this callback). The poll is stopped around the swap (tls.c says
 * why) and restarted on the same number, now the socketpair's end.
 */
static void on_connect(const redisAsyncContext *cac, int status)
{
	redisAsyncContext *ac = (redisAsyncContext *)cac;
	struct uv_events *p = ac->ev.data;

	if (status == REDIS_OK && p->tls) {
		uv_poll_stop(&p->poll);
		p->pump = tc_tls_pump_over(p->poll.loop, p->tls, ac->c.fd, p->host, p->err, sizeof(p->err));
		if (!p->pump)
			/* Freeing ac inside this callback is not safe in hiredis
			 * 0.14: cut the socket instead; hiredis then fails its
			 * first write and disconnects, and tc_redis_uv_error() says why. */
			shutdown(ac->c.fd, SHUT_RDWR);
		if (p->events)
			uv_poll_start(&p->poll, p->events, ev_poll_cb);
	}
	p->on_connect(ac, status);
}

const char *tc_redis_uv_error(const redisAsyncContext *ac)
{
	const struct uv_events *p = ac->ev.data;
	/* (hiredis 1.x clears ev.cleanup once it ran; addRead stays.) */
	if (!p || ac->ev.addRead != ev_add_read)
		return NULL;
	return p->pump ? tc_tls_pump_error(p->pump) : p->err[0] ? p->err : NULL;
}

int tc_redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop, redisConnectCallback *connect_cb,
		       const struct tc_tls *tls, const char *host)
{
	struct uv_events *p = tc_xcalloc(1, sizeof(*p));
	if (uv_poll_init(loop, &p->poll, ac->c.fd)) {
		free(p);
		return -1;
	}
	p->ac = ac;
	p->poll.data = p;
	p->on_connect = connect_cb;
	p->tls = tls;
	p->host = tls ? tc_xstrdup(host) : NULL;
	ac->ev.data = p;
	ac->ev.addRead = ev_add_read;
	ac->ev.delRead = ev_del_read;
	ac->ev.addWrite = ev_add_write;
	ac->ev.delWrite = ev_del_write;
	ac->ev.cleanup = ev_cleanup;
	redisAsyncSetConnectCallback(ac, on_connect);
	return 0;
}
