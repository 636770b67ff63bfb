/*
 * main.c — threadcast-agent, the reference agent worker: the command loop
 * (reading tc:commands), the Redis links, signals, start and stop. Its
 * parts are listed in agent.h.
 *
 * Consumes runtime commands from the `tc:commands` stream (consumer group
 * `workers`, so several agents share the work), answers each on the
 * gateway's reply channel, and on run.start produces a realistic run
 * through the producer contract (FCALL threadcast_append): lifecycle, a
 * streamed AI message with a streamed tool call, tool events, a subgraph in
 * namespace ["researcher"], updates/values/checkpoints per step,
 * custom:progress, and — when the input asks for it — an input.requested
 * interrupt that input.respond resumes. Per-thread state lives in Redis
 * (agent_state.lua), so whichever agent takes the next command of a thread
 * can answer state.* or resume the run. Commands a dead agent read but never
 * acknowledged are claimed by another (XAUTOCLAIM) after --claim-idle-ms.
 *
 *   threadcast-agent [--redis-url URL] [--name NAME] [--token-delay-ms N]
 *                    [--claim-idle-ms N] [--log-level L] [--stall METHOD]
 *
 * --stall METHOD is fault injection for tests: commands of that method are
 * read and then neither answered nor acknowledged, as by a hung worker.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "agent.h"
#include "claim.h"
#include "commands.h"
#include "config.h"
#include "log.h"
#include "redis.h"
#include "run.h"
#include "store.h"
#include "util.h"

extern const char tc_function_source[];
extern const size_t tc_function_source_len;

/* ==== reading commands ============================================================================== */

static void read_next(struct tc_agent *a);

static void on_retry_read(uv_timer_t *t)
{
	read_next(t->data);
}

static void on_group(struct tc_redis *r, redisReply *reply, void *priv)
{
	if (reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "BUSYGROUP", 9))
		tc_log(TC_LOG_WARN, "cannot create the workers group", TC_LS("error", reply->str));
}

static void on_read(struct tc_redis *r, redisReply *reply, void *priv)
{
	struct tc_agent *a = priv;
	a->reading = false;
	if (a->stopping)
		return;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		if (reply && !strncmp(reply->str, "NOGROUP", 7)) {
			struct tc_store_cmd c;
			tc_store_create_group(&c);
			tc_agent_send(a->wr, on_group, NULL, &c);
		}
		uv_timer_start(&a->retry_read, on_retry_read, 200, 0);
		return;
	}
	/* [[stream, [entries...]]] or nil on timeout. */
	for (size_t s = 0; reply->type == REDIS_REPLY_ARRAY && s < reply->elements; s++) {
		const redisReply *st = reply->element[s];
		if (st->type == REDIS_REPLY_ARRAY && st->elements == 2 && st->element[1]->type == REDIS_REPLY_ARRAY)
			for (size_t i = 0; i < st->element[1]->elements; i++)
				tc_agent_take(a, st->element[1]->element[i]);
	}
	read_next(a);
}

static void read_next(struct tc_agent *a)
{
	if (a->reading || a->stopping)
		return;
	struct tc_store_cmd c;
	tc_store_worker_read(&c, a->name, 32, 500);
	if (tc_agent_send(a->rd, on_read, a, &c) == 0)
		a->reading = true;
	else
		uv_timer_start(&a->retry_read, on_retry_read, 200, 0);
}

static void on_rd_up(void *ctx)
{
	read_next(ctx);
}

static void on_wr_up(void *ctx)
{
	struct tc_agent *a = ctx;
	struct tc_store_cmd c;
	tc_store_create_group(&c);
	tc_agent_send(a->wr, on_group, NULL, &c);
	tc_agent_register(a);
}

static const struct tc_redis_listener rd_listener = { .cmd_up = on_rd_up };
static const struct tc_redis_listener wr_listener = { .cmd_up = on_wr_up };

/* ==== main ========================================================================================= */

static void stop(struct tc_agent *a)
{
	if (a->stopping)
		return;
	a->stopping = true;
	tc_log0(TC_LOG_INFO, "agent stopping");
	tc_agent_runs_stop(a);
	tc_agent_claim_stop(a);
	uv_timer_stop(&a->retry_read);
	uv_close((uv_handle_t *)&a->retry_read, NULL);
	uv_close((uv_handle_t *)&a->sigint, NULL);
	uv_close((uv_handle_t *)&a->sigterm, NULL);
	tc_redis_stop(a->rd);
	tc_redis_stop(a->wr);
}

