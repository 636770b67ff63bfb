/*
 * run/assemble.h — the message assembler every translator of the run wing
 * uses for the messages channel.
 *
 * A model's message streams as message-start, content blocks (start, deltas,
 * finish; a text, reasoning or tool call block each, several may overlap,
 * told apart by their index), then message-finish, or error. Several
 * messages stream at once (parallel nodes, subgraphs), told apart by where
 * they come from: the whole namespace (node tasks included) and the node.
 * The assembler keeps one entry per message being streamed (an LRU table of
 * TC_MSG_OPEN), decodes each event into one part (what it is, which block,
 * its text or tool call chunk, and whether that block had content before),
 * and hands the part to the translator, which only decides what to write.
 * A message resumed in the middle (a stream that starts inside it) is
 * created by its first event, taken as an AI message.
 *
 * A translator keeps per-message state of its own in an array of
 * TC_MSG_OPEN entries indexed by tc_msg.no; ops->drop tells it when an
 * entry's message leaves (finished, replaced, or evicted for another).
 */
#ifndef TC_RUN_ASSEMBLE_H
#define TC_RUN_ASSEMBLE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "run/follow.h"

#define TC_MSG_OPEN 32 /**< messages assembled at once */

/** What one messages event is. */
enum tc_msg_part_kind {
	TC_MSG_START,        /**< message-start: the message's id, role, … are in tc_msg */
	TC_MSG_BLOCK_START,  /**< content-block-start */
	TC_MSG_BLOCK_DELTA,  /**< content-block-delta (a text or reasoning delta, or a block-delta's fields) */
	TC_MSG_BLOCK_FINISH, /**< content-block-finish: the whole block */
	TC_MSG_FINISH,       /**< message-finish (usage, when given) */
	TC_MSG_ERROR,        /**< error: the message failed (data.message, data.code) */
};

/** What a content block is. */
enum tc_block_kind {
	TC_BLOCK_NONE,      /**< not a block of ours (an unknown type, or none) */
	TC_BLOCK_TEXT,      /**< "text" / "text-delta" */
	TC_BLOCK_REASONING, /**< "reasoning" / "reasoning-delta" */
	TC_BLOCK_TOOL,      /**< "tool_call" / "tool_call_chunk" */
};

/** One messages event, decoded. */
struct tc_msg_part {
	enum tc_msg_part_kind kind;
	int index;                /**< the block's content index; -1 when absent or not an index */
	enum tc_block_kind block; /**< blocks: what the block (or the delta) is */
	const char *type;         /**< blocks: the block's (or the delta's) type as sent, NULL when none */
	/**
	 * Blocks: data.content for a start or finish; for a delta, data.delta,
	 * or a block-delta's fields (a tool call chunk: id, name, args).
	 */
	const cJSON *content;
	bool wrapped; /**< a delta: it came as a block-delta's fields */
	/**
	 * The text the event carries: a text block's text, a reasoning block's
	 * reasoning, a tool call's args when they are text (NULL when absent).
	 */
	const char *text;
	/**
	 * Whether the block had content before this event: a start with text,
	 * a tool call's start, a delta with text. A start begins the block
	 * anew (false); after a finish the block is over (the next start of
	 * its index is a new block).
	 */
	bool had;
	const cJSON *usage; /**< finish and error: data.usage, else NULL */
};

/** A message being streamed. */
struct tc_msg {
	struct tc_slot slot; /**< key: the namespace as sent (JSON) "#" the node */
	unsigned no;         /**< its entry's number, 0 .. TC_MSG_OPEN-1 (the translator's state) */
	bool open;           /**< the entry holds a message */
	bool ai;             /**< an AI message (role "ai", "assistant", or none) */
	char *id;            /**< message-start's id, else NULL */
	char *role;          /**< message-start's role, else NULL */
	char *tool_call_id;  /**< message-start's tool_call_id (a tool message), else NULL */
	char *node;          /**< the node it came from (the event's), NULL when none */
	uint64_t had;        /**< content indexes (0..62; 63: the rest) whose block had content */
};

/** What the assembler needs of its translator; ctx is the translator. */
struct tc_msg_ops {
	/** One event of message m, decoded (ev: the event). */
	void (*part)(void *ctx, struct tc_msg *m, const struct tc_msg_part *p, const struct tc_run_ev *ev);
	/**
	 * Optional. m's message leaves its entry: after its finish or error
	 * was handled (finished), or without one (replaced by a new message
	 * in its place, evicted for another): the translator frees its state
	 * for m->no and, unfinished, may close what it had open.
	 */
	void (*drop)(void *ctx, struct tc_msg *m, bool finished);
};

/** The open messages of one translator. */
struct tc_msg_asm {
	struct tc_msg msgs[TC_MSG_OPEN];
	uint64_t clock;
	const struct tc_msg_ops *ops;
	void *ctx;
};

/** An assembler with no message open, reporting to ops with ctx. */
void tc_msg_asm_init(struct tc_msg_asm *a, const struct tc_msg_ops *ops, void *ctx);
/** Frees every entry (without ops->drop: the translator is going too). */
void tc_msg_asm_clear(struct tc_msg_asm *a);
/** A messages event of the run (ev->method "messages"): one part, or nothing when it is none. */
void tc_msg_asm_event(struct tc_msg_asm *a, const struct tc_run_ev *ev);
/** Each message still open, in entry order (a run's end closing everything). */
#define TC_MSG_FOR_EACH_OPEN(a, m)                                                                                     \
	for (struct tc_msg *m = (a)->msgs; m < (a)->msgs + TC_MSG_OPEN; m++)                                           \
		if (m->open)

#endif
