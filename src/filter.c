#include "filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TC__CH_NAME(e, name) name,
static const char *const channel_names[] = { TC_CHANNEL_MAP(TC__CH_NAME) };
#define NFIXED TC_CHANNEL_NAMED

enum tc_channel tc_channel_lookup(const char *s, size_t len)
{
	for (int i = 0; i < NFIXED; i++)
		if (strlen(channel_names[i]) == len && !memcmp(channel_names[i], s, len))
			return (enum tc_channel)i;
	if (len > 7 && !memcmp(s, "custom:", 7))
		return TC_CHANNEL_NAMED;
	return TC_CHANNEL_INVALID;
}

enum tc_channel tc_channel_of_method(const char *m, size_t len)
{
	if ((len == 15 && !memcmp(m, "input.requested", 15)) || (len == 14 && !memcmp(m, "input.answered", 14)))
		return TC_CHANNEL_INPUT;
	enum tc_channel c = tc_channel_lookup(m, len);
	/* "input" is a channel but not an event method. */
	return c == TC_CHANNEL_INPUT ? TC_CHANNEL_INVALID : c;
}

int tc_event_key_init(struct tc_event_key *key, const char *method, size_t method_len, const char *ns, size_t ns_len)
{
	key->channel = tc_channel_of_method(method, method_len);
	if (key->channel == TC_CHANNEL_INVALID)
		return -1;
	key->name = method;
	key->name_len = method_len;
	key->ns = ns;
	key->ns_len = ns_len;
	key->depth = 0;
	for (size_t i = 0; i < ns_len; i++)
		key->depth += ns[i] == '/';
	return 0;
}

/* ---- namespace encoding -------------------------------------------------- */

char *tc_namespace_encode(const cJSON *ns, size_t *len)
{
	static const char hex[] = "0123456789ABCDEF";

	if (!cJSON_IsArray(ns) || cJSON_GetArraySize(ns) > TC_NAMESPACE_MAX_SEGMENTS)
		return NULL;
	size_t cap = 1;
	const cJSON *seg;
	cJSON_ArrayForEach(seg, ns)
	{
		if (!cJSON_IsString(seg))
			return NULL;
		cap += 1 + 3 * strlen(seg->valuestring);
	}
	char *out = tc_xmalloc(cap), *o = out;
	cJSON_ArrayForEach(seg, ns)
	{
		*o++ = '/';
		for (const unsigned char *c = (const unsigned char *)seg->valuestring; *c; c++) {
			if (*c == '%' || *c == '/' || *c < 0x20 || *c == 0x7f) {
				*o++ = '%';
				*o++ = hex[*c >> 4];
				*o++ = hex[*c & 15];
			} else {
				*o++ = (char)*c;
			}
		}
	}
	*o = '\0';
	*len = (size_t)(o - out);
	return out;
}

cJSON *tc_namespace_decode(const char *enc, size_t len)
{
	cJSON *arr = cJSON_CreateArray();
	char *seg = tc_xmalloc(len + 1);
	const char *p = enc, *end = enc + len;

	while (p < end && *p == '/') {
		size_t n = 0;
		for (p++; p < end && *p != '/'; p++) {
			int hi, lo;
			if (*p == '%' && end - p >= 3 && (hi = tc_hex_value(p[1])) >= 0 &&
			    (lo = tc_hex_value(p[2])) >= 0) {
				seg[n++] = (char)(hi << 4 | lo);
				p += 2;
			} else {
				seg[n++] = *p;
			}
		}
		seg[n] = '\0';
		cJSON_AddItemToArray(arr, cJSON_CreateString(seg));
	}
	free(seg);
	return arr;
}

/* ---- parsing -------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts v[0..n) and drops duplicates (freeing them); returns the new count. */
static size_t sort_unique(char **v, size_t n)
{
	if (n < 2)
		return n;
	qsort(v, n, sizeof(*v), cmp_str);
	size_t o = 1;
	for (size_t i = 1; i < n; i++) {
		if (strcmp(v[i], v[o - 1]))
			v[o++] = v[i];
		else
			free(v[i]);
	}
	return o;
}

void tc_filter_free(struct tc_filter *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nnamed; i++)
		free(f->named[i]);
	for (size_t i = 0; i < f->nprefixes; i++)
		free(f->prefixes[i]);
	free(f->named);
	free(f->prefixes);
	free(f->canonical);
	free(f);
}

