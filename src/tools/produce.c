/*
 * threadcast-produce — append events to a thread through the producer
 * contract (FCALL threadcast_append), printing each event's seq.
 *
 *   threadcast-produce [options] THREAD [EVENT-JSON ...]
 *
 * Without EVENT-JSON arguments, events are read from stdin, one JSON object
 * per line (NDJSON; blank lines are skipped). Events that have arrived go
 * out in batches (FCALL threadcast_append_batch, appended whole or not at
 * all; --batch 1 uses threadcast_append) and calls are pipelined; an event
 * is never held back waiting for more. With --retry-ms, a lost connection
 * is retried for that long and the calls that were not acknowledged are
 * sent again (at least once). If the function is not loaded yet, it loads
 * threadcast's function libraries (those threadcast loads, as it loads
 * them). In a Redis Cluster, a MOVED reply
 * sends the events to the master it names (back to the configured node if
 * that one fails). Exit status: 0 when every event was appended, 1 when
 * some were not (each refusal is printed to stderr), 2 on bad usage.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "store.h"
#include "tls.h"
#include "util.h"

extern const char tc_function_source[];
extern const size_t tc_function_source_len;

struct opts {
	const char *url, *maxlen, *ttl, *run, *thread;
	const char *tls_ca, *tls_cert, *tls_key;
	long pipeline, batch, retry_ms;
	bool quiet;
};

/* Redirections followed before giving up (a Cluster resharding in a loop). */
#define MAX_REDIRECTS 16
/* A line longer than this cannot be an event (the contract caps an event at 16 MiB). */
#define MAX_LINE (TC_STORE_EVENT_MAX + 1024)

/* One command in flight: a batch of events (one event with --batch 1). */
struct unit {
	char **json;
	long *line; /* the input line (or argument) of each */
	unsigned n;
};

static void usage(void)
{
	fprintf(stderr, "usage: threadcast-produce [options] THREAD [EVENT-JSON ...]\n"
			"  --redis-url URL   Redis (default $THREADCAST_REDIS_URL or redis://127.0.0.1:6379):\n"
			"                    redis://[[user]:password@]host[:port][/db], rediss://... over TLS,\n"
			"                    or unix:///path[?db=N]\n"
			"  --redis-tls-ca FILE    with rediss://: the CA certificates to trust (PEM; default\n"
			"                    $THREADCAST_REDIS_TLS_CA, else the system's)\n"
			"  --redis-tls-cert FILE  a client certificate (PEM; $THREADCAST_REDIS_TLS_CERT)\n"
			"  --redis-tls-key FILE   its key (PEM; $THREADCAST_REDIS_TLS_KEY)\n"
			"  --maxlen N        cap the thread's stream at about N events\n"
			"  --ttl SECONDS     expire the thread's keys after SECONDS idle\n"
			"  --run ID          run id recorded when an event starts a run\n"
			"  --batch N         events per call, appended whole or not at all (default 16;\n"
			"                    1 appends each event on its own)\n"
			"  --pipeline N      calls in flight (default 8)\n"
			"  --retry-ms MS     retry a lost connection for MS milliseconds\n"
			"  --quiet           do not print seqs\n"
			"Without EVENT-JSON, reads one event per line from stdin.\n");
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* With a rediss:// URL, the TLS settings (--redis-tls-*); else NULL. */
static struct tc_tls *tls;

static redisContext *connect_redis(const struct tc_redis_addr *a)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = a->unix_path ? redisConnectUnixWithTimeout(a->unix_path, tv)
				       : redisConnectWithTimeout(a->host, a->port, tv);
	if (!c || c->err) {
		if (c)
			redisFree(c);
		return NULL;
	}
	char err[300];
	if (tls && !a->unix_path && tc_tls_over_blocking(tls, c->fd, a->host, err, sizeof(err))) {
		/* Said once: --retry-ms tries again, but a refused certificate
		 * stays refused. */
		static char said[300];
		if (strcmp(said, err))
			fprintf(stderr, "threadcast-produce: %s:%d: %s\n", a->host, a->port, err);
		snprintf(said, sizeof(said), "%s", err);
		redisFree(c);
		return NULL;
	}
	redisReply *r = NULL;
	if (a->password)
		r = a->user ? redisCommand(c, "AUTH %s %s", a->user, a->password)
			    : redisCommand(c, "AUTH %s", a->password);
	if (r && r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "threadcast-produce: AUTH: %s\n", r->str);
		freeReplyObject(r);
		redisFree(c);
		exit(1);
	}
	freeReplyObject(r);
	if (a->db) {
		r = redisCommand(c, "SELECT %d", a->db);
		freeReplyObject(r);
	}
	return c;
}

