/*
 * session_subs.c — a session's subscriptions and the commands served at
 * length (session_subs.h): subscribe, unsubscribe, reconnect, the SSE
 * stream, agent.getTree; the replays and queries that answer them, and the
 * session's member of the thread's fan-out. Below session.c, which queues
 * and dispatches the commands: a command finished here goes on to the next
 * through s->serve_next, never by calling up.
 */
#include "session_subs.h"

#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "session_int.h"
#include "util.h"

#define SESSION_OF(m) ((struct tc_session *)((char *)(m)-offsetof(struct tc_session, member)))

/* ==== the subscriptions ========================================================================= */

static struct tc__sub *find_sub(struct tc_session *s, const char *id)
{
	for (size_t i = 0; i < s->nsubs; i++)
		if (!strcmp(s->subs[i].id, id))
			return &s->subs[i];
	return NULL;
}

static enum tc_err add_sub(struct tc_session *s, struct tc_filter *f, const char *given_id, struct tc_error *err)
{
	if (s->nsubs >= (size_t)s->env->cfg->max_subscriptions) {
		tc_filter_free(f);
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "this connection already holds %zu subscriptions, the limit; "
				    "unsubscribe one first",
				    s->nsubs);
	}
	if (s->nsubs == s->capsubs) {
		s->capsubs = s->capsubs ? s->capsubs * 2 : 1; /* most connections hold one */
		s->subs = tc_xrealloc(s->subs, s->capsubs * sizeof(*s->subs));
	}
	char *id;
	if (given_id) {
		id = tc_xstrdup(given_id);
	} else {
		/* Ids restored by subscription.reconnect may use any nonce: skip them. */
		while (find_sub(s, id = tc_subscription_id(f, s->next_nonce++)))
			free(id);
	}
	s->subs[s->nsubs++] = (struct tc__sub){ .id = id, .filter = f, .fresh = true };
	tc_metrics.subscriptions++;
	return TC_OK;
}

static void remove_sub(struct tc_session *s, size_t i)
{
	tc_metrics.subscriptions--;
	free(s->subs[i].id);
	tc_filter_free(s->subs[i].filter);
	s->subs[i] = s->subs[--s->nsubs];
}

static bool match_subs(const struct tc_session *s, const struct tc_event_key *k, enum tc_subs w)
{
	for (size_t i = 0; i < s->nsubs; i++) {
		if ((w == TC_SUBS_FRESH && !s->subs[i].fresh) || (w == TC_SUBS_OLD && s->subs[i].fresh))
			continue;
		if (tc_filter_match(s->subs[i].filter, k))
			return true;
	}
	return false;
}

static void drop_joined(struct tc_session *s)
{
	for (size_t i = 0; i < s->njoined; i++)
		free(s->joined[i].sub);
	free(s->joined);
	s->joined = NULL;
	s->njoined = 0;
}

void tc__session_subs_free(struct tc_session *s)
{
	for (size_t i = 0; i < s->nsubs; i++) {
		free(s->subs[i].id);
		tc_filter_free(s->subs[i].filter);
	}
	tc_metrics.subscriptions -= s->nsubs;
	free(s->subs);
	free(s->serving_sub);
	drop_joined(s);
}

/* ==== serving =================================================================================== */

/* The command is served: fresh subscriptions become ordinary, queued commands run. */
static void served(struct tc_session *s)
{
	for (size_t i = 0; i < s->nsubs; i++)
		s->subs[i].fresh = false;
	tc_replay_free(s->replay);
	s->replay = NULL;
	s->query = NULL; /* over when it reported */
	s->serving = TC__SERVE_NONE;
	free(s->serving_sub);
	s->serving_sub = NULL;
	drop_joined(s);
	s->serve_next(s);
}

/* The command fails before its reply: its subscriptions are undone. */
static void refuse(struct tc_session *s, enum tc_err code, const char *message)
{
	struct tc_error err;
	for (size_t i = s->nsubs; i-- > 0;)
		if (s->subs[i].fresh)
			remove_sub(s, i);
	tc_error_set(&err, code, "%s", message);
	if (s->serving == TC__SERVE_STREAM) {
		s->io->close(s->ctx, TC_CLOSE_INTERNAL, TC_MSG_REDIS_DOWN);
	} else {
		tc__session_send_error(s, true, s->cmd_id, &err);
		for (size_t i = 0; i < s->njoined; i++)
			tc__session_send_error(s, true, s->joined[i].cmd_id, &err);
	}
	served(s);
}

