/* Unit tests: config.c — defaults, env, flags, validation, Redis URLs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

static const char *const env_names[] = {
	"THREADCAST_HOST",
	"THREADCAST_PORT",
	"THREADCAST_REDIS_URL",
	"THREADCAST_LOG_LEVEL",
	"THREADCAST_MAX_FRAME_BYTES",
	"THREADCAST_MAX_SUBSCRIPTIONS",
	"THREADCAST_REDIS_BACKOFF_MIN",
	"THREADCAST_REDIS_BACKOFF_MAX",
	"THREADCAST_REDIS_TLS_CA",
	"THREADCAST_REDIS_TLS_CERT",
	"THREADCAST_REDIS_TLS_KEY",
	"THREADCAST_REST_FLAVOR",
};

static int clear_env(void **state)
{
	for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
		unsetenv(env_names[i]);
	unsetenv("THREADCAST_JWT_KEY");
	setenv("THREADCAST_AUTH", "off", 1); /* tested on its own below */
	return 0;
}

static enum tc_config_status load(struct tc_config *cfg, char *err, int argc, ...)
{
	char *argv[16] = { (char *)"threadcast" };
	va_list ap;
	va_start(ap, argc);
	for (int i = 1; i <= argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	err[0] = '\0';
	return tc_config_load(cfg, argc + 1, argv, err, 256);
}

static void auth_is_on_by_default(void **state)
{
	struct tc_config cfg;
	char err[256];
	unsetenv("THREADCAST_AUTH");
	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--jwt-key"));
	assert_non_null(strstr(err, "--auth off"));
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 1, "--jwt-key=/k"), TC_CONFIG_OK);
	assert_string_equal(cfg.auth, "jwt");
	assert_string_equal(cfg.jwt_alg, "RS256");
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 2, "--jwt-key=/k", "--jwt-alg=none"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--jwt-alg"));
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 1, "--auth=maybe"), TC_CONFIG_ERROR);
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 1, "--jwt-jwks=/keys.json"), TC_CONFIG_OK);
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 2, "--jwt-jwks=/keys.json", "--jwt-key=/k"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "exclusive"));
	tc_config_free(&cfg);
}

static void defaults(void **state)
{
	struct tc_config cfg;
	char err[256];
	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_OK);
	assert_int_equal(cfg.port, 8080);
	assert_string_equal(cfg.host, "0.0.0.0");
	assert_string_equal(cfg.redis_url, "redis://127.0.0.1:6379");
	assert_int_equal(cfg.log_threshold, TC_LOG_INFO);
	assert_int_equal(cfg.max_frame_bytes, 65536);
	assert_string_equal(cfg.redis.host, "127.0.0.1");
	assert_int_equal(cfg.redis.port, 6379);
	assert_null(cfg.redis.password);
	tc_config_free(&cfg);
}

static void rest_flavor(void **state)
{
	struct tc_config cfg;
	char err[256];
	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_OK);
	assert_string_equal(cfg.rest_flavor, "javascript"); /* the JavaScript server's answers by default */
	assert_false(cfg.rest_python);
	tc_config_free(&cfg);
	setenv("THREADCAST_REST_FLAVOR", "python", 1);
	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_OK);
	assert_true(cfg.rest_python);
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 1, "--rest-flavor=javascript"), TC_CONFIG_OK);
	assert_false(cfg.rest_python);
	tc_config_free(&cfg);
	unsetenv("THREADCAST_REST_FLAVOR");
	assert_int_equal(load(&cfg, err, 1, "--rest-flavor=ruby"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--rest-flavor"));
	assert_non_null(strstr(err, "javascript or python"));
	tc_config_free(&cfg);
}

static void env_then_flag_precedence(void **state)
{
	struct tc_config cfg;
	char err[256];
	setenv("THREADCAST_PORT", "9000", 1);
	setenv("THREADCAST_LOG_LEVEL", "debug", 1);
	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_OK);
	assert_int_equal(cfg.port, 9000);
	assert_int_equal(cfg.log_threshold, TC_LOG_DEBUG);
	tc_config_free(&cfg);

	/* Both flag spellings; the flag wins over the environment. */
	assert_int_equal(load(&cfg, err, 3, "--port=9100", "--log-level", "warn"), TC_CONFIG_OK);
	assert_int_equal(cfg.port, 9100);
	assert_int_equal(cfg.log_threshold, TC_LOG_WARN);
	tc_config_free(&cfg);
}

