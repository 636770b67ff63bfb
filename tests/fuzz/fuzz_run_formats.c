/*
 * libFuzzer target: the seed formats' translators (src/run/: chunks.h, agent_events.h, ndjson.h). The input is
 * event frames, one a line; the first byte picks where the stream starts
 * (inside the run or not) and a resume point for seeds 004 and 003.
 * Properties: each translator emits exactly one terminal unit once
 * finished, nothing after it, every unit complete (an SSE event ending in
 * its blank line; for seed 003 one JSON object on one line, its event_id
 * the next); and seeds 004 and 003 resumed after k emit exactly what
 * followed k the first time.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "../unit/feed_frame.h"
#include "run/agent_events.h"
#include "run/chunks.h"
#include "run/ndjson.h"
#include "util.h"

struct out {
	char *text;
	size_t len;
	int terminals, units;
	bool after;     /* something came after a terminal */
	uint64_t first; /* seed 003: the event_id of the first unit */
};

static void take(struct out *o, const char *t, size_t len, bool terminal)
{
	if (o->terminals)
		o->after = true;
	o->terminals += terminal;
	o->units++;
	o->text = tc_xrealloc(o->text, o->len + len + 1);
	memcpy(o->text + o->len, t, len);
	o->len += len;
	o->text[o->len] = '\0';
}

/* An SSE event, ending in its blank line. */
static void sse(const char *t, size_t len)
{
	must(len >= 2 && t[len - 1] == '\n' && t[len - 2] == '\n');
}

/* The "id:" line names the id given with the unit. */
static void id_line(const char *t, uint64_t id)
{
	unsigned long long n;
	must(sscanf(t, "id: %llu\n", &n) == 1 && n == id);
}

static void out004(void *ctx, uint64_t id, const char *t, size_t len)
{
	sse(t, len);
	id_line(t, id);
	take(ctx, t, len, strstr(t, "data: {\"type\":\"end\"}") || strstr(t, "data: {\"type\":\"fail\""));
}

static void out002(void *ctx, uint64_t id, const char *t, size_t len)
{
	sse(t, len);
	id_line(t, id);
	const char *ev = strchr(t, '\n') + 1;
	take(ctx, t, len,
	     !strncmp(ev, "event: done\n", 12) || !strncmp(ev, "event: error\n", 13) ||
		     !strncmp(ev, "event: aborted\n", 15));
}

/* A seed 003 line: one JSON object, one "\n" at its end; the reply line is the terminal. */
static void out003(void *ctx, uint64_t id, const char *t, size_t len)
{
	struct out *o = ctx;
	must(len >= 1 && t[len - 1] == '\n' && !memchr(t, '\n', len - 1));
	cJSON *j = cJSON_ParseWithLength(t, len - 1);
	must(cJSON_IsObject(j));
	const cJSON *eid = cJSON_GetObjectItemCaseSensitive(j, "event_id");
	must(cJSON_IsNumber(eid) && eid->valuedouble == (double)(o->first + (uint64_t)o->units));
	must(eid->valuedouble == (double)id);
	must(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "session_id")));
	bool reply = cJSON_GetObjectItemCaseSensitive(j, "reply") != NULL;
	must(reply != cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "type")));
	cJSON_Delete(j);
	take(o, t, len, reply);
}

/* Feeds every line of the input to fn. */
static void lines(const uint8_t *data, size_t size, tc_event_fn *fn, void *f)
{
	size_t i = 0;
	while (i < size) {
		size_t j = i;
		while (j < size && data[j] != '\n')
			j++;
		feed_frame(fn, f, (const char *)data + i, j - i);
		i = j + 1;
	}
}

/* What followed unit k of a stream (units ending in end), NULL when it has fewer. */
static const char *after_unit(const char *text, uint64_t k, const char *end)
{
	const char *from = text;
	for (uint64_t i = 0; i < k && from; i++) {
		from = strstr(from, end);
		from = from ? from + strlen(end) : NULL;
	}
	return from;
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
	bool in_run = data[0] & 1;
	uint64_t skip = data[0] >> 1;
	data++;
	size--;

	struct out all = { 0 }, part = { 0 };
	struct tc_run_chunks *a = tc_run_chunks_new("r1", "agent", in_run, 0, out004, &all);
	lines(data, size, tc_run_chunks_ops.event, a);
	tc_run_chunks_finish(a, "closed");
	must(all.terminals == 1 && !all.after);
	must(strcmp(tc_run_chunks_status(a), "active") != 0);
	uint64_t n = tc_run_chunks_sequence(a);
	must(n == (uint64_t)all.units);
	tc_run_chunks_free(a);
	struct tc_run_chunks *b = tc_run_chunks_new("r1", "agent", in_run, skip, out004, &part);
	lines(data, size, tc_run_chunks_ops.event, b);
	tc_run_chunks_finish(b, "closed");
	/* what followed sequence skip the first time, exactly */
	const char *from = after_unit(all.text, skip, "\n\n");
	must((skip >= n && part.units == 0) || (from && part.text && !strcmp(from, part.text)));
	tc_run_chunks_free(b);
	free(all.text);
	free(part.text);

	struct out o = { 0 }, o2 = { 0 };
	struct tc_run_agent_events *c = tc_run_agent_events_new("r1", "req", "th", "agent", in_run, 0, out002, &o);
	lines(data, size, tc_run_agent_events_ops.event, c);
	tc_run_agent_events_finish(c, NULL, NULL);
	must(o.terminals == 1 && !o.after);
	tc_run_agent_events_free(c);
	/* resumed after id skip: what followed it the first time, exactly */
	c = tc_run_agent_events_new("r1", "req", "th", "agent", in_run, skip, out002, &o2);
	lines(data, size, tc_run_agent_events_ops.event, c);
	tc_run_agent_events_finish(c, NULL, NULL);
	const char *rest = o.text;
	for (uint64_t k = 0; k < skip && rest; k++) {
		rest = strstr(rest, "\n\n");
		rest = rest ? rest + 2 : NULL;
	}
	must((skip >= (uint64_t)o.units && o2.units == 0) || (rest && o2.text && !strcmp(rest, o2.text)));
	tc_run_agent_events_free(c);
	free(o.text);
	free(o2.text);

	struct out all3 = { .first = 1 }, part3 = { .first = skip + 1 };
	struct tc_run_ndjson *d = tc_run_ndjson_new("r1", "th", "agent", "hi", in_run, 0, out003, &all3);
	lines(data, size, tc_run_ndjson_ops.event, d);
	tc_run_ndjson_finish(d, "closed");
	must(all3.terminals == 1 && !all3.after);
	n = tc_run_ndjson_event_id(d);
	must(n == (uint64_t)all3.units);
	tc_run_ndjson_free(d);
	d = tc_run_ndjson_new("r1", "th", "agent", "hi", in_run, skip, out003, &part3);
	lines(data, size, tc_run_ndjson_ops.event, d);
	tc_run_ndjson_finish(d, "closed");
	must(tc_run_ndjson_event_id(d) == n);
	from = after_unit(all3.text, skip, "\n");
	must((skip >= n && part3.units == 0) || (from && part3.text && !strcmp(from, part3.text)));
	tc_run_ndjson_free(d);
	free(all3.text);
	free(part3.text);
	return 0;
}
