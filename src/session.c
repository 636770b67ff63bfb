#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "protocol.h"
#include "util.h"

struct subscription {
	char *id;
	struct tc_filter *filter;
};

struct tc_session {
	const struct tc_config *cfg;
	const struct tc_session_io *io;
	void *ctx;
	char *thread_id;
	struct subscription *subs; /* cfg->max_subscriptions at most */
	size_t nsubs, capsubs;
	uint64_t next_nonce;       /* for subscription ids */
};

struct tc_session *tc_session_new(const struct tc_config *cfg, const char *thread_id,
				  const struct tc_session_io *io, void *ctx)
{
	struct tc_session *s = tc_xcalloc(1, sizeof(*s));
	s->cfg = cfg;
	s->io = io;
	s->ctx = ctx;
	s->thread_id = tc_xstrdup(thread_id);
	s->next_nonce = 1;
	return s;
}

void tc_session_free(struct tc_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nsubs; i++) {
		free(s->subs[i].id);
		tc_filter_free(s->subs[i].filter);
	}
	free(s->subs);
	free(s->thread_id);
	free(s);
}

const char *tc_session_thread(const struct tc_session *s)
{
	return s->thread_id;
}

size_t tc_session_subscriptions(const struct tc_session *s)
{
	return s->nsubs;
}

static void reply_error(struct tc_session *s, const struct tc_command *cmd,
			const struct tc_error *err)
{
	s->io->send(s->ctx, tc_response_error(cmd->has_id, cmd->id, err->code, err->message));
}

static void reply_success(struct tc_session *s, const struct tc_command *cmd, cJSON *result)
{
	s->io->send(s->ctx, tc_response_success(cmd->id, result, -1));
}

static struct subscription *find_sub(struct tc_session *s, const char *id)
{
	for (size_t i = 0; i < s->nsubs; i++)
		if (!strcmp(s->subs[i].id, id))
			return &s->subs[i];
	return NULL;
}

/* ---- subscription.subscribe ----------------------------------------------------- */

static enum tc_err do_subscribe(struct tc_session *s, const struct tc_command *cmd,
				struct tc_error *err)
{
	struct tc_filter *f;

	if (!cmd->params)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	if (tc_filter_parse(cmd->params, &f, err))
		return err->code;
	if (s->nsubs >= (size_t)s->cfg->max_subscriptions) {
		tc_filter_free(f);
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "this connection already holds %zu subscriptions, the limit; "
				    "unsubscribe one first", s->nsubs);
	}
	if (s->nsubs == s->capsubs) {
		s->capsubs = s->capsubs ? s->capsubs * 2 : 4;
		s->subs = tc_xrealloc(s->subs, s->capsubs * sizeof(*s->subs));
	}
	/* Ids restored by subscription.reconnect may use any nonce: skip them. */
	char *id;
	while (find_sub(s, id = tc_subscription_id(f, s->next_nonce++)))
		free(id);
	s->subs[s->nsubs++] = (struct subscription){ .id = id, .filter = f };

	cJSON *result = cJSON_CreateObject();
	cJSON_AddStringToObject(result, "subscriptionId", id);
	cJSON_AddNumberToObject(result, "replayedEvents", 0);
	reply_success(s, cmd, result);
	return TC_OK;
}

/* ---- subscription.unsubscribe --------------------------------------------------- */

static enum tc_err do_unsubscribe(struct tc_session *s, const struct tc_command *cmd,
				  struct tc_error *err)
{
	if (!cmd->params)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params is required");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(cmd->params, "subscriptionId");
	if (!id)
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT, "params.subscriptionId is required");
	if (!cJSON_IsString(id))
		return tc_error_set(err, TC_ERR_INVALID_ARGUMENT,
				    "params.subscriptionId must be a string");
	struct subscription *sub = find_sub(s, id->valuestring);
	if (!sub) {
		size_t len = strlen(id->valuestring);
		return tc_error_set(err, TC_ERR_NO_SUCH_SUBSCRIPTION,
				    "no subscription \"%.*s%s\" on this connection",
				    (int)tc_utf8_prefix(id->valuestring, len, 48), id->valuestring,
				    len > 48 ? "…" : "");
	}
	free(sub->id);
	tc_filter_free(sub->filter);
	*sub = s->subs[--s->nsubs];
	reply_success(s, cmd, NULL);
	return TC_OK;
}

/* ---- dispatch ----------------------------------------------------------------------- */

void tc_session_on_frame(struct tc_session *s, const char *data, size_t len)
{
	struct tc_command cmd;
	struct tc_error err;
	enum tc_err rc = tc_command_parse(data, len, &cmd, &err);

	if (rc == TC_OK) {
		switch (cmd.method) {
		case TC_METHOD_SUBSCRIBE:
			rc = do_subscribe(s, &cmd, &err);
			break;
		case TC_METHOD_UNSUBSCRIBE:
			rc = do_unsubscribe(s, &cmd, &err);
			break;
		case TC_METHOD_UNKNOWN: {
			size_t mlen = strlen(cmd.method_name);
			rc = tc_error_set(&err, TC_ERR_UNKNOWN_COMMAND,
					  "unknown method \"%.*s%s\"",
					  (int)tc_utf8_prefix(cmd.method_name, mlen, 64),
					  cmd.method_name, mlen > 64 ? "…" : "");
			break;
		}
		default:
			rc = tc_error_set(&err, TC_ERR_NOT_SUPPORTED,
					  "%s is not supported by this server yet",
					  tc_method_name(cmd.method));
			break;
		}
	}
	if (rc != TC_OK)
		reply_error(s, &cmd, &err);
	tc_command_free(&cmd);
}
