#include "auth.h"

#include <errno.h>
#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

/* One verifying key, bound to the one algorithm it may verify. */
struct key {
	char *kid; /* NULL: the --jwt-key key, whatever kid a token names */
	jwt_alg_t alg;
	unsigned char *material; /* HS256: the secret; else a PEM public key */
	size_t len;
};

struct tc_auth {
	const struct tc_config *cfg;
	struct key *keys;
	size_t nkeys, skipped;
	/* The key file as it was when read, to notice a rotation. */
	off_t size;
	struct timespec mtime;
	const char *audience, *issuer; /* point into the config; NULL = unchecked */
};

/* No key file is this large; a bigger one is a mistake, not a key. */
#define KEY_FILE_MAX (1 << 20)

static int read_file(const char *path, unsigned char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 4096, n = 0;
	unsigned char *buf = tc_xmalloc(cap + 1);
	size_t r;
	while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			if (cap >= KEY_FILE_MAX)
				break;
			cap *= 2;
			buf = tc_xrealloc(buf, cap + 1);
		}
	}
	fclose(f);
	buf[n] = '\0'; /* PEM and JSON are read as strings */
	*out = buf;
	*len = n;
	return 0;
}

static void keys_free(struct key *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(keys[i].kid);
		free(keys[i].material);
	}
	free(keys);
}

/* ==== JWK → PEM ============================================================================ */

/* A DER encoder just big enough for a SubjectPublicKeyInfo. */
struct der {
	unsigned char buf[2048];
	size_t len;
	bool overflow;
};

static void der_put(struct der *d, const void *p, size_t n)
{
	if (d->overflow || d->len + n > sizeof(d->buf)) {
		d->overflow = true;
		return;
	}
	memcpy(d->buf + d->len, p, n);
	d->len += n;
}

/* Tag and definite length; the content follows with der_put. */
static void der_head(struct der *d, unsigned char tag, size_t n)
{
	unsigned char h[4] = { tag };
	size_t hl;
	if (n < 0x80) {
		h[1] = (unsigned char)n;
		hl = 2;
	} else if (n < 0x100) {
		h[1] = 0x81;
		h[2] = (unsigned char)n;
		hl = 3;
	} else {
		h[1] = 0x82;
		h[2] = (unsigned char)(n >> 8);
		h[3] = (unsigned char)n;
		hl = 4;
	}
	der_put(d, h, hl);
}

static size_t der_head_len(size_t n)
{
	return n < 0x80 ? 2 : n < 0x100 ? 3 : 4;
}

/* An unsigned big-endian integer as a DER INTEGER: no leading zeros, but one
 * zero byte when the top bit is set (else it would read as negative). */
static size_t der_uint_len(const unsigned char *p, size_t n)
{
	while (n > 1 && !*p) {
		p++;
		n--;
	}
	size_t body = n + (*p & 0x80 ? 1 : 0);
	return der_head_len(body) + body;
}

static void der_uint(struct der *d, const unsigned char *p, size_t n)
{
	while (n > 1 && !*p) {
		p++;
		n--;
	}
	bool pad = *p & 0x80;
	der_head(d, 0x02, n + pad);
	if (pad)
		der_put(d, "", 1);
	der_put(d, p, n);
}

/* SEQUENCE { SEQUENCE { algorithm OID [, parameters] }, BIT STRING { key } },
 * with the key's own encoding already in key[0..klen). */
static void der_spki(struct der *d, const unsigned char *alg, size_t alen, const unsigned char *key, size_t klen)
{
	size_t bits = der_head_len(klen + 1) + klen + 1;
	der_head(d, 0x30, der_head_len(alen) + alen + bits);
	der_head(d, 0x30, alen);
	der_put(d, alg, alen);
	der_head(d, 0x03, klen + 1);
	der_put(d, "", 1); /* no unused bits */
	der_put(d, key, klen);
}

