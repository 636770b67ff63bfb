/*
 * config.h — every setting of threadcast, in one table.
 *
 * Each setting is a command-line flag (--name=value or --name value) and an
 * environment variable (THREADCAST_NAME); a flag wins over the environment,
 * the environment over the default. Values are validated at start-up; the
 * first bad one stops the process with a message naming the flag, the
 * variable, the value and what was expected (main exits with status 2).
 */
#ifndef TC_CONFIG_H
#define TC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "log.h"

/**
 * X(field, flag, ENV_SUFFIX, type, default, min, max, help)
 * type is INT (long long within [min, max]) or STR (min/max unused).
 */
#define TC_CONFIG_MAP(X)                                                                                                                                                                                            \
	X(host, "host", "HOST", STR, "0.0.0.0", 0, 0, "address to listen on (0.0.0.0 or :: = every interface)")                                                                                                     \
	X(port, "port", "PORT", INT, "8080", 0, 65535, "TCP port to listen on (0 = any free port, logged at start)")                                                                                                \
	X(redis_url, "redis-url", "REDIS_URL", STR, "redis://127.0.0.1:6379", 0, 0,                                                                                                                                 \
	  "Redis to use: redis://[[user]:password@]host[:port][/db], rediss://… (the same over TLS) or unix:///path[?db=N]")                                                                                        \
	X(redis_tls_ca, "redis-tls-ca", "REDIS_TLS_CA", STR, "", 0, 0,                                                                                                                                              \
	  "with rediss://: PEM file of the CA certificates that sign Redis' (empty: the system's trust store); the server's certificate must also name the host connected to")                                      \
	X(redis_tls_cert, "redis-tls-cert", "REDIS_TLS_CERT", STR, "", 0, 0,                                                                                                                                        \
	  "with rediss://: PEM file of a client certificate (and its chain) to present, for Redis' tls-auth-clients; needs --redis-tls-key")                                                                        \
	X(redis_tls_key, "redis-tls-key", "REDIS_TLS_KEY", STR, "", 0, 0,                                                                                                                                           \
	  "with rediss://: PEM file of the client certificate's private key (unencrypted)")                                                                                                                         \
	X(redis_sentinels, "redis-sentinels", "REDIS_SENTINELS", STR, "", 0, 0,                                                                                                                                     \
	  "comma-separated Sentinel [[user]:password@]host:port list; when set, the master is asked of them and followed through failovers (the URL then gives only credentials, db and TLS)")                      \
	X(redis_sentinel_master, "redis-sentinel-master", "REDIS_SENTINEL_MASTER", STR, "mymaster", 0, 0,                                                                                                           \
	  "the master's name at the Sentinels")                                                                                                                                                                     \
	X(log_level, "log-level", "LOG_LEVEL", STR, "info", 0, 0, "debug, info, warn or error")                                                                                                                     \
	X(max_frame_bytes, "max-frame-bytes", "MAX_FRAME_BYTES", INT, "65536", 256, 16777216,                                                                                                                       \
	  "largest inbound WebSocket message; larger ones close with 1009")                                                                                                                                         \
	X(max_subscriptions, "max-subscriptions", "MAX_SUBSCRIPTIONS", INT, "64", 1, 100000,                                                                                                                        \
	  "subscriptions one connection may hold")                                                                                                                                                                  \
	X(max_queue_bytes, "max-queue-bytes", "MAX_QUEUE_BYTES", INT, "1048576", 4096, 1073741824,                                                                                                                  \
	  "outbound bytes queued per connection before it is cut off (frames of more than a quarter of it, big events, count apart up to 40 MiB)")                                                                  \
	X(max_replay, "max-replay", "MAX_REPLAY", INT, "100000", 1, 100000000,                                                                                                                                      \
	  "events one subscribe, reconnect or SSE stream replays at most; older ones are skipped and counted in missedEvents")                                                                                      \
	X(max_connections, "max-connections", "MAX_CONNECTIONS", INT, "100000", 1, 10000000,                                                                                                                        \
	  "WebSocket connections one process accepts")                                                                                                                                                              \
	X(handshake_timeout_s, "handshake-timeout", "HANDSHAKE_TIMEOUT", INT, "30", 1, 3600,                                                                                                                        \
	  "seconds a client has to complete its HTTP request or upgrade")                                                                                                                                           \
	X(redis_backoff_min_ms, "redis-backoff-min", "REDIS_BACKOFF_MIN", INT, "100", 1, 600000,                                                                                                                    \
	  "first Redis reconnect delay, milliseconds")                                                                                                                                                              \
	X(redis_backoff_max_ms, "redis-backoff-max", "REDIS_BACKOFF_MAX", INT, "5000", 1, 600000,                                                                                                                   \
	  "longest Redis reconnect delay, milliseconds")                                                                                                                                                            \
	X(redis_ping_ms, "redis-ping-interval", "REDIS_PING_INTERVAL", INT, "1000", 50, 600000,                                                                                                                     \
	  "Redis health-check period; a PING unanswered for one period marks Redis slow (unready), five periods reconnect")                                                                                         \
	X(drain_grace_ms, "drain-grace", "DRAIN_GRACE", INT, "10000", 0, 3600000,                                                                                                                                   \
	  "on SIGTERM, first fail /readyz this long while still serving new requests (a balancer stops routing here), milliseconds")                                                                                \
	X(drain_timeout_ms, "drain-timeout", "DRAIN_TIMEOUT", INT, "5000", 0, 3600000,                                                                                                                              \
	  "on SIGTERM, how long to wait for clients to finish closing, milliseconds")                                                                                                                               \
	X(drain_spread_ms, "drain-spread", "DRAIN_SPREAD", INT, "2000", 0, 3600000,                                                                                                                                 \
	  "on SIGTERM, close connections evenly over this many ms (no reconnect stampede)")                                                                                                                         \
	X(auth, "auth", "AUTH", STR, "jwt", 0, 0,                                                                                                                                                                   \
	  "jwt: every client needs a bearer token; off: anyone may read any thread")                                                                                                                                \
	X(jwt_key, "jwt-key", "JWT_KEY", STR, "", 0, 0,                                                                                                                                                             \
	  "file with the HS256 secret, or the RS256/ES256 PEM public key")                                                                                                                                          \
	X(jwt_alg, "jwt-alg", "JWT_ALG", STR, "RS256", 0, 0,                                                                                                                                                        \
	  "the one algorithm accepted with --jwt-key: HS256, RS256 or ES256")                                                                                                                                       \
	X(jwt_jwks, "jwt-jwks", "JWT_JWKS", STR, "", 0, 0,                                                                                                                                                          \
	  "file with a JWKS (JSON Web Key Set) to verify tokens with, instead of --jwt-key: RSA (RS256), EC P-256 (ES256) and oct (HS256) keys chosen by kid; re-read when it changes and on SIGHUP")               \
	X(jwt_audience, "jwt-audience", "JWT_AUDIENCE", STR, "", 0, 0, "when set, tokens must carry this aud")                                                                                                      \
	X(jwt_issuer, "jwt-issuer", "JWT_ISSUER", STR, "", 0, 0, "when set, tokens must carry this iss")                                                                                                            \
	X(allowed_origins, "allowed-origins", "ALLOWED_ORIGINS", STR, "", 0, 0,                                                                                                                                     \
	  "comma-separated browser Origins allowed to connect (empty: any)")                                                                                                                                        \
	X(cors_origins, "cors-origins", "CORS_ORIGINS", STR, "", 0, 0,                                                                                                                                              \
	  "comma-separated browser Origins whose pages may call the HTTP API (CORS: preflights answered, Location and Content-Location exposed): origins, * for any, or scheme://host:* for any port; empty: none") \
	X(commands, "commands", "COMMANDS", STR, "on", 0, 0,                                                                                                                                                        \
	  "on: forward runtime commands (run.start, input.*, state.*) to agent workers; off: answer not_supported")                                                                                                 \
	X(command_timeout_ms, "command-timeout", "COMMAND_TIMEOUT", INT, "30000", 100, 3600000,                                                                                                                     \
	  "how long a runtime command may wait for a worker's answer, milliseconds")                                                                                                                                \
	X(max_inflight, "max-inflight-commands", "MAX_INFLIGHT_COMMANDS", INT, "64", 1, 100000,                                                                                                                     \
	  "runtime commands one connection may have waiting for answers")                                                                                                                                           \
	X(ping_interval_s, "ping-interval", "PING_INTERVAL", INT, "30", 1, 3600,                                                                                                                                    \
	  "seconds a WebSocket may be silent before the server PINGs it")                                                                                                                                           \
	X(idle_timeout_s, "idle-timeout", "IDLE_TIMEOUT", INT, "75", 2, 7200,                                                                                                                                       \
	  "seconds without any frame (PONGs count) before a WebSocket is dropped")                                                                                                                                  \
	X(max_command_rate, "max-command-rate", "MAX_COMMAND_RATE", INT, "1000", 1, 1000000,                                                                                                                        \
	  "commands per second one connection may send (token bucket refill)")                                                                                                                                      \
	X(max_command_burst, "max-command-burst", "MAX_COMMAND_BURST", INT, "10000", 1, 10000000,                                                                                                                   \
	  "commands one connection may send at once (token bucket size)")                                                                                                                                           \
	X(sse_heartbeat_ms, "sse-heartbeat", "SSE_HEARTBEAT", INT, "15000", 100, 3600000,                                                                                                                           \
	  "interval of \": heartbeat\" comments on SSE streams, milliseconds")                                                                                                                                      \
	X(deflate, "deflate", "DEFLATE", INT, "1", 0, 9,                                                                                                                                                            \
	  "permessage-deflate for WebSockets whose client offers it: the zlib level (1 fastest … 9 smallest); 0: never negotiated")                                                                                 \
	X(static_dir, "static-dir", "STATIC_DIR", STR, "", 0, 0,                                                                                                                                                    \
	  "serve the files of this directory over HTTP (the demo page: protocol/js); empty: off")                                                                                                                   \
	X(rest_flavor, "rest-flavor", "REST_FLAVOR", STR, "javascript", 0, 0,                                                                                                                                       \
	  "the LangGraph server (javascript or python) the REST API answers as where no graph decides: new threads, the store, errors of no graph (a graph's routes: its workers' language)")                       \
	X(test_truncate, "test-truncate", "TEST_TRUNCATE", INT, "0", 0, 1,                                                                                                                                          \
	  "1: serve POST /internal/truncate, which deletes every REST thread, run, assistant and store item (the LangGraph reference server's test suite wipes with it); never in production")

