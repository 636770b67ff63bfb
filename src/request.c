/*
 * request.c — the plain request kind of connection: POST /commands (request.h).
 */
#include "request.h"

#include <stdlib.h>

#include "httpres.h"
#include "spell.h"

/* The session's one answer, written as the response; the exchange ends with it. */
static int request_writeable(struct tc_conn *c)
{
	struct tc_buf *b = tc_bufq_pop(&c->out);
	c->want_write = false;
	if (!b)
		return 0;
	int rc = -1;
	if (!tc__http_head(c->wsi, 200, "application/json", b->len) &&
	    lws_write(c->wsi, tc_buf_data(b), b->len, LWS_WRITE_HTTP_FINAL) == (int)b->len)
		rc = 0;
	tc_buf_unref(b);
	return tc__http_exchange_over(c, rc);
}

static void request_destroy(struct tc_conn *c)
{
	free(c);
}

static const struct tc_conn_ops request_ops = {
	.transport = "http",
	.one_shot = true,
	.writeable = request_writeable,
	.destroy = request_destroy,
};

/* Answers a frame the protocol layer built, as JSON with status. */
static int reply_frame(struct lws *wsi, unsigned status, struct tc_buf *b)
{
	int rc = tc__http_send(wsi, status, "application/json", (const char *)tc_buf_data(b));
	tc_buf_unref(b);
	return rc;
}

/*
 * POST /threads/:thread_id/commands answers in protocol 0.0.21 (the
 * official client's spelling), unless the request asks with ?protocol= or
 * its params name protocol fields in camelCase only (assistantId, …): a
 * client written against the seed gets the seed's spelling back.
 */
int tc__request_command(struct tc_server *srv, struct lws *wsi, struct tc_pss *pss, const char *thread,
			const struct tc_grant *g, int asked, const char *body, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;

	if (tc_command_parse(body, len, &cmd, &err)) {
		struct tc_buf *b = tc_response_error(cmd.has_id, cmd.id, err.code, err.message);
		tc_command_free(&cmd);
		return reply_frame(wsi, 400, b);
	}
	if (cmd.method == TC_METHOD_SUBSCRIBE || cmd.method == TC_METHOD_UNSUBSCRIBE ||
	    cmd.method == TC_METHOD_RECONNECT) {
		struct tc_buf *b = tc_response_error(true, cmd.id, TC_ERR_NOT_SUPPORTED,
						     "subscriptions live on a connection: use the WebSocket, or POST "
						     "/threads/:thread_id/stream for SSE");
		tc_command_free(&cmd);
		return reply_frame(wsi, 200, b);
	}
	enum tc_spelling sp = asked >= 0                                    ? (enum tc_spelling)asked
			      : tc_spell_guess(cmd.params) == TC_SPELL_SEED ? TC_SPELL_SEED
									    : TC_SPELL_021;
	tc_command_free(&cmd);
	int admitted = tc__http_refuse_if_full(&srv->conns, wsi);
	if (admitted != 1)
		return admitted;
	struct tc_conn *c = tc_xcalloc(1, sizeof(*c));
	tc__conn_init(c, &srv->conns, &request_ops, wsi, thread, &tc__conn_json_io, sp);
	tc_session_allow_commands(c->session, g->commands);
	pss->conn = c;
	/* The session answers through tc__conn_send; request_writeable writes it. */
	tc_session_on_frame(c->session, body, len);
	return 0;
}