/* Standard base64 in 64-column lines between PEM armour. */
static char *pem_wrap(const unsigned char *der, size_t len)
{
	char *b = tc_base64url_encode(der, len);
	size_t bl = strlen(b), pad = (4 - bl % 4) % 4;
	char *out = tc_xmalloc(64 + bl + pad + bl / 64 + 2 + 64);
	size_t o = (size_t)sprintf(out, "-----BEGIN PUBLIC KEY-----\n");
	for (size_t i = 0; i < bl + pad; i++) {
		char c = i < bl ? b[i] : '=';
		out[o++] = c == '-' ? '+' : c == '_' ? '/' : c;
		if (i % 64 == 63)
			out[o++] = '\n';
	}
	if ((bl + pad) % 64)
		out[o++] = '\n';
	sprintf(out + o, "-----END PUBLIC KEY-----\n");
	free(b);
	return out;
}

/* A base64url member of a JWK, decoded; NULL unless it has [min, max] bytes. */
static unsigned char *jwk_bytes(const cJSON *jwk, const char *name, size_t min, size_t max, size_t *len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(jwk, name);
	if (!cJSON_IsString(v))
		return NULL;
	char *raw = tc_base64url_decode(v->valuestring, strlen(v->valuestring), len);
	if (raw && (*len < min || *len > max)) {
		free(raw);
		raw = NULL;
	}
	return (unsigned char *)raw;
}

