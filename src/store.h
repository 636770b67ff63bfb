/*
 * store.h — the Redis contract, as pure builders and parsers.
 *
 * Everything threadcast, its agents and its tools know about Redis' layout is
 * spelled here and nowhere else in C (the function libraries of
 * protocol/redis/ are the other side of the same contract, their key names in
 * the keys table of threadcast.lua's shared prelude; protocol/README.md
 * documents both, "Where key names live"):
 *
 *   tc:{T}:events   stream, entry <seq>-0, fields m (method), n (encoded
 *                   namespace), e (event JSON)
 *   tc:{T}:meta     hash: seq, epoch, run_seq, run_id, run_status,
 *                   checkpoint ("<seq>\n<latest root checkpoints event>")
 *   tc:{T}:tree     hash: encoded namespace -> "<status>\n<graphName>"
 *   tc:{T}:values   hash: encoded namespace -> "<seq>\n<event JSON>"
 *   tc:{T}:interrupts hash: interrupt id -> "<seq>\n<input.requested event>"
 *                   (the current run's interrupts not answered yet)
 *   tc:{T}:live     sharded pub/sub, the doorbell, one per append call:
 *                   "<epoch>\n<seq>\n<method>\n<encoded namespace>\n<event JSON>",
 *                   or for a batch "*<epoch>\n<first seq>\n<count>\n" then per
 *                   event "<method>\n<encoded namespace>\n<JSON length>\n<JSON>",
 *                   or, past 64 KiB of JSON, "#<epoch>\n<last seq>\n" (read
 *                   the events from the stream)
 *   tc:commands     stream of runtime commands for wildcard workers (group
 *                   "workers"), fields thread, method, params, corr, reply,
 *                   deadline
 *   {tc:commands}:w:<a>, :a:<a>, :assistants
 *                   assistant a's live workers, its command stream, every
 *                   assistant registered (threadcast_submit, _register)
 *   {tc:commands}:r:<run>  a REST run's record (threadcast_rest's)
 *   tc:reply:<id>   sharded pub/sub, worker answers for one gateway
 *   {tc:commands}, {tc:store}  the keys threadcast_rest and threadcast_store
 *                   are called with (their records' hash tags)
 *
 * Builders fill a struct tc_store_cmd whose NULL-terminated argv goes to
 * tc_redis_cmd() (or any hiredis argv call); parsers take a reply or bytes
 * and point into them. No I/O, no allocation: unit-tested and fuzzed.
 */
#ifndef TC_STORE_H
#define TC_STORE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/** The keys of a thread (all under the Cluster hash tag {T}). */
enum tc_store_key {
	TC_KEY_EVENTS,      /**< the event stream */
	TC_KEY_META,        /**< seq, epoch, run_seq, run_id, run_status */
	TC_KEY_TREE,        /**< namespace -> lifecycle status and graph name */
	TC_KEY_VALUES,      /**< namespace -> latest values event */
	TC_KEY_LIVE,        /**< the doorbell channel */
	TC_KEY_INTERRUPTS,  /**< interrupt id -> its input.requested event, while unanswered */
	TC_KEY_AGENT,       /**< the reference agent's run state */
	TC_KEY_AGENT_CKPTS, /**< the reference agent's checkpoints */
};

/** Room for any key or channel of a thread, with its NUL. */
#define TC_STORE_KEY_MAX (TC_THREAD_ID_MAX + 24)
/** Every doorbell channel starts with this (pub/sub routing prefix). */
#define TC_STORE_LIVE_PREFIX "tc:{"
/** The stream of runtime commands and its consumer group. */
#define TC_STORE_COMMANDS "tc:commands"
#define TC_STORE_WORKERS "workers"
/** The hash tag of the command bridge's and the REST records' keys (the slot of tc:commands). */
#define TC_STORE_BRIDGE "{" TC_STORE_COMMANDS "}"
/** The hash tag of the store's keys. */
#define TC_STORE_STORE "{tc:store}"
/** Reply channels: this prefix + a gateway instance id. */
#define TC_STORE_REPLY_PREFIX "tc:reply:"
/** Room for a reply channel with its NUL (instance ids are shorter). */
#define TC_STORE_REPLY_MAX 48
/** Longest epoch (letters and digits) with its NUL. */
#define TC_EPOCH_MAX 40

/** Writes the key (or channel) k of thread into buf and returns buf. */
char *tc_store_key(char buf[TC_STORE_KEY_MAX], const char *thread, enum tc_store_key k);

/** Writes the reply channel of gateway instance into buf (cut to fit) and returns buf. */
char *tc_store_reply_channel(char buf[TC_STORE_REPLY_MAX], const char *instance);

/**
 * The thread of a doorbell channel "tc:{<id>}:live": copies the id into id
 * and returns 0, or -1 when ch is not a doorbell channel.
 */
