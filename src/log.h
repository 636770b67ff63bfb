/*
 * log.h — structured logs: one JSON object per line on stderr.
 *
 *   tc_log(TC_LOG_INFO, "listening", TC_LI("port", port), TC_LS("host", h));
 *   → {"ts":"2026-11-22T10:00:00.123Z","level":"info","msg":"listening","port":8080,"host":"0.0.0.0"}
 *
 * Fields are typed at the call site (TC_LS string, TC_LI integer, TC_LB bool,
 * TC_LD double), so the compiler checks them and the output is always valid
 * JSON. Below the configured level a call costs one comparison.
 */
#ifndef TC_LOG_H
#define TC_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum tc_log_level { TC_LOG_DEBUG, TC_LOG_INFO, TC_LOG_WARN, TC_LOG_ERROR };

enum tc_logf_type { TC_LOGF_STR, TC_LOGF_INT, TC_LOGF_BOOL, TC_LOGF_DOUBLE };

/** One key/value field of a log line. Build with TC_LS / TC_LI / TC_LB / TC_LD. */
struct tc_logf {
	const char *key;
	enum tc_logf_type type;
	union {
		const char *s; /**< NULL prints as null */
		long long i;
		double d;
	} v;
};

#define TC_LS(k, x) ((struct tc_logf){ .key = (k), .type = TC_LOGF_STR, .v.s = (x) })
#define TC_LI(k, x) ((struct tc_logf){ .key = (k), .type = TC_LOGF_INT, .v.i = (long long)(x) })
#define TC_LB(k, x) ((struct tc_logf){ .key = (k), .type = TC_LOGF_BOOL, .v.i = !!(x) })
#define TC_LD(k, x) ((struct tc_logf){ .key = (k), .type = TC_LOGF_DOUBLE, .v.d = (double)(x) })

/** Current threshold; lines below it are dropped. */
extern enum tc_log_level tc_log_threshold;

/** Parses "debug", "info", "warn" or "error". Returns 0 or -1. */
int tc_log_level_parse(const char *s, enum tc_log_level *out);
/** Sets the threshold and routes libwebsockets' own logs through tc_log. */
void tc_log_init(enum tc_log_level threshold);

/** Writes one line. Use the macros below instead. */
void tc__log(enum tc_log_level lvl, const char *msg, size_t n, const struct tc_logf *f);

/** Logs msg with one or more fields. */
#define tc_log(lvl, msg, ...)                                                                                          \
	do {                                                                                                           \
		if ((lvl) >= tc_log_threshold)                                                                         \
			tc__log((lvl), (msg), sizeof((struct tc_logf[]){ __VA_ARGS__ }) / sizeof(struct tc_logf),      \
				(struct tc_logf[]){ __VA_ARGS__ });                                                    \
	} while (0)

/** Logs msg without fields. */
#define tc_log0(lvl, msg)                                                                                              \
	do {                                                                                                           \
		if ((lvl) >= tc_log_threshold)                                                                         \
			tc__log((lvl), (msg), 0, NULL);                                                                \
	} while (0)

#endif