char *tc_jwk_to_pem(const cJSON *jwk, char *why, size_t whylen)
{
	/* rsaEncryption, NULL parameters */
	static const unsigned char rsa_alg[] = { 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7,
						 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00 };
	/* id-ecPublicKey, prime256v1 */
	static const unsigned char ec_alg[] = { 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06,
						0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
	const cJSON *kty = cJSON_GetObjectItemCaseSensitive(jwk, "kty");
	struct der d = { .len = 0 };
	char *pem = NULL;

	if (cJSON_IsString(kty) && !strcmp(kty->valuestring, "RSA")) {
		size_t nl, el;
		/* 1024 to 8192 bits; e up to 8 bytes (65537 is 3). */
		unsigned char *n = jwk_bytes(jwk, "n", 128, 1024, &nl), *e = jwk_bytes(jwk, "e", 1, 8, &el);
		if (!n || !e) {
			snprintf(why, whylen, "an RSA key needs n (1024 to 8192 bits) and e, base64url");
		} else {
			struct der key = { .len = 0 };
			der_head(&key, 0x30, der_uint_len(n, nl) + der_uint_len(e, el));
			der_uint(&key, n, nl);
			der_uint(&key, e, el);
			der_spki(&d, rsa_alg, sizeof(rsa_alg), key.buf, key.len);
			pem = key.overflow || d.overflow ? NULL : pem_wrap(d.buf, d.len);
			if (!pem)
				snprintf(why, whylen, "the RSA key is too large");
		}
		free(n);
		free(e);
		return pem;
	}
	if (cJSON_IsString(kty) && !strcmp(kty->valuestring, "EC")) {
		const cJSON *crv = cJSON_GetObjectItemCaseSensitive(jwk, "crv");
		size_t xl, yl;
		if (!cJSON_IsString(crv) || strcmp(crv->valuestring, "P-256")) {
			snprintf(why, whylen, "EC keys must be on curve P-256 (ES256)");
			return NULL;
		}
		unsigned char *x = jwk_bytes(jwk, "x", 32, 32, &xl), *y = jwk_bytes(jwk, "y", 32, 32, &yl);
		if (x && y) {
			unsigned char point[65] = { 0x04 }; /* uncompressed */
			memcpy(point + 1, x, 32);
			memcpy(point + 33, y, 32);
			der_spki(&d, ec_alg, sizeof(ec_alg), point, sizeof(point));
			pem = pem_wrap(d.buf, d.len);
		} else {
			snprintf(why, whylen, "a P-256 key needs x and y of 32 bytes each, base64url");
		}
		free(x);
		free(y);
		return pem;
	}
	snprintf(why, whylen, "key type %s is not supported (RSA, EC or oct)",
		 cJSON_IsString(kty) ? kty->valuestring : "(none)");
	return NULL;
}

/* ==== loading keys ========================================================================== */

static jwt_alg_t alg_of(const char *name)
{
	return !strcmp(name, "HS256")   ? JWT_ALG_HS256
	       : !strcmp(name, "RS256") ? JWT_ALG_RS256
	       : !strcmp(name, "ES256") ? JWT_ALG_ES256
					: JWT_ALG_INVAL;
}

/* One JWK into k; -1 with why when this server cannot use it. */
static int jwk_load(const cJSON *jwk, struct key *k, char *why, size_t whylen)
{
	const cJSON *kty = cJSON_GetObjectItemCaseSensitive(jwk, "kty");
	const cJSON *alg = cJSON_GetObjectItemCaseSensitive(jwk, "alg");
	const cJSON *use = cJSON_GetObjectItemCaseSensitive(jwk, "use");
	const cJSON *kid = cJSON_GetObjectItemCaseSensitive(jwk, "kid");

	memset(k, 0, sizeof(*k));
	if (use && (!cJSON_IsString(use) || strcmp(use->valuestring, "sig"))) {
		snprintf(why, whylen, "its use is not sig");
		return -1;
	}
	if (!cJSON_IsString(kty)) {
		snprintf(why, whylen, "kty is missing");
		return -1;
	}
	const char *t = kty->valuestring;
	k->alg = !strcmp(t, "RSA")   ? JWT_ALG_RS256
		 : !strcmp(t, "EC")  ? JWT_ALG_ES256
		 : !strcmp(t, "oct") ? JWT_ALG_HS256
				     : JWT_ALG_INVAL;
	if (k->alg == JWT_ALG_INVAL) {
		snprintf(why, whylen, "key type %s is not supported (RSA, EC or oct)", t);
		return -1;
	}
	if (alg && (!cJSON_IsString(alg) || alg_of(alg->valuestring) != k->alg)) {
		snprintf(why, whylen, "alg %s is not supported for kty %s (RS256 for RSA, ES256 for EC, HS256 for oct)",
			 cJSON_IsString(alg) ? alg->valuestring : "?", t);
		return -1;
	}
	if (kid && !cJSON_IsString(kid)) {
		snprintf(why, whylen, "kid must be a string");
		return -1;
	}
	if (k->alg == JWT_ALG_HS256) {
		unsigned char *secret = jwk_bytes(jwk, "k", 16, 4096, &k->len);
		if (!secret) {
			snprintf(why, whylen, "an oct key needs k, 16 to 4096 bytes, base64url");
			return -1;
		}
		k->material = secret;
	} else {
		char *pem = tc_jwk_to_pem(jwk, why, whylen);
		if (!pem)
			return -1;
		k->material = (unsigned char *)pem;
		k->len = strlen(pem);
	}
	k->kid = kid ? tc_xstrdup(kid->valuestring) : NULL;
	return 0;
}

static int jwks_load(const char *path, const char *text, struct key **out, size_t *n, size_t *skipped, char *err,
		     size_t errlen)
{
	cJSON *doc = cJSON_Parse(text), *jwk;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "keys");
	if (!cJSON_IsArray(list)) {
		snprintf(err, errlen, "--jwt-jwks: \"%s\" is not a JWKS: expected {\"keys\": [...]}", path);
		cJSON_Delete(doc);
		return -1;
	}
	struct key *keys = tc_xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*keys));
	size_t k = 0;
	*skipped = 0;
	cJSON_ArrayForEach(jwk, list)
	{
		char why[160];
		if (jwk_load(jwk, &keys[k], why, sizeof(why)) == 0)
			k++;
		else
			++*skipped;
	}
	cJSON_Delete(doc);
	if (!k) {
		snprintf(err, errlen,
			 "--jwt-jwks: \"%s\" holds no key this server can verify with "
			 "(RSA, EC P-256 or oct, use sig)",
			 path);
		free(keys);
		return -1;
	}
	*out = keys;
	*n = k;
	return 0;
}