static void bad_values_name_the_setting(void **state)
{
	struct tc_config cfg;
	char err[256];

	assert_int_equal(load(&cfg, err, 1, "--port=abc"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--port"));
	assert_non_null(strstr(err, "abc"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--port=65536"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "0 to 65535"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--port=12x"), TC_CONFIG_ERROR);
	tc_config_free(&cfg);

	setenv("THREADCAST_MAX_FRAME_BYTES", "10", 1);
	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "THREADCAST_MAX_FRAME_BYTES"));
	tc_config_free(&cfg);
	unsetenv("THREADCAST_MAX_FRAME_BYTES");

	assert_int_equal(load(&cfg, err, 1, "--log-level=loud"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--log-level"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--nope=1"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--nope"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--port"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "needs a value"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "stray"), TC_CONFIG_ERROR);
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--static-dir=/nonexistent/www"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--static-dir"));
	assert_non_null(strstr(err, "not a directory"));
	tc_config_free(&cfg);
	assert_int_equal(load(&cfg, err, 1, "--static-dir=/tmp"), TC_CONFIG_OK);
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 2, "--redis-backoff-min=500", "--redis-backoff-max=100"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--redis-backoff-max"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--redis-url=http://x"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "THREADCAST_REDIS_URL"));
	tc_config_free(&cfg);
}

/* --cors-origins: origins, *, or a host on any port; anything else stops the start. */
static void cors_origins(void **state)
{
	struct tc_config cfg;
	char err[256];
	static const char *const good[] = { "--cors-origins=*", "--cors-origins=https://app.example.com",
					    "--cors-origins=http://localhost:*,http://127.0.0.1:3000" };
	static const char *const bad[] = { "--cors-origins=localhost:3000", "--cors-origins=https://a.example/path",
					   "--cors-origins=ftp://x", "--cors-origins=https://" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(load(&cfg, err, 1, good[i]), TC_CONFIG_OK);
		tc_config_free(&cfg);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(load(&cfg, err, 1, bad[i]), TC_CONFIG_ERROR);
		assert_non_null(strstr(err, "--cors-origins / THREADCAST_CORS_ORIGINS"));
		tc_config_free(&cfg);
	}
}

static void redis_urls(void **state)
{
	struct tc_redis_addr a;
	char err[200];

	assert_int_equal(tc_redis_addr_parse("redis://localhost", &a, err, sizeof(err)), 0);
	assert_string_equal(a.host, "localhost");
	assert_int_equal(a.port, 6379);
	assert_int_equal(a.db, 0);
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("redis://:s%40cret@10.0.0.1:6380/3", &a, err, sizeof(err)), 0);
	assert_null(a.user);
	assert_string_equal(a.password, "s@cret");
	assert_string_equal(a.host, "10.0.0.1");
	assert_int_equal(a.port, 6380);
	assert_int_equal(a.db, 3);
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("redis://alice:pw@h:1", &a, err, sizeof(err)), 0);
	assert_string_equal(a.user, "alice");
	assert_string_equal(a.password, "pw");
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("redis://secret@h", &a, err, sizeof(err)), 0);
	assert_null(a.user);
	assert_string_equal(a.password, "secret");
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("redis://[::1]:7000", &a, err, sizeof(err)), 0);
	assert_string_equal(a.host, "::1");
	assert_int_equal(a.port, 7000);
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("unix:///tmp/r.sock?db=2", &a, err, sizeof(err)), 0);
	assert_string_equal(a.unix_path, "/tmp/r.sock");
	assert_null(a.host);
	assert_int_equal(a.db, 2);
	assert_false(a.tls);
	tc_redis_addr_free(&a);

	const char *bad[] = { "http://h",    "redis://",     "redis://h:0",    "redis://h:99999", "redis://h:12ab",
			      "redis://h/x", "redis://[::1", "redis://:%zz@h", "unix://relative", "unix:///s?x=1",
			      "rediss://",   "rediss://h:0", "redis+tls://h",  "rediss://a:%zz@h" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(tc_redis_addr_parse(bad[i], &a, err, sizeof(err)), -1);
		assert_true(strlen(err) > 0);
		assert_null(a.host);
		assert_null(a.password);
	}
}

