#include "auth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct tc_auth {
	jwt_alg_t alg;
	unsigned char *key;
	size_t keylen;
	const char *audience, *issuer; /* point into the config; NULL = unchecked */
};

static int read_file(const char *path, unsigned char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 4096, n = 0;
	unsigned char *buf = tc_xmalloc(cap);
	size_t r;
	while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			if (cap >= 1 << 20)
				break; /* no key file is a megabyte */
			cap *= 2;
			buf = tc_xrealloc(buf, cap);
		}
	}
	fclose(f);
	*out = buf;
	*len = n;
	return 0;
}

struct tc_auth *tc_auth_new(const struct tc_config *cfg, bool *off, char *err, size_t errlen)
{
	*off = !strcmp(cfg->auth, "off");
	if (*off)
		return NULL;
	struct tc_auth *a = tc_xcalloc(1, sizeof(*a));
	a->alg = !strcmp(cfg->jwt_alg, "HS256") ? JWT_ALG_HS256 :
		 !strcmp(cfg->jwt_alg, "ES256") ? JWT_ALG_ES256 : JWT_ALG_RS256;
	if (read_file(cfg->jwt_key, &a->key, &a->keylen)) {
		snprintf(err, errlen, "--jwt-key / THREADCAST_JWT_KEY: cannot read \"%s\": %s", cfg->jwt_key,
			 strerror(errno));
		free(a);
		return NULL;
	}
	/* A secret file usually ends with a newline nobody meant as key material. */
	if (a->alg == JWT_ALG_HS256)
		while (a->keylen && (a->key[a->keylen - 1] == '\n' || a->key[a->keylen - 1] == '\r'))
			a->keylen--;
	if (a->alg != JWT_ALG_HS256 && !strstr((char *)a->key, "-----BEGIN PUBLIC KEY-----")) {
		snprintf(err, errlen, "--jwt-key: %s needs a PEM public key (-----BEGIN PUBLIC KEY-----)",
			 cfg->jwt_alg);
		tc_auth_free(a);
		return NULL;
	}
	a->audience = *cfg->jwt_audience ? cfg->jwt_audience : NULL;
	a->issuer = *cfg->jwt_issuer ? cfg->jwt_issuer : NULL;
	return a;
}

void tc_auth_free(struct tc_auth *a)
{
	if (!a)
		return;
	free(a->key);
	free(a);
}

static bool thread_listed(const char *json, const char *thread)
{
	cJSON *list = cJSON_Parse(json), *it;
	bool ok = false;
	cJSON_ArrayForEach(it, list) {
		if (!cJSON_IsString(it))
			continue;
		const char *p = it->valuestring;
		size_t n = strlen(p);
		if (n && p[n - 1] == '*' ? !strncmp(p, thread, n - 1) : !strcmp(p, thread)) {
			ok = true;
			break;
		}
	}
	cJSON_Delete(list);
	return ok;
}

/* The audience claim may be a string or an array of strings. */
static bool audience_ok(jwt_t *jwt, const char *want)
{
	const char *s = jwt_get_grant(jwt, "aud");
	if (s)
		return !strcmp(s, want);
	char *json = jwt_get_grants_json(jwt, "aud");
	bool ok = json && thread_listed(json, want) && !strchr(want, '*');
	free(json);
	return ok;
}

enum tc_auth_result tc_auth_check(const struct tc_auth *a, const char *token, const char *thread,
				  int64_t now, struct tc_grant *g, char *why, size_t whylen)
{
	jwt_t *jwt = NULL;
	enum tc_auth_result rc;

	if (!token || !*token) {
		snprintf(why, whylen, "a bearer token is required (Authorization header or access_token)");
		return TC_AUTH_MISSING;
	}
	if (jwt_decode(&jwt, token, a->key, (int)a->keylen) || !jwt) {
		snprintf(why, whylen, "the token is malformed or its signature does not verify");
		return TC_AUTH_INVALID;
	}
	if (jwt_get_alg(jwt) != a->alg) {
		snprintf(why, whylen, "the token is signed with %s; this server accepts only %s",
			 jwt_alg_str(jwt_get_alg(jwt)), jwt_alg_str(a->alg));
		rc = TC_AUTH_INVALID;
		goto out;
	}
	errno = 0;
	long exp = jwt_get_grant_int(jwt, "exp");
	if (errno || exp <= 0) {
		snprintf(why, whylen, "the token has no exp claim");
		rc = TC_AUTH_INVALID;
		goto out;
	}
	if (exp <= now) {
		snprintf(why, whylen, "the token expired");
		rc = TC_AUTH_EXPIRED;
		goto out;
	}
	errno = 0;
	long nbf = jwt_get_grant_int(jwt, "nbf");
	if (!errno && nbf > now) {
		snprintf(why, whylen, "the token is not valid yet (nbf)");
		rc = TC_AUTH_EXPIRED;
		goto out;
	}
	if (a->issuer && (!jwt_get_grant(jwt, "iss") || strcmp(jwt_get_grant(jwt, "iss"), a->issuer))) {
		snprintf(why, whylen, "the token's issuer is not accepted");
		rc = TC_AUTH_INVALID;
		goto out;
	}
	if (a->audience && !audience_ok(jwt, a->audience)) {
		snprintf(why, whylen, "the token's audience is not this server");
		rc = TC_AUTH_INVALID;
		goto out;
	}
	char *threads = jwt_get_grants_json(jwt, "threads");
	bool allowed = threads && thread_listed(threads, thread);
	free(threads);
	if (!allowed) {
		snprintf(why, whylen, "the token does not grant thread \"%s\"", thread);
		rc = TC_AUTH_FORBIDDEN;
		goto out;
	}
	char *cmds = jwt_get_grants_json(jwt, "commands");
	g->commands = cmds && !strcmp(cmds, "true");
	free(cmds);
	g->exp = exp;
	rc = TC_AUTH_OK;
out:
	jwt_free(jwt);
	return rc;
}

bool tc_origin_allowed(const struct tc_config *cfg, const char *origin)
{
	const char *list = cfg->allowed_origins;
	if (!*list || !origin)
		return true; /* no list: any; no Origin header: not a browser */
	size_t n = strlen(origin);
	for (const char *p = list; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if ((len == n && !strncmp(p, origin, n)) || (len == 1 && *p == '*'))
			return true;
		if (!comma)
			break;
		p = comma + 1;
	}
	return false;
}