static void send_unit(redisContext *c, const struct opts *o, const struct unit *u)
{
	const struct tc_store_append_opts ao = { .maxlen = o->maxlen, .ttl = o->ttl, .run = o->run };
	if (o->batch == 1) {
		struct tc_store_cmd cmd;
		tc_store_append(&cmd, o->thread, u->json[0], &ao);
		redisAppendCommandArgv(c, cmd.argc, cmd.argv, NULL);
		return;
	}
	const char *argv[TC_STORE_BATCH_ARGV(TC_STORE_BATCH_MAX)];
	char count[24];
	int argc = tc_store_append_batch(argv, count, o->thread, (const char *const *)u->json, u->n, &ao);
	redisAppendCommandArgv(c, argc, argv, NULL);
}

/* "MOVED <slot> <host>:<port>": point addr at that node. Returns 0 or -1. */
static int moved_to(const char *err, struct tc_redis_addr *addr)
{
	const char *sp = strrchr(err, ' '), *colon = sp ? strrchr(sp, ':') : NULL;
	if (!colon || colon == sp + 1)
		return -1;
	int port = atoi(colon + 1);
	if (port <= 0 || port > 65535)
		return -1;
	free(addr->host);
	free(addr->unix_path);
	addr->host = tc_xstrndup(sp + 1, (size_t)(colon - sp - 1));
	addr->unix_path = NULL;
	addr->port = port;
	addr->db = 0;
	return 0;
}

/* ---- input: arguments, or stdin lines read without stdio -------------------------------
 * Reading stdin ourselves tells us whether a whole line is already here, so
 * a batch takes only what has arrived and a slow producer's events are not
 * held back waiting for a batch to fill. */

struct input {
	char **args; /* NULL: stdin */
	char *buf;
	size_t len, cap;
	bool eof;
	long line;
};

/* Whether the next event can be had without blocking. */
static bool input_ready(struct input *in)
{
	if (in->args || in->eof || (in->len && memchr(in->buf, '\n', in->len)))
		return true;
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	return poll(&p, 1, 0) > 0;
}

/* Reads more of stdin into in->buf (blocking); false at the end. */
static bool input_fill(struct input *in)
{
	if (in->cap - in->len < 65536) {
		in->cap = in->cap ? in->cap * 2 : 131072;
		in->buf = tc_xrealloc(in->buf, in->cap);
	}
	ssize_t n;
	do
		n = read(STDIN_FILENO, in->buf + in->len, in->cap - in->len);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	in->len += (size_t)n;
	return true;
}

/* The next event as a new string, NULL at the end. Lines that are blank are
 * skipped; one longer than MAX_LINE is reported and skipped (*skipped++). */
static char *input_next(struct input *in, long *skipped)
{
	if (in->args) {
		if (!*in->args)
			return NULL;
		in->line++;
		return tc_xstrdup(*in->args++);
	}
	bool dropping = false;
	for (;;) {
		char *nl = in->len ? memchr(in->buf, '\n', in->len) : NULL;
		if (!nl && !in->eof && in->len > MAX_LINE) {
			if (!dropping) {
				fprintf(stderr, "threadcast-produce: line %ld: longer than %d bytes, not sent\n",
					in->line + 1, MAX_LINE);
				(*skipped)++;
				dropping = true;
			}
			in->len = 0;
		}
		if (!nl && !in->eof) {
			if (!input_fill(in))
				in->eof = true;
			continue;
		}
		if (!nl && !in->len)
			return NULL;
		size_t n = nl ? (size_t)(nl - in->buf) : in->len, used = nl ? n + 1 : n;
		in->line++;
		char *ev = NULL;
		size_t m = n;
		while (m > 0 && (in->buf[m - 1] == '\r' || in->buf[m - 1] == ' '))
			m--;
		if (!dropping && m > 0)
			ev = tc_xstrndup(in->buf, m);
		memmove(in->buf, in->buf + used, in->len - used);
		in->len -= used;
		dropping = false;
		if (ev)
			return ev;
	}
}

/*
 * A batch's refusal names its event as "event K"; reports it as a refusal of
 * the event on input line L, worded as --batch 1 would, and the lines of the
 * rest of the batch, which were not appended either.
 */
/*
 * Loads threadcast's function libraries as the gateway does: all of them in
 * one transaction (protocol/README.md, "The function libraries"). Returns
 * NULL, or Redis' error (static storage).
 */
static const char *load_functions(redisContext *c)
{
	static char err[256];
	const char *lib;
	size_t off = 0, len;
	int n = 2;
	redisAppendCommand(c, "MULTI");
	while (tc_store_library_next(tc_function_source, tc_function_source_len, &off, &lib, &len)) {
		redisAppendCommand(c, "FUNCTION LOAD REPLACE %b", lib, len);
		n++;
	}
	redisAppendCommand(c, "EXEC");
	err[0] = '\0';
	for (int k = 0; k < n; k++) {
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK)
			return c->errstr;
		/* The first error says what is wrong: a load Redis refused is
		 * in EXEC's answer, one it would not queue comes before. */
		const redisReply *e = r;
		for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && e == r && i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_ERROR)
				e = r->element[i];
		if (e->type == REDIS_REPLY_ERROR && !err[0])
			snprintf(err, sizeof(err), "%s", e->str);
		freeReplyObject(r);
	}
	return err[0] ? err : NULL;
}

