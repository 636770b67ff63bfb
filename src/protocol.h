/*
 * protocol.h — the command framing of the agent streaming protocol.
 *
 * Pure functions: bytes or cJSON in, cJSON or frames out; no sockets, no
 * event loop. Everything a client sends is a Command {id, method, params};
 * everything we answer is exactly one CommandResponse or ErrorResponse with
 * the same id (null when the id itself was unusable).
 */
#ifndef TC_PROTOCOL_H
#define TC_PROTOCOL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "spell.h"

/**
 * X(ENUM, wire code, default message). The wire codes are the CDDL's
 * ErrorCode; TC_ERR_<ENUM> is a negative int so functions can return it.
 */
#define TC_ERROR_MAP(X)                                                                                                \
	X(INVALID_ARGUMENT, "invalid_argument", "the command is malformed")                                            \
	X(UNKNOWN_COMMAND, "unknown_command", "no such method")                                                        \
	X(UNKNOWN_ERROR, "unknown_error", "internal error")                                                            \
	X(NO_SUCH_RUN, "no_such_run", "no such run")                                                                   \
	X(NO_SUCH_SUBSCRIPTION, "no_such_subscription", "no such subscription")                                        \
	X(NO_SUCH_NAMESPACE, "no_such_namespace", "no such namespace")                                                 \
	X(NO_SUCH_INTERRUPT, "no_such_interrupt", "no such interrupt")                                                 \
	X(NO_SUCH_CHECKPOINT, "no_such_checkpoint", "no such checkpoint")                                              \
	X(PERMISSION_DENIED, "permission_denied", "permission denied")                                                 \
	X(NOT_SUPPORTED, "not_supported", "not supported by this server")

#define TC__ERR_ENUM(e, code, msg) TC__ERRNUM_##e,
enum { TC_ERROR_MAP(TC__ERR_ENUM) TC__ERRNUM_COUNT };
#define TC__ERR_NEG(e, code, msg) TC_ERR_##e = -1 - TC__ERRNUM_##e,
/** Protocol error codes; 0 is success. */
enum tc_err { TC_OK = 0, TC_ERROR_MAP(TC__ERR_NEG) };

/**
 * X(ENUM, code, reason): every WebSocket close code threadcast sends, with
 * the reason it gives when the caller has no more specific one. 1007
 * (invalid UTF-8) is sent by libwebsockets itself. The 44xx codes (4000 +
 * an HTTP status) are for protocol 0.0.21 routes, whose official client
 * reads them as "do not reconnect with the same credentials".
 */
#define TC_CLOSE_MAP(X)                                                                                                \
	X(GOING_AWAY, 1001, "server shutting down; reconnect")                                                         \
	X(UNSUPPORTED_DATA, 1003, "binary messages are not supported: send commands as JSON text")                     \
	X(POLICY, 1008, "policy violation")                                                                            \
	X(TOO_BIG, 1009, "message too big")                                                                            \
	X(INTERNAL, 1011, "internal error")                                                                            \
	X(HISTORY_RESET, 1012, "the thread's history was reset; reconnect to resync")                                  \
	X(TRY_AGAIN, 1013, "too slow: outbound queue limit exceeded; reconnect and resume")                            \
	X(BAD_REQUEST, 4400, "bad request: a thread id is 1 to 128 characters of A-Z a-z 0-9 . _ : -")                 \
	X(UNAUTHORIZED, 4401, "unauthorized: no valid token; reconnect with a fresh one")                              \
	X(FORBIDDEN, 4403, "forbidden: this token may not read this thread")

#define TC__CLOSE_ENUM(e, code, reason) TC_CLOSE_##e = code,
/** WebSocket close codes. */
enum tc_close { TC_CLOSE_MAP(TC__CLOSE_ENUM) };

/** The default reason of a close code. */
const char *tc_close_reason(enum tc_close code);

/** What a client is told when the event store cannot be reached. */
#define TC_MSG_REDIS_DOWN "the event store (Redis) is unavailable; retry shortly"

/** Wire code ("invalid_argument", ...) of err. */
const char *tc_err_code(enum tc_err err);
/** Default human message of err. */
const char *tc_err_message(enum tc_err err);

/**
 * X(ENUM, wire method name, who answers): every method of the CDDL, and
 * threadcast's one extension, run.cancel (ends the thread's active run;
 * params {run_id?}; workers that cannot answer not_supported). GATEWAY
 * methods are answered by threadcast itself; RUNTIME ones by agent workers,
 * through the command bridge (bridge.h). This table is the one place that
 * says which is which.
 */
