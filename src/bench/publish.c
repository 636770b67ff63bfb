/*
 * publish — rate-controlled producer for benchmarks.
 *
 *   publish --redis-url URL --threads T1[,T2…] --count N --rate R [--size B]
 *           [--nthreads K] [--batch B] [--methods M1,M2…] [--http HOST:PORT]
 *           [--spelling seed|0.0.21]
 *
 * Appends N events (spread round-robin over the threads) at R events per
 * second through FCALL threadcast_append, pipelined, each carrying
 * "t":<ns since epoch> taken just before it is sent, and B bytes of padding.
 * With --batch B, each call is FCALL threadcast_append_batch with up to B
 * events of one thread (the threads still take turns, call by call). With
 * --xadd 1, each event is a plain XADD of the same fields to tc:{T}:plain
 * instead: the floor the append path is compared with. With --floor F, each
 * call is FCALL F 1 tc:{T}:floor <n> <event>… (n = 1, or up to --batch):
 * scripts/bench loads F, a function that does only what the contract cannot
 * do without, so the append path is also compared with that. With --tokens 1 the
 * events are what a model streams instead of padding: "messages" text deltas
 * of one word each, in a task's namespace (the deflate scenarios' mix).
 * --rate 0 means as fast as the server answers. With --nthreads K the
 * threads are T1-0 … T1-(K-1). --methods cycles the events' methods (event
 * i has method M[i mod count]; default tasks); every event carries
 * params.timestamp. With --http (or --nchan) the events are POSTed to
 * /pub/<thread> (nchan's publisher location, and bench/blaster's) on one
 * keep-alive connection instead, already in threadcast's envelope (with a
 * per-thread seq, and an event id as long as threadcast's), in --spelling's
 * field names (eventId, or 0.0.21's event_id), so the same load generator
 * reads every system and the frames are the same size. Prints the achieved
 * rate as JSON.
 */
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "store.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- nchan: HTTP/1.1 POSTs, pipelined, responses counted ---------------------------- */

struct http {
	int fd;
	char in[65536];
	size_t len;
};

