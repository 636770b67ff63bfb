/*
 * router.c — the route table and its matcher (router.h). Pure: strings in,
 * a route id and parameters out.
 */
#include "router.h"

#include <assert.h>
#include <string.h>

#define TC__ROUTE_LINE(e, m, p) [TC_ROUTE_##e] = { .id = TC_ROUTE_##e, .methods = (m), .pattern = (p) },
#define TC__REST_ROUTE_LINE(e, p, ms) [TC_ROUTE_##e] = { .id = TC_ROUTE_##e, .methods = 0 ms, .pattern = (p) },
const struct tc_route tc_routes[TC_ROUTE_COUNT] = { TC_CORE_ROUTE_MAP(TC__ROUTE_LINE) TC_REST_ROUTE_MAP(
	TC__REST_ROUTE_LINE, TC__REST_METHOD_BIT) };

/*
 * How a parameter is validated, and what a client is told when it is not
 * valid. The last rule, with no name, is every other parameter's: the ids
 * threadcast takes in a path all use the thread id alphabet until a route
 * needs another.
 */
/* A subgraph's namespace: its nodes' names joined by "|" ("parent|child"), any printable bytes. */
static bool namespace_valid(const char *s, size_t len)
{
	if (len < 1 || len > TC_ROUTE_VALUE_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < ' ' || s[i] == 0x7f)
			return false;
	return true;
}

static const struct param_rule {
	const char *name;
	bool (*valid)(const char *s, size_t len);
	const char *error, *message;
} param_rules[] = {
	{ "thread_id", tc_thread_id_valid, "invalid_thread_id",
	  "a thread id is 1 to 128 characters of A-Z a-z 0-9 . _ : -" },
	{ "namespace", namespace_valid, "invalid_argument",
	  "a subgraph namespace is 1 to 128 printable characters (node names joined by |)" },
	{ NULL, tc_thread_id_valid, "invalid_argument",
	  "a path parameter is 1 to 128 characters of A-Z a-z 0-9 . _ : -" },
};

static const struct param_rule *rule_of(const char *name, size_t len)
{
	size_t i;
	for (i = 0; param_rules[i].name; i++)
		if (strlen(param_rules[i].name) == len && !memcmp(param_rules[i].name, name, len))
			break;
	return &param_rules[i];
}

/* A segment of a path or pattern: the bytes between two '/' (or the end). */
struct seg {
	const char *s;
	size_t len;
};

/* The segment *p starts (at its '/'), advancing *p past it; false at the end. */
static bool next_seg(const char **p, struct seg *g)
{
	if (**p != '/')
		return false;
	g->s = *p + 1;
	g->len = strcspn(g->s, "/");
	*p = g->s + g->len;
	return true;
}

static size_t count_segs(const char *p)
{
	struct seg g;
	size_t n = 0;
	while (next_seg(&p, &g))
		n++;
	return n;
}

static bool is_param(const struct seg *g)
{
	return g->len > 1 && g->s[0] == ':';
}

static bool seg_equal(const struct seg *a, const struct seg *b)
{
	return a->len == b->len && !memcmp(a->s, b->s, a->len);
}

static void set_bad(struct tc_route_match *m, int id, const struct seg *param)
{
	const struct param_rule *r = rule_of(param->s + 1, param->len - 1);
	m->id = id;
	m->error = r->error;
	m->message = r->message;
}

/*
 * Matches r's pattern against path segment by segment, capturing parameters
 * into m. FOUND means the shape and every parameter fit (the method is the
 * caller's business); BAD_PARAM, the shape fits but a parameter does not.
 */
static enum tc_match match_shape(const struct tc_route *r, const char *path, struct tc_route_match *m)
{
	const char *pp = r->pattern, *sp = path;
	struct seg pg, sg, bad = { 0 };

