/*
 * tls.c — TLS for the Redis links: one pump per connection (tls.h).
 *
 * Why a pump, and not hiredis' TLS. Debian 12, the base threadcast is
 * built and tested on, ships hiredis 0.14.1, which has no TLS at all:
 * hiredis_ssl (redisInitiateSSLWithContext) exists from hiredis 1.0 on.
 * And the pub/sub link (pslink.c) does its own I/O with hiredis' parser
 * only, so even hiredis_ssl would leave it without TLS. The choices were
 * (a) build and ship a hiredis 1.x of our own (a vendored library to keep
 * patched, and the two hiredis lines would still differ under us), (b)
 * hiredis_ssl where it exists and nothing on Debian 12 (no TLS on the
 * base we test), or (c) TLS under the links, the same way for both hiredis
 * lines and for pslink. This is (c): one code path, so the one TLS suite
 * covers every build, and OpenSSL (libssl, Debian's) is the only new
 * dependency.
 *
 * How. A link connects as it always did. Once TCP is connected (hiredis'
 * connect callback; pslink's connect), tc_tls_pump_over() dup()s the
 * socket for the pump and dup2()s one end of a socketpair over the link's
 * descriptor: the link, hiredis included, keeps the same fd number and
 * speaks plain RESP on it. The pump drives OpenSSL on the TCP socket
 * (SSL_set_fd, non-blocking) with one uv_poll on each side, on the link's
 * loop, and holds at most one 16 KiB buffer each way: while one is full it
 * stops reading that side, so a slow reader is pushed back through TCP
 * instead of buffered without bound.
 *
 * Why after connect and not at once: hiredis 1.x asks whether a pending
 * connect finished by calling connect() again on its descriptor, which
 * fails on a socketpair (EINVAL); from its connect callback on it only
 * reads and writes (hiredis 0.14 asks getsockopt(SO_ERROR), which a
 * socketpair would pass, but one rule for both is simpler). Why the swap
 * only while nothing polls the descriptor: epoll registers the open file
 * with the number, and a registration left on the old file would keep
 * firing for the number after dup2() (redis_uv.c stops its poll around
 * the swap; pslink closes its TCP handle and opens the pair as a pipe).
 */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "util.h"

/* Bytes in flight each way per connection (a TLS record's worth). */
#define PUMP_BUF 16384
/* A blocking client's handshake not done by then fails. */
#define BLOCKING_HANDSHAKE_MS 10000

struct tc_tls {
	SSL_CTX *ctx;
};

struct tc_tls_pump {
	SSL *ssl;
	int tfd; /* the TCP connection: TLS */
	int pfd; /* our end of the socketpair: plain RESP */
	uv_poll_t tpoll, ppoll;
	int tev, pev; /* what each poll waits for now */
	int handles;  /* open uv handles: freed at 0 once closing */
	bool handshaken;
	bool stopped;            /* no more bytes move; pfd is shut down */
	bool closing;            /* tc_tls_pump_close() ran */
	char err[256];           /* why it stopped; empty when the owner hung up or the server closed */
	size_t out_off, out_len; /* plain -> TLS */
	size_t in_off, in_len;   /* TLS -> plain */
	unsigned char out[PUMP_BUF], in[PUMP_BUF];
};

static void seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- settings ----------------------------------------------------------------------------------- */

static const char *openssl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	return r ? r : "unknown error";
}

/* fopen() first: OpenSSL's own message for a missing file is "system lib". */
static bool can_read(const char *what, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	if (!f) {
		seterr(err, errlen, "cannot read the %s %s: %s", what, file, strerror(errno));
		return false;
	}
	fclose(f);
	return true;
}

struct tc_tls *tc_tls_new(const char *ca_file, const char *cert_file, const char *key_file, char *err, size_t errlen)
{
	bool cert = cert_file && *cert_file, key = key_file && *key_file;