/* rediss:// is redis:// over TLS: every userinfo and host form of it. */
static void redis_tls_urls(void **state)
{
	struct tc_redis_addr a;
	char err[200];

	assert_int_equal(tc_redis_addr_parse("redis://h", &a, err, sizeof(err)), 0);
	assert_false(a.tls);
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("rediss://localhost", &a, err, sizeof(err)), 0);
	assert_true(a.tls);
	assert_string_equal(a.host, "localhost");
	assert_int_equal(a.port, 6379);
	assert_null(a.user);
	assert_null(a.password);
	tc_redis_addr_free(&a);

	assert_int_equal(
		tc_redis_addr_parse("rediss://alice:p%3Aw%40rd@redis.example.com:6380/2", &a, err, sizeof(err)), 0);
	assert_true(a.tls);
	assert_string_equal(a.user, "alice");
	assert_string_equal(a.password, "p:w@rd");
	assert_string_equal(a.host, "redis.example.com");
	assert_int_equal(a.port, 6380);
	assert_int_equal(a.db, 2);
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("rediss://:secret@[::1]:7000", &a, err, sizeof(err)), 0);
	assert_true(a.tls);
	assert_null(a.user);
	assert_string_equal(a.password, "secret");
	assert_string_equal(a.host, "::1");
	assert_int_equal(a.port, 7000);
	tc_redis_addr_free(&a);

	assert_int_equal(tc_redis_addr_parse("rediss://secret@10.0.0.2", &a, err, sizeof(err)), 0);
	assert_true(a.tls);
	assert_null(a.user);
	assert_string_equal(a.password, "secret");
	assert_string_equal(a.host, "10.0.0.2");
	tc_redis_addr_free(&a);

	/* The user with an empty password is still a user. */
	assert_int_equal(tc_redis_addr_parse("rediss://bob:@h", &a, err, sizeof(err)), 0);
	assert_string_equal(a.user, "bob");
	assert_string_equal(a.password, "");
	tc_redis_addr_free(&a);
}

/* The TLS options: made at start-up, so a bad file stops it with its name. */
static void redis_tls_options(void **state)
{
	struct tc_config cfg;
	char err[256];

	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_OK);
	assert_null(cfg.tls); /* plain redis:// */
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--redis-url=rediss://u:p@h:6380"), TC_CONFIG_OK);
	assert_non_null(cfg.tls); /* the system's trust store */
	assert_true(cfg.redis.tls);
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 1, "--redis-tls-ca=/etc/ca.pem"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--redis-tls-ca is set but the Redis URL is not rediss://"));
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 2, "--redis-url=rediss://h", "--redis-tls-ca=/nonexistent/ca.pem"),
			 TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "cannot read the CA file /nonexistent/ca.pem: No such file or directory"));
	tc_config_free(&cfg);

	char path[] = "/tmp/tc-test-ca-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a certificate\n", 18), 18);
	close(fd);
	setenv("THREADCAST_REDIS_TLS_CA", path, 1);
	assert_int_equal(load(&cfg, err, 1, "--redis-url=rediss://h"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "no CA certificate in /tmp/tc-test-ca-"));
	tc_config_free(&cfg);
	unsetenv("THREADCAST_REDIS_TLS_CA");
	unlink(path);

	assert_int_equal(load(&cfg, err, 2, "--redis-url=rediss://h", "--redis-tls-cert=/c.pem"), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "a client certificate needs its key"));
	tc_config_free(&cfg);
}

