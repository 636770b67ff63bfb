#include "fake_redis.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slot.h"
#include "util.h"

struct cmd {
	tc_redis_cb *cb;
	void *priv;
	char *text;
	struct cmd *next;
};

struct tc_redis {
	bool cmd_up, sub_up;
	struct cmd *head, *tail;
	size_t pending, sent;
	struct tc_dlist waiters;
	struct {
		const struct tc_redis_listener *l;
		void *ctx;
		const char *prefix;
	} listeners[TC_REDIS_MAX_LISTENERS];
	int nlisteners;
	char last_sub[256];
	bool has_sub;
	char peek[1024];
};

struct tc_redis *fake_redis_new(void)
{
	struct tc_redis *r = tc_xcalloc(1, sizeof(*r));
	r->cmd_up = r->sub_up = true;
	return r;
}

void fake_redis_free(struct tc_redis *r)
{
	while (r->head)
		fake_reply(r, NULL);
	free(r);
}

size_t fake_pending(const struct tc_redis *r)
{
	return r->pending;
}

size_t fake_sent(const struct tc_redis *r)
{
	return r->sent;
}

const char *fake_peek(const struct tc_redis *r)
{
	return r->head ? r->head->text : NULL;
}

void fake_reply(struct tc_redis *r, redisReply *reply)
{
	struct cmd *c = r->head;
	if (!c) {
		fprintf(stderr, "fake_reply: no command is waiting\n");
		abort();
	}
	r->head = c->next;
	if (!r->head)
		r->tail = NULL;
	r->pending--;
	c->cb(r, reply, c->priv);
	if (reply)
		freeReplyObject(reply);
	free(c->text);
	free(c);
}

const char *fake_take_sub(struct tc_redis *r)
{
	if (!r->has_sub)
		return NULL;
	r->has_sub = false;
	return r->last_sub;
}

static int owner(struct tc_redis *r, const char *ch)
{
	for (int i = 0; i < r->nlisteners; i++)
		if (r->listeners[i].prefix && !strncmp(ch, r->listeners[i].prefix, strlen(r->listeners[i].prefix)))
			return i;
	return -1;
}

void fake_push(struct tc_redis *r, const char *kind, const char *ch, const char *data)
{
	int i = owner(r, ch);
	if (i < 0)
		return;
	const struct tc_redis_listener *l = r->listeners[i].l;
	void *ctx = r->listeners[i].ctx;
	size_t clen = strlen(ch);
	if (!strcmp(kind, "ssubscribe") && l->subscribed)
		l->subscribed(ctx, ch, clen);
	else if (!strcmp(kind, "sunsubscribe") && l->unsubscribed)
		l->unsubscribed(ctx, ch, clen);
	else if (!strcmp(kind, "smessage") && l->message)
		l->message(ctx, ch, clen, data, strlen(data));
	else if (!strcmp(kind, "refused") && l->refused)
		l->refused(ctx, ch, clen);
}

void fake_sub_link(struct tc_redis *r, bool up)
{
	r->sub_up = up;
	for (int i = 0; i < r->nlisteners; i++) {
		const struct tc_redis_listener *l = r->listeners[i].l;
		if (up && l->sub_up)
			l->sub_up(r->listeners[i].ctx);
		else if (!up && l->sub_down)
			l->sub_down(r->listeners[i].ctx, 1);
	}
}

void fake_cmd_link(struct tc_redis *r, bool up)
{
	r->cmd_up = up;
	if (!up) {
		while (r->head)
			fake_reply(r, NULL);
		return;
	}
	for (int i = 0; i < r->nlisteners; i++)
		if (r->listeners[i].l->cmd_up)
			r->listeners[i].l->cmd_up(r->listeners[i].ctx);
	size_t n = r->waiters.count;
	struct tc_dlink *l;
	while (n-- && (l = r->waiters.head)) {
		struct tc_redis_waiter *w = TC_DLIST_ENTRY(l, struct tc_redis_waiter, link);
		tc_dlist_remove(&r->waiters, l);
		w->fn(w);
	}
}

/* ==== redis.h ============================================================================ */

struct tc_redis *tc_redis_new(uv_loop_t *loop, const struct tc_config *cfg, const char *function_source,
			      size_t function_len, unsigned flags)
{
	return fake_redis_new();
}

void tc_redis_add_listener(struct tc_redis *r, const char *prefix, const struct tc_redis_listener *l, void *ctx)
{
	if (r->nlisteners == TC_REDIS_MAX_LISTENERS)
		abort();
	r->listeners[r->nlisteners].l = l;
	r->listeners[r->nlisteners].ctx = ctx;
	r->listeners[r->nlisteners].prefix = prefix;
	r->nlisteners++;
}

