/*
 * libFuzzer target: a run's events as the SDK's run stream (run/modes.c). The
 * first byte picks the stream modes, subgraphs, whether the stream starts
 * inside the run and a resume id; the rest is event frames, one per line.
 * Properties: every emitted event is "id: <n>", "event: <name>", one
 * "data:" line of valid JSON, and a blank line; while the frames' seqs
 * increase, ids strictly increase; the result is a JSON object (a rendered
 * run's: valid JSON). With subgraphs, the stream was given the modes
 * ["values", "messages-tuple"] (they filter a rendered run's events).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "../unit/feed_frame.h"
#include "run/modes.h"
#include "util.h"

struct seen {
	unsigned long long last_id;
	bool any, ordered;
};

static void check(void *ctx, uint64_t given, const char *text, size_t len)
{
	struct seen *s = ctx;
	unsigned long long id;
	int n = 0;
	must(len > 2 && text[len - 1] == '\n' && text[len - 2] == '\n');
	must(sscanf(text, "id: %llu\n%n", &id, &n) == 1 && n > 0);
	must(id == given); /* the id written is the one given with it */
	const char *ev = text + n;
	must(!strncmp(ev, "event: ", 7));
	const char *nl = memchr(ev, '\n', len - (size_t)(ev - text));
	must(nl && !strncmp(nl + 1, "data: ", 6));
	const char *data = nl + 7, *end = text + len - 2;
	must(!memchr(data, '\n', (size_t)(end - data)));
	cJSON *j = cJSON_ParseWithLength(data, (size_t)(end - data));
	must(j != NULL);
	cJSON_Delete(j);
	if (s->ordered && s->any)
		must(id > s->last_id);
	s->last_id = id;
	s->any = true;
}

int FUZZ_ENTRY(const uint8_t *data, size_t size)
{
	static bool init;
	if (!init) {
		tc_cjson_init();
		init = true;
	}
	if (size < 1)
		return 0;
	uint8_t b = data[0];
	struct seen s = { .ordered = true };
	/* (the six low bits pick modes twice over: bits 0-5 and, shifted, the later ones) */
	unsigned modes = (unsigned)(b & 0x3f) | (unsigned)(b & 0x3f) << 6;
	struct tc_run_modes *f = tc_run_modes_new("r1", "t1", modes ? modes : TC_MODE_VALUES, b & 0x40, b & 0x80,
						  b & 0x80 ? (uint64_t)(b & 0x3f) : 0, check, &s);
	tc_run_modes_set_given(f, b & 0x40 ? "[\"values\",\"messages-tuple\"]" : NULL);
	char *text = tc_xstrndup((const char *)data + 1, size - 1);
	double last_seq = -1;
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		cJSON *j = cJSON_Parse(line);
		const cJSON *seq = cJSON_GetObjectItemCaseSensitive(j, "seq");
		if (cJSON_IsNumber(seq)) {
			if (seq->valuedouble <= last_seq || seq->valuedouble > 1e15)
				s.ordered = false;
			last_seq = seq->valuedouble;
		} else {
			s.ordered = false; /* fed as seq 0 */
		}
		cJSON_Delete(j);
		bool over = feed_frame(tc_run_modes_ops.event, f, line, strlen(line));
		must(over == tc_run_modes_ended(f));
	}
	cJSON *res = tc_run_modes_result(f);
	must(cJSON_IsObject(res) || (tc_run_modes_rendered(f) && cJSON_IsRaw(res)));
	char *printed = cJSON_PrintUnformatted(res);
	cJSON *again = cJSON_Parse(printed);
	must(again != NULL);
	cJSON_Delete(again);
	free(printed);
	cJSON_Delete(res);
	tc_run_modes_free(f);
	free(text);
	return 0;
}
