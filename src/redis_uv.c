#include "redis_uv.h"

#include <stdlib.h>

#include "util.h"

struct uv_events {
	redisAsyncContext *ac; /* NULL once hiredis cleaned up */
	uv_poll_t poll;
	int events;
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
	free(h->data);
}

static void ev_cleanup(void *d)
{
	struct uv_events *p = d;
	p->ac = NULL;
	uv_close((uv_handle_t *)&p->poll, ev_closed);
}

int tc_redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
	struct uv_events *p = tc_xcalloc(1, sizeof(*p));
	if (uv_poll_init(loop, &p->poll, ac->c.fd)) {
		free(p);
		return -1;
	}
	p->ac = ac;
	p->poll.data = p;
	ac->ev.data = p;
	ac->ev.addRead = ev_add_read;
	ac->ev.delRead = ev_del_read;
	ac->ev.addWrite = ev_add_write;
	ac->ev.delWrite = ev_del_write;
	ac->ev.cleanup = ev_cleanup;
	return 0;
}
