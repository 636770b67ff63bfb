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
 *
 * --run ID appends one agent run of one thread instead, as a worker streams
 * it through the producer contract: the root lifecycle "started" naming run
 * ID (and appended with RUN ID), then turns of a model call (in node
 * "model": message-start, a text block of TURN_WORDS one-word text deltas,
 * a tool call block streamed in three chunks, message-finish), its tool's
 * tool-started / tool-finished (node "tools"), and per node an updates,
 * values and checkpoints event, then the root "completed". --count is
 * rounded up to whole turns. Every event carries "t" (ns since the epoch,
 * when it is sent) in its data, and in updates' values too, so a reader
 * of a run stream (whose values and updates units pass data through) can
 * measure latency. With --rest 1 the run is reported to threadcast_rest as
 * a REST worker reports it: run.started before its first event, then
 * run.finished (success). --dry-run 1 prints what the run would be without
 * connecting. Both print "kinds": events per kind ("messages/…/text-delta",
 * "values", …), so a reader knows what each kind of viewer must get.
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

/* ---- --run: an agent run's events ---------------------------------------------------- */

#define TURN_WORDS 40                 /* text deltas per model call */
#define TURN_EVENTS (TURN_WORDS + 17) /* events per turn (see run_event) */
#define NWORDS (sizeof(WORDS) / sizeof(WORDS[0]))

/* What an event of a run is: publish --run counts them ("kinds" in its output). */
enum kind {
	K_STARTED,
	K_COMPLETED,
	K_MSG_START,
	K_TEXT_START,
	K_TEXT_DELTA,
	K_TEXT_FINISH,
	K_TOOL_START,
	K_TOOL_DELTA,
	K_TOOL_FINISH,
	K_MSG_FINISH,
	K_TOOL_STARTED,
	K_TOOL_FINISHED,
	K_UPDATES,
	K_VALUES,
	K_CHECKPOINTS,
	NKINDS
};
static const char *const KIND_NAMES[NKINDS] = {
	"lifecycle/started",
	"lifecycle/completed",
	"messages/message-start",
	"messages/content-block-start/text",
	"messages/content-block-delta/text-delta",
	"messages/content-block-finish/text",
	"messages/content-block-start/tool_call_chunk",
	"messages/content-block-delta/tool_call_chunk",
	"messages/content-block-finish/tool_call",
	"messages/message-finish",
	"tools/tool-started",
	"tools/tool-finished",
	"updates",
	"values",
	"checkpoints",
};

/* Events in a run of about count: the two lifecycle events and whole turns. */
static long run_length(long count)
{
	long turns = count > 2 ? (count - 2 + TURN_EVENTS - 1) / TURN_EVENTS : 1;
	return 2 + turns * TURN_EVENTS;
}

/* Word w of turn's text, with the space before it (none before the first). */
static const char *turn_word(long turn, int w, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s", w ? " " : "", WORDS[(size_t)(turn * TURN_WORDS + w) * 7919 % NWORDS]);
	return buf;
}

/* The whole text of a turn's message. */
static void turn_text(long turn, char *out, size_t cap)
{
	size_t n = 0;
	char word[32];
	out[0] = '\0';
	for (int w = 0; w < TURN_WORDS && n < cap; w++)
		n += (size_t)snprintf(out + n, cap - n, "%s", turn_word(turn, w, word, sizeof(word)));
}

/*
 * What event k (from 0) of a turn is: message-start, the text block (start,
 * TURN_WORDS deltas, finish), the tool call block (start, three deltas
 * carrying the arguments so far, finish), message-finish, tool-started,
 * tool-finished, then for the model's step and the tools' each updates,
 * values and a checkpoint.
 */
static enum kind turn_kind(int k)
{
	static const enum kind tail[] = {
		K_TEXT_FINISH, K_TOOL_START,  K_TOOL_DELTA,   K_TOOL_DELTA,    K_TOOL_DELTA,
		K_TOOL_FINISH, K_MSG_FINISH,  K_TOOL_STARTED, K_TOOL_FINISHED, K_UPDATES,
		K_VALUES,      K_CHECKPOINTS, K_UPDATES,      K_VALUES,        K_CHECKPOINTS
	};
	_Static_assert(2 + TURN_WORDS + sizeof(tail) / sizeof(tail[0]) == TURN_EVENTS, "a turn's events");
	return k == 0               ? K_MSG_START
	       : k == 1             ? K_TEXT_START
	       : k < 2 + TURN_WORDS ? K_TEXT_DELTA
				    : tail[k - 2 - TURN_WORDS];
}

