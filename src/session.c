/*
 * session.c — one client's protocol state (session.h): its lifetime, the
 * queue of commands that wait while one is served, the rate limit, the
 * dispatch, and the runtime commands forwarded to workers. The
 * subscriptions and the commands answered by replays and queries are
 * session_subs.c's, below this file; both share session_int.h.
 */
#include "session.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "session_int.h"
#include "session_subs.h"
#include "util.h"

/* Frames a client may pipeline while a command is served, beyond which it is cut. */
#define MAX_PENDING 256
/* Queued frames past which the client is not read from until the queue empties. */
#define PENDING_READ_STOP 16

/* ==== lifetime ============================================================================ */

static void session_free(struct tc_session *s)
{
	assert(!s->replay && !s->query && !s->inflight);
	tc__session_subs_free(s);
	while (s->pending) {
		struct tc__pending *p = s->pending;
		s->pending = p->next;
		free(p);
	}
	free(s->thread_id);
	free(s);
}

/* Drops one reference; true when the session is closed (maybe freed). */
static bool release(struct tc_session *s)
{
	assert(s->refs > 0);
	s->refs--;
	if (!s->closed)
		return false;
	if (!s->refs)
		session_free(s);
	return true;
}

void tc_session_close(struct tc_session *s)
{
	if (!s || s->closed)
		return;
	s->closed = true;
	tc_replay_free(s->replay);
	s->replay = NULL;
	tc_query_cancel(s->query);
	s->query = NULL;
	tc_hub_detach(s->env->hub, &s->member);
	release(s);
}

void tc_session_allow_commands(struct tc_session *s, bool allowed)
{
	s->may_command = allowed;
}

void tc_session_set_spelling(struct tc_session *s, enum tc_spelling sp)
{
	s->sp = sp;
	s->caller.sp = sp;
}

enum tc_spelling tc_session_spelling(const struct tc_session *s)
{
	return s->sp;
}

const char *tc_session_thread(const struct tc_session *s)
{
	return s->thread_id;
}

size_t tc_session_subscriptions(const struct tc_session *s)
{
	return s->nsubs;
}

/* ==== runtime commands: forwarded to agent workers ============================================ */

#define SESSION_OF_CALLER(c) ((struct tc_session *)((char *)(c)-offsetof(struct tc_session, caller)))

static void caller_answer(struct tc_bridge_caller *c, struct tc_buf *frame)
{
	struct tc_session *s = SESSION_OF_CALLER(c);
	if (s->closed)
		tc_buf_unref(frame); /* the client left: the answer goes nowhere */
	else
		s->io->send(s->ctx, frame);
}

static void caller_release(struct tc_bridge_caller *c)
{
	struct tc_session *s = SESSION_OF_CALLER(c);
	s->inflight--;
	release(s);
}

static enum tc_err do_runtime(struct tc_session *s, struct tc_command *cmd, struct tc_error *err)
{
	const struct tc_config *cfg = s->env->cfg;

	if (!s->env->bridge || !cfg->commands_on)
		return tc_error_set(err, TC_ERR_NOT_SUPPORTED,
				    "%s is not available: agent commands are switched off on this gateway",
				    tc_method_name(cmd->method));
	if (tc_params_validate(cmd, s->sp, err))
		return err->code;
	if (!s->may_command)
		return tc_error_set(err, TC_ERR_PERMISSION_DENIED,
				    "this token may read the thread but not send %s; it needs the "
				    "\"commands\" claim",
				    tc_method_name(cmd->method));
	if (s->inflight >= (size_t)cfg->max_inflight)
		return tc_error_set(err, TC_ERR_UNKNOWN_ERROR,
				    "this connection already has %zu commands waiting for answers, the "
				    "limit; wait for some",
				    s->inflight);
	s->refs++;
	s->inflight++;
	if (tc_bridge_submit(s->env->bridge, &s->caller, s->thread_id, cmd, err)) {
		s->inflight--;
		s->refs--;
		return err->code;
	}
	return TC_OK;
}

/* ==== the command queue ========================================================================= */

/* Handles one frame now; returns with s->serving set if it started serving one. */
static void handle_frame(struct tc_session *s, const char *data, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;
	enum tc_err rc = tc_command_parse(data, len, &cmd, &err);

	tc_metrics.commands_total++;

	if (rc == TC_OK) {
		switch (cmd.method) {
		case TC_METHOD_SUBSCRIBE:
			rc = tc__session_subscribe(s, &cmd, &err);
			break;
		case TC_METHOD_UNSUBSCRIBE:
			rc = tc__session_unsubscribe(s, &cmd, &err);
			break;
		case TC_METHOD_RECONNECT:
			rc = tc__session_reconnect(s, &cmd, &err);
			break;
		case TC_METHOD_AGENT_GET_TREE:
			rc = tc__session_get_tree(s, &cmd, &err);
			break;
		case TC_METHOD_UNKNOWN: {
			size_t mlen = strlen(cmd.method_name);
			rc = tc_error_set(&err, TC_ERR_UNKNOWN_COMMAND, "unknown method \"%.*s%s\"",
					  (int)tc_utf8_prefix(cmd.method_name, mlen, 64), cmd.method_name,
					  mlen > 64 ? "…" : "");
			break;
		}
		default:
			rc = do_runtime(s, &cmd, &err);
			break;
		}
	}
	if (rc != TC_OK)
		tc__session_send_error(s, cmd.has_id, cmd.id, &err);
	tc_command_free(&cmd);
}

