#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tls.h"
#include "util.h"

enum setting_type { INT, STR };

struct setting {
	const char *flag;
	const char *env;
	enum setting_type type;
	const char *def;
	long long min, max;
	const char *help;
	size_t offset;
};

#define TC__CFG_ROW(f, fl, en, ty, de, mi, ma, he)                                                                     \
	{ fl, "THREADCAST_" en, ty, de, mi, ma, he, offsetof(struct tc_config, f) },

static const struct setting settings[] = { TC_CONFIG_MAP(TC__CFG_ROW) };
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Stores one value; where names the source for the error message. */
static int assign(struct tc_config *cfg, const struct setting *s, const char *value, const char *where, char *err,
		  size_t errlen)
{
	char *p = (char *)cfg + s->offset;

	if (s->type == STR) {
		char **dst = (char **)(void *)p;
		free(*dst);
		*dst = tc_xstrdup(value);
		return 0;
	}

	char *end;
	errno = 0;
	long long v = strtoll(value, &end, 10);
	if (errno || end == value || *end || v < s->min || v > s->max) {
		seterr(err, errlen, "%s: \"%s\" is not valid: expected an integer from %lld to %lld", where, value,
		       s->min, s->max);
		return -1;
	}
	*(long long *)(void *)p = v;
	return 0;
}

void tc_config_usage(FILE *out)
{
	fprintf(out, "usage: threadcast [--flag=value ...]\n\n"
		     "Every flag can also be set by its environment variable; a flag wins.\n\n");
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		fprintf(out, "  --%-22s %-32s default %s\n      %s\n", s->flag, s->env, *s->def ? s->def : "(empty)",
			s->help);
	}
	fprintf(out, "  --help                     this text\n"
		     "  --version                  print the version\n");
}

static const struct setting *find_flag(const char *name, size_t len)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strlen(settings[i].flag) == len && !strncmp(settings[i].flag, name, len))
			return &settings[i];
	return NULL;
}

static void free_sentinels(struct tc_config *cfg)
{
	for (int i = 0; i < cfg->nsentinels; i++) {
		free(cfg->sentinels[i].host);
		free(cfg->sentinels[i].user);
		free(cfg->sentinels[i].password);
	}
	free(cfg->sentinels);
	cfg->sentinels = NULL;
	cfg->nsentinels = 0;
}

static int parse_userinfo(const char *p, size_t len, char **user, char **password, char *err, size_t errlen);

/*
 * "host:port,[v6]:port,host" (port 26379 when absent), each entry with an
 * optional "[user]:password@" or "password@" as in a URL, into
 * cfg->sentinels.
 */
static int parse_sentinels(struct tc_config *cfg, char *err, size_t errlen)
{
	free_sentinels(cfg);
	for (const char *p = cfg->redis_sentinels; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *user = NULL, *password = NULL;
		const char *at = NULL;
		for (const char *c = p; c < p + len; c++)
			if (*c == '@')
				at = c;
		if (at) {
			char uerr[80];
			if (parse_userinfo(p, (size_t)(at - p), &user, &password, uerr, sizeof(uerr))) {
				seterr(err, errlen, "--redis-sentinels / THREADCAST_REDIS_SENTINELS: %s", uerr);
				free_sentinels(cfg);
				return -1;
			}
			len -= (size_t)(at + 1 - p);
			p = at + 1;
		}
		const char *h = p, *colon = NULL;
		size_t hlen = len;
		if (*p == '[') {
			const char *rb = memchr(p, ']', len);
			if (!rb || (rb + 1 < p + len && rb[1] != ':'))
				goto bad;
			h = p + 1;
			hlen = (size_t)(rb - h);
			colon = rb + 1 < p + len ? rb + 1 : NULL;
		} else if ((colon = memchr(p, ':', len))) {
			hlen = (size_t)(colon - p);
		}
		long port = 26379;
		if (colon) {
			char *pe;
			port = strtol(colon + 1, &pe, 10);
			if (pe != p + len || port < 1 || port > 65535)
				goto bad;
		}
		if (!hlen || hlen > 253)
			goto bad;
		cfg->sentinels = tc_xrealloc(cfg->sentinels, (size_t)(cfg->nsentinels + 1) * sizeof(*cfg->sentinels));
		cfg->sentinels[cfg->nsentinels++] =
			(struct tc_hostport){ tc_xstrndup(h, hlen), (int)port, user, password };
		p += len;
		if (*p == ',')
			p++;
		continue;
	bad:
		free(user);
		free(password);
		seterr(err, errlen, "--redis-sentinels / THREADCAST_REDIS_SENTINELS: \"%.*s\" is not host:port",
		       (int)len, p);
		free_sentinels(cfg);
		return -1;
	}
	if (cfg->nsentinels && !*cfg->redis_sentinel_master) {
		seterr(err, errlen, "--redis-sentinel-master / THREADCAST_REDIS_SENTINEL_MASTER: must not be empty");
		free_sentinels(cfg);
		return -1;
	}
	return 0;
}