static int single_load(const struct tc_config *cfg, unsigned char *text, size_t len, struct key **out, size_t *n,
		       char *err, size_t errlen)
{
	struct key *k = tc_xcalloc(1, sizeof(*k));
	k->alg = alg_of(cfg->jwt_alg);
	/* A secret file usually ends with a newline nobody meant as key material. */
	if (k->alg == JWT_ALG_HS256)
		while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
			len--;
	if (k->alg != JWT_ALG_HS256 && !strstr((char *)text, "-----BEGIN PUBLIC KEY-----")) {
		snprintf(err, errlen, "--jwt-key: %s needs a PEM public key (-----BEGIN PUBLIC KEY-----)",
			 cfg->jwt_alg);
		free(k);
		return -1;
	}
	if (!len) {
		snprintf(err, errlen, "--jwt-key: \"%s\" is empty", cfg->jwt_key);
		free(k);
		return -1;
	}
	k->material = tc_xmalloc(len + 1);
	memcpy(k->material, text, len);
	k->material[len] = '\0';
	k->len = len;
	*out = k;
	*n = 1;
	return 0;
}

/* Reads the configured key file into a fresh key array. */
static int load(struct tc_auth *a, struct key **keys, size_t *n, size_t *skipped, struct stat *st, char *err,
		size_t errlen)
{
	const struct tc_config *cfg = a->cfg;
	bool jwks = *cfg->jwt_jwks;
	const char *path = jwks ? cfg->jwt_jwks : cfg->jwt_key;
	const char *flag = jwks ? "--jwt-jwks / THREADCAST_JWT_JWKS" : "--jwt-key / THREADCAST_JWT_KEY";
	unsigned char *text;
	size_t len;
	int rc;

	if (stat(path, st) || read_file(path, &text, &len)) {
		snprintf(err, errlen, "%s: cannot read \"%s\": %s", flag, path, strerror(errno));
		return -1;
	}
	*skipped = 0;
	rc = jwks ? jwks_load(path, (char *)text, keys, n, skipped, err, errlen)
		  : single_load(cfg, text, len, keys, n, err, errlen);
	free(text);
	return rc;
}

struct tc_auth *tc_auth_new(const struct tc_config *cfg, bool *off, char *err, size_t errlen)
{
	struct stat st;

	*off = !strcmp(cfg->auth, "off");
	if (*off)
		return NULL;
	struct tc_auth *a = tc_xcalloc(1, sizeof(*a));
	a->cfg = cfg;
	if (load(a, &a->keys, &a->nkeys, &a->skipped, &st, err, errlen)) {
		free(a);
		return NULL;
	}
	a->size = st.st_size;
	a->mtime = st.st_mtim;
	a->audience = *cfg->jwt_audience ? cfg->jwt_audience : NULL;
	a->issuer = *cfg->jwt_issuer ? cfg->jwt_issuer : NULL;
	return a;
}

void tc_auth_free(struct tc_auth *a)
{
	if (!a)
		return;
	keys_free(a->keys, a->nkeys);
	free(a);
}

size_t tc_auth_keys(const struct tc_auth *a, size_t *skipped)
{
	*skipped = a->skipped;
	return a->nkeys;
}

int tc_auth_reload(struct tc_auth *a, bool force, char *err, size_t errlen)
{
	const char *path = *a->cfg->jwt_jwks ? a->cfg->jwt_jwks : a->cfg->jwt_key;
	struct stat st;
	struct key *keys;
	size_t n, skipped;

	if (!force && !stat(path, &st) && st.st_size == a->size && st.st_mtim.tv_sec == a->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == a->mtime.tv_nsec)
		return 0;
	if (load(a, &keys, &n, &skipped, &st, err, errlen)) {
		/* Tried once per version of the file: the next change tries again. */
		if (!stat(path, &st)) {
			a->size = st.st_size;
			a->mtime = st.st_mtim;
		}
		return -1;
	}
	keys_free(a->keys, a->nkeys);
	a->keys = keys;
	a->nkeys = n;
	a->skipped = skipped;
	a->size = st.st_size;
	a->mtime = st.st_mtim;
	return 1;
}

/* ==== checking tokens ========================================================================= */

