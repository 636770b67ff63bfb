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

#define TC__METHOD_NAME(e, name) name,
static const char *const method_names[] = { TC_METHOD_MAP(TC__METHOD_NAME) };

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

enum tc_err tc_command_parse(const char *data, size_t len, struct tc_command *cmd,
			     struct tc_error *err)
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
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "id must be an integer from 0 to 9007199254740991");
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

struct tc_buf *tc_response_success(uint64_t id, cJSON *result, int64_t applied_through_seq)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "type", "success");
	add_uint(r, "id", id);
	cJSON_AddItemToObject(r, "result", result ? result : cJSON_CreateObject());
	if (applied_through_seq >= 0) {
		cJSON *meta = cJSON_AddObjectToObject(r, "meta");
		add_uint(meta, "appliedThroughSeq", (uint64_t)applied_through_seq);
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
