/*
 * chunked.h — decoding a request body sent with Transfer-Encoding: chunked.
 *
 * libwebsockets (4.1 and 4.3) hands a chunked request body over as it came,
 * framing and all, and waits for a body of 100 MiB (its guess without a
 * length), so http.c undoes the framing itself and knows from it where the body ends.
 * Strict: sizes in hex, CRLF after each size line and each chunk (a bare LF
 * is refused: a proxy reading it otherwise would see other requests in the
 * body); chunk extensions and trailers are read and dropped.
 *
 * Pure, no I/O, no allocation.
 */
#ifndef TC_CHUNKED_H
#define TC_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

/** A decoder's state; zero it to start a body. */
struct tc_chunked {
	int state;     /**< where in the framing (chunked.c) */
	uint64_t left; /**< bytes of the current chunk still to come */
};

/** What tc_chunked_decode() found. */
enum tc_chunked_rc {
	TC_CHUNKED_MORE = 0,     /**< the body goes on: feed the next piece */
	TC_CHUNKED_DONE = 1,     /**< the last chunk and the trailers were read */
	TC_CHUNKED_BAD = -1,     /**< not chunked framing: the request is refused */
	TC_CHUNKED_TOO_BIG = -2, /**< a chunk's size passes max */
};

/**
 * Decodes in[0..len) into out, which has room for len bytes (the data is
 * never longer than its framing; out may be in itself), and sets *out_len to
 * what it wrote. *used says how much of in the framing took: all of it but
 * after DONE (the rest is not the body). A chunk size above max is TOO_BIG
 * (the body would be too large anyway). After BAD or TOO_BIG, *out_len and
 * *used are unset.
 */
enum tc_chunked_rc tc_chunked_decode(struct tc_chunked *d, const char *in, size_t len, char *out, size_t *out_len,
				     size_t *used, uint64_t max);

#endif
