/*
 * main.c — start-up and orderly stop of one threadcast process.
 *
 * One libuv loop runs everything. The first SIGINT/SIGTERM starts a drain
 * (clients are closed with 1001 so they reconnect elsewhere); a second one,
 * or the end of the drain, tears everything down: lws context, Redis,
 * signal handlers. The loop then runs dry and uv_loop_close() returns 0 —
 * every allocation has been given back (valgrind and LeakSanitizer agree).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "auth.h"
#include "bridge.h"
#include "config.h"
#include "hub.h"
#include "log.h"
#include "lwsmem.h"
#include "redis.h"
#include "replay.h"
#include "scratch.h"
#include "server.h"
#include "util.h"

struct app {
	uv_loop_t loop;
	struct tc_config cfg;
	struct tc_redis *redis;
	struct tc_hub *hub;
	struct tc_bridge *bridge;
	struct tc_session_env env;
	struct tc_server *server;
	struct tc_auth *auth;
	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t key_check; /* notices a rotated key file */
	bool draining, stopping;
};

/* How often the key file is looked at for a rotation. */
#define KEY_CHECK_MS 5000

static void app_stop(void *arg)
{
	struct app *app = arg;

	if (app->stopping)
		return;
	app->stopping = true;
	tc_log0(TC_LOG_INFO, "stopping");
	tc_server_stop(app->server);
	tc_replay_holds_stop(app->env.holds);
	tc_bridge_stop(app->bridge);
	tc_redis_stop(app->redis);
	uv_close((uv_handle_t *)&app->sigint, NULL);
	uv_close((uv_handle_t *)&app->sigterm, NULL);
	uv_close((uv_handle_t *)&app->sighup, NULL);
	uv_close((uv_handle_t *)&app->key_check, NULL);
}

/* Keys are re-read when their file changes, or at once on SIGHUP. */
static void reload_keys(struct app *app, bool force)
{
	char err[512];
	size_t skipped;

	if (!app->auth)
		return;
	switch (tc_auth_reload(app->auth, force, err, sizeof(err))) {
	case 1:
		tc_log(TC_LOG_INFO, "verifying keys reloaded", TC_LI("keys", tc_auth_keys(app->auth, &skipped)),
		       TC_LI("skipped", skipped));
		break;
	case -1:
		tc_log(TC_LOG_ERROR, "verifying keys not reloaded; the previous ones stay", TC_LS("error", err));
		break;
	}
}

static void on_key_check(uv_timer_t *t)
{
	reload_keys(t->data, false);
}

static void on_sighup(uv_signal_t *h, int signum)
{
	reload_keys(h->data, true);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct app *app = h->data;

	if (app->draining) {
		tc_log(TC_LOG_INFO, "second signal: stopping now", TC_LI("signal", signum));
		app_stop(app);
		return;
	}
	app->draining = true;
	/* SIGTERM is a deploy's: /readyz fails first, for --drain-grace, while requests are still served.
	 * SIGINT is someone at a terminal: no grace. */
	int grace = signum == SIGTERM ? app->cfg.drain_grace_ms : 0;
	tc_log(TC_LOG_INFO, "draining", TC_LI("signal", signum),
	       TC_LI("connections", tc_server_connections(app->server)), TC_LI("grace_ms", grace),
	       TC_LI("timeout_ms", app->cfg.drain_timeout_ms));
	tc_server_drain(app->server, grace, app_stop, app);
}

/* threadcast's Redis function libraries (protocol/redis/), embedded one after
 * another by scripts/embed.py --libraries. */
extern const char tc_function_source[];
extern const size_t tc_function_source_len;