static void build_canonical(struct tc_filter *f, bool has_namespaces)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *ch = cJSON_AddArrayToObject(o, "channels");
	for (int i = 0; i < NFIXED; i++)
		if (f->channels & (1u << i))
			cJSON_AddItemToArray(ch, cJSON_CreateString(channel_names[i]));
	for (size_t i = 0; i < f->nnamed; i++)
		cJSON_AddItemToArray(ch, cJSON_CreateString(f->named[i]));
	if (has_namespaces) {
		cJSON *ns = cJSON_AddArrayToObject(o, "namespaces");
		for (size_t i = 0; i < f->nprefixes; i++)
			cJSON_AddItemToArray(ns, tc_namespace_decode(f->prefixes[i], strlen(f->prefixes[i])));
	}
	if (f->depth >= 0)
		cJSON_AddNumberToObject(o, "depth", f->depth);
	f->canonical = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
}

enum tc_err tc_filter_parse(const cJSON *params, struct tc_filter **out, struct tc_error *err)
{
	struct tc_filter *f = tc_xcalloc(1, sizeof(*f));
	const cJSON *channels, *namespaces, *depth, *it;
	size_t i;

	*out = NULL;
	f->depth = -1;
	if (!cJSON_IsObject(params)) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params must be an object with channels");
		goto fail;
	}

	channels = cJSON_GetObjectItemCaseSensitive(params, "channels");
	if (!channels) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.channels is required");
		goto fail;
	}
	if (!cJSON_IsArray(channels) || cJSON_GetArraySize(channels) == 0) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
			     "params.channels must be a non-empty array of channel names");
		goto fail;
	}
	if (cJSON_GetArraySize(channels) > TC_FILTER_MAX_ITEMS) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.channels has more than %d entries",
			     TC_FILTER_MAX_ITEMS);
		goto fail;
	}
	f->named = tc_xcalloc((size_t)cJSON_GetArraySize(channels), sizeof(char *));
	i = 0;
	cJSON_ArrayForEach(it, channels)
	{
		enum tc_channel c = cJSON_IsString(it) ? tc_channel_lookup(it->valuestring, strlen(it->valuestring))
						       : TC_CHANNEL_INVALID;
		if (c == TC_CHANNEL_INVALID) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				     "params.channels[%zu] is not a channel: expected values, updates, "
				     "messages, tools, lifecycle, input, checkpoints, tasks, custom or "
				     "custom:<name>",
				     i);
			goto fail;
		}
		if (c == TC_CHANNEL_NAMED)
			f->named[f->nnamed++] = tc_xstrdup(it->valuestring);
		else
			f->channels |= 1u << c;
		i++;
	}
	f->nnamed = sort_unique(f->named, f->nnamed);

	namespaces = cJSON_GetObjectItemCaseSensitive(params, "namespaces");
	if (namespaces && !cJSON_IsNull(namespaces)) {
		if (!cJSON_IsArray(namespaces)) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				     "params.namespaces must be an array of namespaces (arrays of strings)");
			goto fail;
		}
		if (cJSON_GetArraySize(namespaces) > TC_FILTER_MAX_ITEMS) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.namespaces has more than %d entries",
				     TC_FILTER_MAX_ITEMS);
			goto fail;
		}
		f->prefixes = tc_xcalloc((size_t)cJSON_GetArraySize(namespaces), sizeof(char *));
		i = 0;
		cJSON_ArrayForEach(it, namespaces)
		{
			size_t len;
			char *enc = tc_namespace_encode(it, &len);
			if (!enc) {
				tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
					     "params.namespaces[%zu] must be an array of at most %d strings", i,
					     TC_NAMESPACE_MAX_SEGMENTS);
				goto fail;
			}
			f->prefixes[f->nprefixes++] = enc;
			i++;
		}
		f->nprefixes = sort_unique(f->prefixes, f->nprefixes);
	}

	depth = cJSON_GetObjectItemCaseSensitive(params, "depth");
	if (depth && !cJSON_IsNull(depth)) {
		double d = cJSON_IsNumber(depth) ? depth->valuedouble : -1;
		if (!(d >= 0 && d <= (double)TC_JS_MAX_SAFE) || (double)(long long)d != d) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.depth must be a non-negative integer");
			goto fail;
		}
		/* No namespace is deeper than TC_NAMESPACE_MAX_SEGMENTS anyway. */
		f->depth = d > TC_NAMESPACE_MAX_SEGMENTS ? TC_NAMESPACE_MAX_SEGMENTS : (int)d;
	}

	/* An empty namespaces list is read as "not given": every namespace. */
	build_canonical(f, f->nprefixes > 0);
	if (strlen(f->canonical) > TC_FILTER_MAX_BYTES) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
			     "the filter is too large (%zu bytes of canonical JSON, at most %d)", strlen(f->canonical),
			     TC_FILTER_MAX_BYTES);
		goto fail;
	}
	*out = f;
	return TC_OK;
