/* Unit tests: spell.c — the protocol's two spellings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "spell.h"
#include "util.h"

static char *respell(const char *json, enum tc_spelling sp)
{
	size_t n;
	char *out = tc_spell_json(json, strlen(json), sp, &n);
	if (out)
		assert_int_equal(strlen(out), n);
	return out;
}

static void names(void **state)
{
	assert_string_equal(tc_spell("subscriptionId", TC_SPELL_021), "subscription_id");
	assert_string_equal(tc_spell("subscription_id", TC_SPELL_SEED), "subscriptionId");
	assert_string_equal(tc_spell("subscriptionId", TC_SPELL_SEED), "subscriptionId");
	assert_string_equal(tc_spell("channels", TC_SPELL_021), "channels");
	cJSON *p = cJSON_Parse("{\"run_id\":\"a\",\"lastEventId\":\"b\"}");
	assert_string_equal(tc_spell_get(p, "runId", TC_SPELL_SEED)->valuestring, "a");
	assert_string_equal(tc_spell_get(p, "run_id", TC_SPELL_021)->valuestring, "a");
	assert_string_equal(tc_spell_get(p, "last_event_id", TC_SPELL_021)->valuestring, "b");
	assert_null(tc_spell_get(p, "subscriptions", TC_SPELL_021));
	cJSON_Delete(p);
}

static void text(void **state)
{
	char *s = respell("{\"runId\":\"r\",\"tree\":{\"graphName\":\"g\",\"children\":[{\"graphName\":\"h\"}]}}",
			  TC_SPELL_021);
	assert_string_equal(s,
			    "{\"run_id\":\"r\",\"tree\":{\"graph_name\":\"g\",\"children\":[{\"graph_name\":\"h\"}]}}");
	free(s);
	/* Already right: nothing to do. */
	assert_null(respell("{\"run_id\":\"r\"}", TC_SPELL_021));
	/* User-owned values are left alone, numbers keep their bytes, strings are not keys. */
	s = respell("{\"values\":{\"threadId\":1},\"checkpoint\":{\"parent_id\":\"p\"},\"n\":1.50e3,"
		    "\"s\":\"threadId\",\"metadata\":{\"run_id\":2}}",
		    TC_SPELL_SEED);
	assert_string_equal(s, "{\"values\":{\"threadId\":1},\"checkpoint\":{\"parentId\":\"p\"},\"n\":1.50e3,"
			       "\"s\":\"threadId\",\"metadata\":{\"run_id\":2}}");
	free(s);
	/* Whitespace and escapes survive. */
	s = respell(" { \"toolCallId\" : \"a\\\"b\" , \"x\\u0041\" : [ {\"toolName\":null} ] } ", TC_SPELL_021);
	assert_string_equal(s, " { \"tool_call_id\" : \"a\\\"b\" , \"x\\u0041\" : [ {\"tool_name\":null} ] } ");
	free(s);
}

static void events(void **state)
{
	const char *lc = "{\"method\":\"lifecycle\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"started\","
			 "\"graphName\":\"agent\",\"cause\":{\"type\":\"toolCall\",\"toolCallId\":\"c1\"}}}}";
	size_t n;
	char *s = tc_spell_event(lc, strlen(lc), "lifecycle", 9, TC_SPELL_021, &n);
	assert_string_equal(s, "{\"method\":\"lifecycle\",\"params\":{\"namespace\":[],\"data\":{\"event\":\"started\","
			       "\"graph_name\":\"agent\",\"cause\":{\"type\":\"toolCall\",\"tool_call_id\":\"c1\"}}}}");
	free(s);
	/* A values event's data is the graph's state: never touched. */
	const char *v = "{\"method\":\"values\",\"params\":{\"namespace\":[],\"data\":{\"graphName\":1}}}";
	assert_null(tc_spell_event(v, strlen(v), "values", 6, TC_SPELL_021, &n));
	/* Only params.data: a key elsewhere with a dictionary name stays. */
	const char *t =
		"{\"method\":\"tools\",\"runId\":\"x\",\"params\":{\"runId\":\"y\",\"data\":{\"event\":\"tool-started\","
		"\"toolCallId\":\"c\",\"toolName\":\"search\",\"input\":{\"toolName\":\"q\"}}}}";
	s = tc_spell_event(t, strlen(t), "tools", 5, TC_SPELL_021, &n);
	assert_string_equal(
		s,
		"{\"method\":\"tools\",\"runId\":\"x\",\"params\":{\"runId\":\"y\",\"data\":{\"event\":\"tool-started\","
		"\"tool_call_id\":\"c\",\"tool_name\":\"search\",\"input\":{\"toolName\":\"q\"}}}}");
	free(s);
}

static void trees(void **state)
{
	cJSON *r = cJSON_Parse("{\"run_id\":\"r\",\"values\":{\"run_id\":1},\"checkpoints\":[{\"node_name\":\"n\"}]}");
	tc_spell_tree(r, TC_SPELL_SEED);
	char *s = cJSON_PrintUnformatted(r);
	assert_string_equal(s, "{\"runId\":\"r\",\"values\":{\"run_id\":1},\"checkpoints\":[{\"nodeName\":\"n\"}]}");
	free(s);
	cJSON_Delete(r);
}

int main(void)
{
	tc_cjson_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test(text),
		cmocka_unit_test(events),
		cmocka_unit_test(trees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
