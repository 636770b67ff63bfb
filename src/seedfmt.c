/*
 * seedfmt.c — what the seed formats' translators share beyond runfollow.h
 * (seedfmt.h).
 */
#include "seedfmt.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void tc_seed_append(char **text, size_t *len, const char *s, size_t max)
{
	size_t add = strlen(s);
	if (*len + add > max) {
		add = max > *len ? max - *len : 0;
		while (add && ((unsigned char)s[add] & 0xC0) == 0x80)
			add--; /* not inside a UTF-8 sequence */
	}
	*text = tc_xrealloc(*text, *len + add + 1);
	memcpy(*text + *len, s, add);
	*len += add;
	(*text)[*len] = '\0';
}
