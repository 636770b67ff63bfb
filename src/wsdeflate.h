/*
 * wsdeflate.h — permessage-deflate (RFC 7692) for the WebSocket frames
 * threadcast writes itself (ws.c frames and coalesces them; lws' own
 * compressor is never used for them).
 *
 * One deflater per connection that is receiving: token events are small and
 * alike, and compressing each in the connection's running context (the
 * client keeps its window: no server_no_context_takeover is negotiated)
 * makes them ~8% of their size, where each compressed alone stays at ~70%
 * (measured on the token mix; README "Benchmarks"). The deflater is small
 * (a 2 KiB window, memLevel 2: TC_DEFLATE_CONTEXT_MAX bytes at most, in a
 * mapping of its own) and is freed when its connection has been quiet a
 * while (ws.c); the next frame starts a new one, which the client's
 * inflater reads as well. Only events are compressed: replies and errors
 * leave as they are (RFC 7692 lets any message go uncompressed), so a
 * connection that only subscribed holds no compressor. Pure: zlib and
 * memory only.
 */
#ifndef TC_WSDEFLATE_H
#define TC_WSDEFLATE_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