/* ==== hub member ========================================================================== */

static bool member_match(struct tc_member *m, const struct tc_event_key *k)
{
	return match_subs(SESSION_OF(m), k, TC_SUBS_ANY);
}

static void member_send(struct tc_member *m, struct tc_event *ev)
{
	struct tc_session *s = SESSION_OF(m);
	tc_metrics.events_delivered++;
	s->io->send(s->ctx, tc_buf_ref(tc_event_frame(ev, s->io->kind, s->sp)));
}

static void member_ready(struct tc_member *m)
{
	struct tc_session *s = SESSION_OF(m);
	if (s->replay)
		tc_replay_ready(s->replay);
}

static void member_lost(struct tc_member *m, const char *why)
{
	struct tc_session *s = SESSION_OF(m);
	s->io->close(s->ctx, TC_CLOSE_HISTORY_RESET, why);
}

const struct tc_member_ops tc__session_member_ops = {
	.match = member_match,
	.send = member_send,
	.ready = member_ready,
	.lost = member_lost,
};

/* ==== replays ===================================================================================== */

static bool replay_match(void *ctx, const struct tc_event_key *k, enum tc_subs which)
{
	return match_subs(ctx, k, which);
}

/* A subscribe's reply: its subscription's id and what its replay holds for it. */
static void answer_subscribe(struct tc_session *s, uint64_t cmd_id, const char *sub, const struct tc_replay_answer *a)
{
	const struct tc__sub *sp = find_sub(s, sub); /* gone if unsubscribed meanwhile */
	cJSON *res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, tc_spell("subscriptionId", s->sp), sub);
	cJSON_AddNumberToObject(res, tc_spell("replayedEvents", s->sp), sp ? (double)sp->replayed : 0);
	/* An extension (the result is Extensible): the run's first events
	 * were left out of the replay by --max-replay. */
	if (a->has_missed)
		cJSON_AddNumberToObject(res, tc_spell("missedEvents", s->sp), (double)a->missed);
	tc__session_send_success(s, cmd_id, res, (int64_t)a->applied);
}

/* The replay knows what to answer: the command's reply (or the stream's start). */
static void replay_answer(void *ctx, struct tc_replay_answer *a)
{
	struct tc_session *s = ctx;
	cJSON *res;

	switch (s->serving) {
	case TC__SERVE_STREAM:
		s->io->stream_started(s->ctx, a->restored, a->has_missed, a->missed);
		return;
	case TC__SERVE_SUBSCRIBE:
		answer_subscribe(s, s->cmd_id, s->serving_sub, a);
		for (size_t i = 0; i < s->njoined; i++)
			answer_subscribe(s, s->joined[i].cmd_id, s->joined[i].sub, a);
		return;
	default:
		res = cJSON_CreateObject();
		if (a->has_missed)
			cJSON_AddNumberToObject(res, tc_spell("missedEvents", s->sp), (double)a->missed);
		cJSON_AddBoolToObject(res, "restored", a->restored);
		cJSON_AddItemToObject(res, tc_spell("currentNamespaces", s->sp), a->namespaces);
		a->namespaces = NULL;
		break;
	}
	tc__session_send_success(s, s->cmd_id, res, (int64_t)a->applied);
}

static void replay_send(void *ctx, struct tc_buf *frame)
{
	struct tc_session *s = ctx;
	s->io->send(s->ctx, frame);
}

static size_t replay_queued(void *ctx)
{
	struct tc_session *s = ctx;
	return s->io->queued(s->ctx);
}

static void replay_fail(void *ctx, enum tc_err code, const char *message)
{
	refuse(ctx, code, message);
}

static void replay_close(void *ctx, enum tc_close code, const char *reason)
{
	struct tc_session *s = ctx;
	s->io->close(s->ctx, (int)code, reason);
}

