/*
 * handshake.c — the listener and the handshake deadlines (handshake.h).
 * A waiting connection is a small record with its fd; once adopted, the
 * record moves to in_lws and is reachable from its wsi (lws' opaque user
 * data, which, unlike the per-session data, survives the upgrade). The
 * record is freed when the request arrives, when the connection closes, or
 * when its deadline passes.
 */
#include "handshake.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "scratch.h"
#include "util.h"

/* How often the oldest deadlines are checked: a handshake may outlive its
 * timeout by up to this much. */
#define TICK_MS 250

/* listen()'s backlog; the kernel caps it at net.core.somaxconn. accept_all()
 * drains it every loop turn, but a storm arrives faster than one turn. */
#define LISTEN_BACKLOG 65535

struct tc_handshake {
	struct tc_dlink link;
	int fd;            /* waiting: the socket; adopted: -1 */
	struct lws *wsi;   /* adopted: the connection */
	uint64_t deadline; /* uv_now() ms */
};

static void accept_all(struct tc_handshakes *h);

static void watch(struct tc_handshakes *h, bool on)
{
	if (h->fd < 0 || h->polling == on)
		return;
	h->polling = on;
	if (on)
		uv_poll_start(&h->poll, UV_READABLE, NULL);
	else
		uv_poll_stop(&h->poll);
}

/* Hands the next waiting connections to lws, a turn's worth. */
static void adopt_waiting(struct tc_handshakes *h)
{
	struct tc_dlink *n;
	for (int turn = 0; turn < TC_HANDSHAKES_PER_TURN && (n = h->waiting.head); turn++) {
		struct tc_handshake *p = TC_DLIST_ENTRY(n, struct tc_handshake, link);
		int fd = p->fd;
		tc_dlist_remove(&h->waiting, n);
		h->accepted_ms = p->deadline - h->timeout_ms;
		tc_scratch_free(p);
		/* lws calls NEW_CLIENT_INSTANTIATED (tc_handshake_begin) from here. */
		/* On failure lws has closed the socket itself. */
		if (!lws_adopt_socket_vhost(h->vhost, fd))
			tc_log0(TC_LOG_WARN, "lws could not take an accepted connection");
		h->accepted_ms = 0;
	}
}

static void on_pump(uv_idle_t *c)
{
	struct tc_handshakes *h = c->data;
	if (h->polling)
		accept_all(h); /* between two of lws' batches too */
	adopt_waiting(h);
	if (!h->waiting.count)
		uv_idle_stop(&h->pump);
}

static void pump_soon(struct tc_handshakes *h)
{
	if (h->waiting.count)
		uv_idle_start(&h->pump, on_pump);
}

/* Takes every connection the kernel has ready: none waits in the backlog,
 * which a storm would overflow (SYNs dropped, clients backing off). */
static void accept_all(struct tc_handshakes *h)
{
	uint64_t now = uv_now(h->timer.loop);

	for (;;) {
		int fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: the backlog waits until some close. */
				tc_log(TC_LOG_WARN, "cannot accept: out of file descriptors",
				       TC_LS("error", strerror(errno)));
				watch(h, false);
			}
			break;
		}
		if (h->waiting.count >= h->max_waiting) {
			close(fd); /* --max-connections waiting already */
			continue;
		}
		struct tc_handshake *p = tc_scratch_alloc(sizeof(*p));
		*p = (struct tc_handshake){ .fd = fd, .deadline = now + h->timeout_ms };
		tc_dlist_push_tail(&h->waiting, &p->link);
	}
}

static void on_readable(uv_poll_t *w, int status, int events)
{
	struct tc_handshakes *h = w->data;
	accept_all(h);
	adopt_waiting(h);
	pump_soon(h);
}

static void on_tick(uv_timer_t *t)
{
	struct tc_handshakes *h = t->data;
	uint64_t now = uv_now(t->loop);
	struct tc_dlink *n;

	/* Silent or trickling clients: closed at once, as lws' own timeout would. */
	while ((n = h->waiting.head) && TC_DLIST_ENTRY(n, struct tc_handshake, link)->deadline <= now) {
		struct tc_handshake *p = TC_DLIST_ENTRY(n, struct tc_handshake, link);
		tc_dlist_remove(&h->waiting, n);
		close(p->fd);
		tc_scratch_free(p);
		tc_metrics.handshake_timeouts++;
	}
	while ((n = h->in_lws.head) && TC_DLIST_ENTRY(n, struct tc_handshake, link)->deadline <= now) {
		struct tc_handshake *p = TC_DLIST_ENTRY(n, struct tc_handshake, link);
		struct lws *wsi = p->wsi;
		tc_dlist_remove(&h->in_lws, n);
		lws_set_opaque_user_data(wsi, NULL);
		tc_scratch_free(p);
		tc_metrics.handshake_timeouts++;
		lws_set_timeout(wsi, PENDING_TIMEOUT_ESTABLISH_WITH_SERVER, LWS_TO_KILL_SYNC);
	}
	watch(h, true); /* after EMFILE: try again */
	adopt_waiting(h);
	pump_soon(h);
}

