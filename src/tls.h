/*
 * tls.h — Redis links over TLS (rediss://), under hiredis and pslink.
 *
 * A pump runs TLS for one connection in-process, on the link's libuv loop:
 * the link's socket is swapped for one end of a socketpair, so hiredis (or
 * pslink) keeps speaking plain RESP on the same descriptor, and the pump
 * moves the bytes between the other end and the TCP connection through
 * OpenSSL. Why a pump and not hiredis' own TLS is said at the top of tls.c.
 *
 * The pump never calls its owner: when the TLS side fails it records why
 * and closes its end of the pair, so the owner reads end-of-file as from a
 * server that hung up, and then asks tc_tls_pump_error() for the reason.
 */
#ifndef TC_TLS_H
#define TC_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/** The TLS settings of a process' Redis links (an OpenSSL SSL_CTX). */
struct tc_tls;

/**
 * Makes the settings: ca_file (PEM bundle; NULL or "" for the system's
 * trust store), cert_file and key_file (PEM; a client certificate, both or
 * neither). Certificates are always verified, the peer's name too. NULL
 * with a message naming the file and the problem in err.
 */
struct tc_tls *tc_tls_new(const char *ca_file, const char *cert_file, const char *key_file, char *err, size_t errlen);

/** Frees t (every pump made with it must be closed first). NULL is fine. */
void tc_tls_free(struct tc_tls *t);

/** One connection's TLS. */
struct tc_tls_pump;

/**
 * Puts a pump under fd, a connected TCP socket to host (a name or an IP
 * literal: the server's certificate must name it; a name is also sent as
 * SNI): fd becomes one end of a socketpair that keeps fd's O_NONBLOCK and
 * socket timeouts, the pump keeps the TCP connection. fd must not be
 * watched by any poll while this runs (epoll keys on the file as well as
 * the number). The handshake starts at once on loop; what is written on fd
 * meanwhile is sent once it is done. NULL with a message in err when the
 * descriptors cannot be made (fd is then unchanged).
 */
struct tc_tls_pump *tc_tls_pump_over(uv_loop_t *loop, const struct tc_tls *t, int fd, const char *host, char *err,
				     size_t errlen);

/** Why the pump stopped (a TLS or socket error), or NULL while it runs. */
const char *tc_tls_pump_error(const struct tc_tls_pump *p);

/** Whether the handshake is done (the server's certificate accepted). */
bool tc_tls_pump_ready(const struct tc_tls_pump *p);

/** Stops the pump and frees it once libuv is done with its handles. */
void tc_tls_pump_close(struct tc_tls_pump *p);

/**
 * For blocking clients (hiredis' synchronous context in the tools): puts a
 * pump under fd as tc_tls_pump_over() does, waits for the handshake, and
 * leaves the pump running on a thread of its own until fd is closed (or
 * the server closes); at exit the threads still running are stopped and
 * every one is joined. 0, or -1 with the reason in err (the TLS error when
 * the server or its certificate was refused).
 */
int tc_tls_over_blocking(const struct tc_tls *t, int fd, const char *host, char *err, size_t errlen);

#endif