	if (cert != key) {
		seterr(err, errlen, "a client certificate needs its key, and a key its certificate");
		return NULL;
	}
	ERR_clear_error();
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		seterr(err, errlen, "cannot make a TLS context: %s", openssl_reason());
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* Partial writes: the pump keeps its buffer until all of it went out.
	 * Release buffers: an idle link holds no record buffers. An EOF without
	 * close_notify is a plain end of the connection (Redis closes so). */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				      SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	if (ca_file && *ca_file) {
		if (!can_read("CA file", ca_file, err, errlen))
			goto fail;
		if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
			seterr(err, errlen, "no CA certificate in %s: %s", ca_file, openssl_reason());
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		seterr(err, errlen, "cannot load the system's CA certificates: %s", openssl_reason());
		goto fail;
	}
	if (cert) {
		if (!can_read("certificate", cert_file, err, errlen) || !can_read("key", key_file, err, errlen))
			goto fail;
		if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
			seterr(err, errlen, "cannot use the certificate %s: %s", cert_file, openssl_reason());
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
			seterr(err, errlen, "cannot use the key %s: %s", key_file, openssl_reason());
			goto fail;
		}
		if (SSL_CTX_check_private_key(ctx) != 1) {
			seterr(err, errlen, "the key %s does not match the certificate %s", key_file, cert_file);
			goto fail;
		}
	}
	struct tc_tls *t = tc_xmalloc(sizeof(*t));
	t->ctx = ctx;
	return t;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

