/*
 * filter.h — subscription filters: which events of a thread a subscriber gets.
 *
 * A filter selects by channel (exact: "custom" does not take "custom:x"),
 * by namespace prefix (whole segments: ["a"] is a prefix of ["a","b"] but
 * not of ["ab"]; a segment without ':' also takes itself followed by
 * ":<task id>", so ["a"] is a prefix of ["a:1f3e"], as the reference server
 * matches) and by depth (levels below the prefix; 0 = the prefix itself;
 * without namespaces, levels below the root).
 *
 * Matching never parses JSON: an event is described by a tc_event_key that is
 * computed once per event (not per recipient) from the channel name and the
 * *encoded namespace* stored beside the event JSON. The encoding writes each
 * segment as "/" + segment with "%", "/" and control characters written as
 * %XX (upper-case hex), so [] is "", [""] is "/", ["a","b/c"] is "/a/b%2Fc":
 * segments compare as bytes between "/"s, and depth is the number of "/". protocol/redis/threadcast.lua encodes alike.
 *
 * Pure functions, no I/O.
 */
#ifndef TC_FILTER_H
#define TC_FILTER_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

/** X(ENUM, name): the channels with a fixed name, in canonical order. */
#define TC_CHANNEL_MAP(X)                                                                                              \
	X(VALUES, "values")                                                                                            \
	X(UPDATES, "updates")                                                                                          \
	X(MESSAGES, "messages")                                                                                        \
	X(TOOLS, "tools")                                                                                              \
	X(LIFECYCLE, "lifecycle")                                                                                      \
	X(INPUT, "input")                                                                                              \
	X(CHECKPOINTS, "checkpoints")                                                                                  \
	X(TASKS, "tasks")                                                                                              \
	X(CUSTOM, "custom")

#define TC__CH_ENUM(e, name) TC_CHANNEL_##e,
/** Channel index; TC_CHANNEL_NAMED is any "custom:<name>" channel. */
enum tc_channel { TC_CHANNEL_MAP(TC__CH_ENUM) TC_CHANNEL_NAMED, TC_CHANNEL_INVALID };

/** Limits on what one filter may hold (a subscription id embeds it). */
#define TC_FILTER_MAX_BYTES 4096     /**< canonical JSON size */
#define TC_FILTER_MAX_ITEMS 64       /**< entries of channels, of namespaces */
#define TC_NAMESPACE_MAX_SEGMENTS 32 /**< segments of one namespace */

/** A parsed, canonical filter. */
struct tc_filter {
	uint32_t channels; /**< bit (1 << enum tc_channel) per fixed channel */
	char **named;      /**< sorted unique "custom:<name>" channels */
	size_t nnamed;
	char **prefixes;  /**< sorted unique encoded namespaces */
	size_t nprefixes; /**< 0 = every namespace */
	int depth;        /**< max levels below the prefix, -1 = unlimited */
	char *canonical;  /**< canonical JSON; equal filters, equal text */
};

/** What a filter needs to know of one event; see tc_event_key_init(). */
struct tc_event_key {
	enum tc_channel channel;
	const char *name; /**< full channel name when channel == TC_CHANNEL_NAMED */
	size_t name_len;
	const char *ns; /**< encoded namespace */
	size_t ns_len;
	int depth; /**< segments in ns */
};

/**
 * Resolves a channel name. "input.requested" is not a channel name: callers
 * map the event method to its channel first (tc_channel_of_method).
 */
enum tc_channel tc_channel_lookup(const char *s, size_t len);

/**
 * The channel an event with method m[0..len) belongs to: the method itself,
 * except "input.requested" and "input.answered", whose channel is "input".
 * TC_CHANNEL_INVALID when the method is not an event method.
 */
enum tc_channel tc_channel_of_method(const char *m, size_t len);

/** Fills key from an event's method and encoded namespace. Returns -1 when invalid. */
int tc_event_key_init(struct tc_event_key *key, const char *method, size_t method_len, const char *ns, size_t ns_len);

/**
 * Parses the filter fields (channels, namespaces, depth) of a
 * SubscribeParams / EventStreamRequest object. Other fields are ignored
 * (the CDDL's Extensible). On error returns TC_ERR_INVALID_ARGUMENT with a
 * message naming the field.
 */
enum tc_err tc_filter_parse(const cJSON *params, struct tc_filter **out, struct tc_error *err);

/** Frees f (NULL is a no-op). */
void tc_filter_free(struct tc_filter *f);

/** True when the event described by key passes f. */
bool tc_filter_match(const struct tc_filter *f, const struct tc_event_key *key);

/**
 * Encodes a namespace JSON array (of strings) as described above into a new
 * string; *len receives its length. Returns NULL when ns is not an array of
 * at most TC_NAMESPACE_MAX_SEGMENTS strings.
 */
char *tc_namespace_encode(const cJSON *ns, size_t *len);

/** Decodes an encoded namespace back into a JSON array of strings. */
cJSON *tc_namespace_decode(const char *enc, size_t len);

/**
 * Self-describing subscription id: "s<nonce>.<base64url(canonical JSON)>".
 * Any process can turn it back into the filter, so `subscription.reconnect`
 * works on an instance that never saw the subscription. nonce keeps two
 * subscriptions with equal filters on one connection apart.
 */
char *tc_subscription_id(const struct tc_filter *f, uint64_t nonce);

/** Parses a subscription id back into its filter. */
enum tc_err tc_subscription_id_parse(const char *id, struct tc_filter **out, struct tc_error *err);

#endif
