/*
 * libFuzzer target: the SSE request as it arrives in a query string and a
 * Last-Event-ID header. The input is five lines: channels, namespaces,
 * depth, since, last-event-id (an empty line means the parameter is absent).
 * Properties: a request that parses gives a filter whose canonical text
 * parses back to itself; an eventId that parses prints back exactly as given.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "fuzz.h"
#include "protocol.h"
#include "util.h"

int FUZZ_ENTRY(const uint8_t *data, size_t size)
{
	static bool init;
	char *text = tc_xstrndup((const char *)data, size), *fields[5] = { 0 }, *p = text;
	struct tc_error err;

	if (!init) {
		tc_cjson_init();
		init = true;
	}
	if (strlen(text) != size) { /* a NUL cannot come through a query or header */
		free(text);
		return 0;
	}
	for (int i = 0; i < 5 && p; i++) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		fields[i] = *p ? p : NULL;
		p = nl ? nl + 1 : NULL;
	}
	cJSON *req = tc_stream_request_from_query(fields[0], fields[1], fields[2], fields[3], &err);
	if (req) {
		struct tc_filter *f, *g;
		if (tc_filter_parse(req, &f, &err) == TC_OK) {
			cJSON *canon = cJSON_Parse(f->canonical);
			must(canon != NULL);
			must(tc_filter_parse(canon, &g, &err) == TC_OK);
			must(!strcmp(f->canonical, g->canonical));
			cJSON_Delete(canon);
			tc_filter_free(f);
			tc_filter_free(g);
		}
		cJSON_Delete(req);
	}
	if (fields[4]) {
		char epoch[40], again[80];
		uint64_t seq;
		if (tc_event_id_parse(fields[4], epoch, &seq)) {
			snprintf(again, sizeof(again), "%s:%llu", epoch, (unsigned long long)seq);
			must(!strcmp(again, fields[4])); /* one spelling per eventId */
		}
	}
	free(text);
	return 0;
}