/* Event i of a run of n events (run_length), sent at t, into out; returns its kind. */
static enum kind run_event(char *out, size_t cap, long i, long n, const char *run_id, uint64_t t)
{
	static const char args[] = "{\"query\":\"sea otters tool use\"}";
	char text[TURN_WORDS * 24], word[32], data[TURN_WORDS * 24 + 768], ns[96], tool_msg[128] = "";
	const unsigned long long ts = t / 1000000, tn = t;
	if (i == 0 || i == n - 1) {
		snprintf(out, cap,
			 "{\"method\":\"lifecycle\",\"params\":{\"namespace\":[],\"timestamp\":%llu,\"data\":"
			 "{\"event\":\"%s\",\"run_id\":\"%s\",\"graph_name\":\"agent\",\"t\":%llu}}}",
			 ts, i ? "completed" : "started", run_id, tn);
		return i ? K_COMPLETED : K_STARTED;
	}
	long turn = (i - 1) / TURN_EVENTS;
	int k = (int)((i - 1) % TURN_EVENTS);
	enum kind kd = turn_kind(k);
	const char *method = kd == K_TOOL_STARTED || kd == K_TOOL_FINISHED ? "tools" : "messages";
	/* Each step a task of its own, as LangGraph's: the namespace names it, the node is its name. */
	bool tools = kd == K_TOOL_STARTED || kd == K_TOOL_FINISHED || k >= TURN_EVENTS - 3;
	snprintf(ns, sizeof(ns), "\"namespace\":[\"%s:9938e864-5005-5501-a6bf-%012lx\"],\"node\":\"%s\"",
		 tools ? "tools" : "model", turn * 2 + tools, tools ? "tools" : "model");
	turn_text(turn, text, sizeof(text));
	switch (kd) {
	case K_MSG_START:
		snprintf(data, sizeof(data), "\"event\":\"message-start\",\"role\":\"ai\",\"id\":\"msg-%s-%ld\"",
			 run_id, turn);
		break;
	case K_TEXT_START:
		snprintf(data, sizeof(data),
			 "\"event\":\"content-block-start\",\"index\":0,\"content\":"
			 "{\"type\":\"text\",\"text\":\"\"}");
		break;
	case K_TEXT_DELTA:
		snprintf(data, sizeof(data),
			 "\"event\":\"content-block-delta\",\"index\":0,\"delta\":"
			 "{\"type\":\"text-delta\",\"text\":\"%s\"}",
			 turn_word(turn, k - 2, word, sizeof(word)));
		break;
	case K_TEXT_FINISH:
		snprintf(data, sizeof(data),
			 "\"event\":\"content-block-finish\",\"index\":0,\"content\":"
			 "{\"type\":\"text\",\"text\":\"%s\"}",
			 text);
		break;
	case K_TOOL_START:
		snprintf(data, sizeof(data),
			 "\"event\":\"content-block-start\",\"index\":1,\"content\":"
			 "{\"type\":\"tool_call_chunk\",\"id\":\"call-%ld\",\"name\":\"search\",\"args\":\"\"}",
			 turn);
		break;
	case K_TOOL_DELTA: {
		/* A block-delta shallow-merges its fields: each carries the arguments so far, escaped. */
		int d = k - (TURN_WORDS + 4), part = (int)sizeof(args) / 3 + 1;
		int upto = (d + 1) * part < (int)sizeof(args) - 1 ? (d + 1) * part : (int)sizeof(args) - 1;
		char so_far[64], *p = so_far;
		for (int c = 0; c < upto; c++) {
			if (args[c] == '"')
				*p++ = '\\';
			*p++ = args[c];
		}
		*p = '\0';
		snprintf(data, sizeof(data),
			 "\"event\":\"content-block-delta\",\"index\":1,\"delta\":"
			 "{\"type\":\"block-delta\",\"fields\":{\"type\":\"tool_call_chunk\",\"args\":\"%s\"}}",
			 so_far);
		break;
	}
	case K_TOOL_FINISH:
		snprintf(data, sizeof(data),
			 "\"event\":\"content-block-finish\",\"index\":1,\"content\":"
			 "{\"type\":\"tool_call\",\"id\":\"call-%ld\",\"name\":\"search\",\"args\":%s}",
			 turn, args);
		break;
	case K_MSG_FINISH:
		snprintf(data, sizeof(data),
			 "\"event\":\"message-finish\",\"reason\":\"tool_use\",\"usage\":"
			 "{\"input_tokens\":%ld,\"output_tokens\":%d,\"total_tokens\":%ld}",
			 120 + turn * 60, TURN_WORDS + 8, 168 + turn * 60 + TURN_WORDS);
		break;
	case K_TOOL_STARTED:
		snprintf(data, sizeof(data),
			 "\"event\":\"tool-started\",\"tool_call_id\":\"call-%ld\",\"tool_name\":"
			 "\"search\",\"input\":{\"query\":\"sea otters tool use\"}",
			 turn);
		break;
	case K_TOOL_FINISHED:
		snprintf(data, sizeof(data),
			 "\"event\":\"tool-finished\",\"tool_call_id\":\"call-%ld\",\"tool_name\":"
			 "\"search\",\"output\":{\"content\":\"Found 2 results about sea otters.\",\"type\":\"tool\"}",
			 turn);
		break;
	default: {
		/* A step's updates, values and checkpoint, at the root. The state: the question and
		 * the turn's messages (a window, not the whole transcript). */
		long step = turn * 2 + tools + 1;
		if (tools)
			snprintf(tool_msg, sizeof(tool_msg),
				 ",{\"type\":\"tool\",\"tool_call_id\":\"call-%ld\","
				 "\"content\":\"Found 2 results about sea otters.\"}",
				 turn);
		char state[TURN_WORDS * 24 + 512];
		snprintf(state, sizeof(state),
			 "\"messages\":[{\"type\":\"human\",\"content\":\"How do sea otters use "
			 "tools?\"},{\"type\":\"ai\",\"id\":\"msg-%s-%ld\",\"content\":\"%s\",\"tool_calls\":[{\"id\":"
			 "\"call-%ld\",\"name\":\"search\",\"args\":%s}]}%s]",
			 run_id, turn, text, turn, args, tool_msg);
		if (kd == K_UPDATES)
			snprintf(data, sizeof(data), "\"node\":\"%s\",\"values\":{%s,\"t\":%llu}",
				 tools ? "tools" : "model", state, tn);
		else if (kd == K_VALUES)
			snprintf(data, sizeof(data), "%s,\"step\":%ld", state, step);
		else
			snprintf(data, sizeof(data),
				 "\"id\":\"ck-%s-%ld\",\"parent_id\":\"ck-%s-%ld\",\"step\":%ld,"
				 "\"source\":\"loop\"",
				 run_id, step, run_id, step - 1, step);
		method = kd == K_UPDATES ? "updates" : kd == K_VALUES ? "values" : "checkpoints";
		snprintf(ns, sizeof(ns), "\"namespace\":[]");
	}
	}
	snprintf(out, cap, "{\"method\":\"%s\",\"params\":{%s,\"timestamp\":%llu,\"data\":{%s,\"t\":%llu}}}", method,
		 ns, ts, data, tn);
	return kd;
}