/** The parsed Redis location. */
struct tc_redis_addr {
	char *host; /**< NULL for a unix socket */
	int port;
	char *unix_path; /**< NULL for TCP */
	char *user;      /**< NULL when the URL has none (AUTH with password only) */
	char *password;  /**< NULL when the URL has none */
	int db;          /**< SELECTed after connecting when non-zero */
	bool tls;        /**< rediss://: every link runs TLS (tls.h) */
};

struct tc_tls;

#define TC__CFG_FIELD_INT(f) long long f;
#define TC__CFG_FIELD_STR(f) char *f;
#define TC__CFG_FIELD(f, flag, env, type, def, min, max, help) TC__CFG_FIELD_##type(f)

/** Every setting, plus values derived from them. Owns its strings. */
struct tc_config {
	TC_CONFIG_MAP(TC__CFG_FIELD)
	enum tc_log_level log_threshold; /**< parsed log_level */
	bool commands_on;                /**< parsed commands */
	bool rest_python;                /**< parsed rest_flavor: python */
	struct tc_redis_addr redis;      /**< parsed redis_url */
	struct tc_hostport {
		char *host;
		int port;
		char *user;     /**< NULL when the entry has none */
		char *password; /**< NULL when the entry has none (no AUTH) */
	} * sentinels;          /**< parsed redis_sentinels */
	int nsentinels;
	/** With a rediss:// URL, the TLS settings of every Redis link; else NULL. */
	struct tc_tls *tls;
};

