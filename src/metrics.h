/*
 * metrics.h — process counters, gauges and histograms, as Prometheus text.
 *
 * One loop thread touches them, so they are plain integers: counting costs
 * an increment. Components bump the fields of tc_metrics directly; the
 * server renders them at GET /metrics, adding the gauges it knows
 * (connections by transport, watched threads).
 */
#ifndef TC_METRICS_H
#define TC_METRICS_H

#include <stddef.h>
#include <stdint.h>

/** Latency histogram with fixed buckets (seconds, Prometheus style). */
#define TC_HIST_BUCKETS 14
struct tc_hist {
	uint64_t counts[TC_HIST_BUCKETS + 1]; /**< per bucket; the last is +Inf */
	uint64_t n;
	double sum; /**< seconds */
};

/** Upper bounds of the buckets, seconds. */
extern const double tc_hist_bounds[TC_HIST_BUCKETS];

/** Adds one observation of `seconds`. */
void tc_hist_observe(struct tc_hist *h, double seconds);

struct tc_metrics {
	uint64_t events_delivered;   /**< event frames queued to clients (live + replay) */
	uint64_t bytes_out;          /**< bytes handed to sockets */
	uint64_t replay_requests;    /**< subscribe / reconnect / SSE replays started */
	uint64_t replayed_events;    /**< event frames sent by replays */
	uint64_t replays_capped;     /**< replays shortened by --max-replay */
	uint64_t replays_held;       /**< subscribe answers that waited for the rest of their burst */
	uint64_t gap_fills;          /**< XRANGE reads to fill doorbell gaps */
	uint64_t slow_consumer_cuts; /**< connections closed for a full queue */
	uint64_t handshake_timeouts; /**< connections closed before their request came */
	uint64_t commands_total;     /**< commands received (all methods) */
	uint64_t command_errors;     /**< error replies sent */
	uint64_t redis_reconnects;   /**< command-link connections made */
	uint64_t redis_redirects;    /**< Cluster MOVED / ASK replies followed */
	uint64_t redis_slot_maps;    /**< Cluster slot maps read that changed routing */
	uint64_t subscriptions;      /**< gauge: subscriptions held */
	uint64_t deflate_in;         /**< payload bytes of frames compressed (permessage-deflate) */
	uint64_t deflate_out;        /**< the bytes those frames took on the wire */
	uint64_t run_events; /**< events a run's feed translated (once per feed, whatever its viewers: run/feed.h) */
	uint64_t run_units;  /**< units run feeds made */
	struct tc_hist command_latency; /**< runtime command: sent → answered */
	struct tc_hist redis_rtt;       /**< PING round trips */
};

/** The process' metrics. */
extern struct tc_metrics tc_metrics;

/** Gauges only the caller knows, rendered with the rest. */
struct tc_metrics_gauges {
	size_t websockets, sse, http_commands, threads, pending_commands, handshakes;
	size_t deflaters, deflate_memory; /**< compressors alive (wsdeflate.h), and the bytes mapped for them */
	size_t run_feeds;                 /**< run feeds alive (run/feed.h) */
	int redis_up;
};

/** Renders everything as Prometheus text into a new string. */
char *tc_metrics_render(const struct tc_metrics_gauges *g);

#endif
