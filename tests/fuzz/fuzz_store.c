/*
 * libFuzzer target: the Redis contract's parsers (store.c) on bytes that
 * arrive from Redis — a doorbell message, a values index entry, a tree index
 * entry — and the agent tree built from tree entries (tree.c). The first
 * byte picks the parser. Properties: every field points inside the input;
 * a doorbell that parses is put back together byte for byte from its
 * fields; a tree always has its root.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "store.h"
#include "tree.h"
#include "util.h"

static bool inside(const char *p, size_t len, const char *in, size_t size)
{
	return p >= in && p + len <= in + size;
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
	const char *in = (const char *)data + 1;
	size_t n = size - 1;
	char *copy = tc_xmalloc(n + 1); /* exactly n readable bytes for ASan, plus slack */
	memcpy(copy, in, n);
	in = copy;

	switch (data[0] % 3) {
	case 0: {
		/* A doorbell of either form: every event inside the input, in seq order. */
		struct tc_doorbell_reader r;
		struct tc_doorbell d;
		uint64_t next = 0;
		if (tc_store_doorbell_open(&r, in, n) == 0) {
			while (tc_store_doorbell_next(&r, &d) == 1) {
				if (!d.json) {
					/* A thin one: "#<epoch>\n<seq>\n", nothing more, nothing else. */
					char again[TC_EPOCH_MAX + 32];
					int k = snprintf(again, sizeof(again), "#%.*s\n%llu\n", (int)d.epoch_len,
							 d.epoch, (unsigned long long)d.seq);
					must(r.thin && d.seq && !d.method && (size_t)k == n && !memcmp(again, in, n));
					continue;
				}
				must(inside(d.epoch, d.epoch_len, in, n) && inside(d.method, d.method_len, in, n) &&
				     inside(d.ns, d.ns_len, in, n) && inside(d.json, d.json_len, in, n));
				must(d.epoch_len > 0 && d.epoch_len < TC_EPOCH_MAX && d.json[0] == '{');
				must(d.seq <= (uint64_t)TC_JS_MAX_SAFE && (!next || d.seq == next));
				next = d.seq + 1;
			}
		}
		if (tc_store_doorbell_parse(in, n, &d))
			break;
		/* A one-event doorbell puts back together byte for byte from its fields
		 * (they may hold any byte but a newline: memcpy, not printf). */
		char *again = tc_xmalloc(n + 64), *o = again;
		memcpy(o, d.epoch, d.epoch_len);
		o += d.epoch_len;
		o += sprintf(o, "\n%llu\n", (unsigned long long)d.seq);
		memcpy(o, d.method, d.method_len);
		o += d.method_len;
		*o++ = '\n';
		memcpy(o, d.ns, d.ns_len);
		o += d.ns_len;
		*o++ = '\n';
		memcpy(o, d.json, d.json_len);
		o += d.json_len;
		must((size_t)(o - again) == n && !memcmp(again, in, n));
		free(again);
		break;
	}
	case 1: {
		uint64_t seq;
		const char *json;
		size_t jlen;
		if (!tc_store_values_parse(in, n, &seq, &json, &jlen))
			must(seq > 0 && inside(json, jlen, in, n) && json[0] == '{');
		break;
	}
	default: {
		/* Entries separated by NUL: "<encoded ns>\t<status>\n<graph>". */
		struct tc_store_pair pairs[16];
		size_t np = 0;
		const char *p = in, *end = in + n;
		while (p < end && np < 16) {
			const char *z = memchr(p, '\0', (size_t)(end - p));
			const char *e = z ? z : end;
			const char *tab = memchr(p, '\t', (size_t)(e - p));
			if (tab)
				pairs[np++] =
					(struct tc_store_pair){ p, tab + 1, (size_t)(tab - p), (size_t)(e - tab - 1) };
			p = e + 1;
		}
		tc_tree_sort(pairs, np);
		cJSON *tree = tc_tree_build(pairs, np);
		bool has_root = false;
		for (size_t i = 0; i < np; i++)
			has_root |= pairs[i].key_len == 0;
		must(!tree == !has_root);
		cJSON_Delete(tree);
		size_t distinct = 0;
		for (size_t i = 0; i < np; i++)
			distinct += !i || pairs[i].key_len != pairs[i - 1].key_len ||
				    memcmp(pairs[i].key, pairs[i - 1].key, pairs[i].key_len);
		cJSON *ns = tc_tree_namespaces(pairs, np);
		must(cJSON_GetArraySize(ns) == (int)distinct);
		cJSON_Delete(ns);
		break;
	}
	}
	free(copy);
	return 0;
}
