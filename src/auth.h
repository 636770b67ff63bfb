/*
 * auth.h — who may read which thread: JWT bearer tokens (libjwt).
 *
 * The verifying key and algorithm are configured (--jwt-key, --jwt-alg):
 * HS256 with a shared secret, or RS256 / ES256 with a PEM public key. A
 * token whose header names any other algorithm is refused, which closes the
 * classic "HS256 signed with the public key" and "alg: none" holes. Claims:
 *
 *   exp      required; the token stops working then (open connections too)
 *   nbf      optional
 *   aud/iss  checked when --jwt-audience / --jwt-issuer are set
 *   threads  array of thread ids the bearer may read; "abc*" is a prefix,
 *            "*" every thread
 *   commands true when the bearer may send runtime commands (run.start, …)
 *
 * Pure: no sockets; the server finds the token (Authorization: Bearer, or
 * the access_token query parameter) and asks.
 */
#ifndef TC_AUTH_H
#define TC_AUTH_H

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
	TC_AUTH_INVALID,   /**< bad signature, algorithm, claims: 401 */
	TC_AUTH_EXPIRED,   /**< exp passed or nbf not reached: 401 */
	TC_AUTH_FORBIDDEN, /**< valid, but not for this thread: 403 */
};

/**
 * Reads the key and settings from cfg. Returns NULL with err set when auth
 * is on and the key cannot be used; sets *off (and returns NULL, no error)
 * when auth is off.
 */
struct tc_auth *tc_auth_new(const struct tc_config *cfg, bool *off, char *err, size_t errlen);
void tc_auth_free(struct tc_auth *a);

/**
 * Checks token (NULL when none was sent) for thread at time now (Unix
 * seconds). On TC_AUTH_OK fills g; otherwise why says what was wrong.
 */
enum tc_auth_result tc_auth_check(const struct tc_auth *a, const char *token, const char *thread,
				  int64_t now, struct tc_grant *g, char *why, size_t whylen);

/** True when origin (NULL: none sent) may connect per --allowed-origins. */
bool tc_origin_allowed(const struct tc_config *cfg, const char *origin);

#endif
