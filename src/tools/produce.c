/*
 * threadcast-produce — append events to a thread through the producer
 * contract (FCALL threadcast_append), printing each event's seq.
 *
 *   threadcast-produce [options] THREAD [EVENT-JSON ...]
 *
 * Without EVENT-JSON arguments, events are read from stdin, one JSON object
 * per line (NDJSON; blank lines are skipped). Commands are pipelined. With
 * --retry-ms, a lost connection is retried for that long and the events
 * that were not acknowledged are sent again (at least once). If the
 * function is not loaded yet, it loads it (the same library threadcast
 * loads). In a Redis Cluster, a MOVED reply sends the events to the master
 * it names (back to the configured node if that one fails). Exit status: 0 when every event was appended, 1 when some were
 * refused (each refusal is printed to stderr), 2 on bad usage.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "store.h"
#include "util.h"

extern const char tc_function_source[];
extern const size_t tc_function_source_len;

struct opts {
	const char *url, *maxlen, *ttl, *run, *thread;
	long pipeline, retry_ms;
	bool quiet;
};

/* Redirections followed before giving up (a Cluster resharding in a loop). */
#define MAX_REDIRECTS 16

struct pending {
	char *json;
	long line;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: threadcast-produce [options] THREAD [EVENT-JSON ...]\n"
		"  --redis-url URL   Redis (default $THREADCAST_REDIS_URL or redis://127.0.0.1:6379)\n"
		"  --maxlen N        cap the thread's stream at about N events\n"
		"  --ttl SECONDS     expire the thread's keys after SECONDS idle\n"
		"  --run ID          run id recorded when an event starts a run\n"
		"  --pipeline N      events in flight (default 64)\n"
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

static redisContext *connect_redis(const struct tc_redis_addr *a)
{
	struct timeval tv = { 2, 0 };
	redisContext *c = a->unix_path ? redisConnectUnixWithTimeout(a->unix_path, tv) :
					 redisConnectWithTimeout(a->host, a->port, tv);
	if (!c || c->err) {
		if (c)
			redisFree(c);
		return NULL;
	}
	redisReply *r = NULL;
	if (a->password)
		r = a->user ? redisCommand(c, "AUTH %s %s", a->user, a->password) :
			      redisCommand(c, "AUTH %s", a->password);
	if (r && r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "threadcast-produce: AUTH: %s\n", r->str);
		exit(1);
	}
	freeReplyObject(r);
	if (a->db) {
		r = redisCommand(c, "SELECT %d", a->db);
		freeReplyObject(r);
	}
	return c;
}

static void append_cmd(redisContext *c, const struct opts *o, const char *json)
{
	struct tc_store_cmd cmd;
	tc_store_append(&cmd, o->thread, json, &(struct tc_store_append_opts){
		.maxlen = o->maxlen, .ttl = o->ttl, .run = o->run });
	redisAppendCommandArgv(c, cmd.argc, cmd.argv, NULL);
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

/* Reads the next event (from argv or stdin) into a new string; NULL at the end. */
static char *next_event(char ***args, long *line)
{
	if (*args) {
		if (!**args)
			return NULL;
		(*line)++;
		return tc_xstrdup(*(*args)++);
	}
	static char *buf;
	static size_t cap;
	ssize_t n;
	while ((n = getline(&buf, &cap, stdin)) >= 0) {
		(*line)++;
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
			buf[--n] = '\0';
		if (n > 0)
			return tc_xstrdup(buf);
	}
	free(buf);
	buf = NULL;
	return NULL;
}

int main(int argc, char **argv)
{
	struct opts o = { .pipeline = 64 };
	struct tc_redis_addr addr;
	char err[200];
	int i = 1;

	o.url = getenv("THREADCAST_REDIS_URL") ? getenv("THREADCAST_REDIS_URL") : "redis://127.0.0.1:6379";
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
		else if (!strcmp(a, "--maxlen"))
			o.maxlen = v;
		else if (!strcmp(a, "--ttl"))
			o.ttl = v;
		else if (!strcmp(a, "--run"))
			o.run = v;
		else if (!strcmp(a, "--pipeline"))
			o.pipeline = strtol(v, NULL, 10);
		else if (!strcmp(a, "--retry-ms"))
			o.retry_ms = strtol(v, NULL, 10);
		else {
			fprintf(stderr, "threadcast-produce: unknown option %s\n", a);
			usage();
			return 2;
		}
	}
	if (i >= argc || o.pipeline < 1 || o.pipeline > 100000) {
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
	char **args = i < argc ? argv + i : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct pending *win = tc_xcalloc((size_t)o.pipeline, sizeof(*win));
	long head = 0, count = 0, line = 0, failures = 0;
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
					return 1;
				}
				usleep(100000);
				continue;
			}
			/* Resend what was not acknowledged. */
			for (long k = 0; k < count; k++)
				append_cmd(c, &o, win[(head + k) % o.pipeline].json);
		}
		while (!eof && count < o.pipeline) {
			char *json = next_event(&args, &line);
			if (!json) {
				eof = true;
				break;
			}
			win[(head + count) % o.pipeline] = (struct pending){ json, line };
			count++;
			append_cmd(c, &o, json);
		}
		if (!count)
			break;
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			redisFree(c);
			c = NULL;
			if (!o.retry_ms) {
				fprintf(stderr, "threadcast-produce: lost the connection to Redis\n");
				return 1;
			}
			continue;
		}
		struct pending *p = &win[head];
		if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "MOVED ", 6) &&
		    moved_to(r->str, &addr) == 0 && ++redirects <= MAX_REDIRECTS) {
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
				return 1;
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
			r = redisCommand(c, "FUNCTION LOAD REPLACE %b", tc_function_source, tc_function_source_len);
			if (!r || r->type == REDIS_REPLY_ERROR) {
				fprintf(stderr, "threadcast-produce: FUNCTION LOAD: %s\n", r ? r->str : c->errstr);
				return 1;
			}
			freeReplyObject(r);
			loaded = true;
			for (long k = 0; k < count; k++)
				append_cmd(c, &o, win[(head + k) % o.pipeline].json);
			continue;
		}
		deadline = 0;
		if (r->type == REDIS_REPLY_INTEGER) {
			if (!o.quiet)
				printf("%lld\n", r->integer);
		} else {
			fprintf(stderr, "threadcast-produce: event %ld: %s\n", p->line,
				r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
			failures++;
		}
		freeReplyObject(r);
		free(p->json);
		head = (head + 1) % o.pipeline;
		count--;
	}
	if (c)
		redisFree(c);
	free(win);
	tc_redis_addr_free(&addr);
	return failures ? 1 : 0;
}