static void replay_done(void *ctx)
{
	served(ctx);
}

static void replay_tally(void *ctx, const struct tc_event_key *k)
{
	struct tc_session *s = ctx;
	for (size_t i = 0; i < s->nsubs; i++)
		if (s->subs[i].fresh && tc_filter_match(s->subs[i].filter, k))
			s->subs[i].replayed++;
}

/*
 * Subscribes queued right behind the one being served join its replay: one
 * pass over the history in seq order for all of them, their replies first.
 * A 0.0.21 client (the official SDK) subscribes several filters at once and
 * reacts to a run's end as soon as it sees it; replayed one after another,
 * the end of the run would reach it before the later subscriptions' events.
 * Joining stops at the first frame that is not a valid subscribe, which is
 * then served in its turn.
 */
static bool replay_gather(void *ctx)
{
	struct tc_session *s = ctx;
	size_t had = s->njoined;

	if (s->serving != TC__SERVE_SUBSCRIBE || s->sp != TC_SPELL_021)
		return false;
	while (s->pending && !s->pending->unsubscribed) {
		struct tc__pending *p = s->pending;
		struct tc_command cmd;
		struct tc_error err;
		struct tc_filter *f;
		bool joins = tc_command_parse(p->data, p->len, &cmd, &err) == TC_OK &&
			     cmd.method == TC_METHOD_SUBSCRIBE && cmd.params &&
			     tc_filter_parse(cmd.params, &f, &err) == TC_OK && add_sub(s, f, NULL, &err) == TC_OK;
		uint64_t id = cmd.id;
		tc_command_free(&cmd);
		if (!joins)
			break;
		tc_metrics.commands_total++;
		s->joined = tc_xrealloc(s->joined, (s->njoined + 1) * sizeof(*s->joined));
		s->joined[s->njoined++] = (struct tc__joined){ id, tc_xstrdup(s->subs[s->nsubs - 1].id) };
		free(tc__session_pending_pop(s));
	}
	if (s->njoined == had)
		return false;
	for (size_t i = 0; i < s->nsubs; i++)
		s->subs[i].replayed = 0; /* the replay counts again, for all */
	return true;
}

/* A 0.0.21 subscribe with nothing behind it may wait for the subscribes of its burst. */
static bool replay_may_hold(void *ctx)
{
	struct tc_session *s = ctx;

	return !s->closed && s->serving == TC__SERVE_SUBSCRIBE && s->sp == TC_SPELL_021 && !s->pending;
}

static const struct tc_replay_ops replay_ops = {
	.match = replay_match,
	.answer = replay_answer,
	.send = replay_send,
	.queued = replay_queued,
	.fail = replay_fail,
	.close = replay_close,
	.done = replay_done,
	.gather = replay_gather,
	.tally = replay_tally,
	.may_hold = replay_may_hold,
};

void tc_session_on_drained(struct tc_session *s)
{
	if (!s->closed && s->replay)
		tc_replay_drained(s->replay);
}

/* Serves a subscribe, reconnect or stream with a replay; the reply comes later. */
static void begin_replay(struct tc_session *s, enum tc__serving what, uint64_t id, const struct tc_replay_from *from)
{
	bool fresh = false;

	tc_metrics.replay_requests++;
	if (!s->member.thread) {
		tc_hub_attach(s->env->hub, s->thread_id, &s->member);
		fresh = true;
	}
	s->serving = what;
	s->cmd_id = id;
	struct tc_replay_start start = {
		.cfg = s->env->cfg,
		.redis = s->env->redis,
		.thread = s->thread_id,
		.member = &s->member,
		.fresh_member = fresh,
		.kind = s->io->kind,
		.spelling = s->sp,
		.per_subscription = s->sp == TC_SPELL_021,
		.ops = &replay_ops,
		.ctx = s,
		.holds = s->env->holds,
		.reconnect = what != TC__SERVE_SUBSCRIBE && (what != TC__SERVE_STREAM || from),
		.from = from,
	};
	s->replay = tc_replay_start(&start);
	if (!s->replay)
		refuse(s, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN);
}

/* ==== commands ================================================================================== */

