/*
 * libFuzzer target: respelling JSON text (spell.c). The input is a JSON
 * text; the first byte picks the spelling and whether it is an event.
 * Properties: the output is valid JSON; respelling it again changes
 * nothing; and it equals the parse of the input respelled as a tree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "spell.h"
#include "util.h"

int FUZZ_ENTRY(const uint8_t *data, size_t size)
{
	static bool init;
	if (!init) {
		tc_cjson_init();
		init = true;
	}
	if (size < 1)
		return 0;
	enum tc_spelling sp = data[0] & 1 ? TC_SPELL_021 : TC_SPELL_SEED;
	char *text = tc_xstrndup((const char *)data + 1, size - 1);
	size_t len = strlen(text), n, n2;
	const char *end = NULL;
	cJSON *in = cJSON_ParseWithOpts(text, &end, true); /* only whole, valid JSON texts */
	if (!in) {
		free(text);
		return 0;
	}
	char *out = data[0] & 2 ? tc_spell_event(text, len, "messages", 8, sp, &n) : tc_spell_json(text, len, sp, &n);
	if (out) {
		cJSON *got = cJSON_ParseWithLength(out, n);
		must(got != NULL);
		char *again =
			data[0] & 2 ? tc_spell_event(out, n, "messages", 8, sp, &n2) : tc_spell_json(out, n, sp, &n2);
		must(again == NULL);
		if (!(data[0] & 2)) {
			/* Printed, so that duplicate keys compare in order too. */
			tc_spell_tree(in, sp);
			char *a = cJSON_PrintUnformatted(in), *b = cJSON_PrintUnformatted(got);
			must(!strcmp(a, b));
			free(a);
			free(b);
		}
		cJSON_Delete(got);
		free(out);
	}
	cJSON_Delete(in);
	free(text);
	return 0;
}