/** Result of tc_config_load(). */
enum tc_config_status {
	TC_CONFIG_OK = 0,    /**< cfg is filled in; run */
	TC_CONFIG_EXIT = 1,  /**< --help or --version was printed; exit 0 */
	TC_CONFIG_ERROR = -1 /**< err holds the message; exit 2 */
};

/**
 * Fills cfg from defaults, the environment (getenv) and argv[1..argc).
 * On TC_CONFIG_ERROR, err holds one line naming the setting and the problem.
 * Call tc_config_free() after any result.
 */
enum tc_config_status tc_config_load(struct tc_config *cfg, int argc, char **argv, char *err, size_t errlen);

/** Frees every string cfg owns. */
void tc_config_free(struct tc_config *cfg);

/**
 * Parses a Redis URL into addr (freed by tc_redis_addr_free). Returns 0, or -1
 * with a message in err.
 */
int tc_redis_addr_parse(const char *url, struct tc_redis_addr *addr, char *err, size_t errlen);
/** Frees the strings of addr. */
void tc_redis_addr_free(struct tc_redis_addr *addr);

/**
 * url as logs may show it: a password in its userinfo replaced by "***"
 * (redis://alice:***@host). Writes at most outlen bytes to out; returns out.
 */
const char *tc_redis_url_redact(const char *url, char *out, size_t outlen);

/** Prints the flag/env/default table (for --help) to f. */
void tc_config_usage(FILE *out);

#endif
