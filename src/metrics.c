#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct tc_metrics tc_metrics;

const double tc_hist_bounds[TC_HIST_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5,
};

void tc_hist_observe(struct tc_hist *h, double s)
{
	int i = 0;
	while (i < TC_HIST_BUCKETS && s > tc_hist_bounds[i])
		i++;
	h->counts[i]++;
	h->n++;
	h->sum += s;
}

struct out {
	char *buf;
	size_t len, cap;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void put(struct out *o, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		o->cap = o->cap * 2 + (size_t)n;
		o->buf = tc_xrealloc(o->buf, o->cap);
	}
}

static void counter(struct out *o, const char *name, const char *help, uint64_t v)
{
	put(o, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void gauge(struct out *o, const char *name, const char *help, uint64_t v)
{
	put(o, "# HELP %s %s\n# TYPE %s gauge\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void hist(struct out *o, const char *name, const char *help, const struct tc_hist *h)
{
	uint64_t cum = 0;
	put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (int i = 0; i < TC_HIST_BUCKETS; i++) {
		cum += h->counts[i];
		put(o, "%s_bucket{le=\"%g\"} %llu\n", name, tc_hist_bounds[i], (unsigned long long)cum);
	}
	put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)h->n, name,
	    h->sum, name, (unsigned long long)h->n);
}

char *tc_metrics_render(const struct tc_metrics_gauges *g)
{
	struct out o = { tc_xmalloc(4096), 0, 4096 };
	const struct tc_metrics *m = &tc_metrics;

	put(&o,
	    "# HELP threadcast_connections Open client connections by transport.\n"
	    "# TYPE threadcast_connections gauge\n"
	    "threadcast_connections{transport=\"websocket\"} %zu\n"
	    "threadcast_connections{transport=\"sse\"} %zu\n"
	    "threadcast_connections{transport=\"http_command\"} %zu\n",
	    g->websockets, g->sse, g->http_commands);
	gauge(&o, "threadcast_handshakes", "Accepted connections whose request has not arrived yet.", g->handshakes);
	gauge(&o, "threadcast_deflaters",
	      "permessage-deflate compressors, each shared by the WebSockets receiving the same events.", g->deflaters);
	gauge(&o, "threadcast_deflate_memory_bytes", "Memory zlib holds for those compressors.", g->deflate_memory);
	gauge(&o, "threadcast_subscriptions", "Subscriptions held by connections.", m->subscriptions);
	gauge(&o, "threadcast_run_feeds",
	      "Runs being translated for REST and seed-format streams, each shared by its viewers in one format.",
	      g->run_feeds);
	gauge(&o, "threadcast_threads_watched", "Threads with local subscribers.", g->threads);
	gauge(&o, "threadcast_commands_pending", "Runtime commands waiting for a worker.", g->pending_commands);
	gauge(&o, "threadcast_redis_up", "1 when Redis is connected and answering.", (uint64_t)g->redis_up);
	counter(&o, "threadcast_events_delivered_total", "Event frames queued to clients.", m->events_delivered);
	counter(&o, "threadcast_bytes_out_total", "Bytes written to client sockets.", m->bytes_out);
	counter(&o, "threadcast_deflate_in_bytes_total",
		"Payload bytes of WebSocket frames sent compressed (permessage-deflate).", m->deflate_in);
	counter(&o, "threadcast_deflate_out_bytes_total", "What those frames took on the wire, headers included.",
		m->deflate_out);
	counter(&o, "threadcast_run_events_translated_total",
		"Thread events run feeds translated (once per feed, however many viewers share it).", m->run_events);
	counter(&o, "threadcast_run_units_total", "Stream units (SSE events, NDJSON lines) run feeds made.",
		m->run_units);
	counter(&o, "threadcast_replay_requests_total", "Replays started (subscribe, reconnect, SSE).",
		m->replay_requests);
	counter(&o, "threadcast_replayed_events_total", "Event frames sent by replays.", m->replayed_events);
	counter(&o, "threadcast_replays_capped_total", "Replays that began later than asked because of --max-replay.",
		m->replays_capped);
	counter(&o, "threadcast_replays_held_total",
		"Subscribe answers that waited for the rest of their burst (the run was over).", m->replays_held);
	counter(&o, "threadcast_gap_fills_total", "Stream reads that filled doorbell gaps.", m->gap_fills);
	counter(&o, "threadcast_slow_consumer_cuts_total", "Connections closed because their queue was full.",
		m->slow_consumer_cuts);
	counter(&o, "threadcast_handshake_timeouts_total",
		"Connections closed because their request did not arrive within --handshake-timeout.",
		m->handshake_timeouts);
	counter(&o, "threadcast_commands_total", "Commands received.", m->commands_total);
	counter(&o, "threadcast_command_errors_total", "Error replies sent.", m->command_errors);
	counter(&o, "threadcast_redis_connects_total", "Connections made to Redis (first and reconnects).",
		m->redis_reconnects);
	counter(&o, "threadcast_redis_redirects_total", "Redis Cluster MOVED and ASK replies followed.",
		m->redis_redirects);
	counter(&o, "threadcast_redis_slot_map_changes_total",
		"Redis Cluster slot maps read that changed where commands go.", m->redis_slot_maps);
	hist(&o, "threadcast_command_latency_seconds", "Runtime commands, sent to a worker until answered.",
	     &m->command_latency);
	hist(&o, "threadcast_redis_rtt_seconds", "Redis PING round-trip time.", &m->redis_rtt);
	return o.buf;
}
