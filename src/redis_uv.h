/*
 * redis_uv.h — hiredis' async client on a libuv loop.
 *
 * Our own instead of hiredis 0.14's adapters/libuv.h, which ignores a poll
 * error: a connect refused while Redis restarts then never completes and the
 * link hangs for good. On error we let hiredis read and write, so it sees
 * the socket error and reports it (hiredis 1.x adapters do the same).
 */
#ifndef TC_REDIS_UV_H
#define TC_REDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/**
 * Attaches ac to loop: hiredis drives its socket through a uv_poll handle
 * that is closed (and freed) when hiredis cleans the context up. 0, or -1
 * when the poll handle cannot be made (ac is untouched).
 */
int tc_redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

#endif
