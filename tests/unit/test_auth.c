/* Unit tests: auth.c — JWK to PEM against keys exported by an independent
 * implementation (Node's crypto), and token checks against a JWKS file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "util.h"

/* Generated once with Node: generateKeyPairSync, then export() as jwk and as spki PEM. */
static const char rsa_jwk[] =
	"{\"kty\": \"RSA\", \"n\": \"rnugi7EnVCj-DWbAE-0-jUO6DTtoFW-FLPHJQjUbvqWYeCFlu5946NU_-Lb_HUD7UKcJdITaNe5f2N5s4LzCE6iQhFAE44ON_0h9ZPPFQOgfW3wt89ep7uSlVbEHZ-mzYW6u-L2m3bDQGvFZK3pFx1iE2iTrS0JRudE-MeVCpBM9HJtHLPZNXl7kV5eH5hdn2oFYsqAQeh8nrwsSeRCHkhZcLbtyFA-FLoOPsG0dwuPuD3OeIbSOVoY8-qNUIuRYrdd4Uhc7yPQMqlz-dW7ITaSBlyRnyrCxykLUSz0us4_nM2dsWuMUYkghJhmQrgQqm8Iy9s1EfIfj-uwPy-IgpQ\", \"e\": \"AQAB\"}";
static const char rsa_pem[] = "-----BEGIN PUBLIC KEY-----\n"
			      "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEArnugi7EnVCj+DWbAE+0+\n"
			      "jUO6DTtoFW+FLPHJQjUbvqWYeCFlu5946NU/+Lb/HUD7UKcJdITaNe5f2N5s4LzC\n"
			      "E6iQhFAE44ON/0h9ZPPFQOgfW3wt89ep7uSlVbEHZ+mzYW6u+L2m3bDQGvFZK3pF\n"
			      "x1iE2iTrS0JRudE+MeVCpBM9HJtHLPZNXl7kV5eH5hdn2oFYsqAQeh8nrwsSeRCH\n"
			      "khZcLbtyFA+FLoOPsG0dwuPuD3OeIbSOVoY8+qNUIuRYrdd4Uhc7yPQMqlz+dW7I\n"
			      "TaSBlyRnyrCxykLUSz0us4/nM2dsWuMUYkghJhmQrgQqm8Iy9s1EfIfj+uwPy+Ig\n"
			      "pQIDAQAB\n"
			      "-----END PUBLIC KEY-----\n";
static const char ec_jwk[] =
	"{\"kty\": \"EC\", \"x\": \"QaBAZD1RaVby8fpbPnFl382Ag-n2FHIKGMopQ8CVkg0\", \"y\": \"jPKuXR4OOETy6j77-p7h6XunPRhtV5uTxbzWBeDNniY\", \"crv\": \"P-256\"}";
static const char ec_pem[] = "-----BEGIN PUBLIC KEY-----\n"
			     "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQaBAZD1RaVby8fpbPnFl382Ag+n2\n"
			     "FHIKGMopQ8CVkg2M8q5dHg44RPLqPvv6nuHpe6c9GG1Xm5PFvNYF4M2eJg==\n"
			     "-----END PUBLIC KEY-----\n";

static void expect_pem(const char *jwk, const char *pem)
{
	char why[160] = "";
	cJSON *j = cJSON_Parse(jwk);
	char *got = tc_jwk_to_pem(j, why, sizeof(why));
	assert_non_null(got);
	assert_string_equal(got, pem);
	free(got);
	cJSON_Delete(j);
}

static void expect_refused(const char *jwk, const char *because)
{
	char why[160] = "";
	cJSON *j = cJSON_Parse(jwk);
	assert_null(tc_jwk_to_pem(j, why, sizeof(why)));
	assert_non_null(strstr(why, because));
	cJSON_Delete(j);
}

static void jwk_rsa(void **state)
{
	expect_pem(rsa_jwk, rsa_pem);
}

static void jwk_ec(void **state)
{
	expect_pem(ec_jwk, ec_pem);
}

static void jwk_unusable(void **state)
{
	expect_refused("{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"AA\",\"y\":\"AA\"}", "P-256");
	expect_refused("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\"}", "x and y");
	expect_refused("{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}", "1024 to 8192 bits");
	expect_refused("{\"kty\":\"RSA\",\"n\":\"!!\",\"e\":\"AQAB\"}", "base64url");
	expect_refused("{\"kty\":\"OKP\"}", "not supported");
	expect_refused("{}", "not supported");
}

/* ---- tokens against a JWKS with one oct key ---------------------------------------- */

static const char secret[] = "0123456789abcdef0123456789abcdef";

static char *token(const char *alg, const char *kid, const unsigned char *key, long exp, const char *threads)
{
	jwt_t *jwt;
	char grants[256];
	assert_int_equal(jwt_new(&jwt), 0);
	if (kid)
		jwt_add_header(jwt, "kid", kid);
	snprintf(grants, sizeof(grants), "{\"exp\":%ld,\"threads\":%s}", exp, threads);
	assert_int_equal(jwt_add_grants_json(jwt, grants), 0);
	assert_int_equal(jwt_set_alg(jwt, jwt_str_alg(alg), key, key ? (int)strlen((const char *)key) : 0), 0);
	char *t = jwt_encode_str(jwt);
	jwt_free(jwt);
	return t;
}

