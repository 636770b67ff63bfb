/*
 * request.h — the plain request kind of connection (conn.h): POST
 * /threads/:thread_id/commands, one protocol command in, its one response
 * out, served by a session that lives as long as the exchange.
 */
#ifndef TC_REQUEST_H
#define TC_REQUEST_H

#include <stddef.h>

#include "srv.h"

/**
 * Runs the command body (len bytes) for thread, with the request's grant,
 * in the spelling asked (?protocol=, -1: from the command). The response
 * goes out when the session answers. Returns what the lws callback returns.
 */
int tc__request_command(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
			const struct tc_grant *g, int asked, const char *body, size_t len);

#endif
