/*
 * util.h — small helpers shared by every component.
 *
 * Out-of-memory policy (decided once, here): threadcast never tries to limp
 * on after an allocation fails. tc_xmalloc() and friends print one line to
 * stderr and abort(), so callers never check for NULL. Bounds on everything a
 * peer can make us allocate are enforced *before* allocating (frame sizes,
 * queue bytes, subscription counts), so running out of memory is an
 * operational failure, not an input the code has to handle.
 */
#ifndef TC_UTIL_H
#define TC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Like malloc(); aborts with a message when out of memory. Never NULL. */
void *tc_xmalloc(size_t n);
/** Like calloc(); aborts when out of memory. Never NULL. */
void *tc_xcalloc(size_t count, size_t size);
/** Like realloc(); aborts when out of memory. Never NULL. */
void *tc_xrealloc(void *p, size_t n);
/** Like strdup(); aborts when out of memory. */
char *tc_xstrdup(const char *s);
/** Copies len bytes of s into a new NUL-terminated string. */
char *tc_xstrndup(const char *s, size_t len);

/** Installs the aborting allocators into cJSON. Call once at start-up. */
void tc_cjson_init(void);

/** Wall-clock milliseconds since the Unix epoch. */
int64_t tc_wall_ms(void);

/** Largest integer a JavaScript number holds exactly (the CDDL's js-uint). */
#define TC_JS_MAX_SAFE 9007199254740991LL

/** n random bytes: the kernel's (getrandom), else rand() (ids only, never secrets). */
void tc_random_bytes(void *buf, size_t n);
/** A random (v4) UUID in lowercase hex, NUL-terminated (37 bytes). */
void tc_uuid4(char out[37]);

/**
 * True when s[0..len) is a valid thread id: 1 to 128 characters of
 * [A-Za-z0-9._:-]. Braces are excluded so a thread id is always safe inside a
 * Redis Cluster hash tag.
 */
bool tc_thread_id_valid(const char *s, size_t len);
/** Maximum length of a thread id. */
#define TC_THREAD_ID_MAX 128

/** Value of a hex digit (either case), or -1. */
int tc_hex_value(char c);

/**
 * Encodes len bytes as unpadded base64url into a new string.
 */
char *tc_base64url_encode(const void *data, size_t len);

/**
 * Decodes unpadded base64url. Returns a new NUL-terminated buffer and sets
 * *out_len, or NULL when the input is not valid base64url.
 */
char *tc_base64url_decode(const char *s, size_t len, size_t *out_len);

#endif