static enum tc_auth_result check(struct tc_auth *a, char *tok, char *why)
{
	struct tc_grant g;
	enum tc_auth_result r = tc_auth_check(a, tok, "t1", 1000, &g, why, 160);
	free(tok);
	return r;
}

static void jwks_tokens(void **state)
{
	char path[] = "/tmp/tc-test-jwks-XXXXXX", err[256], why[160];
	int fd = mkstemp(path);
	char *k = tc_base64url_encode(secret, strlen(secret));
	dprintf(fd,
		"{\"keys\":[{\"kty\":\"oct\",\"kid\":\"s1\",\"k\":\"%s\"},{\"kty\":\"oct\",\"use\":\"enc\",\"k\":\"%s\"}]}",
		k, k);
	close(fd);
	free(k);
	char jwt[] = "jwt", none[] = "", rs[] = "RS256";
	struct tc_config cfg = {
		.auth = jwt, .jwt_key = none, .jwt_jwks = path, .jwt_alg = rs, .jwt_audience = none, .jwt_issuer = none
	};
	bool off;
	struct tc_auth *a = tc_auth_new(&cfg, &off, err, sizeof(err));
	assert_non_null(a);
	size_t skipped;
	assert_int_equal(tc_auth_keys(a, &skipped), 1);
	assert_int_equal(skipped, 1);
	const unsigned char *key = (const unsigned char *)secret;

	assert_int_equal(check(a, token("HS256", "s1", key, 2000, "[\"t*\"]"), why), TC_AUTH_OK);
	assert_int_equal(check(a, token("HS256", NULL, key, 2000, "[\"t1\"]"), why), TC_AUTH_OK);
	assert_int_equal(check(a, token("HS256", "s1", key, 500, "[\"t1\"]"), why), TC_AUTH_EXPIRED);
	assert_int_equal(check(a, token("HS256", "s1", key, 2000, "[\"u1\"]"), why), TC_AUTH_FORBIDDEN);
	assert_int_equal(check(a, token("HS256", "s2", key, 2000, "[\"t1\"]"), why), TC_AUTH_INVALID);
	assert_non_null(strstr(why, "key id \"s2\""));
	assert_int_equal(
		check(a,
		      token("HS256", "s1", (const unsigned char *)"another secret of 32 bytes.....", 2000, "[\"t1\"]"),
		      why),
		TC_AUTH_INVALID);
	assert_non_null(strstr(why, "does not verify"));
	assert_int_equal(check(a, token("none", NULL, NULL, 2000, "[\"t1\"]"), why), TC_AUTH_INVALID);
	assert_non_null(strstr(why, "signed with none"));
	assert_int_equal(check(a, tc_xstrdup("e30.e30.x"), why), TC_AUTH_INVALID); /* {} as header */
	assert_int_equal(check(a, tc_xstrdup("garbage"), why), TC_AUTH_INVALID);

	/* Unchanged file: nothing to do. A broken one: refused, the old key stays. */
	assert_int_equal(tc_auth_reload(a, false, err, sizeof(err)), 0);
	FILE *f = fopen(path, "w");
	fputs("{\"keys\":[{\"kty\":\"RSA\"}]}", f);
	fclose(f);
	assert_int_equal(tc_auth_reload(a, true, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no key this server can verify"));
	assert_int_equal(check(a, token("HS256", "s1", key, 2000, "[\"t1\"]"), why), TC_AUTH_OK);
	tc_auth_free(a);
	unlink(path);
}

/* Which pages may read the HTTP API (CORS, --cors-origins); WebSocket origins (--allowed-origins) the same way. */
static void cors_origins(void **state)
{
	char list[] = "http://localhost:*,https://app.example.com", none[] = "", any[] = "*",
	     local[] = "http://localhost:*";
	struct tc_config cfg = { .cors_origins = list, .allowed_origins = none };
	assert_true(tc_cors_allowed(&cfg, "http://localhost:3000"));
	assert_true(tc_cors_allowed(&cfg, "http://localhost:80"));
	assert_true(tc_cors_allowed(&cfg, "https://app.example.com"));
	assert_false(tc_cors_allowed(&cfg, "http://localhost")); /* no port: not "any port" */
	assert_false(tc_cors_allowed(&cfg, "http://localhost:3000x"));
	assert_false(tc_cors_allowed(&cfg, "http://localhost.evil.com:3000"));
	assert_false(tc_cors_allowed(&cfg, "https://localhost:3000")); /* another scheme */
	assert_false(tc_cors_allowed(&cfg, "https://app.example.com:443"));
	assert_false(tc_cors_allowed(&cfg, NULL));
	assert_false(tc_cors_allowed(&cfg, ""));
	cfg.cors_origins = none;
	assert_false(tc_cors_allowed(&cfg, "http://localhost:3000")); /* none by default */
	cfg.cors_origins = any;
	assert_true(tc_cors_allowed(&cfg, "https://anything.example"));
	assert_true(tc_origin_allowed(&cfg, "https://anything.example")); /* no --allowed-origins: any */
	cfg.allowed_origins = local;
	assert_true(tc_origin_allowed(&cfg, "http://localhost:5173"));
	assert_false(tc_origin_allowed(&cfg, "http://example.com"));
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cors_origins), cmocka_unit_test(jwk_rsa),     cmocka_unit_test(jwk_ec),
		cmocka_unit_test(jwk_unusable), cmocka_unit_test(jwks_tokens),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