	m->nparams = 0;
	for (;;) {
		bool more_p = next_seg(&pp, &pg), more_s = next_seg(&sp, &sg);
		if (!more_p || !more_s) {
			if (more_p || more_s)
				return TC_MATCH_NONE;
			break;
		}
		if (!is_param(&pg)) {
			if (!seg_equal(&pg, &sg))
				return TC_MATCH_NONE;
			continue;
		}
		const struct param_rule *rule = rule_of(pg.s + 1, pg.len - 1);
		if (!rule->valid(sg.s, sg.len) || sg.len > TC_ROUTE_VALUE_MAX) {
			if (!bad.s)
				bad = pg; /* the first bad parameter is the one reported */
			continue;
		}
		assert(m->nparams < TC_ROUTE_PARAMS_MAX); /* the table's patterns keep to it */
		struct tc_route_param *prm = &m->params[m->nparams++];
		prm->name = pg.s + 1;
		prm->name_len = pg.len - 1;
		memcpy(prm->value, sg.s, sg.len);
		prm->value[sg.len] = '\0';
	}
	if (bad.s) {
		set_bad(m, r->id, &bad);
		return TC_MATCH_BAD_PARAM;
	}
	m->id = r->id;
	return TC_MATCH_FOUND;
}

/*
 * A path with more segments than r's pattern that starts with the
 * pattern's text before its first parameter and ends with the text after
 * its last one: the parameter itself holds a '/' (the client sent "a%2Fb"),
 * which no parameter rule allows. Sets m to the first parameter's complaint.
 */
static bool spans_param(const struct tc_route *r, const char *path, size_t path_segs, struct tc_route_match *m)
{
	const char *first = strstr(r->pattern, "/:"), *last, *p;

	if (!first || path_segs <= count_segs(r->pattern))
		return false;
	for (last = first; (p = strstr(last + 1, "/:")); last = p)
		;
	const char *tail = last + 1 + strcspn(last + 1, "/");
	size_t head_len = (size_t)(first - r->pattern) + 1, tail_len = strlen(tail), len = strlen(path);
	/* A pattern ending in its parameter ("/threads/:thread_id") cannot tell
	 * "a/b" from a deeper path no route has: those are unknown paths. */
	if (!tail_len || len < head_len + tail_len || memcmp(path, r->pattern, head_len) ||
	    memcmp(path + len - tail_len, tail, tail_len))
		return false;
	struct seg param = { first + 1, strcspn(first + 1, "/") };
	set_bad(m, r->id, &param);
	return true;
}

enum tc_match tc_route_match(const struct tc_route *routes, size_t n, unsigned method, const char *path,
			     struct tc_route_match *m)
{
	struct tc_route_match cand;
	enum tc_match best = TC_MATCH_NONE;

	/* Table order among equals; a route for the method beats one for the
	 * path only, which beats a bad parameter. */
	for (size_t i = 0; i < n; i++) {
		enum tc_match r = match_shape(&routes[i], path, &cand);
		if (r == TC_MATCH_FOUND && (routes[i].methods & method)) {
			*m = cand;
			return TC_MATCH_FOUND;
		}
		if (r == TC_MATCH_FOUND && best != TC_MATCH_METHOD) {
			*m = cand;
			best = TC_MATCH_METHOD;
		} else if (r == TC_MATCH_BAD_PARAM && best == TC_MATCH_NONE) {
			*m = cand;
			best = TC_MATCH_BAD_PARAM;
		}
	}
	if (best != TC_MATCH_NONE)
		return best;
	size_t segs = count_segs(path);
	for (size_t i = 0; i < n; i++)
		if (spans_param(&routes[i], path, segs, m))
			return TC_MATCH_BAD_PARAM;
	return TC_MATCH_NONE;
}

const char *tc_route_param(const struct tc_route_match *m, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < m->nparams; i++)
		if (m->params[i].name_len == len && !memcmp(m->params[i].name, name, len))
			return m->params[i].value;
	return NULL;
}