#define TC_METHOD_MAP(X)                                                                                               \
	X(RUN_START, "run.start", RUNTIME)                                                                             \
	X(SUBSCRIBE, "subscription.subscribe", GATEWAY)                                                                \
	X(UNSUBSCRIBE, "subscription.unsubscribe", GATEWAY)                                                            \
	X(RECONNECT, "subscription.reconnect", GATEWAY)                                                                \
	X(AGENT_GET_TREE, "agent.getTree", GATEWAY)                                                                    \
	X(INPUT_RESPOND, "input.respond", RUNTIME)                                                                     \
	X(INPUT_INJECT, "input.inject", RUNTIME)                                                                       \
	X(STATE_GET, "state.get", RUNTIME)                                                                             \
	X(STATE_LIST_CHECKPOINTS, "state.listCheckpoints", RUNTIME)                                                    \
	X(STATE_FORK, "state.fork", RUNTIME)                                                                           \
	X(RUN_CANCEL, "run.cancel", RUNTIME)

#define TC__METHOD_ENUM(e, name, who) TC_METHOD_##e,
enum tc_method { TC_METHOD_MAP(TC__METHOD_ENUM) TC_METHOD_UNKNOWN };

/** Wire name of a known method. */
const char *tc_method_name(enum tc_method m);
/** The method called name[0..len), or TC_METHOD_UNKNOWN. */
enum tc_method tc_method_lookup(const char *name, size_t len);

/** A parsed command. Owns root; params points into it. */
struct tc_command {
	cJSON *root; /**< whole parsed frame, freed by tc_command_free */
	bool has_id; /**< id was present and a js-uint */
	uint64_t id; /**< valid when has_id */
	enum tc_method method;
	const char *method_name; /**< points into root; NULL when not a string */
	cJSON *params;           /**< the params object; NULL when absent */
};

/** Error detail: code plus a message a person can act on. */
struct tc_error {
	enum tc_err code;
	char message[256];
};

/** Sets err to code and a printf-formatted message; returns code. */
enum tc_err tc_error_set(struct tc_error *err, enum tc_err code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/**
 * Parses one frame as a Command. The frame must be exactly one JSON object
 * (surrounding whitespace allowed) with a js-uint `id`, a string `method` and,
 * when present, an object `params`. Known and unknown methods both parse;
 * TC_METHOD_UNKNOWN is the caller's to answer. On error, cmd->has_id says
 * whether the reply can carry the id, and cmd must still be freed.
 */
enum tc_err tc_command_parse(const char *data, size_t len, struct tc_command *cmd, struct tc_error *err);
/** Frees the parse tree of cmd. */
void tc_command_free(struct tc_command *cmd);

/**
 * Builds {"type":"success","id":id,"result":result[,"meta":{"appliedThroughSeq":n}]},
 * meta spelled as sp. Consumes result (NULL means {}), spelled by the caller.
 * applied_through_seq < 0 omits meta.
 */
struct tc_buf *tc_response_success(uint64_t id, cJSON *result, int64_t applied_through_seq, enum tc_spelling sp);

/** Builds {"type":"error","id":id|null,"error":code,"message":message}. */
struct tc_buf *tc_response_error(bool has_id, uint64_t id, enum tc_err code, const char *message);

/** Serializes a cJSON value into a frame buffer. Does not consume v. */
struct tc_buf *tc_json_frame(const cJSON *v);

/** True for the methods answered by agent workers (RUNTIME in TC_METHOD_MAP). */
bool tc_method_is_runtime(enum tc_method m);

/**
 * Respells the params of a runtime command as 0.0.21 in place (either
 * spelling is accepted; workers get 0.0.21) and validates them against the
 * CDDL. On error returns TC_ERR_INVALID_ARGUMENT with a message naming the
 * field as spelling sp does ("params.interruptId" or "params.interrupt_id").
 */
enum tc_err tc_params_validate(struct tc_command *cmd, enum tc_spelling sp, struct tc_error *err);

/**
 * Parses an eventId as this server issues them, "<epoch>:<seq>" (epoch 1 to
 * 39 letters and digits, seq 1 to 2^53-1 without leading zeros). Returns
 * false when id is anything else.
 */
bool tc_event_id_parse(const char *id, char epoch[40], uint64_t *seq);

/**
 * Builds an EventStreamRequest object from the query parameters of an SSE
 * GET (each NULL when absent): channels "a,b", namespaces a JSON array of
 * arrays, depth and since numbers. On error returns NULL with a message
 * naming the parameter. The result still goes through tc_filter_parse.
 */
cJSON *tc_stream_request_from_query(const char *channels, const char *namespaces, const char *depth, const char *since,
				    struct tc_error *err);

/**
 * Length of the longest prefix of s[0..len) that is at most max bytes and
 * does not split a UTF-8 sequence. For quoting client text in messages.
 */
size_t tc_utf8_prefix(const char *s, size_t len, size_t max);

#endif
