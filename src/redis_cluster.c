#include "redis_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Reads: while everything is up, while something is not, and soon. */
#define REFRESH_MS 5000
#define REFRESH_UNREADY_MS 250
#define REFRESH_SOON_MS 20

static void on_timer(uv_timer_t *t);

void tc__cluster_init(struct tc__cluster *c, uv_loop_t *loop, const struct tc__cluster_ops *ops, void *ctx)
{
	memset(c, 0, sizeof(*c));
	c->ops = ops;
	c->ctx = ctx;
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
}

static void schedule(struct tc__cluster *c, uint64_t ms)
{
	if (c->on)
		uv_timer_start(&c->timer, on_timer, ms, 0);
}

void tc__cluster_start(struct tc__cluster *c)
{
	c->on = true;
}

void tc__cluster_asking(struct tc__cluster *c)
{
	c->asking = true;
	c->again = false;
}

void tc__cluster_want(struct tc__cluster *c)
{
	if (!c->on)
		return;
	if (c->asking)
		c->again = true;
	else if (uv_timer_get_due_in(&c->timer) > REFRESH_SOON_MS || !uv_is_active((uv_handle_t *)&c->timer))
		schedule(c, REFRESH_SOON_MS);
}

static void on_timer(uv_timer_t *t)
{
	struct tc__cluster *c = t->data;

	if (c->asking || !c->on)
		return;
	if (!c->ops->ask(c->ctx)) {
		schedule(c, REFRESH_UNREADY_MS);
		return;
	}
	tc__cluster_asking(c);
}

int tc__cluster_read(struct tc__cluster *c, const redisReply *rep, const char *self_host, bool *changed)
{
	c->asking = false;
	if (!c->on)
		return 0;
	if (!rep || rep->type != REDIS_REPLY_ARRAY) {
		schedule(c, REFRESH_UNREADY_MS);
		return 0;
	}
	/* [[start, end, [host, port, id, ...], replicas...], ...] */
	void **map = tc_xcalloc(TC_SLOTS, sizeof(*map));
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
		    e->element[2]->elements < 2 || e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		long long lo = e->element[0]->integer, hi = e->element[1]->integer;
		const char *host = e->element[2]->element[0]->str;
		int port = (int)e->element[2]->element[1]->integer;
		if (!host[0] || !strcmp(host, "?")) /* the answering node's own address */
			host = self_host;
		if (lo < 0 || hi >= TC_SLOTS || lo > hi || !host)
			continue;
		void *n = c->ops->node_at(c->ctx, host, port);
		for (long long s = lo; s <= hi; s++)
			map[s] = n;
	}
	*changed = memcmp(map, c->slots, sizeof(c->slots)) != 0;
	memcpy(c->slots, map, sizeof(c->slots));
	free(map);
	return 1;
}

void tc__cluster_read_done(struct tc__cluster *c, bool all_up)
{
	schedule(c, c->again ? REFRESH_SOON_MS : all_up ? REFRESH_MS : REFRESH_UNREADY_MS);
}

void *tc__cluster_redirect(struct tc__cluster *c, const char *err, unsigned *slot)
{
	const char *sp = strchr(err, ' ');
	char host[256];
	unsigned s;
	int port;
	if (!sp || sscanf(sp + 1, "%u", &s) != 1 || s >= TC_SLOTS)
		return NULL;
	const char *addr = strchr(sp + 1, ' ');
	const char *colon = addr ? strrchr(addr, ':') : NULL;
	if (!colon || colon - addr - 1 <= 0 || (size_t)(colon - addr - 1) >= sizeof(host) ||
	    sscanf(colon + 1, "%d", &port) != 1)
		return NULL;
	memcpy(host, addr + 1, (size_t)(colon - addr - 1));
	host[colon - addr - 1] = '\0';
	if (!host[0]) /* "MOVED 1 :6380": the node did not know its own address */
		return NULL;
	*slot = s;
	return c->ops->node_at(c->ctx, host, port);
}

void tc__cluster_stop(struct tc__cluster *c)
{
	c->on = false;
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, NULL);
}
