#include "spell.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/*
 * Every multi-word field name of the protocol (CDDL 0.0.21), in both
 * spellings. Single words are spelled alike and need no entry.
 */
static const char *const names[][TC_SPELLINGS] = {
	{ "appliedThroughSeq", "applied_through_seq" },
	{ "assistantId", "assistant_id" },
	{ "cacheCreation", "cache_creation" },
	{ "cacheRead", "cache_read" },
	{ "checkpointId", "checkpoint_id" },
	{ "citedText", "cited_text" },
	{ "currentNamespaces", "current_namespaces" },
	{ "endIndex", "end_index" },
	{ "eventId", "event_id" },
	{ "exampleId", "example_id" },
	{ "fileId", "file_id" },
	{ "fromNode", "from_node" },
	{ "graphName", "graph_name" },
	{ "inputTokenDetails", "input_token_details" },
	{ "inputTokens", "input_tokens" },
	{ "interruptId", "interrupt_id" },
	{ "interruptIds", "interrupt_ids" },
	{ "langsmithTracer", "langsmith_tracer" },
	{ "lastEventId", "last_event_id" },
	{ "mimeType", "mime_type" },
	{ "missedEvents", "missed_events" },
	{ "modelType", "model_type" },
	{ "multitaskStrategy", "multitask_strategy" },
	{ "nodeName", "node_name" },
	{ "outputTokenDetails", "output_token_details" },
	{ "outputTokens", "output_tokens" },
	{ "parentId", "parent_id" },
	{ "projectName", "project_name" },
	{ "replayedEvents", "replayed_events" },
	{ "runId", "run_id" },
	{ "serviceTier", "service_tier" },
	{ "startIndex", "start_index" },
	{ "strictResume", "strict_resume" },
	{ "subscriptionId", "subscription_id" },
	{ "systemFingerprint", "system_fingerprint" },
	{ "threadId", "thread_id" },
	{ "toolCallId", "tool_call_id" },
	{ "toolName", "tool_name" },
	{ "totalTokens", "total_tokens" },
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/*
 * Keys whose values belong to the user, not to the protocol: graph state
 * (values, update), tool input/output and arguments, interrupt payloads and
 * responses, run input and config, metadata. Nothing under them is renamed.
 */
static const char *const opaque[] = {
	"values", "update", "input", "output", "args", "payload", "response", "config", "metadata",
};

/* The entry of the dictionary spelled s[0..len) in the spelling other than sp, or -1. */
static int lookup_other(const char *s, size_t len, enum tc_spelling sp)
{
	const int other = sp == TC_SPELL_SEED ? TC_SPELL_021 : TC_SPELL_SEED;
	for (size_t i = 0; i < NNAMES; i++)
		if (strlen(names[i][other]) == len && !memcmp(names[i][other], s, len))
			return (int)i;
	return -1;
}

static bool is_opaque(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(opaque) / sizeof(opaque[0]); i++)
		if (strlen(opaque[i]) == len && !memcmp(opaque[i], s, len))
			return true;
	return false;
}

const char *tc_spell(const char *name, enum tc_spelling sp)
{
	for (size_t i = 0; i < NNAMES; i++)
		if (!strcmp(names[i][0], name) || !strcmp(names[i][1], name))
			return names[i][sp];
	return name;
}

cJSON *tc_spell_get(const cJSON *obj, const char *name, enum tc_spelling sp)
{
	const char *mine = tc_spell(name, sp);
	const char *other = tc_spell(name, sp == TC_SPELL_SEED ? TC_SPELL_021 : TC_SPELL_SEED);
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, mine);
	return v || other == mine ? v : cJSON_GetObjectItemCaseSensitive(obj, other);
}

/* ==== the text rewriter ===================================================================== */

/*
 * A single pass over valid JSON text that copies it, renaming object keys
 * found in the dictionary. Containers are tracked on a stack: whether an
 * object expects a key next, whether the container is user-owned (opaque),
 * and how much of `path` (the keys leading to where renaming starts) leads
 * to it. With out NULL it only measures: the change in length and whether
 * anything would be renamed.
 */
#define MAX_DEPTH 256

struct level {
	bool object, expect_key, opaque;
	int on_path; /* keys of path matched to get here; -1 off the path */
};

struct rewrite {
	const char *const *path; /* NULL-terminated */
	int path_len;
	enum tc_spelling sp;
	char *out;
	size_t n; /* bytes written (or that would be) */
	int renamed;
};

static void emit(struct rewrite *w, const char *p, size_t len)
{
	if (w->out)
		memcpy(w->out + w->n, p, len);
	w->n += len;
}

/* End of the string token that starts at p (an opening quote). */
static const char *string_end(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return end;
}

