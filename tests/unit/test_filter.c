/* Unit tests: filter.c — parsing, canonical form, matching, subscription ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "util.h"

static struct tc_filter *must_parse(const char *json)
{
	cJSON *p = cJSON_Parse(json);
	struct tc_filter *f = NULL;
	struct tc_error err;
	assert_non_null(p);
	enum tc_err rc = tc_filter_parse(p, &f, &err);
	if (rc)
		fail_msg("%s: %s", json, err.message);
	cJSON_Delete(p);
	return f;
}

static void parse_error(const char *json, const char *needle)
{
	cJSON *p = cJSON_Parse(json);
	struct tc_filter *f = (struct tc_filter *)1;
	struct tc_error err;
	assert_non_null(p);
	assert_int_equal(tc_filter_parse(p, &f, &err), TC_ERR_INVALID_ARGUMENT);
	assert_null(f);
	if (!strstr(err.message, needle))
		fail_msg("%s: message \"%s\" lacks \"%s\"", json, err.message, needle);
	cJSON_Delete(p);
}

static bool match(const struct tc_filter *f, const char *method, const char *ns_json)
{
	cJSON *ns = cJSON_Parse(ns_json);
	size_t len;
	char *enc = tc_namespace_encode(ns, &len);
	struct tc_event_key k;
	assert_non_null(enc);
	assert_int_equal(tc_event_key_init(&k, method, strlen(method), enc, len), 0);
	bool m = tc_filter_match(f, &k);
	free(enc);
	cJSON_Delete(ns);
	return m;
}

static void namespace_encoding(void **state)
{
	struct {
		const char *json, *enc;
	} cases[] = {
		{ "[]", "" },
		{ "[\"\"]", "/" },
		{ "[\"a\",\"b\"]", "/a/b" },
		{ "[\"a/b\",\"%\"]", "/a%2Fb/%25" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *ns = cJSON_Parse(cases[i].json);
		size_t len;
		char *enc = tc_namespace_encode(ns, &len);
		assert_string_equal(enc, cases[i].enc);
		assert_int_equal(len, strlen(cases[i].enc));
		free(enc);
		cJSON_Delete(ns);
	}
	cJSON *bad = cJSON_Parse("[\"a\",1]");
	size_t len;
	assert_null(tc_namespace_encode(bad, &len));
	cJSON_Delete(bad);
}

static void channels(void **state)
{
	struct tc_filter *f = must_parse("{\"channels\":[\"messages\",\"custom\",\"input\"]}");
	assert_true(match(f, "messages", "[]"));
	assert_true(match(f, "custom", "[]"));
	assert_false(match(f, "custom:progress", "[]")); /* exact: custom is not custom:* */
	assert_true(match(f, "input.requested", "[]"));  /* input.requested is channel input */
	assert_false(match(f, "values", "[]"));
	tc_filter_free(f);

	f = must_parse("{\"channels\":[\"custom:progress\"]}");
	assert_true(match(f, "custom:progress", "[]"));
	assert_false(match(f, "custom:progres", "[]"));
	assert_false(match(f, "custom", "[]"));
	tc_filter_free(f);

	struct tc_event_key k;
	assert_int_equal(tc_event_key_init(&k, "input", 5, "", 0), -1); /* not an event method */
	assert_int_equal(tc_event_key_init(&k, "bogus", 5, "", 0), -1);
}

