/*
 * run/follow.c — following one run through a thread's events (follow.h).
 */
#include "run/follow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spell.h"
#include "util.h"

const cJSON *tc_run_get(const cJSON *o, const char *name)
{
	return cJSON_IsObject(o) ? tc_spell_get(o, name, TC_SPELL_021) : NULL;
}

const char *tc_run_str(const cJSON *o, const char *name)
{
	const cJSON *v = tc_run_get(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

void tc_run_follow_init(struct tc_run_follow *fw, const char *run_id, bool in_run)
{
	*fw = (struct tc_run_follow){ .run_id = tc_xstrdup(run_id ? run_id : ""), .in_run = in_run };
}

void tc_run_follow_clear(struct tc_run_follow *fw)
{
	for (size_t i = 0; i < fw->nsubgraphs; i++)
		free(fw->subgraphs[i]);
	free(fw->run_id);
	*fw = (struct tc_run_follow){ 0 };
}

void tc_run_ev_clear(struct tc_run_ev *ev)
{
	free(ev->ns);
	*ev = (struct tc_run_ev){ 0 };
}

/* "a|b" from ["a", "b"] (caller frees). */
static char *ns_join(const cJSON *ns)
{
	size_t n = 1;
	const cJSON *it;
	cJSON_ArrayForEach(it, ns) if (cJSON_IsString(it)) n += strlen(it->valuestring) + 1;
	char *s = tc_xmalloc(n), *p = s;
	*p = '\0';
	cJSON_ArrayForEach(it, ns)
	{
		if (!cJSON_IsString(it))
			continue;
		if (p != s)
			*p++ = '|';
		size_t l = strlen(it->valuestring);
		memcpy(p, it->valuestring, l);
		p += l;
		*p = '\0';
	}
	return s;
}

static bool is_subgraph(const struct tc_run_follow *fw, const char *ns)
{
	for (size_t i = 0; i < fw->nsubgraphs; i++)
		if (!strcmp(fw->subgraphs[i], ns))
			return true;
	return false;
}

/* Drops the node tasks from a joined namespace: node gets the innermost one's name. */
static void graph_ns(const struct tc_run_follow *fw, char *joined, char node[128])
{
	for (;;) {
		if (!*joined || is_subgraph(fw, joined))
			return;
		char *bar = strrchr(joined, '|');
		char *seg = bar ? bar + 1 : joined;
		if (!node[0])
			snprintf(node, 128, "%.*s", (int)strcspn(seg, ":"), seg);
		if (bar)
			*bar = '\0';
		else
			*joined = '\0';
	}
}

enum tc_run_step tc_run_follow_step(struct tc_run_follow *fw, uint64_t seq, const cJSON *j, struct tc_run_ev *ev)
{
	*ev = (struct tc_run_ev){ 0 };
	if (fw->ended || !j)
		return TC_RUN_SKIP;
	const char *method = tc_run_str(j, "method");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "params");
	const cJSON *nsv = cJSON_GetObjectItemCaseSensitive(params, "namespace");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
	if (!method || !cJSON_IsArray(nsv))
		return TC_RUN_SKIP;
	bool root = cJSON_GetArraySize(nsv) == 0;
	const char *status = !strcmp(method, "lifecycle") ? tc_run_str(data, "event") : NULL;
	if (root && status && !strcmp(status, "started")) {
		const char *rid = tc_run_str(data, "run_id");
		if (!fw->in_run && rid && !strcmp(rid, fw->run_id)) {
			fw->in_run = true;
		} else if (fw->in_run && rid && strcmp(rid, fw->run_id)) {
			fw->ended = true;
			return TC_RUN_CUT;
		}
	}
	if (status && !root) {
		char *sub = ns_join(nsv);
		if (!is_subgraph(fw, sub) && fw->nsubgraphs < TC_RUN_SUBGRAPHS)
			fw->subgraphs[fw->nsubgraphs++] = sub;
		else
			free(sub);
	}
	if (!fw->in_run)
		return TC_RUN_SKIP;
	ev->seq = seq;
	ev->event = j;
	ev->method = method;
	ev->params = params;
	ev->data = data;
	ev->namespace_ = nsv;
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(params, "timestamp");
	ev->timestamp = cJSON_IsNumber(ts) ? ts->valuedouble : 0;
	ev->status = status;
	ev->ns = ns_join(nsv);
	const char *node = tc_run_str(params, "node");
	if (node)
		snprintf(ev->node, sizeof(ev->node), "%s", node);
	if (!status)
		graph_ns(fw, ev->ns, ev->node);
	if (root && status &&
	    (!strcmp(status, "completed") || !strcmp(status, "failed") || !strcmp(status, "interrupted"))) {
		fw->ended = true;
		return TC_RUN_END;
	}
	return TC_RUN_EVENT;
}

char *tc_sse_unit(const char *id, const char *event, const char *data, size_t data_len, size_t *len)
{
	size_t il = id ? strlen(id) : 0, el = event ? strlen(event) : 0;
	char *buf = tc_xmalloc(il + el + data_len + 32), *p = buf;
	if (id) {
		memcpy(p, "id: ", 4);
		memcpy(p + 4, id, il);
		p += 4 + il;
		*p++ = '\n';
	}
	if (event) {
		memcpy(p, "event: ", 7);
		memcpy(p + 7, event, el);
		p += 7 + el;
		*p++ = '\n';
	}
	memcpy(p, "data: ", 6);
	memcpy(p + 6, data, data_len);
	p += 6 + data_len;
	memcpy(p, "\n\n", 3);
	*len = (size_t)(p + 2 - buf);
	return buf;
}

char *tc_sse_event(const char *id, const char *event, const cJSON *data, size_t *len)
{
	char *json = data ? cJSON_PrintUnformatted(data) : tc_xstrdup("null");
	char *buf = tc_sse_unit(id, event, json, strlen(json), len);
	free(json);
	return buf;
}

/* ---- a value's text in JSON text, as cJSON reads it (whitespace: every byte up to 32) ---- */

static const char *json_ws(const char *p, const char *end)
{
	while (p < end && (unsigned char)*p <= 32)
		p++;
	return p;
}

/* Past the string that starts at p (its '"'); NULL when it does not end. */
static const char *json_string_end(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '"')
			return p + 1;
		if (*p == '\\' && ++p == end)
			break;
	}
	return NULL;
}