/* Runs queued frames until one is served at length or none are left. */
static void run_pending(struct tc_session *s)
{
	while (!s->closed && !s->serving && s->pending) {
		struct tc__pending *p = tc__session_pending_pop(s);
		if (p->unsubscribed)
			tc__session_send_unsubscribed(s, p->cmd_id); /* its effect came when it arrived */
		else
			handle_frame(s, p->data, p->len);
		free(p);
	}
	if (!s->closed && !s->reading && !s->serving) {
		s->reading = true;
		s->io->set_reading(s->ctx, true);
	}
}

/* Token bucket: --max-command-burst tokens, refilled at --max-command-rate. */
static bool take_token(struct tc_session *s)
{
	const struct tc_config *cfg = s->env->cfg;
	uint64_t now = uv_hrtime();
	s->tokens += (double)(now - s->refilled_ns) / 1e9 * (double)cfg->max_command_rate;
	if (s->tokens > (double)cfg->max_command_burst)
		s->tokens = (double)cfg->max_command_burst;
	s->refilled_ns = now;
	if (s->tokens < 1)
		return false;
	s->tokens -= 1;
	return true;
}

/* Refuses a command over the rate; a client that keeps going is cut off. */
static void rate_limited(struct tc_session *s, const char *data, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;
	const struct tc_config *cfg = s->env->cfg;

	if (++s->rejected > 100) {
		s->io->close(s->ctx, TC_CLOSE_POLICY, "command rate limit exceeded");
		return;
	}
	tc_command_parse(data, len, &cmd, &err);
	tc_error_set(&err, TC_ERR_UNKNOWN_ERROR,
		     "rate limit exceeded: at most %lld commands per second (bursts of %lld); slow down",
		     cfg->max_command_rate, cfg->max_command_burst);
	tc__session_send_error(s, cmd.has_id, cmd.id, &err);
	tc_command_free(&cmd);
}

void tc_session_on_frame(struct tc_session *s, const char *data, size_t len)
{
	if (s->closed)
		return;
	if (!take_token(s)) {
		rate_limited(s, data, len);
		return;
	}
	s->rejected = 0;
	if (!s->serving) {
		handle_frame(s, data, len);
		return;
	}
	/* A command is being served: this one waits its turn; past
	 * PENDING_READ_STOP of them the client is not read from until the
	 * queue is empty again. */
	if (s->npending >= MAX_PENDING) {
		s->io->close(s->ctx, TC_CLOSE_POLICY, "too many commands pipelined behind a replay");
		return;
	}
	struct tc__pending *p;
	if (!tc__session_unsubscribe_now(s, data, len, &p)) {
		p = tc_xcalloc(1, sizeof(*p) + len);
		p->len = len;
		memcpy(p->data, data, len);
	}
	p->next = NULL;
	if (s->pending_tail)
		s->pending_tail->next = p;
	else
		s->pending = p;
	s->pending_tail = p;
	s->npending++;
	/* Not at the first: frames that came together are taken together
	 * (replay_gather, session_subs.c), and commands of one burst rarely
	 * pass this. */
	if (s->reading && s->npending >= PENDING_READ_STOP) {
		s->reading = false;
		s->io->set_reading(s->ctx, false);
	}
	if (s->replay)
		tc_replay_nudge(s->replay); /* a held answer: gather this frame, or answer */
}

struct tc_session *tc_session_new(const struct tc_session_env *env, const char *thread_id,
				  const struct tc_session_io *io, void *ctx)
{
	struct tc_session *s = tc_xcalloc(1, sizeof(*s));
	s->env = env;
	s->io = io;
	s->ctx = ctx;
	s->thread_id = tc_xstrdup(thread_id);
	s->next_nonce = 1;
	s->refs = 1;
	s->reading = true;
	s->member.ops = &tc__session_member_ops;
	s->may_command = true;
	s->tokens = (double)env->cfg->max_command_burst;
	s->refilled_ns = uv_hrtime();
	s->caller.answer = caller_answer;
	s->caller.release = caller_release;
	s->serve_next = run_pending;
	return s;
}
