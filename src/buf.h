/*
 * buf.h — reference-counted outbound frames and the per-connection queue.
 *
 * A frame is serialized once into a tc_buf and the same tc_buf is queued on
 * every connection that must receive it; each queue holds one reference. The
 * payload is preceded by TC_BUF_HEADROOM spare bytes so libwebsockets can
 * write its frame header in place (LWS_PRE) without a copy. Writing the same
 * buffer to several connections is safe because a server-to-client header for
 * a given length is always the same bytes and lws_write() is synchronous.
 */
#ifndef TC_BUF_H
#define TC_BUF_H

#include <stddef.h>
#include <stdint.h>

/** Spare bytes before the payload; at least LWS_PRE (checked in ws.c). */
#define TC_BUF_HEADROOM 16

/**
 * Something a component derives from a buffer and keeps with it, freed with
 * the buffer (h2o's shared memory with a dispose callback). The component
 * embeds this struct in its own and recovers its struct from it; the buffer
 * only calls dispose, so it knows nothing of what is attached (wsdeflate.c
 * keeps an event's compressed frame this way). Lives in the attachment, not
 * in the buffer: every event has a tc_buf, few have an attachment.
 */
struct tc_buf_att {
	/** Frees the attachment (the struct embedding it); called once (tc_buf_attach(), tc_buf_unref()). */
	void (*dispose)(struct tc_buf_att *a);
};

struct tc_buf {
	uint32_t refs;          /**< owners; the last tc_buf_unref() frees */
	uint32_t len;           /**< payload bytes */
	struct tc_buf_att *att; /**< one attachment (tc_buf_attach()), else NULL */
	unsigned char mem[];    /**< TC_BUF_HEADROOM spare bytes, then payload */
};

/** New buffer with room for len payload bytes, one reference. */
struct tc_buf *tc_buf_new(size_t len);
/** New buffer holding a copy of data[0..len), one reference. */
struct tc_buf *tc_buf_copy(const void *data, size_t len);
/** Payload start (after the headroom). */
static inline unsigned char *tc_buf_data(struct tc_buf *b)
{
	return b->mem + TC_BUF_HEADROOM;
}
/** Takes one more reference; returns b. */
static inline struct tc_buf *tc_buf_ref(struct tc_buf *b)
{
	b->refs++;
	return b;
}
/** Drops one reference; the last frees the buffer and disposes of its attachment. NULL: a no-op. */
void tc_buf_unref(struct tc_buf *b);
/**
 * Gives b the attachment a (NULL: none), disposing of the one it had. A
 * buffer holds one: a component reading b->att checks its dispose function
 * is its own before it takes the attachment for its own struct.
 */
void tc_buf_attach(struct tc_buf *b, struct tc_buf_att *a);

/**
 * FIFO of buffer references with a byte count. The ring grows by doubling;
 * the *byte* bound is the caller's policy (see conn.c), the queue only
 * counts: all bytes, and apart those of entries of big_from bytes or more. Each queued entry owns one reference.
 */
/**
 * A connection's frames of more than a quarter of --max-queue-bytes (a big
 * values event) are not held to that bound, which would cut a client for
 * one event, but to this one of their own (conn.c; a run's feed keeps its
 * log so too): two events of the append limit (16 MiB) and their framing.
 * The frames are shared, so a client holds references, seldom copies.
 */
#define TC_BUFQ_BIG_MAX (40u << 20)

/** Entries a queue holds in itself before it allocates a ring. */
#define TC_BUFQ_INLINE 2

struct tc_bufq {
	struct tc_buf **ring; /**< cap entries once more than TC_BUFQ_INLINE were queued, else NULL */
	/** The entries while ring is NULL: a queue that only ever held a reply or two allocates nothing. */
	struct tc_buf *inl[TC_BUFQ_INLINE];
	uint32_t cap;   /**< ring's capacity, a power of two; unused while ring is NULL */
	uint32_t head;  /**< index of the oldest entry */
	uint32_t count; /**< entries queued */
	size_t bytes;   /**< sum of payload lengths queued */
	/** Entries of at least big_from bytes (0: none) are also counted here. */
	size_t big_bytes;
	/** Set by the owner (kept by tc_bufq_clear): where a big entry starts, or 0. */
	uint32_t big_from;
};

/** Appends b, taking over the caller's reference. */
void tc_bufq_push(struct tc_bufq *q, struct tc_buf *b);
/** Oldest entry without removing it, or NULL when empty. */
struct tc_buf *tc_bufq_peek(const struct tc_bufq *q);
/** Removes the oldest entry and returns its reference to the caller. */
struct tc_buf *tc_bufq_pop(struct tc_bufq *q);
/** Drops every entry and the ring itself; the queue is empty and reusable (big_from stays). */
void tc_bufq_clear(struct tc_bufq *q);

#endif