int main(int argc, char **argv)
{
	struct app app;
	char err[512];
	int rc;

	memset(&app, 0, sizeof(app));
	tc_cjson_init();
	switch (tc_config_load(&app.cfg, argc, argv, err, sizeof(err))) {
	case TC_CONFIG_OK:
		break;
	case TC_CONFIG_EXIT:
		tc_config_free(&app.cfg);
		return 0;
	case TC_CONFIG_ERROR:
		fprintf(stderr, "threadcast: %s\n", err);
		tc_config_free(&app.cfg);
		return 2;
	}
	tc_log_init(app.cfg.log_threshold);
	signal(SIGPIPE, SIG_IGN);
	tc_lwsmem_init();
	tc_scratch_init();
	srand((unsigned)uv_hrtime() ^ (unsigned)getpid());

	bool auth_off;
	struct tc_auth *auth = tc_auth_new(&app.cfg, &auth_off, err, sizeof(err));
	if (!auth && !auth_off) {
		fprintf(stderr, "threadcast: %s\n", err);
		tc_config_free(&app.cfg);
		return 2;
	}
	if (auth_off) {
		tc_log0(TC_LOG_WARN, "authentication is off (--auth off): anyone may read any thread");
	} else {
		size_t skipped;
		tc_log(TC_LOG_INFO, "verifying keys loaded", TC_LI("keys", tc_auth_keys(auth, &skipped)),
		       TC_LI("skipped", skipped));
	}
	app.auth = auth;

	uv_loop_init(&app.loop);
	app.redis = tc_redis_new(&app.loop, &app.cfg, tc_function_source, tc_function_source_len, 0);
	app.hub = tc_hub_new(&app.cfg, app.redis);
	app.bridge = tc_bridge_new(&app.loop, &app.cfg, app.redis);
	app.env = (struct tc_session_env){ .cfg = &app.cfg,
					   .hub = app.hub,
					   .redis = app.redis,
					   .bridge = app.bridge,
					   .auth = auth,
					   .holds = tc_replay_holds_new(&app.loop) };
	app.server = tc_server_new(&app.loop, &app.env);
	if (!app.server) {
		tc_replay_holds_stop(app.env.holds);
		tc_bridge_stop(app.bridge);
		tc_redis_stop(app.redis);
		uv_run(&app.loop, UV_RUN_DEFAULT);
		tc_replay_holds_free(app.env.holds);
		tc_bridge_free(app.bridge);
		tc_hub_free(app.hub);
		tc_auth_free(auth);
		tc_redis_free(app.redis);
		uv_loop_close(&app.loop);
		tc_config_free(&app.cfg);
		return 1;
	}
	uv_signal_init(&app.loop, &app.sigint);
	uv_signal_init(&app.loop, &app.sigterm);
	uv_signal_init(&app.loop, &app.sighup);
	uv_timer_init(&app.loop, &app.key_check);
	app.sigint.data = app.sigterm.data = app.sighup.data = app.key_check.data = &app;
	uv_signal_start(&app.sigint, on_signal, SIGINT);
	uv_signal_start(&app.sigterm, on_signal, SIGTERM);
	uv_signal_start(&app.sighup, on_sighup, SIGHUP);
	if (auth)
		uv_timer_start(&app.key_check, on_key_check, KEY_CHECK_MS, KEY_CHECK_MS);

	char redis_url[512];
	tc_log(TC_LOG_INFO, "listening", TC_LS("host", app.cfg.host), TC_LI("port", tc_server_port(app.server)),
	       TC_LS("redis", tc_redis_url_redact(app.cfg.redis_url, redis_url, sizeof(redis_url))),
	       TC_LS("version", TC_VERSION));

	uv_run(&app.loop, UV_RUN_DEFAULT);

	tc_server_free(app.server);
	tc_replay_holds_free(app.env.holds);
	tc_bridge_free(app.bridge);
	tc_hub_free(app.hub);
	tc_redis_free(app.redis);
	tc_auth_free(auth);
	rc = uv_loop_close(&app.loop);
	if (rc)
		tc_log(TC_LOG_ERROR, "event loop still had handles at exit", TC_LS("error", uv_strerror(rc)));
	else
		tc_log0(TC_LOG_INFO, "stopped");
	tc_lwsmem_shutdown();
	tc_scratch_shutdown(); /* last: says so if a request-lived object leaked */
	tc_config_free(&app.cfg);
	return rc ? 1 : 0;
}
