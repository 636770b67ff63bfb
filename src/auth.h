/*
 * auth.h — who may read which thread: JWT bearer tokens (libjwt).
 *
 * Keys come from one of two sources:
 *   --jwt-key FILE   one key: the HS256 secret, or an RS256 / ES256 PEM
 *                    public key; --jwt-alg names its algorithm.
 *   --jwt-jwks FILE  a JSON Web Key Set: RSA keys (RS256), EC P-256 keys
 *                    (ES256) and oct secrets (HS256); a token's "kid" header
 *                    picks its key (without one, the first key of the
 *                    token's algorithm). Keys whose "use" is not "sig" or
 *                    whose type this server cannot verify are skipped.
 * Every key is bound to one algorithm and a token whose header names any
 * other is refused, which closes the classic "HS256 signed with the public
 * key" and "alg: none" holes. Claims:
 *
 *   exp      required; the token stops working then (open connections too)
 *   nbf      optional
 *   aud/iss  checked when --jwt-audience / --jwt-issuer are set
 *   threads  array of thread ids the bearer may read; "abc*" is a prefix,
 *            "*" every thread
 *   commands true when the bearer may send runtime commands (run.start, …)
 *
 * Checking is pure (no sockets): the server finds the token (Authorization:
 * Bearer, or the access_token query parameter) and asks. Reading the key
 * file is the only I/O, at start-up and in tc_auth_reload().
 */
#ifndef TC_AUTH_H
#define TC_AUTH_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct tc_auth;

/** What a valid token grants. */
struct tc_grant {
	int64_t exp;   /**< Unix seconds; 0 when auth is off */
	bool commands; /**< may send runtime commands */
};

enum tc_auth_result {
	TC_AUTH_OK,
	TC_AUTH_MISSING,   /**< no token: HTTP 401 */
	TC_AUTH_INVALID,   /**< bad signature, algorithm, key id, claims: 401 */
	TC_AUTH_EXPIRED,   /**< exp passed or nbf not reached: 401 */
	TC_AUTH_FORBIDDEN, /**< valid, but not for this thread: 403 */
};

/**
 * Reads the keys and settings from cfg. Returns NULL with err set when auth
 * is on and no key can be used; sets *off (and returns NULL, no error) when
 * auth is off. cfg must outlive the result.
 */
struct tc_auth *tc_auth_new(const struct tc_config *cfg, bool *off, char *err, size_t errlen);
void tc_auth_free(struct tc_auth *a);

/** Keys loaded, and keys of the file skipped as unusable (JWKS only). */
size_t tc_auth_keys(const struct tc_auth *a, size_t *skipped);

/**
 * Reads the key file again — only when its size or modification time
 * changed, unless force. Returns 1 when the keys were replaced, 0 when the
 * file is unchanged, -1 (err set) when it cannot be used: the keys in use
 * stay, so a half-written rotation never locks everyone out.
 */
int tc_auth_reload(struct tc_auth *a, bool force, char *err, size_t errlen);

/**
 * Checks token (NULL when none was sent) for thread at time now (Unix
 * seconds). On TC_AUTH_OK fills g; otherwise why says what was wrong.
 */
enum tc_auth_result tc_auth_check(const struct tc_auth *a, const char *token, const char *thread, int64_t now,
				  struct tc_grant *g, char *why, size_t whylen);

/** True when origin (NULL: none sent) may connect per --allowed-origins. */
bool tc_origin_allowed(const struct tc_config *cfg, const char *origin);

/**
 * True when a browser page of origin may read the HTTP API's answers
 * (CORS) per --cors-origins: an entry is an origin, "*" (any), or
 * "scheme://host:*" (that host on any port). False for no origin.
 */
bool tc_cors_allowed(const struct tc_config *cfg, const char *origin);

/**
 * The PEM public key (SubjectPublicKeyInfo) of one JWK object of kty RSA
 * (n, e) or EC with crv P-256 (x, y); NULL with why set otherwise. Exposed
 * for tests.
 */
char *tc_jwk_to_pem(const cJSON *jwk, char *why, size_t whylen);

#endif
