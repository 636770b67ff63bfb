/*
 * redis_uv.h — hiredis' async client on a libuv loop, over TLS when asked.
 *
 * Our own instead of hiredis 0.14's adapters/libuv.h, which ignores a poll
 * error: a connect refused while Redis restarts then never completes and the
 * link hangs for good. On error we let hiredis read and write, so it sees
 * the socket error and reports it (hiredis 1.x adapters do the same).
 *
 * TLS (tls.h): once hiredis has seen the TCP connect succeed, in its connect
 * callback and before it writes anything, the adapter stops its poll, puts
 * a TLS pump under the descriptor and polls again: hiredis then speaks
 * plain RESP to the pump (hiredis 0.14 has no TLS; the same path serves
 * 1.x). A TLS failure reaches hiredis as the server closing the
 * connection; tc_redis_uv_error() tells why.
 */
#ifndef TC_REDIS_UV_H
#define TC_REDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

struct tc_tls;

/**
 * Attaches ac (just made by redisAsyncConnect*, no callback set yet) to
 * loop: hiredis drives its socket through a uv_poll handle that is closed
 * (and freed) when hiredis cleans the context up. on_connect is ac's connect
 * callback (set here). With tls, the connection runs TLS to host (the name
 * or address the server's certificate must carry). 0, or -1 when the poll
 * handle cannot be made (ac is untouched).
 */
int tc_redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop, redisConnectCallback *on_connect,
		       const struct tc_tls *tls, const char *host);

/**
 * Why ac's TLS failed (the certificate refused, the handshake cut...), or
 * NULL: read it in the disconnect callback, where hiredis only knows that
 * the connection closed.
 */
const char *tc_redis_uv_error(const redisAsyncContext *ac);

#endif