bool tc_redis_ready(const struct tc_redis *r)
{
	return r->cmd_up && r->sub_up;
}

bool tc_redis_cmd_up(const struct tc_redis *r)
{
	return r->cmd_up;
}

const char *tc_redis_status(const struct tc_redis *r)
{
	return r->cmd_up ? "up" : "down";
}

unsigned tc_redis_connects(const struct tc_redis *r)
{
	return 1;
}

bool tc_redis_is_cluster(const struct tc_redis *r)
{
	return false;
}

unsigned tc_redis_nodes(const struct tc_redis *r)
{
	return 1;
}

int tc_redis_command(struct tc_redis *r, tc_redis_cb *cb, void *privdata, int argc, const char **argv,
		     const size_t *argvlen)
{
	if (!r->cmd_up)
		return -1;
	struct cmd *c = tc_xcalloc(1, sizeof(*c));
	size_t len = 0;
	for (int i = 0; i < argc; i++)
		len += argvlen[i] + 1;
	c->text = tc_xcalloc(1, len + 1);
	for (int i = 0; i < argc; i++) {
		if (i)
			strcat(c->text, " ");
		strncat(c->text, argv[i], argvlen[i]);
	}
	c->cb = cb;
	c->priv = privdata;
	if (r->tail)
		r->tail->next = c;
	else
		r->head = c;
	r->tail = c;
	r->pending++;
	r->sent++;
	return 0;
}

int tc_redis_cmd(struct tc_redis *r, tc_redis_cb *cb, void *privdata, const char *const *argv)
{
	size_t lens[32];
	int argc = 0;
	for (; argv[argc]; argc++)
		lens[argc] = strlen(argv[argc]);
	return tc_redis_command(r, cb, privdata, argc, (const char **)argv, lens);
}

unsigned tc_redis_subscribe(struct tc_redis *r, const char *channel)
{
	if (!r->sub_up)
		return 0;
	snprintf(r->last_sub, sizeof(r->last_sub), "SSUBSCRIBE %s", channel);
	r->has_sub = true;
	return 1;
}

int tc_redis_unsubscribe(struct tc_redis *r, unsigned node, const char *channel)
{
	if (!r->sub_up || node != 1)
		return -1;
	snprintf(r->last_sub, sizeof(r->last_sub), "SUNSUBSCRIBE %s", channel);
	r->has_sub = true;
	return 0;
}

void tc_redis_wait_ready(struct tc_redis *r, struct tc_redis_waiter *w)
{
	if (!tc_dlist_linked(&r->waiters, &w->link))
		tc_dlist_push_tail(&r->waiters, &w->link);
}

void tc_redis_wait_cancel(struct tc_redis *r, struct tc_redis_waiter *w)
{
	tc_dlist_remove(&r->waiters, &w->link);
}

void tc_redis_stop(struct tc_redis *r)
{
	while (r->head)
		fake_reply(r, NULL);
}

void tc_redis_free(struct tc_redis *r)
{
	fake_redis_free(r);
}

/* ==== replies ============================================================================= */

static redisReply *reply_new(int type)
{
	redisReply *r = tc_xcalloc(1, sizeof(*r));
	r->type = type;
	return r;
}

static redisReply *with_str(int type, const char *s)
{
	redisReply *r = reply_new(type);
	r->len = strlen(s);
	r->str = tc_xstrdup(s);
	return r;
}

redisReply *rr_str(const char *s)
{
	return with_str(REDIS_REPLY_STRING, s);
}

redisReply *rr_err(const char *s)
{
	return with_str(REDIS_REPLY_ERROR, s);
}

redisReply *rr_nil(void)
{
	return reply_new(REDIS_REPLY_NIL);
}

redisReply *rr_int(long long v)
{
	redisReply *r = reply_new(REDIS_REPLY_INTEGER);
	r->integer = v;
	return r;
}

static redisReply *arr_v(size_t n, va_list ap)
{
	redisReply *r = reply_new(REDIS_REPLY_ARRAY);
	r->elements = n;
	r->element = n ? tc_xcalloc(n, sizeof(*r->element)) : NULL;
	for (size_t i = 0; i < n; i++)
		r->element[i] = va_arg(ap, redisReply *);
	return r;
}

redisReply *rr_arr(size_t n, ...)
{
	va_list ap;
	va_start(ap, n);
	redisReply *r = arr_v(n, ap);
	va_end(ap);
	return r;
}

redisReply *rr_entry(uint64_t seq, const char *method, const char *ns, const char *json)
{
	char id[32];
	snprintf(id, sizeof(id), "%llu-0", (unsigned long long)seq);
	return rr_arr(2, rr_str(id),
		      rr_arr(6, rr_str("m"), rr_str(method), rr_str("n"), rr_str(ns), rr_str("e"), rr_str(json)));
}
