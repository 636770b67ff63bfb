#ifndef TC_REPLY_ARENA_H
#define TC_REPLY_ARENA_H

/*
 * Redis replies built in blocks, one chain of blocks per reply.
 *
 * hiredis' own reader allocates every element and every string of a reply
 * on its own (0.14 and 1.x alike): a replay's page of 512 events is some
 * 5,000 mallocs and as many frees, a third of the gateway's CPU while it
 * replays (perf). A command link's reply lives only until its callback
 * returns, and a reader builds one reply at a time; so here the objects of
 * a reply are carved from blocks chained behind its root, and hiredis'
 * free of the root (after the callback, or of a reply left half read when
 * the connection goes) gives the whole chain back, its blocks kept for the
 * next reply. The objects are plain redisReply structs: every reader of
 * replies reads them as before.
 */

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

struct tc_reply_block;

/**
 * Where a link's replies are built: the chain of the reply being read, and
 * blocks kept for the next (at most 1 MiB). Owned by the link, which
 * outlives its readers: hiredis frees a reader, and with it a reply left
 * half read, before the link is freed.
 */
struct tc_reply_arena {
	struct tc_reply_block *tail;  /* the block objects are carved from */
	struct tc_reply_block *spare; /* blocks of freed replies */
	unsigned nspare;
	bool closed; /* replies freed from now on give their blocks back to malloc */
};

/**
 * Makes reader r build its replies in a (zeroed, or used by a reader before
 * on the same link). Replies must then be freed with r->fn->freeObject, as
 * hiredis does, never with freeReplyObject().
 */
void tc_reply_arena_use(redisReader *r, struct tc_reply_arena *a);

/**
 * The link closes: the blocks kept are freed, and so are those of replies
 * freed after (a reply in its callback as the link closes). a stays
 * readable until its readers are freed.
 */
void tc_reply_arena_close(struct tc_reply_arena *a);

#endif
