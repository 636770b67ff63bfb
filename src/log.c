#include "log.h"

#include <libwebsockets.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum tc_log_level tc_log_threshold = TC_LOG_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

int tc_log_level_parse(const char *s, enum tc_log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (!strcmp(s, level_names[i])) {
			*out = (enum tc_log_level)i;
			return 0;
		}
	}
	return -1;
}

/* Appends s as a JSON string (quotes included) to the line buffer. */
static void put_json_str(char *buf, size_t cap, size_t *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = *o;

	if (n < cap)
		buf[n++] = '"';
	for (; *s && n + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else if (c == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else if (c < 0x20) {
			memcpy(buf + n, "\\u00", 4);
			n += 4;
			buf[n++] = hex[c >> 4];
			buf[n++] = hex[c & 15];
		} else {
			buf[n++] = (char)c;
		}
	}
	if (n < cap)
		buf[n++] = '"';
	*o = n;
}

static void put_raw(char *buf, size_t cap, size_t *o, const char *s)
{
	size_t len = strlen(s);
	if (*o + len > cap)
		len = cap - *o;
	memcpy(buf + *o, s, len);
	*o += len;
}

void tc__log(enum tc_log_level lvl, const char *msg, size_t n, const struct tc_logf *f)
{
	/* Long values are cut; the line stays valid JSON because the tail
	 * ("}\n") is reserved below. */
	char line[4096];
	const size_t cap = sizeof(line) - 2;
	size_t o = 0;
	char tmp[96];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(tmp, sizeof(tmp), "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	put_raw(line, cap, &o, tmp);
	put_raw(line, cap, &o, level_names[lvl]);
	put_raw(line, cap, &o, "\",\"msg\":");
	put_json_str(line, cap, &o, msg);
	for (size_t i = 0; i < n; i++) {
		put_raw(line, cap, &o, ",");
		put_json_str(line, cap, &o, f[i].key);
		put_raw(line, cap, &o, ":");
		switch (f[i].type) {
		case TC_LOGF_STR:
			if (f[i].v.s)
				put_json_str(line, cap, &o, f[i].v.s);
			else
				put_raw(line, cap, &o, "null");
			break;
		case TC_LOGF_INT:
			snprintf(tmp, sizeof(tmp), "%lld", f[i].v.i);
			put_raw(line, cap, &o, tmp);
			break;
		case TC_LOGF_BOOL:
			put_raw(line, cap, &o, f[i].v.i ? "true" : "false");
			break;
		case TC_LOGF_DOUBLE:
			snprintf(tmp, sizeof(tmp), "%.6g", f[i].v.d);
			put_raw(line, cap, &o, tmp);
			break;
		}
	}
	line[o++] = '}';
	line[o++] = '\n';
	fwrite(line, 1, o, stderr);
}

/* libwebsockets' logs arrive here as text lines; re-emit them as JSON. */
static void lws_emit(int level, const char *line)
{
	enum tc_log_level lvl = level & LLL_ERR ? TC_LOG_ERROR : level & LLL_WARN ? TC_LOG_WARN : TC_LOG_DEBUG;
	char copy[512];
	size_t len = strlen(line);

	if (lvl < tc_log_threshold)
		return;
	if (len >= sizeof(copy))
		len = sizeof(copy) - 1;
	memcpy(copy, line, len);
	while (len && (copy[len - 1] == '\n' || copy[len - 1] == '\r'))
		len--;
	copy[len] = '\0';
	tc_log(lvl, "libwebsockets", TC_LS("detail", copy));
}

void tc_log_init(enum tc_log_level threshold)
{
	/* stderr is unbuffered: each line leaves in one write(), so lines from
	 * several processes sharing a pipe do not interleave. */
	tc_log_threshold = threshold;
	lws_set_log_level(threshold == TC_LOG_DEBUG ? LLL_ERR | LLL_WARN | LLL_NOTICE : LLL_ERR | LLL_WARN, lws_emit);
}