fail:
	tc_filter_free(f);
	return err->code;
}

/* ---- matching --------------------------------------------------------------- */

static bool channel_match(const struct tc_filter *f, const struct tc_event_key *k)
{
	if (k->channel != TC_CHANNEL_NAMED)
		return f->channels & (1u << k->channel);
	for (size_t i = 0; i < f->nnamed; i++)
		if (strlen(f->named[i]) == k->name_len && !memcmp(f->named[i], k->name, k->name_len))
			return true;
	return false;
}

static int prefix_depth(const char *p)
{
	int d = 0;
	for (; *p; p++)
		d += *p == '/';
	return d;
}

/*
 * Whether the encoded namespace ns[0..len) starts with the encoded prefix p,
 * segment by segment. A prefix segment without ':' also takes a segment
 * that is it followed by ":<anything>" (a node's task: "agent" takes
 * "agent:3f2c…"), as the reference server matches; ':' is never escaped, so
 * the encoded bytes compare as the segments do.
 */
static bool prefix_match(const char *p, const char *ns, size_t len)
{
	const char *n = ns, *end = ns + len;
	while (*p) { /* at a '/' of each */
		if (n == end)
			return false;
		const char *pe = strchr(p + 1, '/'), *ne = memchr(n + 1, '/', (size_t)(end - n - 1));
		size_t pl = pe ? (size_t)(pe - p) : strlen(p), nl = ne ? (size_t)(ne - n) : (size_t)(end - n);
		bool same = pl == nl && !memcmp(p, n, pl);
		if (!same && !(pl < nl && n[pl] == ':' && !memcmp(p, n, pl) && !memchr(p, ':', pl)))
			return false;
		p += pl;
		n += nl;
	}
	return true;
}

bool tc_filter_match(const struct tc_filter *f, const struct tc_event_key *k)
{
	if (!channel_match(f, k))
		return false;
	if (f->nprefixes == 0)
		return f->depth < 0 || k->depth <= f->depth;
	for (size_t i = 0; i < f->nprefixes; i++) {
		const char *p = f->prefixes[i];
		if (!prefix_match(p, k->ns, k->ns_len))
			continue;
		if (f->depth < 0 || k->depth - prefix_depth(p) <= f->depth)
			return true;
	}
	return false;
}

/* ---- subscription ids ---------------------------------------------------------- */

char *tc_subscription_id(const struct tc_filter *f, uint64_t nonce)
{
	char *b64 = tc_base64url_encode(f->canonical, strlen(f->canonical));
	size_t n = strlen(b64) + 32;
	char *id = tc_xmalloc(n);
	snprintf(id, n, "s%llu.%s", (unsigned long long)nonce, b64);
	free(b64);
	return id;
}

enum tc_err tc_subscription_id_parse(const char *id, struct tc_filter **out, struct tc_error *err)
{
	const char *p = id;
	size_t len;

	*out = NULL;
	if (*p++ != 's' || *p < '0' || *p > '9')
		goto bad;
	while (*p >= '0' && *p <= '9' && p - id < 21)
		p++;
	if (*p++ != '.')
		goto bad;
	char *json = tc_base64url_decode(p, strlen(p), &len);
	if (!json || len > TC_FILTER_MAX_BYTES || strlen(json) != len) {
		free(json);
		goto bad;
	}
	cJSON *params = cJSON_ParseWithLength(json, len);
	free(json);
	if (!params)
		goto bad;
	struct tc_error inner;
	enum tc_err rc = tc_filter_parse(params, out, &inner);
	cJSON_Delete(params);
	if (rc == TC_OK)
		return TC_OK;
bad:
	return tc_error_set(err, TC_ERR_NO_SUCH_SUBSCRIPTION,
			    "\"%.*s%s\" is not a subscription id issued by this server",
			    (int)tc_utf8_prefix(id, strlen(id), 48), id, strlen(id) > 48 ? "…" : "");
}