int tc_store_live_thread(const char *ch, size_t len, char id[TC_THREAD_ID_MAX + 1]);

/**
 * A decimal number that is the whole of s[0..len), without leading zeros, at
 * most 2^53-1. Returns 0 and sets *out, or -1.
 */
int tc_store_u64(const char *s, size_t len, uint64_t *out);

/* ==== commands ============================================================================ */

/** A command's argument vector and the strings it points into. */
/** Longest assistant (graph) id: printable, no spaces. */
#define TC_STORE_ASSISTANT_MAX 128
/** The routing keys of one assistant: {tc:commands}:w:<a> and {tc:commands}:a:<a>. */
#define TC_STORE_ROUTE_KEY_MAX (TC_STORE_ASSISTANT_MAX + 24)

struct tc_store_cmd {
	const char *argv[24]; /**< NULL-terminated */
	int argc;
	char key[TC_STORE_KEY_MAX];
	char num[3][24];
	char route[2][TC_STORE_ROUTE_KEY_MAX];
};

/** Options of an append; zero/NULL fields are left to the function's defaults. */
struct tc_store_append_opts {
	const char *maxlen; /**< MAXLEN n: the stream's approximate cap */
	const char *ttl;    /**< TTL seconds of the thread's keys */
	const char *run;    /**< RUN id of a run that starts with this event */
};

/** HMGET meta seq epoch entry_max entry_seq run_seq run_id run_status (parse with tc_store_meta_parse). */
void tc_store_read_meta(struct tc_store_cmd *c, const char *thread);
/** HMGET meta seq epoch: where the thread stands (tc_store_meta_parse). */
void tc_store_read_head(struct tc_store_cmd *c, const char *thread);
/** HMGET meta seq epoch run_status checkpoint: what GET /threads/:id/state needs of meta. */
void tc_store_read_status(struct tc_store_cmd *c, const char *thread);
/** HGET values "": the root namespace's latest values event. */
void tc_store_read_root_values(struct tc_store_cmd *c, const char *thread);
/** HGET meta epoch. */
void tc_store_read_epoch(struct tc_store_cmd *c, const char *thread);
/** Bytes of events one threadcast_range read stops after (TC_STORE_RANGE_BYTES_S is it as text). */
#define TC_STORE_RANGE_BYTES 1048576
#define TC_STORE_RANGE_BYTES_S "1048576"
/** Most bytes of events a plain XRANGE read may return, were each the thread's largest. */
#define TC_STORE_PLAIN_BYTES (4 << 20)
/** Fewest events a plain XRANGE read is worth sending for (else threadcast_range reads). */
#define TC_STORE_PLAIN_MIN 32

/** One read of a thread's events: what was asked, and how it was sent. */
struct tc_store_range {
	uint64_t after;   /**< the events after this seq */
	uint64_t through; /**< up to this one (0: to the end) */
	unsigned count;   /**< at most this many */
	/* Set by tc_store_read_range(), for tc_store_range_parse(): */
	unsigned plain; /**< the COUNT of a plain XRANGE; 0: sent as threadcast_range */
};

/**
 * What one meta read told of a history: none of its entries through seq
 * `head` has more than `entry_max` bytes of fields (0: not known, as for a
 * history an earlier version began).
 */
struct tc_store_bound {
	uint64_t head, entry_max;
};

/**
 * Reads the events r asks for. Events may be 16 MiB, so a read is bounded
 * in bytes as well as in count. With a bound b from a meta read of the same
 * history, a read that ends at or before b->head ("to the end" then ends
 * there: the end when meta was read) is a plain XRANGE whose COUNT keeps it
 * within TC_STORE_PLAIN_BYTES, when that is still TC_STORE_PLAIN_MIN events
 * or all that r asks for; any other read is FCALL_RO threadcast_range, which
 * stops after TC_STORE_RANGE_BYTES. The plain read is the fast one: Redis
 * converts a function's reply through Lua, ~3 µs an entry. Read the reply
 * with tc_store_range_parse().
 */
void tc_store_read_range(struct tc_store_cmd *c, const char *thread, struct tc_store_range *r,
			 const struct tc_store_bound *b);
/**
 * The reply to the read r (NULL: a read sent without a bound, which is always
 * threadcast_range's): *entries the XRANGE-shaped array of entries,
 * *more whether more may follow (a count or bytes reached; false at the
 * range's end). 0, or -1 when the reply is not one.
 */
int tc_store_range_parse(const redisReply *reply, const struct tc_store_range *r, const redisReply **entries,
			 bool *more);
