#include "protocol.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TC__ERR_CODE(e, code, msg) code,
#define TC__ERR_MSG(e, code, msg) msg,
static const char *const err_codes[] = { TC_ERROR_MAP(TC__ERR_CODE) };
static const char *const err_msgs[] = { TC_ERROR_MAP(TC__ERR_MSG) };

const char *tc_err_code(enum tc_err err)
{
	int i = -1 - (int)err;
	return i >= 0 && i < TC__ERRNUM_COUNT ? err_codes[i] : "unknown_error";
}

const char *tc_err_message(enum tc_err err)
{
	int i = -1 - (int)err;
	return i >= 0 && i < TC__ERRNUM_COUNT ? err_msgs[i] : "internal error";
}

const char *tc_close_reason(enum tc_close code)
{
#define TC__CLOSE_CASE(e, num, reason)                                                                                 \
	case TC_CLOSE_##e:                                                                                             \
		return reason;
	switch (code) {
		TC_CLOSE_MAP(TC__CLOSE_CASE)
	}
#undef TC__CLOSE_CASE
	return "closing";
}

#define TC__METHOD_NAME(e, name, who) name,
static const char *const method_names[] = { TC_METHOD_MAP(TC__METHOD_NAME) };
#define TC__METHOD_RUNTIME(e, name, who) [TC_METHOD_##e] = TC__IS_##who,
#define TC__IS_RUNTIME true
#define TC__IS_GATEWAY false
static const bool method_runtime[] = { TC_METHOD_MAP(TC__METHOD_RUNTIME) };

const char *tc_method_name(enum tc_method m)
{
	return m < TC_METHOD_UNKNOWN ? method_names[m] : "unknown";
}

enum tc_method tc_method_lookup(const char *name, size_t len)
{
	for (int i = 0; i < TC_METHOD_UNKNOWN; i++)
		if (strlen(method_names[i]) == len && !memcmp(method_names[i], name, len))
			return (enum tc_method)i;
	return TC_METHOD_UNKNOWN;
}

enum tc_err tc_error_set(struct tc_error *err, enum tc_err code, const char *fmt, ...)
{
	va_list ap;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return code;
}

size_t tc_utf8_prefix(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	size_t n = max;
	/* Step back over continuation bytes to the start of a sequence. */
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static bool is_js_uint(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return false;
	double d = v->valuedouble;
	if (!(d >= 0 && d <= (double)TC_JS_MAX_SAFE) || floor(d) != d)
		return false;
	*out = (uint64_t)d;
	return true;
}

static bool only_space(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	return true;
}

enum tc_err tc_command_parse(const char *data, size_t len, struct tc_command *cmd, struct tc_error *err)
{
	const char *end = NULL;

	memset(cmd, 0, sizeof(*cmd));
	cmd->method = TC_METHOD_UNKNOWN;
	cmd->root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
	if (!cmd->root) {
		size_t at = end && end >= data ? (size_t)(end - data) : 0;
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "malformed JSON at byte %zu: a command is one JSON object", at);
	}
	/* A NUL inside the frame stops cJSON early; only_space catches it too. */
	if (!only_space(end, data + len))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "malformed JSON: unexpected data after the command at byte %zu",
				    (size_t)(end - data));
	if (!cJSON_IsObject(cmd->root))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "a command must be a JSON object with id, method and params");

	cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd->root, "id");
	if (!id)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "id is required");
	if (!is_js_uint(id, &cmd->id))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "id must be an integer from 0 to 9007199254740991");
	cmd->has_id = true;

	cJSON *method = cJSON_GetObjectItemCaseSensitive(cmd->root, "method");
	if (!method)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "method is required");
	if (!cJSON_IsString(method))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "method must be a string");
	cmd->method_name = method->valuestring;
	cmd->method = tc_method_lookup(method->valuestring, strlen(method->valuestring));

	cJSON *params = cJSON_GetObjectItemCaseSensitive(cmd->root, "params");
	if (params && !cJSON_IsObject(params))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params must be an object");
	cmd->params = params;
	return TC_OK;
}

void tc_command_free(struct tc_command *cmd)
{
	cJSON_Delete(cmd->root);
	memset(cmd, 0, sizeof(*cmd));
}

struct tc_buf *tc_json_frame(const cJSON *v)
{
	char *s = cJSON_PrintUnformatted(v);
	struct tc_buf *b = tc_buf_copy(s, strlen(s));
	free(s);
	return b;
}

/* Integers are added as raw text: cJSON would print 1e15 for 10^15. */
static void add_uint(cJSON *obj, const char *key, uint64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	cJSON_AddRawToObject(obj, key, num);
}

