/*
 * slot.h — Redis Cluster key-slot routing: which slot a key, and a command,
 * belongs to. Pure functions.
 *
 * A key's slot is the CRC16 (XMODEM) of the key, or of its hash tag — the
 * part between the first "{" and the next "}" when that part is not empty —
 * modulo 16384. Every key and channel of a thread carries the tag {T}, so a
 * thread lives in one slot.
 */
#ifndef TC_SLOT_H
#define TC_SLOT_H

#include <stddef.h>

/** Slots in a Redis Cluster. */
#define TC_SLOTS 16384

/** The Cluster slot of a key (or channel). */
unsigned tc_slot_of(const char *key, size_t len);

/**
 * Where the key of a command is: the first key of EVAL/EVALSHA/FCALL
 * (when it has keys), the first stream of XREAD/XREADGROUP, the key of
 * XGROUP/XINFO, none for PING/CLUSTER/FUNCTION, else argv[1]. -1 when the
 * command has no key.
 */
int tc_slot_key_index(int argc, const char **argv);

/** The slot a command must go to, or TC_SLOTS when any node will do. */
unsigned tc_slot_of_command(int argc, const char **argv, const size_t *lens);

#endif