/** XRANGE events - + COUNT 1: the oldest event still kept. */
void tc_store_read_first(struct tc_store_cmd *c, const char *thread);
/** HGETALL of an index (TC_KEY_TREE, TC_KEY_VALUES or TC_KEY_INTERRUPTS). */
void tc_store_read_index(struct tc_store_cmd *c, const char *thread, enum tc_store_key index);
/** FCALL threadcast_append 1 <thread> <json> [MAXLEN n] [TTL s] [RUN id]. */
void tc_store_append(struct tc_store_cmd *c, const char *thread, const char *json,
		     const struct tc_store_append_opts *o);
/** Largest event JSON the append functions take (their MAX_EVENT_BYTES). */
#define TC_STORE_EVENT_MAX (16 << 20)
/** Most events in one threadcast_append_batch call (the function's own limit). */
#define TC_STORE_BATCH_MAX 1000
/**
 * FCALL threadcast_append_batch 1 <thread> <n> <json>... [options] into argv,
 * which has room for TC_STORE_BATCH_ARGV(n) pointers; count is where the
 * decimal n is written. Returns argc (argv[argc] is NULL).
 */
#define TC_STORE_BATCH_ARGV(n) ((size_t)(n) + 12)
int tc_store_append_batch(const char **argv, char count[24], const char *thread, const char *const *json, unsigned n,
			  const struct tc_store_append_opts *o);

/** The fields of one runtime command on its way to workers. */
struct tc_store_command {
	const char *thread, *method, *params, *corr, *reply, *deadline;
	const char *assistant; /**< the graph it is for; "" when unknown (see threadcast_submit) */
};
/** XADD tc:commands MAXLEN ~ … * thread … method … params … corr … reply … deadline …. */
/**
 * FCALL threadcast_submit: the command goes to the stream of its assistant's
 * workers (or the wildcard workers'); refused at once when no live worker
 * can take it. The reply is the stream's name, or an error.
 */
void tc_store_submit(struct tc_store_cmd *c, const struct tc_store_command *cmd);
/**
 * FCALL threadcast_register: worker counts as serving assistant ("*": any)
 * for live_ms more. Workers repeat it as their heartbeat.
 */
void tc_store_register(struct tc_store_cmd *c, const char *assistant, const char *worker, long live_ms);
/**
 * The next Redis function library of src[0..len), a text of one or more
 * libraries one after another, each starting with its "#!lua name=…" line
 * (scripts/embed.py --libraries makes it; tc_redis_new() loads it): from
 * *off, points *lib at the library, sets *lib_len, moves *off past it and
 * returns 1; returns 0 when none is left.
 */
int tc_store_library_next(const char *src, size_t len, size_t *off, const char **lib, size_t *lib_len);
/** Whether s[0..len) can be an assistant id (1 to 128 printable bytes, no spaces). */
bool tc_store_assistant_valid(const char *s, size_t len);
/**
 * HMGET {tc:commands}:r:<run> thread_id after_seq kwargs status assistant_id graph_id language:
 * what a join of a REST run needs of its record (threadcast_rest.lua's records).
 */
void tc_store_read_rest_run(struct tc_store_cmd *c, const char *run_id);
/** A REST run's record as tc_store_read_rest_run reads it; points into the reply. */
struct tc_store_rest_run {
	const char *thread_id; /**< its thread; NULL when the run has no record */
	size_t thread_id_len;
	uint64_t after_seq; /**< its events come after this seq (0 when absent or not a number) */
	const char *kwargs; /**< what it was asked with (JSON text); NULL when absent */
	size_t kwargs_len;
	const char *status; /**< pending, running, success, error, timeout, interrupted; "" when absent */
	size_t status_len;
	bool active;              /**< pending or running: not over yet */
	bool failed;              /**< error or timeout */
	const char *assistant_id; /**< NULL when absent */
	size_t assistant_id_len;
	const char *graph_id; /**< the graph its assistant runs; NULL when absent (runs of older versions) */
	size_t graph_id_len;
	bool python; /**< a Python graph's run (language "python"): the Python server's answers */
};
/**
 * Parses tc_store_read_rest_run's reply into out: 0, or -1 when it is not
 * that HMGET's answer (an error, Redis gone). A run without a record parses
 * with thread_id NULL.
 */
int tc_store_rest_run_parse(const redisReply *r, struct tc_store_rest_run *out);
/**
 * FCALL threadcast_rest 1 {tc:commands} <op> <args> (or, store: threadcast_store
 * 1 {tc:store}): one REST request (rest.h); args must outlive c.
 */
void tc_store_rest_call(struct tc_store_cmd *c, bool store, const char *op, const char *args);

/** HMGET meta seq epoch assistant_id: where the thread stands and the graph it runs. */
void tc_store_read_route(struct tc_store_cmd *c, const char *thread);
/**
 * Parses tc_store_read_route's reply: *seq (0 when absent) and the assistant
 * id (pointing into the reply; len 0 when absent or not a valid id).
 */