void tc_tls_free(struct tc_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* ---- the pump ----------------------------------------------------------------------------------- */

static void pump_run(struct tc_tls_pump *p);

/* No more bytes move: the owner reads end-of-file (and asks why). */
static void stop(struct tc_tls_pump *p, const char *why)
{
	if (p->stopped)
		return;
	p->stopped = true;
	if (why)
		snprintf(p->err, sizeof(p->err), "%s", why);
	uv_poll_stop(&p->tpoll);
	uv_poll_stop(&p->ppoll);
	shutdown(p->pfd, SHUT_RDWR);
}

/* An OpenSSL call failed for good: say why as precisely as OpenSSL can. */
static void ssl_failed(struct tc_tls_pump *p, int e)
{
	char why[200];
	long verify = SSL_get_verify_result(p->ssl);

	if (e == SSL_ERROR_SSL && verify != X509_V_OK)
		snprintf(why, sizeof(why), "certificate verify failed: %s", X509_verify_cert_error_string(verify));
	else if (e == SSL_ERROR_SSL)
		snprintf(why, sizeof(why), "%s%s", openssl_reason(),
			 ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_WRONG_VERSION_NUMBER
				 ? " (is the port a TLS port?)"
				 : "");
	else if (e == SSL_ERROR_SYSCALL && errno)
		snprintf(why, sizeof(why), "%s", strerror(errno));
	else
		snprintf(why, sizeof(why), "connection closed by the server");
	char msg[256];
	snprintf(msg, sizeof(msg), "TLS %s: %s", p->handshaken ? "error" : "handshake failed", why);
	ERR_clear_error();
	stop(p, msg);
}

/*
 * A write failed on the socket (reset, broken pipe): the server may have
 * said why before it closed, in an alert not read yet (TLS 1.3 servers
 * refuse a client certificate after the client's side of the handshake,
 * and the reset for our unread bytes then fails our first write). Its
 * reason is the better one.
 */
static void write_failed(struct tc_tls_pump *p)
{
	unsigned char scratch[256];
	int saved = errno;
	ERR_clear_error();
	int rc = SSL_read(p->ssl, scratch, (int)sizeof(scratch));
	if (rc <= 0 && SSL_get_error(p->ssl, rc) == SSL_ERROR_SSL) {
		ssl_failed(p, SSL_ERROR_SSL);
		return;
	}
	errno = saved;
	ssl_failed(p, SSL_ERROR_SYSCALL);
}

/*
 * After an SSL_read or SSL_write (writing) that did not move bytes: records
 * what it waits for in *tev and returns true, or stops the pump and returns
 * false.
 */
static bool ssl_wait(struct tc_tls_pump *p, int rc, int *tev, bool writing)
{
	int e = SSL_get_error(p->ssl, rc);
	if (e == SSL_ERROR_WANT_READ) {
		*tev |= UV_READABLE;
		return true;
	}
	if (e == SSL_ERROR_WANT_WRITE) {
		*tev |= UV_WRITABLE;
		return true;
	}
	if (e == SSL_ERROR_ZERO_RETURN)
		stop(p, NULL); /* the server closed: the owner reads end-of-file */
	else if (e == SSL_ERROR_SYSCALL && writing)
		write_failed(p);
	else
		ssl_failed(p, e);
	return false;
}

/* The owner closed its end: end TLS politely (one try), then stop. */
static void owner_gone(struct tc_tls_pump *p)
{
	SSL_shutdown(p->ssl);
	ERR_clear_error();
	stop(p, NULL);
}

static void watch(uv_poll_t *h, int *cur, int want, uv_poll_cb cb)
{
	if (*cur == want)
		return;
	*cur = want;
	if (want)
		uv_poll_start(h, want, cb);
	else
		uv_poll_stop(h);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct tc_tls_pump *p = h->data;
	if (p->stopped)
		return;
	/* An error (libuv says EBADF for POLLERR: a reset, say) stopped the
	 * poll. Let OpenSSL and recv() meet the error themselves: an alert the
	 * server sent before it reset is still there to be read, and says why. */
	if (status < 0)
		*(h == &p->tpoll ? &p->tev : &p->pev) = 0;
	pump_run(p);
}

/*
 * Moves what can move, both ways, until nothing does; then polls for what
 * each side waits for. Each buffer is refilled only once it is empty.
 */
static void pump_run(struct tc_tls_pump *p)
{
	int tev, pev;
	bool moved;

	do {
		tev = pev = 0;
		moved = false;
		if (!p->handshaken) {
			ERR_clear_error();
			errno = 0;
			int rc = SSL_connect(p->ssl);
			if (rc != 1) {
				if (!ssl_wait(p, rc, &tev, true))
					return;
				break;
			}
			p->handshaken = true;
		}
		/* plain -> TLS */
		if (p->out_off == p->out_len) {
			ssize_t n = recv(p->pfd, p->out, sizeof(p->out), 0);
			if (n > 0) {
				p->out_off = 0;
				p->out_len = (size_t)n;
			} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				owner_gone(p);
				return;
			} else {
				pev |= UV_READABLE;
			}
		}
		if (p->out_off < p->out_len) {
			ERR_clear_error();
			errno = 0;
			int rc = SSL_write(p->ssl, p->out + p->out_off, (int)(p->out_len - p->out_off));
			if (rc > 0) {
				p->out_off += (size_t)rc;
				moved = true;
			} else if (!ssl_wait(p, rc, &tev, true)) {
				return;
			}
		}
		/* TLS -> plain */
		if (p->in_off == p->in_len) {
			ERR_clear_error();
			errno = 0;
			int rc = SSL_read(p->ssl, p->in, (int)sizeof(p->in));
			if (rc > 0) {
				p->in_off = 0;
				p->in_len = (size_t)rc;
			} else if (!ssl_wait(p, rc, &tev, false)) {
				return;
			}
		}
		if (p->in_off < p->in_len) {
			ssize_t n = send(p->pfd, p->in + p->in_off, p->in_len - p->in_off, MSG_NOSIGNAL);
			if (n > 0) {
				p->in_off += (size_t)n;
				moved = true;
			} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
				pev |= UV_WRITABLE;
			} else {
				owner_gone(p);
				return;
			}
		}
	} while (moved);
	watch(&p->tpoll, &p->tev, tev, on_poll);
	watch(&p->ppoll, &p->pev, pev, on_poll);
}

static void on_closed(uv_handle_t *h)
{
	struct tc_tls_pump *p = h->data;
	if (--p->handles)
		return;
	SSL_free(p->ssl);
	close(p->tfd);
	close(p->pfd);
	free(p);
}

void tc_tls_pump_close(struct tc_tls_pump *p)
{
	if (!p || p->closing)
		return;
	p->closing = true;
	p->stopped = true;
	uv_close((uv_handle_t *)&p->tpoll, on_closed);
	uv_close((uv_handle_t *)&p->ppoll, on_closed);
}