static void rewrite(struct rewrite *w, const char *p, size_t len)
{
	struct level st[MAX_DEPTH];
	int depth = 0; /* levels on the stack */
	const char *end = p + len;
	const char *key = NULL; /* the key whose value comes next */
	size_t key_len = 0;

	while (p < end) {
		const char c = *p;
		if (c == '"') {
			const char *e = string_end(p, end);
			struct level *l = depth ? &st[depth - 1] : NULL;
			if (l && l->object && l->expect_key) {
				key = p + 1;
				key_len = (size_t)(e - p) - 2;
				l->expect_key = false;
				bool active = !l->opaque && l->on_path == w->path_len;
				int i = active && !memchr(key, '\\', key_len) ? lookup_other(key, key_len, w->sp) : -1;
				if (i >= 0) {
					const char *to = names[i][w->sp];
					emit(w, "\"", 1);
					emit(w, to, strlen(to));
					emit(w, "\"", 1);
					w->renamed++;
				} else {
					emit(w, p, (size_t)(e - p));
				}
			} else {
				emit(w, p, (size_t)(e - p));
				key = NULL;
			}
			p = e;
			continue;
		}
		if (c == '{' || c == '[') {
			struct level child = { .object = c == '{', .expect_key = c == '{' };
			if (!depth) {
				child.on_path = 0;
				child.opaque = false;
			} else {
				const struct level *parent = &st[depth - 1];
				bool via_key = parent->object && key;
				child.opaque = parent->opaque ||
					       (via_key && parent->on_path == w->path_len && is_opaque(key, key_len));
				if (parent->on_path < 0 || parent->on_path == w->path_len)
					child.on_path = parent->on_path; /* off the path, or past it */
				else if (via_key && w->path[parent->on_path] &&
					 strlen(w->path[parent->on_path]) == key_len &&
					 !memcmp(w->path[parent->on_path], key, key_len))
					child.on_path = parent->on_path + 1;
				else
					child.on_path = -1;
			}
			if (depth == MAX_DEPTH) { /* deeper than any protocol value: copy the rest */
				emit(w, p, (size_t)(end - p));
				return;
			}
			st[depth++] = child;
			key = NULL;
			emit(w, p, 1);
			p++;
			continue;
		}
		if (c == '}' || c == ']') {
			if (depth)
				depth--;
		} else if (c == ',') {
			if (depth && st[depth - 1].object)
				st[depth - 1].expect_key = true;
			key = NULL;
		}
		emit(w, p, 1);
		p++;
	}
}

static char *run(const char *json, size_t len, const char *const *path, enum tc_spelling sp, size_t *out_len)
{
	struct rewrite w = { .path = path, .sp = sp };
	while (path[w.path_len])
		w.path_len++;
	rewrite(&w, json, len); /* measure */
	if (!w.renamed)
		return NULL;
	w.out = tc_xmalloc(w.n + 1);
	w.n = 0;
	w.renamed = 0;
	rewrite(&w, json, len);
	w.out[w.n] = '\0';
	*out_len = w.n;
	return w.out;
}

char *tc_spell_json(const char *json, size_t len, enum tc_spelling sp, size_t *out_len)
{
	static const char *const root[] = { NULL };
	return run(json, len, root, sp, out_len);
}

char *tc_spell_event(const char *json, size_t len, const char *method, size_t method_len, enum tc_spelling sp,
		     size_t *out_len)
{
	static const char *const data[] = { "params", "data", NULL };
	static const char *const defined[] = { "lifecycle",       "messages",       "tools",
					       "input.requested", "input.answered", "checkpoints" };
	for (size_t i = 0; i < sizeof(defined) / sizeof(defined[0]); i++)
		if (strlen(defined[i]) == method_len && !memcmp(defined[i], method, method_len))
			return run(json, len, data, sp, out_len);
	return NULL;
}

/* ==== cJSON trees ============================================================================ */

static void count(const cJSON *v, int seen[TC_SPELLINGS])
{
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		if (it->string) {
			for (int sp = 0; sp < TC_SPELLINGS; sp++)
				seen[sp] += lookup_other(it->string, strlen(it->string),
							 sp == TC_SPELL_SEED ? TC_SPELL_021 : TC_SPELL_SEED) >= 0;
			if (is_opaque(it->string, strlen(it->string)))
				continue;
		}
		count(it, seen);
	}
}

int tc_spell_guess(const cJSON *v)
{
	int seen[TC_SPELLINGS] = { 0 };
	count(v, seen);
	if (seen[TC_SPELL_021])
		return TC_SPELL_021;
	return seen[TC_SPELL_SEED] ? TC_SPELL_SEED : -1;
}

void tc_spell_tree(cJSON *v, enum tc_spelling sp)
{
	cJSON *it;
	if (cJSON_IsArray(v)) {
		cJSON_ArrayForEach(it, v) tc_spell_tree(it, sp);
		return;
	}
	if (!cJSON_IsObject(v))
		return;
	cJSON_ArrayForEach(it, v)
	{
		if (!it->string)
			continue;
		int i = lookup_other(it->string, strlen(it->string), sp);
		if (i >= 0 && !(it->type & cJSON_StringIsConst)) {
			cJSON_free(it->string);
			it->string = tc_xstrdup(names[i][sp]);
		}
		if (!is_opaque(it->string, strlen(it->string)))
			tc_spell_tree(it, sp);
	}
}
