/*
 * libFuzzer target: everything a client's command frame reaches before any
 * I/O — framing, params validation of every method, subscription filters —
 * plus properties that must hold for any input:
 *   - a parsed filter's subscription id parses back to the same filter;
 *   - every error reply is valid JSON, whatever text the input put in it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "fuzz.h"
#include "protocol.h"
#include "util.h"

static void check_error_reply(const struct tc_command *cmd, const struct tc_error *err)
{
	struct tc_buf *b = tc_response_error(cmd->has_id, cmd->id, err->code, err->message);
	cJSON *back = cJSON_ParseWithLength((const char *)tc_buf_data(b), b->len);
	must(back != NULL);
	cJSON_Delete(back);
	tc_buf_unref(b);
}

int FUZZ_ENTRY(const uint8_t *data, size_t size)
{
	static bool init;
	struct tc_command cmd;
	struct tc_error err;

	if (!init) {
		tc_cjson_init();
		init = true;
	}
	if (tc_command_parse((const char *)data, size, &cmd, &err)) {
		check_error_reply(&cmd, &err);
		tc_command_free(&cmd);
		return 0;
	}
	if (tc_method_is_runtime(cmd.method) &&
	    tc_params_validate(&cmd, data[0] & 1 ? TC_SPELL_021 : TC_SPELL_SEED, &err))
		check_error_reply(&cmd, &err);
	if (cmd.params) {
		struct tc_filter *f;
		if (tc_filter_parse(cmd.params, &f, &err) == TC_OK) {
			char *id = tc_subscription_id(f, cmd.id);
			struct tc_filter *g;
			must(tc_subscription_id_parse(id, &g, &err) == TC_OK);
			must(!strcmp(f->canonical, g->canonical));
			free(id);
			tc_filter_free(g);
			tc_filter_free(f);
		} else {
			check_error_reply(&cmd, &err);
		}
	}
	tc_command_free(&cmd);
	return 0;
}
