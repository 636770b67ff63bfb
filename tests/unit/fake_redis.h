/*
 * fake_redis.h — a scripted stand-in for redis.c in unit tests.
 *
 * It implements the whole of redis.h without a socket: commands are
 * recorded in order and answered by the test (fake_reply), subscriptions
 * are recorded and confirmed by the test (fake_push), and the link can be
 * brought down and up. Tests link it instead of src/redis.c, so the hub,
 * replays and queries run unchanged against it. Replies are built with the
 * rr_* helpers (hiredis' own reply struct, freed by freeReplyObject).
 */
#ifndef TC_FAKE_REDIS_H
#define TC_FAKE_REDIS_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis.h"

/** A fake that is up (commands accepted) unless told otherwise. */
struct tc_redis *fake_redis_new(void);
void fake_redis_free(struct tc_redis *r);

/** Commands sent and not yet answered. */
size_t fake_pending(const struct tc_redis *r);
/** The oldest unanswered command as its words joined by spaces (NULL if none). */
const char *fake_peek(const struct tc_redis *r);
/** Answers the oldest command with reply (taken over; NULL = link lost). */
void fake_reply(struct tc_redis *r, redisReply *reply);
/** Total commands ever sent. */
size_t fake_sent(const struct tc_redis *r);

/** The last (S)SUBSCRIBE or SUNSUBSCRIBE sent, "SSUBSCRIBE <ch>" (NULL if none); clears it. */
const char *fake_take_sub(struct tc_redis *r);
/** Redis confirms or announces: kind "ssubscribe", "sunsubscribe" or "smessage". */
void fake_push(struct tc_redis *r, const char *kind, const char *channel, const char *data);
/** The pub/sub link of node 1 drops (sub_down), or comes back (sub_up). */
void fake_sub_link(struct tc_redis *r, bool up);
/** The command link goes down (pending commands get NULL) or up (cmd_up, waiters run). */
void fake_cmd_link(struct tc_redis *r, bool up);

/* Reply builders. */
redisReply *rr_str(const char *s);
redisReply *rr_nil(void);
redisReply *rr_int(long long v);
redisReply *rr_err(const char *s);
/** An array of n replies (taken over). */
redisReply *rr_arr(size_t n, ...);
/** One XRANGE entry "<seq>-0" with fields m, n, e. */
redisReply *rr_entry(uint64_t seq, const char *method, const char *ns, const char *json);

#endif