/* "kinds":{…} of a run: its events per kind. */
static void print_kinds(const long kinds[NKINDS])
{
	printf(",\"kinds\":{");
	for (int k = 0; k < NKINDS; k++)
		printf("%s\"%s\":%ld", k ? "," : "", KIND_NAMES[k], kinds[k]);
	printf("}");
}

/* FCALL threadcast_rest 1 {tc:commands} <op> <args>, as a REST worker reports its run; 0 when accepted. */
static int rest_report(redisContext *c, const char *op, const char *args)
{
	struct tc_store_cmd cmd;
	tc_store_rest_call(&cmd, false, op, args);
	redisReply *r = redisCommandArgv(c, cmd.argc, cmd.argv, NULL);
	bool answered =
		r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2 && r->element[0]->type == REDIS_REPLY_INTEGER;
	long long status = answered ? r->element[0]->integer : 0;
	if (status < 200 || status > 299)
		fprintf(stderr, "publish: threadcast_rest %s: %s\n", op,
			!r                                                      ? "no reply"
			: r->type == REDIS_REPLY_ERROR                          ? r->str
			: answered && r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str
										: "refused");
	freeReplyObject(r);
	return status >= 200 && status <= 299 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *url = "redis://127.0.0.1:6379", *threads = NULL, *nchan = NULL, *spelling = "seed";
	const char *floor_fn = NULL, *run_id = NULL;
	const char *methods[16] = { "tasks" };
	int nmethods = 1;
	char *method_list = NULL;
	long count = 0, size = 100, nthreads = 0, batch = 1, xadd = 0, tokens = 0, rest = 0, dry_run = 0;
	long kinds[NKINDS] = { 0 };
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
		else if (!strcmp(argv[i], "--run"))
			run_id = argv[i + 1];
		else if (!strcmp(argv[i], "--rest"))
			rest = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--dry-run"))
			dry_run = atol(argv[i + 1]);
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
	if ((rest || dry_run) && !run_id) {
		fprintf(stderr, "publish: --rest and --dry-run go with --run\n");
		free(method_list);
		return 2;
	}
	if (run_id &&
	    (batch != 1 || xadd || floor_fn || nchan || nthreads || tokens || (threads && strchr(threads, ',')))) {
		fprintf(stderr,
			"publish: --run appends one thread's run, one event per call, through threadcast_append\n");
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
	if (run_id) {
		count = run_length(count);
		if (dry_run) {
			char *buf = malloc(16384);
			for (long i = 0; i < count; i++)
				kinds[run_event(buf, 16384, i, count, run_id, 0)]++;
			free(buf);
			printf("{\"published\":0,\"events\":%ld", count);
			print_kinds(kinds);
			printf("}\n");
			rc = 0;
			goto done;
		}
	}
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
	/* Room for one event: its padding and envelope, or a run's largest (a values event). */
	size_t slot = run_id ? 16384 : (size_t)size + 300;
	ev = malloc(slot);
	evs = malloc((size_t)batch * slot);
	if (rest) {
		/* As a worker: the run starts after the thread's seq now. */
		redisReply *r = redisCommand(c, "HGET tc:{%s}:meta seq", tv[0]);
		char args[300];
		snprintf(args, sizeof(args), "{\"run_id\":\"%s\",\"after_seq\":%s}", run_id,
			 r && r->type == REDIS_REPLY_STRING ? r->str : "0");
		freeReplyObject(r);
		if (rest_report(c, "run.started", args))
			goto done;
	}
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
					ev, slot,
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
					json[n] = evs + (size_t)n * slot;
					uint64_t t = now_ns();
					if (run_id) {
						kinds[run_event((char *)json[n], slot, sent + n, count, run_id, t)]++;
					} else if (tokens) {
						/* what a model streams: a message's text deltas, a word each */
						snprintf(
							(char *)json[n], slot,
							"{\"method\":\"messages\",\"params\":{\"namespace\":[\"model:9938e864-5005-"
							"5501-a6bf-dac20bfa3bd6\"],\"timestamp\":%llu,\"node\":\"model\",\"data\":"
							"{\"t\":%llu,\"event\":\"content-block-delta\",\"index\":0,\"delta\":"
							"{\"type\":\"text-delta\",\"text\":\"%s \"}}}}",
							(unsigned long long)(t / 1000000), (unsigned long long)t,
							WORDS[(sent + n) * 7919 % (sizeof(WORDS) / sizeof(WORDS[0]))]);
					} else {
						snprintf(
							(char *)json[n], slot,
							"{\"method\":\"%s\",\"params\":{\"namespace\":[],\"timestamp\":%llu,"
							"\"data\":{\"t\":%llu,\"p\":\"%s\"}}}",
							methods[(sent + n) % nmethods],
							(unsigned long long)(t / 1000000), (unsigned long long)t, pad);
					}
					n++;
				}
				/* A run's first event names it. */
				const struct tc_store_append_opts ao = { .maxlen = "1000000",
									 .run = run_id && sent == 0 ? run_id : NULL };
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
	if (rest) {
		char args[300];
		snprintf(args, sizeof(args), "{\"run_id\":\"%s\",\"status\":\"success\",\"values\":{\"step\":%ld}}",
			 run_id, (count - 2) / TURN_EVENTS * 2);
		if (rest_report(c, "run.finished", args))
			goto done;
	}
	printf("{\"published\":%ld,\"seconds\":%.3f,\"rate\":%.0f", count, secs, (double)count / secs);
	if (run_id)
		print_kinds(kinds);
	printf("}\n");
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