static void namespaces_and_depth(void **state)
{
	struct tc_filter *f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[\"a\"]]}");
	assert_true(match(f, "values", "[\"a\"]"));
	assert_true(match(f, "values", "[\"a\",\"b\",\"c\"]"));
	assert_false(match(f, "values", "[\"ab\"]")); /* whole segments */
	assert_false(match(f, "values", "[]"));
	assert_false(match(f, "values", "[\"b\",\"a\"]"));
	tc_filter_free(f);

	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[\"a\"]],\"depth\":1}");
	assert_true(match(f, "values", "[\"a\"]"));
	assert_true(match(f, "values", "[\"a\",\"b\"]"));
	assert_false(match(f, "values", "[\"a\",\"b\",\"c\"]"));
	tc_filter_free(f);

	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[\"a\"]],\"depth\":0}");
	assert_true(match(f, "values", "[\"a\"]"));
	assert_false(match(f, "values", "[\"a\",\"b\"]"));
	tc_filter_free(f);

	/* No namespaces: every namespace, depth counted from the root. */
	f = must_parse("{\"channels\":[\"values\"],\"depth\":1}");
	assert_true(match(f, "values", "[]"));
	assert_true(match(f, "values", "[\"x\"]"));
	assert_false(match(f, "values", "[\"x\",\"y\"]"));
	tc_filter_free(f);

	/* The root prefix [] matches everything; "/" in segments does not confuse. */
	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[],[\"q\"]],\"depth\":0}");
	assert_true(match(f, "values", "[]"));
	assert_true(match(f, "values", "[\"q\"]"));
	assert_false(match(f, "values", "[\"r\"]"));
	tc_filter_free(f);

	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[\"a/b\"]]}");
	assert_true(match(f, "values", "[\"a/b\",\"c\"]"));
	assert_false(match(f, "values", "[\"a\",\"b\"]"));
	tc_filter_free(f);

	/* A segment without ':' also takes its task-suffixed form, as the reference server matches. */
	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[\"gp_two\"],[\"x:1\",\"y\"]],\"depth\":1}");
	assert_true(match(f, "values", "[\"gp_two:7c1e\"]"));
	assert_true(match(f, "values", "[\"gp_two:7c1e\",\"child:2\"]"));
	assert_false(match(f, "values", "[\"gp_two:7c1e\",\"child:2\",\"deep\"]")); /* depth */
	assert_false(match(f, "values", "[\"gp_twox:7c1e\"]"));
	assert_false(match(f, "values", "[\"gp\"]"));
	assert_true(match(f, "values", "[\"x:1\",\"y:9\"]"));
	assert_false(match(f, "values", "[\"x:2\",\"y\"]")); /* a prefix segment with ':' is exact */
	assert_false(match(f, "values", "[\"x\",\"y\"]"));
	tc_filter_free(f);
	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[[\"\"]]}");
	assert_true(match(f, "values", "[\"\"]"));
	assert_true(match(f, "values", "[\":t\"]"));
	assert_false(match(f, "values", "[\"a\"]"));
	assert_false(match(f, "values", "[]"));
	tc_filter_free(f);

	/* An empty namespaces list reads as "not given". */
	f = must_parse("{\"channels\":[\"values\"],\"namespaces\":[]}");
	assert_true(match(f, "values", "[\"z\"]"));
	tc_filter_free(f);
}

static void parse_errors(void **state)
{
	parse_error("{}", "params.channels is required");
	parse_error("{\"channels\":[]}", "params.channels must be a non-empty array");
	parse_error("{\"channels\":\"messages\"}", "params.channels must be a non-empty array");
	parse_error("{\"channels\":[\"messages\",\"bogus\"]}", "params.channels[1]");
	parse_error("{\"channels\":[5]}", "params.channels[0]");
	parse_error("{\"channels\":[\"custom:\"]}", "params.channels[0]");
	parse_error("{\"channels\":[\"input.requested\"]}", "params.channels[0]");
	parse_error("{\"channels\":[\"values\"],\"namespaces\":\"a\"}", "params.namespaces must be");
	parse_error("{\"channels\":[\"values\"],\"namespaces\":[[\"a\",1]]}", "params.namespaces[0]");
	parse_error("{\"channels\":[\"values\"],\"namespaces\":[[],\"a\"]}", "params.namespaces[1]");
	parse_error("{\"channels\":[\"values\"],\"depth\":-1}", "params.depth");
	parse_error("{\"channels\":[\"values\"],\"depth\":1.5}", "params.depth");
	parse_error("{\"channels\":[\"values\"],\"depth\":\"2\"}", "params.depth");

	/* Size limits: too many channels, too large a filter. */
	char big[8192] = "{\"channels\":[";
	for (int i = 0; i < 65; i++)
		strcat(big, i ? ",\"values\"" : "\"values\"");
	strcat(big, "]}");
	parse_error(big, "more than 64");

	strcpy(big, "{\"channels\":[\"values\"],\"namespaces\":[");
	for (int i = 0; i < 40; i++) {
		char seg[160];
		snprintf(seg, sizeof(seg), "%s[\"%0120d\"]", i ? "," : "", i);
		strcat(big, seg);
	}
	strcat(big, "]}");
	parse_error(big, "too large");
}

static void canonical_and_ids(void **state)
{
	struct tc_filter *a = must_parse("{\"channels\":[\"tools\",\"custom:b\",\"messages\",\"custom:a\",\"tools\"],"
					 "\"namespaces\":[[\"y\"],[\"x\"],[\"y\"]],\"depth\":2,\"extra\":true}");
	struct tc_filter *b = must_parse(
		"{\"depth\":2,\"namespaces\":[[\"x\"],[\"y\"]],\"channels\":[\"custom:a\",\"messages\",\"tools\",\"custom:b\"]}");
	assert_string_equal(a->canonical, "{\"channels\":[\"messages\",\"tools\",\"custom:a\",\"custom:b\"],"
					  "\"namespaces\":[[\"x\"],[\"y\"]],\"depth\":2}");
	assert_string_equal(a->canonical, b->canonical);

	char *id1 = tc_subscription_id(a, 1), *id2 = tc_subscription_id(a, 2);
	assert_string_not_equal(id1, id2);
	assert_true(id1[0] == 's');

	/* Any process can rebuild the filter from the id alone. */
	struct tc_filter *back = NULL;
	struct tc_error err;
	assert_int_equal(tc_subscription_id_parse(id2, &back, &err), TC_OK);
	assert_string_equal(back->canonical, a->canonical);
	assert_true(match(back, "custom:a", "[\"x\",\"q\"]"));
	assert_false(match(back, "values", "[\"x\"]"));
	tc_filter_free(back);

	const char *bad[] = { "", "s", "s1", "s1.", "x1.abc", "s1.!!!!", "sX.abc", "s1.e30" /* {} */ };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		back = (struct tc_filter *)1;
		assert_int_equal(tc_subscription_id_parse(bad[i], &back, &err), TC_ERR_NO_SUCH_SUBSCRIPTION);
		assert_null(back);
	}
	free(id1);
	free(id2);
	tc_filter_free(a);
	tc_filter_free(b);
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(namespace_encoding),   cmocka_unit_test(channels),
		cmocka_unit_test(namespaces_and_depth), cmocka_unit_test(parse_errors),
		cmocka_unit_test(canonical_and_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
