/*
 * libFuzzer target: the seed formats' translators (seedfmt.h). The input is
 * event frames, one a line; the first byte picks where the stream starts
 * (inside the run or not) and a resume point for seed 004. Properties: each
 * translator emits exactly one terminal unit once finished, nothing after
 * it, every unit complete (an SSE event ending in its blank line); and seed
 * 004 resumed after sequence k emits exactly what followed k the first time.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "seedfmt.h"
#include "util.h"

struct out {
	char *text;
	size_t len;
	int terminals, units;
	bool after; /* something came after a terminal */
};

static void take(struct out *o, const char *t, size_t len, bool terminal)
{
	must(len >= 2 && t[len - 1] == '\n' && t[len - 2] == '\n');
	if (o->terminals)
		o->after = true;
	o->terminals += terminal;
	o->units++;
	o->text = tc_xrealloc(o->text, o->len + len + 1);
	memcpy(o->text + o->len, t, len);
	o->len += len;
	o->text[o->len] = '\0';
}

static void out004(void *ctx, const char *t, size_t len)
{
	take(ctx, t, len, strstr(t, "data: {\"type\":\"end\"}") || strstr(t, "data: {\"type\":\"fail\""));
}

static void out002(void *ctx, const char *t, size_t len)
{
	must(!strncmp(t, "id: ", 4));
	t = strchr(t, '\n') + 1;
	take(ctx, t, len, !strncmp(t, "event: done\n", 12) || !strncmp(t, "event: error\n", 13) ||
				  !strncmp(t, "event: aborted\n", 15));
}

/* Feeds every line of the input to fn. */
static void lines(const uint8_t *data, size_t size, bool (*fn)(void *, const char *, size_t), void *f)
{
	size_t i = 0;
	while (i < size) {
		size_t j = i;
		while (j < size && data[j] != '\n')
			j++;
		fn(f, (const char *)data + i, j - i);
		i = j + 1;
	}
}

static bool ev004(void *f, const char *s, size_t n)
{
	return tc_seed004_event(f, s, n);
}

static bool ev002(void *f, const char *s, size_t n)
{
	return tc_seed002_event(f, s, n);
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
	struct tc_seed004 *a = tc_seed004_new("r1", "agent", in_run, 0, out004, &all);
	lines(data, size, ev004, a);
	tc_seed004_finish(a, "closed");
	must(all.terminals == 1 && !all.after);
	must(strcmp(tc_seed004_status(a), "active") != 0);
	uint64_t n = tc_seed004_sequence(a);
	must(n == (uint64_t)all.units);
	tc_seed004_free(a);
	struct tc_seed004 *b = tc_seed004_new("r1", "agent", in_run, skip, out004, &part);
	lines(data, size, ev004, b);
	tc_seed004_finish(b, "closed");
	/* what followed sequence skip the first time, exactly */
	const char *from = all.text;
	for (uint64_t k = 0; k < skip && from; k++) {
		from = strstr(from, "\n\n");
		from = from ? from + 2 : NULL;
	}
	must((skip >= n && part.units == 0) || (from && part.text && !strcmp(from, part.text)));
	tc_seed004_free(b);
	free(all.text);
	free(part.text);

	struct out o = { 0 };
	struct tc_seed002 *c = tc_seed002_new("r1", "req", "th", "agent", in_run, 0, out002, &o);
	lines(data, size, ev002, c);
	tc_seed002_finish(c, NULL, NULL);
	must(o.terminals == 1 && !o.after);
	tc_seed002_free(c);
	free(o.text);
	return 0;
}
