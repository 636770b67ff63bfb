#include "redis_cmd.h"

#include <string.h>

#include "metrics.h"
#include "scratch.h"

/* Redirections and waits (TRYAGAIN, CLUSTERDOWN, a master not connected
 * yet) one command may go through before its caller is told it failed. */
#define MAX_TRIES 40
#define RETRY_MS 100

/* A command on its way, kept whole so a redirection can send it again. */
struct tc__cmd {
	struct tc__cmds *q;
	tc_redis_cb *cb;
	void *privdata;
	unsigned slot; /* TC_SLOTS: no key, any node */
	unsigned tries;
	unsigned ask_node;    /* ASK: the node to try once, with ASKING */
	struct tc__cmd *next; /* parked list */
	int argc;
	const char **argv;
	size_t *lens;
};

static void send_cmd(struct tc__cmd *c);
static void on_park_timer(uv_timer_t *t);

void tc__cmds_init(struct tc__cmds *q, uv_loop_t *loop, struct tc_redis *r, const struct tc__cmd_ops *ops, void *ctx)
{
	*q = (struct tc__cmds){ .r = r, .ops = ops, .ctx = ctx };
	uv_timer_init(loop, &q->park);
	q->park.data = q;
}

static void finish(struct tc__cmd *c, redisReply *reply)
{
	c->cb(c->q->r, reply, c->privdata);
	tc_scratch_free(c);
}

static void park(struct tc__cmd *c)
{
	struct tc__cmds *q = c->q;
	c->next = q->parked;
	q->parked = c;
	if (!uv_is_active((uv_handle_t *)&q->park))
		uv_timer_start(&q->park, on_park_timer, RETRY_MS, 0);
}

static void on_command_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct tc__cmd *c = privdata;
	struct tc__cmds *q = c->q;
	redisReply *rep = reply;

	if (rep && rep->type == REDIS_REPLY_ERROR && !q->stopped && c->tries < MAX_TRIES && q->ops->cluster(q->ctx)) {
		c->ask_node = 0;
		if (!strncmp(rep->str, "MOVED ", 6)) {
			tc_metrics.redis_redirects++;
			q->ops->moved(q->ctx, rep->str);
			c->tries++;
			send_cmd(c);
			return;
		}
		if (!strncmp(rep->str, "ASK ", 4) && (c->ask_node = q->ops->ask(q->ctx, rep->str))) {
			tc_metrics.redis_redirects++;
			c->tries++;
			send_cmd(c);
			return;
		}
		if (!strncmp(rep->str, "TRYAGAIN", 8) || !strncmp(rep->str, "CLUSTERDOWN", 11)) {
			q->ops->wait(q->ctx);
			park(c);
			return;
		}
	}
	finish(c, rep);
}

/* Sends c to its node, or parks it until that node is connected. */
static void send_cmd(struct tc__cmd *c)
{
	redisAsyncContext *ac = c->q->ops->conn(c->q->ctx, c->slot, c->ask_node);
	if (!ac) {
		park(c);
		return;
	}
	if (c->ask_node)
		redisAsyncCommand(ac, NULL, NULL, "ASKING");
	if (redisAsyncCommandArgv(ac, on_command_reply, c, c->argc, c->argv, c->lens) != REDIS_OK)
		park(c);
}

static void on_park_timer(uv_timer_t *t)
{
	struct tc__cmds *q = t->data;
	struct tc__cmd *list = q->parked;
	q->parked = NULL;
	while (list) {
		struct tc__cmd *c = list;
		list = c->next;
		if (q->stopped || ++c->tries > MAX_TRIES)
			finish(c, NULL);
		else
			send_cmd(c);
	}
}

int tc__cmds_send(struct tc__cmds *q, redisAsyncContext *ac, unsigned slot, tc_redis_cb *cb, void *privdata, int argc,
		  const char **argv, const size_t *argvlen)
{
	/* One block: the context, then argv, lens and the bytes, for resending. */
	size_t bytes = 0;
	for (int i = 0; i < argc; i++)
		bytes += argvlen[i] + 1;
	size_t head = sizeof(struct tc__cmd) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
	struct tc__cmd *c = tc_scratch_alloc(head + bytes);
	*c = (struct tc__cmd){ .q = q, .cb = cb, .privdata = privdata, .slot = slot, .argc = argc };
	c->argv = (const char **)(c + 1);
	c->lens = (size_t *)(c->argv + argc);
	char *p = (char *)(c->lens + argc);
	for (int i = 0; i < argc; i++) {
		memcpy(p, argv[i], argvlen[i]);
		p[argvlen[i]] = '\0';
		c->argv[i] = p;
		c->lens[i] = argvlen[i];
		p += argvlen[i] + 1;
	}
	if (redisAsyncCommandArgv(ac, on_command_reply, c, argc, c->argv, c->lens) != REDIS_OK) {
		tc_scratch_free(c);
		return -1;
	}
	return 0;
}

void tc__cmds_kick(struct tc__cmds *q)
{
	if (q->parked && !q->stopped)
		uv_timer_start(&q->park, on_park_timer, 0, 0);
}

void tc__cmds_stop(struct tc__cmds *q)
{
	q->stopped = true;
	uv_timer_stop(&q->park);
	uv_close((uv_handle_t *)&q->park, NULL);
	while (q->parked) {
		struct tc__cmd *c = q->parked;
		q->parked = c->next;
		finish(c, NULL);
	}
}