static int http_connect(struct http *h, const char *hostport)
{
	char host[64];
	const char *colon = strrchr(hostport, ':');
	if (!colon || (size_t)(colon - hostport) >= sizeof(host))
		return -1;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || (h->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	int one = 1;
	setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	h->len = 0;
	if (connect(h->fd, (struct sockaddr *)&a, sizeof(a))) {
		close(h->fd);
		h->fd = -1;
		return -1;
	}
	return 0;
}

static int http_send(struct http *h, const char *path, const char *body, size_t n)
{
	char head[256];
	int hl = snprintf(head, sizeof(head),
			  "POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
			  "Content-Length: %zu\r\n\r\n",
			  path, n);
	return write(h->fd, head, (size_t)hl) == hl && write(h->fd, body, n) == (ssize_t)n ? 0 : -1;
}

/* Reads until one whole response is buffered, consumes it; its status, or -1. */
static int http_response(struct http *h)
{
	for (;;) {
		char *end = memmem(h->in, h->len, "\r\n\r\n", 4);
		if (end) {
			size_t head = (size_t)(end + 4 - h->in), body = 0;
			char *cl = memmem(h->in, head, "Content-Length:", 15);
			if (!cl)
				cl = memmem(h->in, head, "content-length:", 15);
			if (cl)
				body = strtoul(cl + 15, NULL, 10);
			if (h->len >= head + body) {
				int status = atoi(h->in + 9);
				memmove(h->in, h->in + head + body, h->len - head - body);
				h->len -= head + body;
				return status;
			}
		}
		ssize_t r = read(h->fd, h->in + h->len, sizeof(h->in) - h->len);
		if (r <= 0)
			return -1;
		h->len += (size_t)r;
	}
}

/* --tokens: the words of the deltas (a paragraph's worth, cycled out of order). */
static const char *const WORDS[] = {
	"The",     "otter",  "is",    "a",       "semiaquatic", "mammal", "of",        "the",    "weasel",
	"family;", "it",     "eats",  "fish,",   "crabs",       "and",    "frogs,",    "floats", "on",
	"its",     "back",   "and",   "uses",    "stones",      "as",     "tools.",    "Sea",    "otters",
	"hold",    "hands",  "while", "they",    "sleep",       "so",     "they",      "do",     "not",
	"drift",   "apart.", "Their", "fur",     "is",          "the",    "densest",   "of",     "any",
	"animal:", "about",  "a",     "million", "hairs",       "per",    "square",    "inch.",  "Here",
	"is",      "what",   "I",     "found",   "about",       "your",   "question,", "with",   "three",
	"sources", "and",    "a",     "short",   "summary.",
};

int main(int argc, char **argv)
{
	const char *url = "redis://127.0.0.1:6379", *threads = NULL, *nchan = NULL, *spelling = "seed";
	const char *floor_fn = NULL;
	const char *methods[16] = { "tasks" };
	int nmethods = 1;
	char *method_list = NULL;
	long count = 0, size = 100, nthreads = 0, batch = 1, xadd = 0, tokens = 0;
	double rate = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--redis-url"))
			url = argv[i + 1];
		else if (!strcmp(argv[i], "--threads"))
			threads = argv[i + 1];
		else if (!strcmp(argv[i], "--count"))
			count = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rate"))
			rate = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--tokens"))
			tokens = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--nthreads"))
			nthreads = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--nchan") || !strcmp(argv[i], "--http"))
			nchan = argv[i + 1];
		else if (!strcmp(argv[i], "--spelling"))
			spelling = argv[i + 1];
		else if (!strcmp(argv[i], "--methods")) {
			free(method_list);
			method_list = strdup(argv[i + 1]);
			nmethods = 0;
			for (char *m = strtok(method_list, ","); m; m = strtok(NULL, ",")) {
				if (nmethods == 16) {
					fprintf(stderr, "publish: --methods takes at most 16 methods\n");
					free(method_list);
					return 2;
				}
				methods[nmethods++] = m;
			}
		} else if (!strcmp(argv[i], "--batch"))
			batch = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--xadd"))
			xadd = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--floor"))
			floor_fn = argv[i + 1];
		else {
			fprintf(stderr, "publish: unknown option %s\n", argv[i]);
			free(method_list);
			return 2;
		}
	}
	if (batch < 1 || batch > TC_STORE_BATCH_MAX || (xadd && batch != 1)) {
		fprintf(stderr, "publish: --batch must be 1 to %d (1 with --xadd)\n", TC_STORE_BATCH_MAX);
		free(method_list);
		return 2;
	}
	bool snake = !strcmp(spelling, "0.0.21");
	if (!snake && strcmp(spelling, "seed")) {
		fprintf(stderr, "publish: --spelling must be seed or 0.0.21\n");
		free(method_list);
		return 2;
	}
	if (nmethods == 0) {
		fprintf(stderr, "publish: --methods names no method\n");
		free(method_list);
		return 2;
	}
	struct tc_redis_addr a;
	char err[200];
	if (tc_redis_addr_parse(url, &a, err, sizeof(err))) {
		fprintf(stderr, "publish: --redis-url: %s\n", err);
		free(method_list);
		return 2;
	}
	/* Everything below is freed at `done`, whichever way the run ends. */
	int rc = 1, nt = 0;
	char **tv = NULL, *list = NULL, *pad = NULL, *ev = NULL, *evs = NULL;
	uint64_t *seqs = NULL;
	/* Events per reply still to come, oldest first (a ring as deep as the window). */
	long *inflight_n = calloc(512, sizeof(long)), ring_head = 0;
	redisContext *c = NULL;
	struct http h = { .fd = -1 };
	if (nthreads > 0 && threads) {
		tv = calloc((size_t)nthreads, sizeof(*tv));
		for (long i = 0; i < nthreads; i++) {
			tv[i] = malloc(strlen(threads) + 24);
			sprintf(tv[i], "%s-%ld", threads, i);
		}
		nt = (int)nthreads;
	} else if (threads) {
		list = strdup(threads);
		for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
			tv = realloc(tv, (size_t)(nt + 1) * sizeof(*tv));
			tv[nt++] = t; /* points into list */
		}
	}
	if (nt == 0 || count < 1) {
		fprintf(stderr,
			"usage: publish --redis-url URL --threads T[,T…] --count N --rate R [--size B] "
			"[--nthreads K] [--batch B] [--methods M,…] [--http HOST:PORT] [--spelling seed|0.0.21]\n");
		rc = 2;
		goto done;
	}
	seqs = calloc((size_t)nt, sizeof(*seqs));
	if (nchan) {
		if (http_connect(&h, nchan)) {
			perror("publish: connect to nchan");
			goto done;
		}
	} else {
		c = redisConnect(a.host, a.port);
		if (!c || c->err) {
			fprintf(stderr, "publish: cannot connect to Redis\n");
			goto done;
		}
	}
	pad = malloc((size_t)size + 1);
	memset(pad, 'x', (size_t)size);
	pad[size] = '\0';
	ev = malloc((size_t)size + 300);
	evs = malloc((size_t)batch * ((size_t)size + 300));
	uint64_t start = now_ns();
	long sent = 0, acked = 0, inflight = 0, calls = 0;
	while (acked < count) {
		double due = rate > 0 ? (double)(now_ns() - start) / 1e9 * rate : 1e18;
		while (sent < count && sent < due && inflight < (nchan ? 64 : 512)) {
			int k = (int)(sent % nt);
			if (nchan) {
				char path[300];
				uint64_t t = now_ns();
				/* The event id as long as threadcast's: a 13-digit epoch, ':', the seq. */
				int n = snprintf(
					ev, (size_t)size + 300,
					"{\"type\":\"event\",\"%s\":\"6b04c1a2d9e1f:%llu\",\"seq\":%llu,\"method\":\"%s\","
					"\"params\":{\"namespace\":[],\"timestamp\":%llu,\"data\":{\"t\":%llu,\"p\":\"%s\"}}}",
					snake ? "event_id" : "eventId", (unsigned long long)seqs[k] + 1,
					(unsigned long long)seqs[k] + 1, methods[sent % nmethods],
					(unsigned long long)(t / 1000000), (unsigned long long)t, pad);
				seqs[k]++;
				snprintf(path, sizeof(path), "/pub/%s", tv[k]);
				if (http_send(&h, path, ev, (size_t)n))
					goto done;
				sent++;
				inflight++;
			} else {
				/* One call: up to --batch events of thread k, all due. */
				const char *json[TC_STORE_BATCH_MAX];
				long n = 0;
				k = (int)(calls % nt);
				while (n < batch && sent + n < count && sent + n < due) {
					json[n] = evs + (size_t)n * ((size_t)size + 300);
					uint64_t t = now_ns();
					if (tokens) /* what a model streams: a message's text deltas, a word each */
						snprintf(
							(char *)json[n], (size_t)size + 300,
							"{\"method\":\"messages\",\"params\":{\"namespace\":[\"model:9938e864-5005-"
							"5501-a6bf-dac20bfa3bd6\"],\"timestamp\":%llu,\"node\":\"model\",\"data\":"
							"{\"t\":%llu,\"event\":\"content-block-delta\",\"index\":0,\"delta\":"
							"{\"type\":\"text-delta\",\"text\":\"%s \"}}}}",
							(unsigned long long)(t / 1000000), (unsigned long long)t,
							WORDS[(sent + n) * 7919 % (sizeof(WORDS) / sizeof(WORDS[0]))]);
					else
						snprintf(
							(char *)json[n], (size_t)size + 300,
							"{\"method\":\"%s\",\"params\":{\"namespace\":[],\"timestamp\":%llu,"
							"\"data\":{\"t\":%llu,\"p\":\"%s\"}}}",
							methods[(sent + n) % nmethods],
							(unsigned long long)(t / 1000000), (unsigned long long)t, pad);
					n++;
				}
				const struct tc_store_append_opts ao = { .maxlen = "1000000" };
				if (xadd) {
					char key[TC_STORE_KEY_MAX + 8];
					snprintf(key, sizeof(key), "tc:{%s}:plain", tv[k]);
					redisAppendCommandArgv(c, 12,
							       (const char *[]){ "XADD", key, "MAXLEN", "~", "1000000",
										 "*", "m", methods[sent % nmethods],
										 "n", "", "e", json[0] },
							       NULL);
					inflight_n[(ring_head + inflight) % 512] = 1;
					calls++;
					sent++;
					inflight++;
					continue;
				}
				if (floor_fn) {
					char key[TC_STORE_KEY_MAX + 8], num[24];
					const char *fargv[5 + TC_STORE_BATCH_MAX];
					snprintf(key, sizeof(key), "tc:{%s}:floor", tv[k]);
					snprintf(num, sizeof(num), "%ld", n);
					fargv[0] = "FCALL", fargv[1] = floor_fn, fargv[2] = "1", fargv[3] = key,
					fargv[4] = num;
					for (long j = 0; j < n; j++)
						fargv[5 + j] = json[j];
					redisAppendCommandArgv(c, (int)(5 + n), fargv, NULL);
				} else if (batch == 1) {
					struct tc_store_cmd cmd;
					tc_store_append(&cmd, tv[k], json[0], &ao);
					redisAppendCommandArgv(c, cmd.argc, cmd.argv, NULL);
				} else {
					const char *bargv[TC_STORE_BATCH_ARGV(TC_STORE_BATCH_MAX)];
					char num[24];
					int bargc = tc_store_append_batch(bargv, num, tv[k], json, (unsigned)n, &ao);
					redisAppendCommandArgv(c, bargc, bargv, NULL);
				}
				inflight_n[(ring_head + inflight) % 512] = n;
				calls++;
				sent += n;
				inflight++;
			}
		}
		if (inflight) {
			if (nchan) {
				int st = http_response(&h);
				if (st < 200 || st > 299) {
					fprintf(stderr, "publish: nchan answered %d\n", st);
					goto done;
				}
			} else {
				redisReply *r;
				if (redisGetReply(c, (void **)&r) != REDIS_OK)
					goto done;
				bool refused = r->type == REDIS_REPLY_ERROR;
				if (refused)
					fprintf(stderr, "publish: %s\n", r->str);
				freeReplyObject(r);
				if (refused)
					goto done;
				acked += inflight_n[ring_head] - 1;
				ring_head = (ring_head + 1) % 512;
			}
			acked++;
			inflight--;
		} else {
			usleep(200);
		}
	}
	double secs = (double)(now_ns() - start) / 1e9;
	printf("{\"published\":%ld,\"seconds\":%.3f,\"rate\":%.0f}\n", count, secs, (double)count / secs);
	rc = 0;
done:
	if (c)
		redisFree(c);
	if (h.fd >= 0)
		close(h.fd);
	if (!list)
		for (int i = 0; i < nt; i++)
			free(tv[i]);
	free(list);
	free(tv);
	free(seqs);
	free(pad);
	free(ev);
	free(evs);
	free(inflight_n);
	free(method_list);
	tc_redis_addr_free(&a);
	return rc;
}