/*
 * --cors-origins: each entry "*", or an origin (http:// or https://, a host,
 * an optional port or ":*"), no path.
 */
static int check_origins(const char *list, char *err, size_t errlen)
{
	for (const char *p = list; *p;) {
		const char *comma = strchr(p, ',');
		int len = comma ? (int)(comma - p) : (int)strlen(p);
		const char *host = !strncmp(p, "http://", 7) ? p + 7 : !strncmp(p, "https://", 8) ? p + 8 : NULL;
		bool ok = (len == 1 && *p == '*') ||
			  (host && host < p + len && !memchr(host, '/', (size_t)(p + len - host)));
		if (!ok) {
			seterr(err, errlen,
			       "--cors-origins / THREADCAST_CORS_ORIGINS: \"%.*s\" is not valid: expected an origin "
			       "(https://app.example.com, http://localhost:*) or *",
			       len, p);
			return -1;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

/* The TLS settings, made now so that a bad file stops the start with its name. */
static int validate_tls(struct tc_config *cfg, char *err, size_t errlen)
{
	const char *given = *cfg->redis_tls_ca     ? "--redis-tls-ca"
			    : *cfg->redis_tls_cert ? "--redis-tls-cert"
			    : *cfg->redis_tls_key  ? "--redis-tls-key"
						   : NULL;
	if (!cfg->redis.tls) {
		if (given) {
			seterr(err, errlen, "%s is set but the Redis URL is not rediss:// (TLS)", given);
			return -1;
		}
		return 0;
	}
	char terr[300];
	cfg->tls = tc_tls_new(cfg->redis_tls_ca, cfg->redis_tls_cert, cfg->redis_tls_key, terr, sizeof(terr));
	if (!cfg->tls) {
		seterr(err, errlen, "Redis TLS (--redis-tls-ca, --redis-tls-cert, --redis-tls-key): %s", terr);
		return -1;
	}
	return 0;
}

static int validate(struct tc_config *cfg, char *err, size_t errlen)
{
	if (tc_log_level_parse(cfg->log_level, &cfg->log_threshold)) {
		seterr(err, errlen,
		       "--log-level / THREADCAST_LOG_LEVEL: \"%s\" is not valid: expected debug, info, warn or error",
		       cfg->log_level);
		return -1;
	}
	if (!strcmp(cfg->commands, "on") || !strcmp(cfg->commands, "off")) {
		cfg->commands_on = !strcmp(cfg->commands, "on");
	} else {
		seterr(err, errlen, "--commands / THREADCAST_COMMANDS: \"%s\" is not valid: expected on or off",
		       cfg->commands);
		return -1;
	}
	if (!strcmp(cfg->rest_flavor, "javascript") || !strcmp(cfg->rest_flavor, "python")) {
		cfg->rest_python = !strcmp(cfg->rest_flavor, "python");
	} else {
		seterr(err, errlen,
		       "--rest-flavor / THREADCAST_REST_FLAVOR: \"%s\" is not valid: expected javascript or python",
		       cfg->rest_flavor);
		return -1;
	}
	if (strcmp(cfg->auth, "jwt") && strcmp(cfg->auth, "off")) {
		seterr(err, errlen, "--auth / THREADCAST_AUTH: \"%s\" is not valid: expected jwt or off", cfg->auth);
		return -1;
	}
	if (!strcmp(cfg->auth, "jwt") && !*cfg->jwt_key && !*cfg->jwt_jwks) {
		seterr(err, errlen,
		       "authentication is on by default: give --jwt-key (THREADCAST_JWT_KEY) "
		       "with the verifying key or --jwt-jwks (THREADCAST_JWT_JWKS) with a key set, "
		       "or run with --auth off to let anyone read");
		return -1;
	}
	if (*cfg->jwt_key && *cfg->jwt_jwks) {
		seterr(err, errlen, "--jwt-key and --jwt-jwks are exclusive: give one source of keys");
		return -1;
	}
	if (strcmp(cfg->jwt_alg, "HS256") && strcmp(cfg->jwt_alg, "RS256") && strcmp(cfg->jwt_alg, "ES256")) {
		seterr(err, errlen,
		       "--jwt-alg / THREADCAST_JWT_ALG: \"%s\" is not valid: expected HS256, RS256 or ES256",
		       cfg->jwt_alg);
		return -1;
	}
	if (*cfg->static_dir) {
		struct stat st;
		if (stat(cfg->static_dir, &st) || !S_ISDIR(st.st_mode)) {
			seterr(err, errlen, "--static-dir / THREADCAST_STATIC_DIR: \"%s\" is not a directory",
			       cfg->static_dir);
			return -1;
		}
	}
	if (!*cfg->host) {
		seterr(err, errlen, "--host / THREADCAST_HOST: must not be empty");
		return -1;
	}
	if (check_origins(cfg->cors_origins, err, errlen))
		return -1;
	if (cfg->idle_timeout_s <= cfg->ping_interval_s) {
		seterr(err, errlen, "--idle-timeout (%lld) must exceed --ping-interval (%lld)", cfg->idle_timeout_s,
		       cfg->ping_interval_s);
		return -1;
	}
	if (cfg->redis_backoff_min_ms > cfg->redis_backoff_max_ms) {
		seterr(err, errlen, "--redis-backoff-min (%lld) must not exceed --redis-backoff-max (%lld)",
		       cfg->redis_backoff_min_ms, cfg->redis_backoff_max_ms);
		return -1;
	}
	if (parse_sentinels(cfg, err, errlen))
		return -1;
	char rerr[200];
	if (tc_redis_addr_parse(cfg->redis_url, &cfg->redis, rerr, sizeof(rerr))) {
		seterr(err, errlen, "--redis-url / THREADCAST_REDIS_URL: \"%s\" is not valid: %s", cfg->redis_url,
		       rerr);
		return -1;
	}
	return validate_tls(cfg, err, errlen);
}

enum tc_config_status tc_config_load(struct tc_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	char where[160];

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NSETTINGS; i++)
		if (assign(cfg, &settings[i], settings[i].def, "default", err, errlen))
			return TC_CONFIG_ERROR; /* a bad default is a bug; tests catch it */

	for (size_t i = 0; i < NSETTINGS; i++) {
		const char *v = getenv(settings[i].env);
		if (!v)
			continue;
		snprintf(where, sizeof(where), "%s", settings[i].env);
		if (assign(cfg, &settings[i], v, where, err, errlen))
			return TC_CONFIG_ERROR;
	}

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			tc_config_usage(stdout);
			return TC_CONFIG_EXIT;
		}
		if (!strcmp(a, "--version")) {
			printf("threadcast %s\n", TC_VERSION);
			return TC_CONFIG_EXIT;
		}
		if (strncmp(a, "--", 2)) {
			seterr(err, errlen, "unexpected argument \"%s\" (try --help)", a);
			return TC_CONFIG_ERROR;
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		const struct setting *s = find_flag(name, nlen);
		if (!s) {
			seterr(err, errlen, "unknown flag \"--%.*s\" (try --help)", (int)nlen, name);
			return TC_CONFIG_ERROR;
		}
		const char *value = eq ? eq + 1 : NULL;
		if (!value) {
			if (i + 1 >= argc) {
				seterr(err, errlen, "--%s needs a value", s->flag);
				return TC_CONFIG_ERROR;
			}
			value = argv[++i];
		}
		snprintf(where, sizeof(where), "--%s", s->flag);
		if (assign(cfg, s, value, where, err, errlen))
			return TC_CONFIG_ERROR;
	}
	return validate(cfg, err, errlen) ? TC_CONFIG_ERROR : TC_CONFIG_OK;
}

void tc_config_free(struct tc_config *cfg)
{
	for (size_t i = 0; i < NSETTINGS; i++) {
		if (settings[i].type == STR) {
			char **p = (char **)(void *)((char *)cfg + settings[i].offset);
			free(*p);
			*p = NULL;
		}
	}
	tc_redis_addr_free(&cfg->redis);
	free_sentinels(cfg);
	tc_tls_free(cfg->tls);
	cfg->tls = NULL;
}

/* ---- Redis URL ---------------------------------------------------------- */

/* Percent-decodes s[0..len) into a new string; NULL on a bad escape. */
static char *pct_decode(const char *s, size_t len)
{
	char *out = tc_xmalloc(len + 1);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '%') {
			out[o++] = s[i];
			continue;
		}
		int hi = i + 2 < len ? tc_hex_value(s[i + 1]) : -1;
		int lo = i + 2 < len ? tc_hex_value(s[i + 2]) : -1;
		if (hi < 0 || lo < 0) {
			free(out);
			return NULL;
		}
		out[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	out[o] = '\0';
	return out;
}

/*
 * A URL's userinfo, p[0..len): "user:password", ":password" or "password"
 * (the common "password only" form: redis://secret@host), %-escaped.
 */
static int parse_userinfo(const char *p, size_t len, char **user, char **password, char *err, size_t errlen)
{
	const char *colon = memchr(p, ':', len);
	if (colon && colon > p && !(*user = pct_decode(p, (size_t)(colon - p)))) {
		seterr(err, errlen, "bad %%-escape in the user");
		return -1;
	}
	const char *pw = colon ? colon + 1 : p;
	if (!(*password = pct_decode(pw, (size_t)(p + len - pw)))) {
		free(*user);
		*user = NULL;
		seterr(err, errlen, "bad %%-escape in the password");
		return -1;
	}
	return 0;
}

static int parse_int_range(const char *s, size_t len, long long min, long long max, long long *out)
{
	if (len == 0 || len > 10)
		return -1;
	long long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int tc_redis_addr_parse(const char *url, struct tc_redis_addr *a, char *err, size_t errlen)
{
	long long v;

	memset(a, 0, sizeof(*a));
	if (!strncmp(url, "unix://", 7)) {
		const char *path = url + 7, *q = strchr(path, '?');
		size_t plen = q ? (size_t)(q - path) : strlen(path);
		if (plen == 0 || path[0] != '/') {
			seterr(err, errlen, "a unix:// URL needs an absolute socket path");
			return -1;
		}
		a->unix_path = tc_xstrndup(path, plen);
		if (q) {
			if (strncmp(q, "?db=", 4) || parse_int_range(q + 4, strlen(q + 4), 0, 100000, &v)) {
				seterr(err, errlen, "the only query allowed is ?db=N");
				goto fail;
			}
			a->db = (int)v;
		}
		return 0;
	}
	if (!strncmp(url, "rediss://", 9)) {
		a->tls = true;
	} else if (strncmp(url, "redis://", 8)) {
		seterr(err, errlen, "the scheme must be redis://, rediss:// (TLS) or unix://");
		return -1;
	}
	const char *p = url + (a->tls ? 9 : 8);
	const char *slash = strchr(p, '/');
	const char *auth_end = NULL;
	/* Userinfo ends at the last '@' before the path; a '/' or '@' inside a
	 * password must be %-escaped, as in any URL. */
	for (const char *c = p; *c && c != slash; c++)
		if (*c == '@')
			auth_end = c;
	if (auth_end) {
		if (parse_userinfo(p, (size_t)(auth_end - p), &a->user, &a->password, err, errlen))
			goto fail;
		p = auth_end + 1;
	}
	const char *hend = slash ? slash : p + strlen(p);
	const char *port = NULL;
	const char *host = p;
	size_t hlen;
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(hend - p));
		if (!rb) {
			seterr(err, errlen, "unterminated [IPv6] host");
			goto fail;
		}
		host = p + 1;
		hlen = (size_t)(rb - host);
		if (rb + 1 < hend) {
			if (rb[1] != ':') {
				seterr(err, errlen, "unexpected text after ]");
				goto fail;
			}
			port = rb + 2;
		}
	} else {
		const char *colon = memchr(p, ':', (size_t)(hend - p));
		hlen = colon ? (size_t)(colon - p) : (size_t)(hend - p);
		if (colon)
			port = colon + 1;
	}
	if (hlen == 0) {
		seterr(err, errlen, "the host is missing");
		goto fail;
	}
	a->host = tc_xstrndup(host, hlen);
	a->port = 6379;
	if (port) {
		if (parse_int_range(port, (size_t)(hend - port), 1, 65535, &v)) {
			seterr(err, errlen, "the port must be a number from 1 to 65535");
			goto fail;
		}
		a->port = (int)v;
	}
	if (slash && slash[1]) {
		if (parse_int_range(slash + 1, strlen(slash + 1), 0, 100000, &v)) {
			seterr(err, errlen, "the path must be a database number");
			goto fail;
		}
		a->db = (int)v;
	}
	return 0;
fail:
	tc_redis_addr_free(a);
	return -1;
}

void tc_redis_addr_free(struct tc_redis_addr *a)
{
	free(a->host);
	free(a->unix_path);
	free(a->user);
	free(a->password);
	memset(a, 0, sizeof(*a));
}

const char *tc_redis_url_redact(const char *url, char *out, size_t outlen)
{
	const char *scheme = strstr(url, "://");
	const char *host = scheme ? scheme + 3 : url;
	const char *slash = strchr(host, '/'), *at = NULL;
	for (const char *c = host; *c && c != slash; c++)
		if (*c == '@')
			at = c;
	if (!at) {
		snprintf(out, outlen, "%s", url);
		return out;
	}
	const char *colon = memchr(host, ':', (size_t)(at - host));
	/* user:password@ keeps the user; password@ is all password. */
	int keep = colon ? (int)(colon + 1 - url) : (int)(host - url);
	snprintf(out, outlen, "%.*s***%s", keep, url, at);
	return out;
}
