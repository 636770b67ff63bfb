/*
 * wsdeflate.h — permessage-deflate (RFC 7692) for the WebSocket frames
 * threadcast writes itself (ws.c frames and coalesces them; lws' own
 * compressor is never used for them).
 *
 * Compression in a running context: token events are small and alike, and
 * compressed after the ones before (the client keeps its window: no
 * server_no_context_takeover is negotiated) they take ~13% of their size,
 * where each compressed alone stays at ~69% (the token mix; README
 * "Benchmarks"). The context is shared: connections that received the same
 * events since they began compressing are at the same place in one
 * compressor's stream and reuse what it made (tc_dz_frame below), so a
 * thread's subscribers cost one compression per event. A compressor is
 * small (a 2 KiB window, memLevel 2: TC_DEFLATE_CONTEXT_MAX bytes at most,
 * in a mapping of its own) and a connection lets its own go when it has
 * been quiet a while (ws.c); its next frame starts afresh, which the
 * client's inflater reads as well. Only events are compressed: replies and
 * errors leave as they are (RFC 7692 lets any message go uncompressed), so
 * a connection that only subscribed holds no compressor. Pure: zlib and
 * memory only.
 */
#ifndef TC_WSDEFLATE_H
#define TC_WSDEFLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** deflate's window (bits) and memLevel, and what zlib holds for one deflater at most. */
#define TC_DEFLATE_WBITS 11
#define TC_DEFLATE_MEMLEVEL 2
#define TC_DEFLATE_CONTEXT_MAX (16 * 1024)
/** What one deflater maps: its zlib state, and a page for the rest. */
#define TC_DEFLATE_MAPPED (TC_DEFLATE_CONTEXT_MAX + 4096)

struct tc_deflater;

/** A new deflater at level (1 fastest … 9 smallest); NULL when zlib cannot make one. */
struct tc_deflater *tc_deflater_new(int level);
void tc_deflater_free(struct tc_deflater *d);

/** A final text frame's header for a payload of len bytes (server frames: unmasked); returns its length. */
#define TC_WS_FRAME_HEADER_MAX 10
size_t tc_ws_frame_header(unsigned char *h, size_t len, bool compressed);

/** The most bytes tc_deflate_frame() writes for a payload of n bytes (header included). */
size_t tc_deflate_frame_max(size_t n);

/**
 * Writes one compressed, final text frame (FIN, RSV1, opcode 1; server
 * frames are not masked) of payload p (n bytes) to out, which has room for
 * tc_deflate_frame_max(n) bytes. Returns the frame's length, 0 when zlib
 * failed (the deflater is then unusable: free it).
 */
size_t tc_deflate_frame(struct tc_deflater *d, const void *p, size_t n, unsigned char *out);

/** Bytes mapped for every deflater of the process (TC_DEFLATE_MAPPED each). */
size_t tc_deflate_memory(void);

/*
 * Shared compression. Connections that receive the same events in the same
 * order since they began compressing have compressors in the same state,
 * so one compressor can serve them all: the compressed form of an event is
 * kept on its tc_buf (the frame every subscriber is queued; as the buffer's
 * attachment, buf.h, freed with it), with the compressor and the position
 * in its stream it was made from, and a connection at that very place
 * reuses it instead of compressing again. A
 * connection with no compressor yet joins the one that compressed its frame
 * first thing (a fresh state, whatever the client's window holds); one whose
 * frames differ, or that fell behind its compressor, gets a fresh compressor
 * of its own. So a thread's subscribers pay for one compression per event,
 * not one per delivery, and every stream stays exactly what a compressor of
 * its own would have made.
 */
struct tc_buf;
struct tc_dz;

/** A connection's place in a shared compressor's stream; zeroed: none. */
struct tc_dzref {
	struct tc_dz *dz;
	uint64_t pos; /**< frames the connection has had from it */
};

/**
 * The compressed frame (header included) of payload buffer b for the
 * connection at r, *len bytes, valid until b is compressed again or freed;
 * NULL when zlib failed (the connection should go).
 */
const unsigned char *tc_dz_frame(struct tc_dzref *r, struct tc_buf *b, int level, size_t *len);
/** The connection stops compressing (quiet a while, or gone). */
void tc_dzref_release(struct tc_dzref *r);
/** Shared compressors alive, and compressions made (each event once per compressor that needed it). */
size_t tc_dz_count(void);
uint64_t tc_dz_compressions(void);

#endif