/* Past the value that starts at p; NULL when it does not end before end. */
static const char *json_value_end(const char *p, const char *end)
{
	if (p >= end)
		return NULL;
	if (*p == '"')
		return json_string_end(p, end);
	if (*p == '{' || *p == '[') {
		size_t depth = 0;
		while (p < end) {
			if (*p == '"') {
				p = json_string_end(p, end);
				if (!p)
					return NULL;
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return NULL;
	}
	const char *from = p; /* a number, true, false, null */
	while (p < end && (unsigned char)*p > 32 && !memchr(",:]}", *p, 4))
		p++;
	return p > from ? p : NULL;
}

bool tc_run_json_at(const char *json, size_t len, const char *const *path, const char **at, size_t *at_len)
{
	const char *p = json, *end = json + len;
	for (; *path; path++) {
		p = json_ws(p, end);
		if (p >= end || *p != '{')
			return false;
		for (p++;;) {
			p = json_ws(p, end);
			const char *key_end = p < end && *p == '"' ? json_string_end(p, end) : NULL;
			if (!key_end)
				return false; /* (an empty object, or not one) */
			const char *key = p + 1;
			size_t klen = (size_t)(key_end - 1 - key);
			if (memchr(key, '\\', klen) || memchr(key, '\0', klen))
				return false;
			p = json_ws(key_end, end);
			if (p >= end || *p != ':')
				return false;
			p = json_ws(p + 1, end);
			if (klen == strlen(*path) && !memcmp(key, *path, klen))
				break;
			p = json_value_end(p, end);
			p = p ? json_ws(p, end) : NULL;
			if (!p || p >= end || *p != ',')
				return false;
			p++;
		}
	}
	const char *value_end = json_value_end(p, end);
	if (!value_end)
		return false;
	*at = p;
	*at_len = (size_t)(value_end - p);
	return true;
}

void tc_run_append(char **text, size_t *len, const char *s, size_t max)
{
	size_t add = strlen(s);
	if (*len + add > max) {
		add = max > *len ? max - *len : 0;
		while (add && ((unsigned char)s[add] & 0xC0) == 0x80)
			add--; /* not inside a UTF-8 sequence */
	}
	*text = tc_xrealloc(*text, *len + add + 1);
	memcpy(*text + *len, s, add);
	*len += add;
	(*text)[*len] = '\0';
}

void *tc_slot_find(void *entries, size_t n, size_t size, uint64_t *clock, const char *key, bool create, bool *fresh)
{
	struct tc_slot *free_slot = NULL, *oldest = entries;
	*fresh = false;
	for (size_t i = 0; i < n; i++) {
		struct tc_slot *s = (struct tc_slot *)((char *)entries + i * size);
		if (s->key && !strcmp(s->key, key)) {
			s->used = ++*clock;
			return s;
		}
		if (!s->key && !free_slot)
			free_slot = s;
		if (s->used < oldest->used)
			oldest = s;
	}
	if (!create)
		return NULL;
	struct tc_slot *s = free_slot ? free_slot : oldest;
	free(s->key);
	s->key = tc_xstrdup(key);
	s->used = ++*clock;
	*fresh = true;
	return s;
}

void tc_slot_clear(struct tc_slot *s)
{
	free(s->key);
	*s = (struct tc_slot){ 0 };
}