struct tc_buf *tc_response_success(uint64_t id, cJSON *result, int64_t applied_through_seq, enum tc_spelling sp)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "type", "success");
	add_uint(r, "id", id);
	cJSON_AddItemToObject(r, "result", result ? result : cJSON_CreateObject());
	if (applied_through_seq >= 0) {
		cJSON *meta = cJSON_AddObjectToObject(r, "meta");
		add_uint(meta, tc_spell("appliedThroughSeq", sp), (uint64_t)applied_through_seq);
	}
	struct tc_buf *b = tc_json_frame(r);
	cJSON_Delete(r);
	return b;
}

struct tc_buf *tc_response_error(bool has_id, uint64_t id, enum tc_err code, const char *message)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "type", "error");
	if (has_id)
		add_uint(r, "id", id);
	else
		cJSON_AddNullToObject(r, "id");
	cJSON_AddStringToObject(r, "error", tc_err_code(code));
	cJSON_AddStringToObject(r, "message", message ? message : tc_err_message(code));
	struct tc_buf *b = tc_json_frame(r);
	cJSON_Delete(r);
	return b;
}

/* ==== params of the runtime commands (CDDL sections 4a, 10, 11) ============================== */

/*
 * The params are read spelled as 0.0.21 (tc_params_validate respells them
 * first); the messages name each field as the client's spelling
 * does, so "params.interruptId is required" on a seed route and
 * "params.interrupt_id is required" on a 0.0.21 one.
 */
struct check {
	const cJSON *p;     /* the object being checked */
	const char *prefix; /* "params", "params.responses[2]" */
	enum tc_spelling sp;
	struct tc_error *err;
};

static enum tc_err bad(const struct check *c, const char *name, const char *what)
{
	return tc_error_set(c->err, TC_ERR_INVALID_ARGUMENT, "%s%s%s %s", c->prefix, *name ? "." : "",
			    tc_spell(name, c->sp), what);
}

static bool is_namespace(const cJSON *v)
{
	const cJSON *seg;
	if (!cJSON_IsArray(v))
		return false;
	cJSON_ArrayForEach(seg, v) if (!cJSON_IsString(seg)) return false;
	return true;
}

static const cJSON *get(const struct check *c, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(c->p, name);
}

/* Optional object-valued fields shared by several commands. */
static enum tc_err optional_objects(const struct check *c, const char *const *names)
{
	for (; *names; names++) {
		const cJSON *v = get(c, *names);
		if (v && !cJSON_IsObject(v))
			return bad(c, *names, "must be an object");
	}
	return TC_OK;
}

static bool is_run_send(const cJSON *v)
{
	const cJSON *node = cJSON_GetObjectItemCaseSensitive(v, "node");
	return cJSON_IsObject(v) && cJSON_IsString(node);
}

static bool is_goto(const cJSON *v)
{
	const cJSON *it;
	if (cJSON_IsString(v) || is_run_send(v))
		return true;
	if (!cJSON_IsArray(v))
		return false;
	cJSON_ArrayForEach(it, v) if (!cJSON_IsString(it) && !is_run_send(it)) return false;
	return true;
}

static enum tc_err string_field(const struct check *c, const char *name, bool required)
{
	const cJSON *v = get(c, name);
	if (!v)
		return required ? bad(c, name, "is required") : TC_OK;
	return cJSON_IsString(v) ? TC_OK : bad(c, name, "must be a string");
}

/* A Namespace-shaped field (an array of strings; state.get's keys too). */
static enum tc_err namespace_field(const struct check *c, const char *name, bool required)
{
	const cJSON *v = get(c, name);
	if (!v)
		return required ? bad(c, name, "is required") : TC_OK;
	return is_namespace(v) ? TC_OK : bad(c, name, "must be an array of strings");
}

static enum tc_err respond_entry(const struct check *c)
{
	if (namespace_field(c, "namespace", true) || string_field(c, "interrupt_id", true))
		return c->err->code;
	return get(c, "response") ? TC_OK : bad(c, "response", "is required");
}

static enum tc_err check_respond(const struct check *c)
{
	static const char *const upd_cfg_meta[] = { "update", "config", "metadata", NULL };
	const cJSON *v = get(c, "responses");
	if (v) {
		char prefix[40];
		int i = 0;
		const cJSON *e;
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
			return bad(c, "responses", "must be a non-empty array");
		cJSON_ArrayForEach(e, v)
		{
			snprintf(prefix, sizeof(prefix), "params.responses[%d]", i++);
			struct check entry = { e, prefix, c->sp, c->err };
			if (!cJSON_IsObject(e))
				return bad(&entry, "", "must be an object");
			if (respond_entry(&entry))
				return c->err->code;
		}
	} else if (respond_entry(c)) {
		return c->err->code;
	}
	v = get(c, "goto");
	if (v && !is_goto(v))
		return bad(c, "goto", "must be a node name, a {node, input} send, or a list of them");
	return optional_objects(c, upd_cfg_meta);
}

