/*
 * chunked.c — Transfer-Encoding: chunked request bodies (see chunked.h).
 *
 *   body    = *chunk last-chunk trailer CRLF
 *   chunk   = size [ ";" ext ] CRLF data CRLF
 *   last    = 1*"0" [ ";" ext ] CRLF
 *   trailer = *( field CRLF )
 */
#include "chunked.h"

#include <string.h>

#include "util.h"

enum {
	SIZE_FIRST, /* the first hex digit of a size */
	SIZE,       /* more hex digits, ';' or CR */
	EXT,        /* an extension, up to CR */
	SIZE_LF,    /* the LF of a size line */
	DATA,       /* left bytes of data */
	DATA_CR,    /* the CRLF after a chunk's data */
	DATA_LF,
	TRAILER, /* the start of a trailer line, or the CR of the final empty line */
	FIELD,   /* a trailer field, up to CR */
	FIELD_LF,
	END_LF, /* the LF of the final empty line */
	DONE,
};

enum tc_chunked_rc tc_chunked_decode(struct tc_chunked *d, const char *in, size_t len, char *out, size_t *out_len,
				     size_t *used, uint64_t max)
{
	size_t i = 0, w = 0;
	while (i < len && d->state != DONE) {
		char c = in[i++];
		int h;
		switch (d->state) {
		case SIZE_FIRST:
		case SIZE:
			if ((h = tc_hex_value(c)) >= 0) {
				if (d->left > (max >> 4) || (d->left << 4 | (uint64_t)h) > max)
					return TC_CHUNKED_TOO_BIG;
				d->left = d->left << 4 | (uint64_t)h;
				d->state = SIZE;
			} else if (d->state == SIZE && c == ';') {
				d->state = EXT;
			} else if (d->state == SIZE && c == '\r') {
				d->state = SIZE_LF;
			} else {
				return TC_CHUNKED_BAD;
			}
			break;
		case EXT:
		case FIELD:
			if (c == '\n')
				return TC_CHUNKED_BAD;
			if (c == '\r')
				d->state = d->state == EXT ? SIZE_LF : FIELD_LF;
			break;
		case SIZE_LF:
			if (c != '\n')
				return TC_CHUNKED_BAD;
			d->state = d->left ? DATA : TRAILER;
			break;
		case DATA: {
			size_t n = len - i + 1 < d->left ? len - i + 1 : (size_t)d->left;
			memmove(out + w, in + i - 1, n);
			w += n;
			d->left -= n;
			i += n - 1;
			if (!d->left)
				d->state = DATA_CR;
			break;
		}
		case DATA_CR:
			if (c != '\r')
				return TC_CHUNKED_BAD;
			d->state = DATA_LF;
			break;
		case DATA_LF:
		case FIELD_LF:
			if (c != '\n')
				return TC_CHUNKED_BAD;
			d->state = d->state == DATA_LF ? SIZE_FIRST : TRAILER;
			break;
		case TRAILER:
			d->state = c == '\r' ? END_LF : c == '\n' ? -1 : FIELD;
			if (d->state < 0)
				return TC_CHUNKED_BAD;
			break;
		case END_LF:
			if (c != '\n')
				return TC_CHUNKED_BAD;
			d->state = DONE;
			break;
		}
	}
	*used = i;
	*out_len = w;
	return d->state == DONE ? TC_CHUNKED_DONE : TC_CHUNKED_MORE;
}