static void sentinel_lists(void **state)
{
	struct tc_config cfg;
	char err[256];

	assert_int_equal(load(&cfg, err, 1, "--redis-sentinels=s1:26380,[::1]:5000,s3"), TC_CONFIG_OK);
	assert_int_equal(cfg.nsentinels, 3);
	assert_string_equal(cfg.sentinels[0].host, "s1");
	assert_int_equal(cfg.sentinels[0].port, 26380);
	assert_string_equal(cfg.sentinels[1].host, "::1");
	assert_int_equal(cfg.sentinels[1].port, 5000);
	assert_string_equal(cfg.sentinels[2].host, "s3");
	assert_int_equal(cfg.sentinels[2].port, 26379); /* Sentinel's default port */
	assert_string_equal(cfg.redis_sentinel_master, "mymaster");
	tc_config_free(&cfg);

	assert_int_equal(load(&cfg, err, 0), TC_CONFIG_OK);
	assert_int_equal(cfg.nsentinels, 0); /* off unless given */
	tc_config_free(&cfg);

	/* Each Sentinel may have credentials of its own, as in a URL. */
	assert_int_equal(load(&cfg, err, 1, "--redis-sentinels=alice:p%40w@s1:26380,:only@s2,tok@[::1]:5000,s4"),
			 TC_CONFIG_OK);
	assert_int_equal(cfg.nsentinels, 4);
	assert_string_equal(cfg.sentinels[0].user, "alice");
	assert_string_equal(cfg.sentinels[0].password, "p@w");
	assert_string_equal(cfg.sentinels[0].host, "s1");
	assert_int_equal(cfg.sentinels[0].port, 26380);
	assert_null(cfg.sentinels[1].user);
	assert_string_equal(cfg.sentinels[1].password, "only");
	assert_string_equal(cfg.sentinels[1].host, "s2");
	assert_int_equal(cfg.sentinels[1].port, 26379);
	assert_null(cfg.sentinels[2].user);
	assert_string_equal(cfg.sentinels[2].password, "tok");
	assert_string_equal(cfg.sentinels[2].host, "::1");
	assert_int_equal(cfg.sentinels[2].port, 5000);
	assert_null(cfg.sentinels[3].user);
	assert_null(cfg.sentinels[3].password);
	tc_config_free(&cfg);

	static const char *const bad[] = { "--redis-sentinels=s1:0",     "--redis-sentinels=s1:x",
					   "--redis-sentinels=:5",       "--redis-sentinels=[::1",
					   "--redis-sentinels=a:1,,b:2", "--redis-sentinels=u:%zz@s1",
					   "--redis-sentinels=pw@" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(load(&cfg, err, 1, bad[i]), TC_CONFIG_ERROR);
		assert_non_null(strstr(err, "--redis-sentinels / THREADCAST_REDIS_SENTINELS"));
		assert_int_equal(cfg.nsentinels, 0);
		tc_config_free(&cfg);
	}
	assert_int_equal(load(&cfg, err, 2, "--redis-sentinels=s1", "--redis-sentinel-master="), TC_CONFIG_ERROR);
	assert_non_null(strstr(err, "--redis-sentinel-master"));
	tc_config_free(&cfg);
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(defaults, clear_env),
		cmocka_unit_test_setup(rest_flavor, clear_env),
		cmocka_unit_test_setup(env_then_flag_precedence, clear_env),
		cmocka_unit_test_setup(bad_values_name_the_setting, clear_env),
		cmocka_unit_test(redis_urls),
		cmocka_unit_test(redis_tls_urls),
		cmocka_unit_test_setup(redis_tls_options, clear_env),
		cmocka_unit_test_setup(cors_origins, clear_env),
		cmocka_unit_test_setup(sentinel_lists, clear_env),
		cmocka_unit_test_setup(auth_is_on_by_default, clear_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