enum tc_err tc__session_subscribe(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err)
{
	struct tc_filter *f;

	if (!cmd->params)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	if (tc_filter_parse(cmd->params, &f, err) || add_sub(s, f, NULL, err))
		return err->code;
	/* Kept by value: an unsubscribe served meanwhile may move the array. */
	s->serving_sub = tc_xstrdup(s->subs[s->nsubs - 1].id);
	begin_replay(s, TC__SERVE_SUBSCRIBE, cmd->id, NULL);
	return TC_OK;
}

/* Finds the subscription an unsubscribe names; fills err when it cannot. */
static struct tc__sub *unsubscribe_target(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err)
{
	if (!cmd->params) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
		return NULL;
	}
	const char *field = tc_spell("subscriptionId", s->sp);
	const cJSON *id = tc_spell_get(cmd->params, field, s->sp);
	if (!id) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.%s is required", field);
		return NULL;
	}
	if (!cJSON_IsString(id)) {
		tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.%s must be a string", field);
		return NULL;
	}
	struct tc__sub *sub = find_sub(s, id->valuestring);
	if (!sub) {
		size_t len = strlen(id->valuestring);
		tc_error_set(err, TC_ERR_NO_SUCH_SUBSCRIPTION, "no subscription \"%.*s%s\" on this connection",
			     (int)tc_utf8_prefix(id->valuestring, len, 48), id->valuestring, len > 48 ? "…" : "");
	}
	return sub;
}

void tc__session_send_unsubscribed(struct tc_session *s, uint64_t id)
{
	tc__session_send_success(s, id, NULL, s->member.thread ? (int64_t)s->member.cursor : -1);
}

enum tc_err tc__session_unsubscribe(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err)
{
	struct tc__sub *sub = unsubscribe_target(s, cmd, err);
	if (!sub)
		return err->code;
	remove_sub(s, (size_t)(sub - s->subs));
	tc__session_send_unsubscribed(s, cmd->id);
	return TC_OK;
}

enum tc_err tc__session_reconnect(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err)
{
	const cJSON *p = cmd->params, *run, *last, *subs, *it;
	struct tc_filter *filters[256];
	char last_epoch[TC_EPOCH_MAX] = "";
	uint64_t last_seq = 0;
	size_t n = 0;

	if (!p)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	run = tc_spell_get(p, "runId", s->sp);
	if (!cJSON_IsString(run))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.%s %s", tc_spell("runId", s->sp),
				    run ? "must be a string" : "is required");
	/* Optional text: absent is fine, null is not text. */
	last = tc_spell_get(p, "lastEventId", s->sp);
	if (last && (!cJSON_IsString(last) || !tc_event_id_parse(last->valuestring, last_epoch, &last_seq)))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "params.%s must be an eventId this server sent (\"<epoch>:<seq>\")",
				    tc_spell("lastEventId", s->sp));
	subs = cJSON_GetObjectItemCaseSensitive(p, "subscriptions");
	if (subs && !cJSON_IsNull(subs) && !cJSON_IsArray(subs))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "params.subscriptions must be an array of subscription ids");
	size_t want = subs ? (size_t)cJSON_GetArraySize(subs) : 0;
	if (s->nsubs + want > (size_t)s->env->cfg->max_subscriptions || want > 256)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "restoring %zu subscriptions would exceed this connection's limit of %lld", want,
				    s->env->cfg->max_subscriptions);
	size_t i = 0;
	cJSON_ArrayForEach(it, subs)
	{
		if (!cJSON_IsString(it)) {
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.subscriptions[%zu] must be a string", i);
			goto fail;
		}
		if (tc_subscription_id_parse(it->valuestring, &filters[n], err))
			goto fail;
		if (find_sub(s, it->valuestring)) {
			tc_filter_free(filters[n]);
			tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				     "params.subscriptions[%zu] is already active on this connection", i);
			goto fail;
		}
		n++;
		i++;
	}
	i = 0;
	cJSON_ArrayForEach(it, subs) add_sub(s, filters[i++], it->valuestring, err);
	struct tc_replay_from from = { .seq = last_seq };
	memcpy(from.epoch, last_epoch, sizeof(from.epoch));
	begin_replay(s, TC__SERVE_RECONNECT, cmd->id, last && cJSON_IsString(last) ? &from : NULL);
	return TC_OK;
