#include "slot.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

/* CRC16-CCITT (XMODEM), the Cluster's key hash. */
static uint16_t crc16(const char *p, size_t n)
{
	uint16_t crc = 0;
	for (size_t i = 0; i < n; i++) {
		crc ^= (uint16_t)((unsigned char)p[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (uint16_t)(crc << 1 ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned tc_slot_of(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);
	if (open) {
		const char *start = open + 1, *close = memchr(start, '}', len - (size_t)(start - key));
		if (close && close > start)
			return crc16(start, (size_t)(close - start)) & (TC_SLOTS - 1);
	}
	return crc16(key, len) & (TC_SLOTS - 1);
}

int tc_slot_key_index(int argc, const char **argv)
{
	if (argc < 2)
		return -1;
	const char *c = argv[0];
	if (!strcasecmp(c, "EVAL") || !strcasecmp(c, "EVALSHA") || !strcasecmp(c, "FCALL") ||
	    !strcasecmp(c, "FCALL_RO"))
		return argc > 3 && strcmp(argv[2], "0") ? 3 : -1;
	if (!strcasecmp(c, "XREADGROUP") || !strcasecmp(c, "XREAD")) {
		for (int i = 1; i + 1 < argc; i++)
			if (!strcasecmp(argv[i], "STREAMS"))
				return i + 1;
		return -1;
	}
	if (!strcasecmp(c, "XGROUP") || !strcasecmp(c, "XINFO"))
		return argc > 2 ? 2 : -1;
	if (!strcasecmp(c, "PING") || !strcasecmp(c, "CLUSTER") || !strcasecmp(c, "FUNCTION"))
		return -1;
	return 1;
}

unsigned tc_slot_of_command(int argc, const char **argv, const size_t *lens)
{
	int k = tc_slot_key_index(argc, argv);
	return k < 0 ? TC_SLOTS : tc_slot_of(argv[k], lens[k]);
}
