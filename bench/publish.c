/*
 * publish — rate-controlled producer for benchmarks.
 *
 *   publish --redis-url URL --threads T1[,T2…] --count N --rate R [--size B]
 *
 * Appends N events (spread round-robin over the threads) at R events per
 * second through FCALL threadcast_append, pipelined, each carrying
 * "t":<ns since epoch> taken just before it is sent, and B bytes of padding.
 * --rate 0 means as fast as Redis answers. Prints the achieved rate.
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *url = "redis://127.0.0.1:6379", *threads = NULL;
	long count = 0, size = 100;
	double rate = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--redis-url")) url = argv[i + 1];
		else if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
		else if (!strcmp(argv[i], "--count")) count = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rate")) rate = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--size")) size = atol(argv[i + 1]);
	}
	struct tc_redis_addr a;
	char err[200];
	if (!threads || count < 1 || tc_redis_addr_parse(url, &a, err, sizeof(err))) {
		fprintf(stderr, "usage: publish --redis-url URL --threads T[,T…] --count N --rate R [--size B]\n");
		return 2;
	}
	char *list = strdup(threads), **tv = NULL;
	int nt = 0;
	for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
		tv = realloc(tv, (size_t)(nt + 1) * sizeof(*tv));
		tv[nt++] = t;
	}
	redisContext *c = redisConnect(a.host, a.port);
	if (!c || c->err)
		return 1;
	char *pad = malloc((size_t)size + 1);
	memset(pad, 'x', (size_t)size);
	pad[size] = '\0';
	char *ev = malloc((size_t)size + 200);
	uint64_t start = now_ns();
	long sent = 0, acked = 0, inflight = 0;
	while (acked < count) {
		double due = rate > 0 ? (double)(now_ns() - start) / 1e9 * rate : 1e18;
		while (sent < count && sent < due && inflight < 512) {
			snprintf(ev, (size_t)size + 200,
				 "{\"method\":\"tasks\",\"params\":{\"namespace\":[],\"data\":{\"t\":%llu,\"p\":\"%s\"}}}",
				 (unsigned long long)now_ns(), pad);
			const char *argv2[] = { "FCALL", "threadcast_append", "1", tv[sent % nt], ev, "MAXLEN", "1000000" };
			redisAppendCommandArgv(c, 7, argv2, NULL);
			sent++;
			inflight++;
		}
		if (inflight) {
			redisReply *r;
			if (redisGetReply(c, (void **)&r) != REDIS_OK)
				return 1;
			if (r->type == REDIS_REPLY_ERROR) {
				fprintf(stderr, "publish: %s\n", r->str);
				return 1;
			}
			freeReplyObject(r);
			acked++;
			inflight--;
		} else {
			usleep(200);
		}
	}
	double secs = (double)(now_ns() - start) / 1e9;
	printf("{\"published\":%ld,\"seconds\":%.3f,\"rate\":%.0f}\n", count, secs, (double)count / secs);
	redisFree(c);
	return 0;
}