const char *tc_tls_pump_error(const struct tc_tls_pump *p)
{
	return p && p->err[0] ? p->err : NULL;
}

bool tc_tls_pump_ready(const struct tc_tls_pump *p)
{
	return p->handshaken && !p->stopped;
}

/* The name the certificate must carry: an IP literal is checked as an
 * address and sent without SNI (RFC 6066 has no SNI for addresses). */
static int expect_peer(SSL *ssl, const char *host)
{
	unsigned char addr[16];
	if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -1;
	if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
		return -1;
	return 0;
}

/* Gives to's socket the send and receive timeouts from has. */
static void copy_timeouts(int from, int to)
{
	static const int opts[] = { SO_RCVTIMEO, SO_SNDTIMEO };
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		struct timeval tv;
		socklen_t len = sizeof(tv);
		if (!getsockopt(from, SOL_SOCKET, opts[i], &tv, &len) && (tv.tv_sec || tv.tv_usec))
			setsockopt(to, SOL_SOCKET, opts[i], &tv, sizeof(tv));
	}
}

struct tc_tls_pump *tc_tls_pump_over(uv_loop_t *loop, const struct tc_tls *t, int fd, const char *host, char *err,
				     size_t errlen)
{
	int sv[2] = { -1, -1 }, tfd = -1;
	SSL *ssl = NULL;
	struct tc_tls_pump *p = NULL;

	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    (tfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		seterr(err, errlen, "cannot set up TLS: %s", strerror(errno));
		goto fail;
	}
	ERR_clear_error();
	if (!(ssl = SSL_new(t->ctx)) || expect_peer(ssl, host) || SSL_set_fd(ssl, tfd) != 1) {
		seterr(err, errlen, "cannot set up TLS for %s: %s", host, openssl_reason());
		ERR_clear_error();
		goto fail;
	}
	SSL_set_connect_state(ssl);
	/* The owner's end behaves as its socket did. */
	if ((fl & O_NONBLOCK) && fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK)) {
		seterr(err, errlen, "cannot set up TLS: %s", strerror(errno));
		goto fail;
	}
	copy_timeouts(fd, sv[0]);

	p = tc_xcalloc(1, sizeof(*p));
	p->ssl = ssl;
	p->tfd = tfd;
	p->pfd = sv[1];
	p->tpoll.data = p->ppoll.data = p;
	/* uv_poll_init makes tfd non-blocking: the TCP connection's open file,
	 * which fd still shares until the dup2 below. */
	if (uv_poll_init(loop, &p->tpoll, tfd)) {
		seterr(err, errlen, "cannot set up TLS: cannot poll the connection");
		goto fail;
	}
	p->handles++;
	if (uv_poll_init(loop, &p->ppoll, sv[1])) {
		seterr(err, errlen, "cannot set up TLS: cannot poll the connection");
		p->closing = true;
		uv_close((uv_handle_t *)&p->tpoll, on_closed); /* frees ssl, tfd, sv[1] and p */
		close(sv[0]);
		return NULL;
	}
	p->handles++;
	if (dup2(sv[0], fd) < 0) {
		seterr(err, errlen, "cannot set up TLS: %s", strerror(errno));
		tc_tls_pump_close(p); /* frees ssl, tfd, sv[1] and p */
		close(sv[0]);
		return NULL;
	}
	close(sv[0]);
	pump_run(p);
	return p;

fail:
	free(p);
	if (ssl)
		SSL_free(ssl);
	if (tfd >= 0)
		close(tfd);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return NULL;
}

/* ---- blocking clients --------------------------------------------------------------------------- */

/*
 * A blocking client's pump runs on a thread of its own, with its own loop,
 * until the client closes its descriptor (or the server the connection).
 * The threads are joined at exit (after waking those still running), so
 * OpenSSL's per-thread state is freed and a sanitizer build sees no leak.
 */