static enum tc_err check_inject(const struct check *c)
{
	if (namespace_field(c, "namespace", true))
		return c->err->code;
	const cJSON *m = get(c, "message");
	if (!m)
		return bad(c, "message", "is required");
	if (!cJSON_IsObject(m))
		return bad(c, "message", "must be an object");
	struct check msg = { m, "params.message", c->sp, c->err };
	const cJSON *role = get(&msg, "role");
	if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "system")))
		return bad(&msg, "role", "must be \"user\" or \"system\"");
	if (string_field(&msg, "content", true) || string_field(&msg, "name", false))
		return c->err->code;
	return TC_OK;
}

enum tc_err tc_params_validate(struct tc_command *cmd, enum tc_spelling sp, struct tc_error *err)
{
	static const char *const cfg_meta[] = { "config", "metadata", NULL };
	const struct check c = { cmd->params, "params", sp, err };
	const cJSON *v;

	tc_spell_tree(cmd->params, TC_SPELL_021); /* workers read 0.0.21 too */
	if (!c.p)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	switch (cmd->method) {
	case TC_METHOD_RUN_START:
		if (string_field(&c, "assistant_id", true))
			return err->code;
		if (!get(&c, "input"))
			return bad(&c, "input", "is required (it may be null)");
		v = get(&c, "langsmith_tracer");
		if (v && !cJSON_IsObject(v))
			return bad(&c, "langsmith_tracer", "must be an object");
		return optional_objects(&c, cfg_meta);

	case TC_METHOD_INPUT_RESPOND:
		return check_respond(&c);

	case TC_METHOD_INPUT_INJECT:
		return check_inject(&c);

	case TC_METHOD_STATE_GET:
		if (namespace_field(&c, "namespace", true))
			return err->code;
		return namespace_field(&c, "keys", false);

	case TC_METHOD_STATE_LIST_CHECKPOINTS: {
		if (namespace_field(&c, "namespace", false))
			return err->code;
		const cJSON *limit = get(&c, "limit");
		if (limit &&
		    (!cJSON_IsNumber(limit) || limit->valuedouble < 0 ||
		     limit->valuedouble != floor(limit->valuedouble) || limit->valuedouble > (double)TC_JS_MAX_SAFE))
			return bad(&c, "limit", "must be a non-negative integer");
		return string_field(&c, "before", false);
	}

	case TC_METHOD_RUN_CANCEL:
		return string_field(&c, "run_id", false);

	case TC_METHOD_STATE_FORK:
		if (string_field(&c, "checkpoint_id", true))
			return err->code;
		v = get(&c, "config");
		if (v && !cJSON_IsObject(v))
			return bad(&c, "config", "must be an object");
		return TC_OK;

	default:
		return tc_error_set(err, TC_ERR_NOT_SUPPORTED, "%s is not a runtime command",
				    tc_method_name(cmd->method));
	}
}

bool tc_event_id_parse(const char *id, char epoch[40], uint64_t *seq)
{
	const char *colon = strchr(id, ':');
	if (!colon || colon == id || colon - id >= 40 || colon[1] < '1' || colon[1] > '9')
		return false; /* no leading zero: one spelling per eventId */
	for (const char *p = id; p < colon; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
			return false;
	uint64_t v = 0;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9' || v > (uint64_t)TC_JS_MAX_SAFE / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > (uint64_t)TC_JS_MAX_SAFE)
		return false;
	memcpy(epoch, id, (size_t)(colon - id));
	epoch[colon - id] = '\0';
	*seq = v;
	return true;
}

cJSON *tc_stream_request_from_query(const char *channels, const char *namespaces, const char *depth, const char *since,
				    struct tc_error *err)
{
	cJSON *req = cJSON_CreateObject();
	const char *nums[2] = { depth, since }, *names[2] = { "depth", "since" };

	if (channels) {
		cJSON *ch = cJSON_AddArrayToObject(req, "channels");
		const char *p = channels;
		for (;;) {
			const char *comma = strchr(p, ',');
			size_t n = comma ? (size_t)(comma - p) : strlen(p);
			if (n) {
				char *name = tc_xstrndup(p, n);
				cJSON_AddItemToArray(ch, cJSON_CreateString(name));
				free(name);
			}
			if (!comma)
				break;
			p = comma + 1;
		}
	}
	if (namespaces) {
		cJSON *ns = cJSON_Parse(namespaces);
		if (!ns) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				     "the namespaces query parameter must be a JSON array of arrays of strings");
			cJSON_Delete(req);
			return NULL;
		}
		cJSON_AddItemToObject(req, "namespaces", ns);
	}
	for (int i = 0; i < 2; i++) {
		if (!nums[i])
			continue;
		char *end;
		double d = strtod(nums[i], &end);
		if (end == nums[i] || *end) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "the %s query parameter must be a number", names[i]);
			cJSON_Delete(req);
			return NULL;
		}
		cJSON_AddNumberToObject(req, names[i], d);
	}
	return req;
}

bool tc_method_is_runtime(enum tc_method m)
{
	return m < TC_METHOD_UNKNOWN && method_runtime[m];
}