static void on_signal(uv_signal_t *h, int signum)
{
	stop(h->data);
}

static void usage(void)
{
	fprintf(stderr, "usage: threadcast-agent [--redis-url URL] [--name NAME] [--token-delay-ms N]\n"
			"                        [--claim-idle-ms N] [--log-level L] [--stall METHOD]\n");
}

int main(int argc, char **argv)
{
	struct tc_agent a;
	uv_loop_t loop;
	char err[256], host[64], name[128];
	char *cargv[5] = { argv[0] };
	int cargc = 1;
	const char *url = NULL, *level = "info";

	memset(&a, 0, sizeof(a));
	tc_cjson_init();
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(name, sizeof(name), "%s-%d", host, (int)getpid());
	a.token_delay_ms = 50;
	a.claim_idle_ms = 5000;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--help")) {
			usage();
			return 0;
		}
		if (!v || strncmp(argv[i], "--", 2)) {
			usage();
			return 2;
		}
		i++;
		if (!strcmp(argv[i - 1], "--redis-url"))
			url = v;
		else if (!strcmp(argv[i - 1], "--name"))
			snprintf(name, sizeof(name), "%s", v);
		else if (!strcmp(argv[i - 1], "--token-delay-ms"))
			a.token_delay_ms = atol(v);
		else if (!strcmp(argv[i - 1], "--claim-idle-ms"))
			a.claim_idle_ms = atol(v) > 0 ? atol(v) : 5000;
		else if (!strcmp(argv[i - 1], "--log-level"))
			level = v;
		else if (!strcmp(argv[i - 1], "--stall"))
			a.stall = v;
		else {
			usage();
			return 2;
		}
	}
	/* The agent shares the gateway's config code for Redis settings. */
	char urlarg[1100], lvlarg[64];
	if (url) {
		snprintf(urlarg, sizeof(urlarg), "--redis-url=%s", url);
		cargv[cargc++] = urlarg;
	}
	snprintf(lvlarg, sizeof(lvlarg), "--log-level=%s", level);
	cargv[cargc++] = lvlarg;
	cargv[cargc++] = (char *)"--auth=off"; /* the agent serves no clients */
	if (tc_config_load(&a.cfg, cargc, cargv, err, sizeof(err)) != TC_CONFIG_OK) {
		fprintf(stderr, "threadcast-agent: %s\n", err);
		tc_config_free(&a.cfg);
		return 2;
	}
	tc_log_init(a.cfg.log_threshold);
	signal(SIGPIPE, SIG_IGN);
	a.name = name;
	a.loop = &loop;
	uv_loop_init(&loop);
	a.rd = tc_redis_new(&loop, &a.cfg, tc_function_source, tc_function_source_len, TC_REDIS_NO_PUBSUB);
	a.wr = tc_redis_new(&loop, &a.cfg, tc_function_source, tc_function_source_len, TC_REDIS_NO_PUBSUB);
	tc_redis_add_listener(a.rd, NULL, &rd_listener, &a);
	tc_redis_add_listener(a.wr, NULL, &wr_listener, &a);
	uv_timer_init(&loop, &a.retry_read);
	a.retry_read.data = &a;
	tc_agent_claim_start(&a);
	uv_signal_init(&loop, &a.sigint);
	uv_signal_init(&loop, &a.sigterm);
	a.sigint.data = a.sigterm.data = &a;
	uv_signal_start(&a.sigint, on_signal, SIGINT);
	uv_signal_start(&a.sigterm, on_signal, SIGTERM);
	char redis_url[512];
	tc_log(TC_LOG_INFO, "agent started", TC_LS("name", a.name),
	       TC_LS("redis", tc_redis_url_redact(a.cfg.redis_url, redis_url, sizeof(redis_url))),
	       TC_LI("token_delay_ms", a.token_delay_ms));

	uv_run(&loop, UV_RUN_DEFAULT);

	tc_redis_free(a.rd);
	tc_redis_free(a.wr);
	int rc = uv_loop_close(&loop);
	tc_config_free(&a.cfg);
	return rc ? 1 : 0;
}