fail:
	while (n)
		tc_filter_free(filters[--n]);
	return err->code;
}

static void tree_answered(void *ctx, enum tc_err code, const char *message, cJSON *result, uint64_t head)
{
	struct tc_session *s = ctx;
	struct tc_error err;

	if (code) {
		tc_error_set(&err, code, "%s", message);
		tc__session_send_error(s, true, s->cmd_id, &err);
	} else {
		tc_spell_tree(result, s->sp);
		tc__session_send_success(s, s->cmd_id, result, (int64_t)head);
	}
	served(s);
}

enum tc_err tc__session_get_tree(struct tc_session *s, const struct tc_command *cmd, struct tc_error *err)
{
	const cJSON *run = cmd->params ? tc_spell_get(cmd->params, "runId", s->sp) : NULL;
	if (run && !cJSON_IsNull(run) && !cJSON_IsString(run))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.%s must be a string",
				    tc_spell("runId", s->sp));
	s->serving = TC__SERVE_TREE;
	s->cmd_id = cmd->id;
	s->query = tc_query_tree(s->env->redis, s->thread_id, cJSON_IsString(run) ? run->valuestring : NULL,
				 tree_answered, s);
	if (!s->query) {
		s->serving = TC__SERVE_NONE;
		return tc_error_set(err, TC_ERR_UNKNOWN_ERROR, TC_MSG_REDIS_DOWN);
	}
	return TC_OK;
}

enum tc_err tc_session_open_stream(struct tc_session *s, const cJSON *request, const char *last_event_id,
				   struct tc_error *err)
{
	struct tc_filter *f;
	char epoch[TC_EPOCH_MAX] = "";
	uint64_t seq = 0;
	bool has_since = false;

	if (last_event_id) {
		if (!tc_event_id_parse(last_event_id, epoch, &seq))
			return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
					    "Last-Event-ID must be an eventId this server sent (\"<epoch>:<seq>\")");
		has_since = true;
	} else {
		const cJSON *since = cJSON_GetObjectItemCaseSensitive(request, "since");
		if (since && !cJSON_IsNull(since)) {
			if (!cJSON_IsNumber(since) || since->valuedouble < 0 ||
			    since->valuedouble > (double)TC_JS_MAX_SAFE ||
			    since->valuedouble != (double)(uint64_t)since->valuedouble)
				return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
						    "since must be a non-negative integer (a seq)");
			seq = (uint64_t)since->valuedouble;
			has_since = true;
		}
	}
	if (tc_filter_parse(request, &f, err) || add_sub(s, f, NULL, err))
		return err->code;
	struct tc_replay_from from = { .seq = seq, .any_epoch = !last_event_id };
	memcpy(from.epoch, epoch, sizeof(from.epoch));
	/* No commands on a stream: reading stays off, the transport reads none. */
	begin_replay(s, TC__SERVE_STREAM, 0, has_since ? &from : NULL);
	return TC_OK;
}

/*
 * An unsubscribe that arrives while another command is served (a replay
 * may take a while) stops the delivery at once: the subscription goes now,
 * and only the reply waits its turn, so replies keep command order and no
 * event for it follows the reply. Anything else about it (not a valid
 * unsubscribe, no such subscription) is left for its turn.
 */
bool tc__session_unsubscribe_now(struct tc_session *s, const char *data, size_t len, struct tc__pending **out)
{
	struct tc_command cmd;
	struct tc_error err;
	bool done = false;

	if (tc_command_parse(data, len, &cmd, &err) == TC_OK && cmd.method == TC_METHOD_UNSUBSCRIBE) {
		struct tc__sub *sub = unsubscribe_target(s, &cmd, &err);
		if (sub) {
			remove_sub(s, (size_t)(sub - s->subs));
			*out = tc_xcalloc(1, sizeof(**out));
			(*out)->unsubscribed = true;
			(*out)->cmd_id = cmd.id;
			done = true;
		}
	}
	tc_command_free(&cmd);
	return done;
}