static void report_batch_error(const char *err, const struct unit *u)
{
	const char *p = err;
	long k = 0;
	while ((p = strstr(p, "event ")) && !(p[6] >= '1' && p[6] <= '9'))
		p += 6;
	if (p)
		k = strtol(p + 6, NULL, 10);
	if (k >= 1 && k <= (long)u->n) {
		const char *rest = p + 6;
		while (*rest >= '0' && *rest <= '9')
			rest++;
		fprintf(stderr, "threadcast-produce: event %ld: %.*sevent%s\n", u->line[k - 1], (int)(p - err), err,
			rest);
	} else {
		fprintf(stderr, "threadcast-produce: %s\n", err);
	}
	fprintf(stderr,
		"threadcast-produce: events %ld-%ld not appended: a batch is appended whole "
		"or not at all (--batch 1 appends each event on its own)\n",
		u->line[0], u->line[u->n - 1]);
}

static void unit_free(struct unit *u)
{
	for (unsigned i = 0; i < u->n; i++)
		free(u->json[i]);
	u->n = 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .pipeline = 8, .batch = 16 };
	struct tc_redis_addr addr;
	char err[200];
	int i = 1;

	o.url = getenv("THREADCAST_REDIS_URL") ? getenv("THREADCAST_REDIS_URL") : "redis://127.0.0.1:6379";
	o.tls_ca = getenv("THREADCAST_REDIS_TLS_CA");
	o.tls_cert = getenv("THREADCAST_REDIS_TLS_CERT");
	o.tls_key = getenv("THREADCAST_REDIS_TLS_KEY");
	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--quiet")) {
			o.quiet = true;
			continue;
		}
		if (!strcmp(a, "--help")) {
			usage();
			return 0;
		}
		if (!v) {
			usage();
			return 2;
		}
		i++;
		if (!strcmp(a, "--redis-url"))
			o.url = v;
		else if (!strcmp(a, "--redis-tls-ca"))
			o.tls_ca = v;
		else if (!strcmp(a, "--redis-tls-cert"))
			o.tls_cert = v;
		else if (!strcmp(a, "--redis-tls-key"))
			o.tls_key = v;
		else if (!strcmp(a, "--maxlen"))
			o.maxlen = v;
		else if (!strcmp(a, "--ttl"))
			o.ttl = v;
		else if (!strcmp(a, "--run"))
			o.run = v;
		else if (!strcmp(a, "--pipeline"))
			o.pipeline = strtol(v, NULL, 10);
		else if (!strcmp(a, "--batch"))
			o.batch = strtol(v, NULL, 10);
		else if (!strcmp(a, "--retry-ms"))
			o.retry_ms = strtol(v, NULL, 10);
		else {
			fprintf(stderr, "threadcast-produce: unknown option %s\n", a);
			usage();
			return 2;
		}
	}
	if (i >= argc || o.pipeline < 1 || o.pipeline > 10000 || o.batch < 1 || o.batch > TC_STORE_BATCH_MAX) {
		usage();
		return 2;
	}
	o.thread = argv[i++];
	if (!tc_thread_id_valid(o.thread, strlen(o.thread))) {
		fprintf(stderr, "threadcast-produce: \"%s\" is not a valid thread id\n", o.thread);
		return 2;
	}
	if (tc_redis_addr_parse(o.url, &addr, err, sizeof(err))) {
		fprintf(stderr, "threadcast-produce: --redis-url: %s\n", err);
		return 2;
	}
	if (addr.tls) {
		char terr[300];
		if (!(tls = tc_tls_new(o.tls_ca, o.tls_cert, o.tls_key, terr, sizeof(terr)))) {
			fprintf(stderr, "threadcast-produce: TLS: %s\n", terr);
			return 2;
		}
	}
	struct input in = { .args = i < argc ? argv + i : NULL };
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* The window: o.pipeline calls of up to o.batch events each. */
	struct unit *win = tc_xcalloc((size_t)o.pipeline, sizeof(*win));
	for (long k = 0; k < o.pipeline; k++) {
		win[k].json = tc_xcalloc((size_t)o.batch, sizeof(char *));
		win[k].line = tc_xcalloc((size_t)o.batch, sizeof(long));
	}
	long head = 0, count = 0, failures = 0;
	bool eof = false, loaded = false;
	int redirects = 0;
	redisContext *c = NULL;
	long deadline = 0;

	for (;;) {
		if (!c) {
			c = connect_redis(&addr);
			if (!c && redirects) {
				/* The node a MOVED named is gone (a failed master): ask
				 * the configured one again, it redirects to the new one. */
				tc_redis_addr_free(&addr);
				tc_redis_addr_parse(o.url, &addr, err, sizeof(err));
				redirects = 0;
			}
			if (!c) {
				if (!deadline)
					deadline = now_ms() + o.retry_ms;
				if (now_ms() >= deadline) {
					fprintf(stderr, "threadcast-produce: cannot reach Redis at %s\n", o.url);
					failures = -1; /* given up: exit 1, after the frees below */
					break;
				}
				usleep(100000);
				continue;
			}
			/* Resend what was not acknowledged. */
			for (long k = 0; k < count; k++)
				send_unit(c, &o, &win[(head + k) % o.pipeline]);
		}
		/* Fill the window; wait for input only when nothing is in flight. */
		while (!eof && count < o.pipeline && (!count || input_ready(&in))) {
			struct unit *u = &win[(head + count) % o.pipeline];
			char *json;
			while (u->n < (unsigned)o.batch && (!u->n || input_ready(&in)) &&
			       (json = input_next(&in, &failures))) {
				u->line[u->n] = in.line;
				u->json[u->n++] = json;
			}
			if (u->n < (unsigned)o.batch && (in.args ? !*in.args : in.eof && !in.len))
				eof = true;
			if (!u->n)
				break;
			count++;
			send_unit(c, &o, u);
		}
		if (!count)
			break;
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			redisFree(c);
			c = NULL;
			if (!o.retry_ms) {
				fprintf(stderr, "threadcast-produce: lost the connection to Redis\n");
				failures = -1; /* given up: exit 1, after the frees below */
				break;
			}
			continue;
		}
		struct unit *u = &win[head];
		if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "MOVED ", 6) && moved_to(r->str, &addr) == 0 &&
		    ++redirects <= MAX_REDIRECTS) {
			/* A Cluster, and the thread's slot lives elsewhere: nothing in
			 * the window ran here (one thread, one slot); send it there. */
			freeReplyObject(r);
			redisFree(c);
			c = NULL;
			continue;
		}
		if (r->type == REDIS_REPLY_ERROR && o.retry_ms &&
		    (!strncmp(r->str, "LOADING", 7) || !strncmp(r->str, "TRYAGAIN", 8) ||
		     !strncmp(r->str, "CLUSTERDOWN", 11))) {
			/* Redis is restarting: nothing was appended; start over on a
			 * fresh connection, as after a lost one. */
			freeReplyObject(r);
			redisFree(c);
			c = NULL;
			if (!deadline)
				deadline = now_ms() + o.retry_ms;
			if (now_ms() >= deadline) {
				fprintf(stderr, "threadcast-produce: Redis stayed unavailable\n");
				failures = -1; /* given up: exit 1, after the frees below */
				break;
			}
			usleep(100000);
			continue;
		}
		if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "Function not found") && !loaded) {
			/* Load the contract once, then send the whole window again. */
			freeReplyObject(r);
			for (long k = 1; k < count; k++) {
				if (redisGetReply(c, (void **)&r) == REDIS_OK)
					freeReplyObject(r);
			}
			const char *refused = load_functions(c);
			if (refused) {
				fprintf(stderr, "threadcast-produce: FUNCTION LOAD: %s\n", refused);
				failures = -1; /* given up: exit 1, after the frees below */
				break;
			}
			loaded = true;
			for (long k = 0; k < count; k++)
				send_unit(c, &o, &win[(head + k) % o.pipeline]);
			continue;
		}
		deadline = 0;
		if (r->type == REDIS_REPLY_INTEGER) {
			for (unsigned k = 0; !o.quiet && k < u->n; k++)
				printf("%lld\n", r->integer + (long long)k);
		} else if (r->type != REDIS_REPLY_ERROR) {
			fprintf(stderr, "threadcast-produce: event %ld: unexpected reply\n", u->line[0]);
			failures += u->n;
		} else if (u->n == 1) {
			fprintf(stderr, "threadcast-produce: event %ld: %s\n", u->line[0], r->str);
			failures++;
		} else {
			report_batch_error(r->str, u);
			failures += u->n;
		}
		freeReplyObject(r);
		unit_free(u);
		head = (head + 1) % o.pipeline;
		count--;
	}
	if (c)
		redisFree(c);
	for (long k = 0; k < o.pipeline; k++) {
		unit_free(&win[k]);
		free(win[k].json);
		free(win[k].line);
	}
	free(win);
	free(in.buf);
	tc_redis_addr_free(&addr);
	tc_tls_free(tls); /* a pump still ending holds its own reference */
	return failures ? 1 : 0;
}