static bool thread_listed(const char *json, const char *thread)
{
	cJSON *list = cJSON_Parse(json), *it;
	bool ok = false;
	cJSON_ArrayForEach(it, list)
	{
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

/*
 * The key for token, chosen by its header (alg, kid) before anything is
 * verified. NULL with why set when none fits: an algorithm this server does
 * not take, or a kid it does not know.
 */
static const struct key *key_for(const struct tc_auth *a, const char *token, char *why, size_t whylen)
{
	const char *dot = strchr(token, '.');
	size_t len;
	char *head = dot ? tc_base64url_decode(token, (size_t)(dot - token), &len) : NULL;
	cJSON *h = head ? cJSON_ParseWithLength(head, len) : NULL;
	const cJSON *alg = cJSON_GetObjectItemCaseSensitive(h, "alg");
	const cJSON *kid = cJSON_GetObjectItemCaseSensitive(h, "kid");
	const struct key *found = NULL;

	free(head);
	if (!cJSON_IsString(alg)) {
		snprintf(why, whylen, "the token is malformed: no JOSE header with an alg");
		goto out;
	}
	jwt_alg_t want = alg_of(alg->valuestring);
	for (size_t i = 0; i < a->nkeys && !found; i++) {
		const struct key *k = &a->keys[i];
		if (k->kid && cJSON_IsString(kid) ? !strcmp(k->kid, kid->valuestring) : k->alg == want)
			found = k;
	}
	if (!found && cJSON_IsString(kid))
		snprintf(why, whylen, "the token's key id \"%.64s\" is not one of this server's keys",
			 kid->valuestring);
	else if (!found || found->alg != want)
		snprintf(why, whylen, "the token is signed with %.16s; this server accepts only %s here",
			 alg->valuestring, jwt_alg_str(found ? found->alg : a->keys[0].alg));
	if (found && found->alg != want)
		found = NULL;
out:
	cJSON_Delete(h);
	return found;
}

enum tc_auth_result tc_auth_check(const struct tc_auth *a, const char *token, const char *thread, int64_t now,
				  struct tc_grant *g, char *why, size_t whylen)
{
	jwt_t *jwt = NULL;
	enum tc_auth_result rc;

	if (!token || !*token) {
		snprintf(why, whylen, "a bearer token is required (Authorization header or access_token)");
		return TC_AUTH_MISSING;
	}
	const struct key *key = key_for(a, token, why, whylen);
	if (!key)
		return TC_AUTH_INVALID;
	if (jwt_decode(&jwt, token, key->material, (int)key->len) || !jwt) {
		snprintf(why, whylen, "the token is malformed or its signature does not verify");
		return TC_AUTH_INVALID;
	}
	if (jwt_get_alg(jwt) != key->alg) { /* key_for checked; libjwt read the header itself */
		snprintf(why, whylen, "the token is signed with %s; this server accepts only %s",
			 jwt_alg_str(jwt_get_alg(jwt)), jwt_alg_str(key->alg));
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

/*
 * Whether origin is in a comma-separated list of origins: equal to an entry,
 * or any for "*"; with ports, an entry "scheme://host:*" takes that host
 * on any port (a local set-up whose port changes).
 */
static bool origin_listed(const char *list, const char *origin)
{
	size_t n = strlen(origin);
	for (const char *p = list; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if ((len == n && !strncmp(p, origin, n)) || (len == 1 && *p == '*'))
			return true;
		if (len > 2 && !strncmp(p + len - 2, ":*", 2) && n > len - 1 && !strncmp(p, origin, len - 1)) {
			const char *port = origin + len - 1;
			if (*port && strspn(port, "0123456789") == strlen(port))
				return true;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	return false;
}

bool tc_origin_allowed(const struct tc_config *cfg, const char *origin)
{
	const char *list = cfg->allowed_origins;
	if (!*list || !origin)
		return true; /* no list: any; no Origin header: not a browser */
	return origin_listed(list, origin);
}

bool tc_cors_allowed(const struct tc_config *cfg, const char *origin)
{
	return origin && *origin && origin_listed(cfg->cors_origins, origin);
}