struct blocking {
	uv_loop_t loop;
	uv_timer_t timer; /* the handshake's deadline */
	uv_async_t wake;  /* at exit: stop the pump */
	struct tc_tls_pump *pump;
	pthread_t thread;
	bool timed_out;
	bool done; /* the pump stopped: wake must not be sent (under blocking_lock) */
	struct blocking *next;
};

static pthread_mutex_t blocking_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blocking *blocking_threads; /* every one started, until exit */
static pthread_once_t blocking_once = PTHREAD_ONCE_INIT;

static void on_handshake_deadline(uv_timer_t *t)
{
	struct blocking *b = t->data;
	b->timed_out = true;
}

static void on_wake(uv_async_t *a)
{
	struct blocking *b = a->data;
	stop(b->pump, NULL);
}

static void *pump_thread(void *arg)
{
	struct blocking *b = arg;
	/* OpenSSL writes with write(): a server gone must be EPIPE, not a
	 * SIGPIPE that ends the tool. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	/* Returns once the pump stopped: its polls are then idle and wake does
	 * not keep the loop alive. */
	uv_run(&b->loop, UV_RUN_DEFAULT);
	pthread_mutex_lock(&blocking_lock);
	b->done = true;
	pthread_mutex_unlock(&blocking_lock);
	tc_tls_pump_close(b->pump);
	uv_close((uv_handle_t *)&b->wake, NULL);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_loop_close(&b->loop);
	return NULL;
}

static void join_blocking_threads(void)
{
	pthread_mutex_lock(&blocking_lock);
	for (struct blocking *b = blocking_threads; b; b = b->next)
		if (!b->done)
			uv_async_send(&b->wake);
	struct blocking *list = blocking_threads;
	blocking_threads = NULL;
	pthread_mutex_unlock(&blocking_lock);
	while (list) {
		struct blocking *b = list;
		list = b->next;
		pthread_join(b->thread, NULL);
		free(b);
	}
}

static void register_join_at_exit(void)
{
	atexit(join_blocking_threads);
}

/* The handshake failed or the thread could not start: undo, with err set. */
static int blocking_failed(struct blocking *b)
{
	tc_tls_pump_close(b->pump);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_loop_close(&b->loop);
	free(b);
	return -1;
}

int tc_tls_over_blocking(const struct tc_tls *t, int fd, const char *host, char *err, size_t errlen)
{
	struct blocking *b = tc_xcalloc(1, sizeof(*b));
	if (uv_loop_init(&b->loop)) {
		free(b);
		seterr(err, errlen, "cannot set up TLS: no event loop");
		return -1;
	}
	struct tc_tls_pump *p = b->pump = tc_tls_pump_over(&b->loop, t, fd, host, err, errlen);
	if (!p)
		return blocking_failed(b);
	uv_timer_init(&b->loop, &b->timer);
	b->timer.data = b;
	uv_timer_start(&b->timer, on_handshake_deadline, BLOCKING_HANDSHAKE_MS, 0);
	while (!p->handshaken && !p->stopped && !b->timed_out)
		uv_run(&b->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&b->timer, NULL);
	if (!p->handshaken || p->stopped) {
		seterr(err, errlen, "%s",
		       p->err[0]    ? p->err
		       : p->stopped ? "TLS handshake failed: connection closed by the server"
				    : "TLS handshake failed: timed out (is the port a TLS port?)");
		return blocking_failed(b);
	}
	pthread_once(&blocking_once, register_join_at_exit);
	uv_async_init(&b->loop, &b->wake, on_wake);
	uv_unref((uv_handle_t *)&b->wake);
	b->wake.data = b;
	pthread_mutex_lock(&blocking_lock);
	int rc = pthread_create(&b->thread, NULL, pump_thread, b);
	if (!rc) {
		b->next = blocking_threads;
		blocking_threads = b;
	}
	pthread_mutex_unlock(&blocking_lock);
	if (rc) {
		seterr(err, errlen, "cannot set up TLS: %s", strerror(rc));
		uv_close((uv_handle_t *)&b->wake, NULL);
		return blocking_failed(b);
	}
	return 0;
}