/* A listening socket on host:port; host NULL: "::" (both families), else "0.0.0.0". */
static int open_listener(const char *host, int port)
{
	char service[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *res = NULL;
	const char *tries[2] = { host, NULL };
	if (!host) {
		tries[0] = "::";
		tries[1] = "0.0.0.0";
	}
	snprintf(service, sizeof(service), "%d", port);
	for (int t = 0; t < 2 && tries[t]; t++) {
		if (getaddrinfo(tries[t], service, &hints, &res))
			continue;
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
			if (fd < 0)
				continue;
			int one = 1, zero = 0;
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (a->ai_family == AF_INET6)
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			/* accept() hands over a connection once its first bytes arrived: in a
			 * storm the clients' requests trail their connects, and connections
			 * lws took without one would wait in its lists, each a walk of them
			 * (its header tables and timeouts: 40% of the server's user time at
			 * 19,000 clients). A silent client is accepted after a second anyway
			 * (the kernel's first SYN-ACK retransmit) and meets the deadline. */
			setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof(one));
			if (!bind(fd, a->ai_addr, a->ai_addrlen) && !listen(fd, LISTEN_BACKLOG)) {
				freeaddrinfo(res);
				return fd;
			}
			int e = errno;
			close(fd);
			errno = e;
		}
		freeaddrinfo(res);
		res = NULL;
	}
	return -1;
}

void tc_handshakes_init(struct tc_handshakes *h, uv_loop_t *loop, uint64_t timeout_ms, size_t max_waiting)
{
	*h = (struct tc_handshakes){ .fd = -1, .timeout_ms = timeout_ms, .max_waiting = max_waiting };
	uv_timer_init(loop, &h->timer);
	uv_idle_init(loop, &h->pump);
	h->timer.data = h->pump.data = h;
}

int tc_handshakes_listen(struct tc_handshakes *h, struct lws_vhost *vhost, const char *host, int port)
{
	uv_loop_t *loop = h->timer.loop;
	h->vhost = vhost;
	h->fd = open_listener(host, port);
	if (h->fd < 0)
		return -1;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	getsockname(h->fd, (struct sockaddr *)&ss, &len);
	int bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	uv_poll_init(loop, &h->poll, h->fd);
	h->poll.data = h;
	h->polling = true;
	uv_poll_start(&h->poll, UV_READABLE, on_readable);
	uv_timer_start(&h->timer, on_tick, TICK_MS, TICK_MS);
	return bound;
}

void tc_handshake_begin(struct tc_handshakes *h, struct lws *wsi)
{
	/* lws filed a deadline of its own: cancelled, ours replaces it. */
	lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
	uint64_t since = h->accepted_ms ? h->accepted_ms : uv_now(h->timer.loop);
	struct tc_handshake *p = tc_scratch_alloc(sizeof(*p));
	*p = (struct tc_handshake){ .fd = -1, .wsi = wsi, .deadline = since + h->timeout_ms };
	tc_dlist_push_tail(&h->in_lws, &p->link);
	lws_set_opaque_user_data(wsi, p);
}

void tc_handshake_end(struct tc_handshakes *h, struct lws *wsi)
{
	struct tc_handshake *p = lws_get_opaque_user_data(wsi);
	if (!p)
		return;
	tc_dlist_remove(&h->in_lws, &p->link);
	lws_set_opaque_user_data(wsi, NULL);
	tc_scratch_free(p);
}

size_t tc_handshakes_pending(const struct tc_handshakes *h)
{
	return h->waiting.count + h->in_lws.count;
}

static void free_all(struct tc_dlist *l)
{
	struct tc_dlink *n;
	while ((n = l->head)) {
		struct tc_handshake *p = TC_DLIST_ENTRY(n, struct tc_handshake, link);
		tc_dlist_remove(l, n);
		if (p->fd >= 0)
			close(p->fd);
		if (p->wsi)
			lws_set_opaque_user_data(p->wsi, NULL);
		tc_scratch_free(p);
	}
}

void tc_handshakes_close(struct tc_handshakes *h)
{
	free_all(&h->waiting);
	free_all(&h->in_lws);
	if (h->fd >= 0) {
		uv_poll_stop(&h->poll);
		uv_close((uv_handle_t *)&h->poll, NULL);
		close(h->fd);
		h->fd = -1;
	}
	uv_timer_stop(&h->timer);
	uv_idle_stop(&h->pump);
	uv_close((uv_handle_t *)&h->timer, NULL);
	uv_close((uv_handle_t *)&h->pump, NULL);
}