int tc_store_route_parse(const redisReply *r, uint64_t *seq, const char **assistant, size_t *len);
/** XGROUP CREATE tc:commands workers $ MKSTREAM (BUSYGROUP when it exists). */
void tc_store_create_group(struct tc_store_cmd *c);
/** A worker's read: XREADGROUP GROUP workers <consumer> COUNT n BLOCK ms STREAMS tc:commands >. */
void tc_store_worker_read(struct tc_store_cmd *c, const char *consumer, unsigned count, unsigned block_ms);
/** A worker's claim of what dead workers left: XAUTOCLAIM tc:commands workers <consumer> <ms> 0-0 COUNT n. */
void tc_store_worker_claim(struct tc_store_cmd *c, const char *consumer, long min_idle_ms, unsigned count);
/** XACK tc:commands workers <entry id>. */
void tc_store_worker_ack(struct tc_store_cmd *c, const char *entry_id);
/** SPUBLISH <reply channel> <answer JSON>: a worker's answer to a gateway. */
void tc_store_worker_answer(struct tc_store_cmd *c, const char *reply, const char *json);

/* ==== replies and messages ================================================================ */

/** A thread's meta as read by tc_store_read_meta / _head; points into the reply. */
struct tc_store_meta {
	uint64_t seq;      /**< last seq assigned (0: none) */
	const char *epoch; /**< "" when the thread has no history */
	size_t epoch_len;
	uint64_t run_seq;   /**< first seq of the current run (0 if unknown) */
	const char *run_id; /**< NULL when unknown */
	size_t run_id_len;
	bool run_over;      /**< the root lifecycle's latest status ends the run (read_meta) */
	uint64_t entry_max; /**< the largest entry through entry_seq, in bytes (read_meta; 0: not known) */
	uint64_t entry_seq; /**< the last seq entry_max covers (read_meta) */
};
/** Parses the HMGET reply of either read; -1 when it is not one. */
int tc_store_meta_parse(const redisReply *r, struct tc_store_meta *m);

/** One stream entry, pointing into a hiredis reply. */
struct tc_stream_entry {
	uint64_t seq;
	const char *method, *ns, *json;
	size_t method_len, ns_len, json_len;
};
/**
 * Parses one XRANGE entry (["<seq>-0", [m, …, n, …, e, …]]): 0, or -1 when
 * it is not an event entry (the JSON must start with '{').
 */
int tc_store_entry_parse(const redisReply *entry, struct tc_stream_entry *out);

/**
 * A doorbell's fields, pointing into the message. json is NULL for a thin
 * doorbell: events up to seq are in the stream only (they were too big).
 */
struct tc_doorbell {
	const char *epoch, *method, *ns, *json;
	size_t epoch_len, method_len, ns_len, json_len;
	uint64_t seq;
};
/**
 * Splits a one-event doorbell message; -1 when malformed (the epoch must be
 * 1 to 39 letters and digits, the seq a number, the JSON an object).
 */
int tc_store_doorbell_parse(const char *p, size_t len, struct tc_doorbell *out);

/** Reading the events of a doorbell of either form, in order. */
struct tc_doorbell_reader {
	const char *p, *end; /**< what is left of the message */
	const char *epoch;
	size_t epoch_len;
	uint64_t seq;  /**< the next event's seq */
	uint64_t left; /**< events still to read */
	bool batch;
	bool thin; /**< "#<epoch>\n<last seq>\n": one event-less entry, json NULL */
};

/**
 * Starts reading the doorbell message p[0..len): 0, or -1 when its head is
 * malformed. Read its events with tc_store_doorbell_next().
 */
int tc_store_doorbell_open(struct tc_doorbell_reader *r, const char *p, size_t len);

/**
 * The next event of the doorbell into out (for a thin doorbell, one with
 * json NULL and the call's last seq): 1, 0 when all were read (and
 * nothing is left over), -1 when the message is malformed from here on.
 */
int tc_store_doorbell_next(struct tc_doorbell_reader *r, struct tc_doorbell *out);

/** Parses a values index entry "<seq>\n<json>"; -1 when malformed. */
int tc_store_values_parse(const char *v, size_t len, uint64_t *seq, const char **json, size_t *json_len);

/** One field and value of a hash, pointing into a reply. */
struct tc_store_pair {
	const char *key, *value;
	size_t key_len, value_len;
};
/**
 * The string field/value pairs of an HGETALL reply into out, which has room
 * for r->elements / 2; returns how many (pairs of other types are skipped).
 */
size_t tc_store_pairs(const redisReply *r, struct tc_store_pair *out);

/** A tree index entry "<status>\n<graphName>" (graph "" when absent). */
struct tc_tree_value {
	const char *status, *graph;
	size_t status_len, graph_len;
};
void tc_store_tree_parse(const char *v, size_t len, struct tc_tree_value *out);

#endif
