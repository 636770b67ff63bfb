/*
 * spell.h — the two spellings of the protocol's field names.
 *
 * The CDDL and the seed README write multi-word field names in camelCase
 * (eventId, subscriptionId, graphName); the protocol's published bindings
 * (@langchain/protocol 0.0.21), its reference server and its official
 * client write them in snake_case (event_id, subscription_id, graph_name).
 * threadcast speaks both: the route a client uses picks the spelling of
 * everything threadcast writes to it, and commands are read in either.
 *
 * Only the protocol's own field names are respelled — a fixed dictionary of
 * the CDDL's multi-word names — and only where the protocol puts them:
 * values under user-owned keys (state values, tool input and output,
 * interrupt payloads, metadata, config, …) pass through byte for byte, as
 * does everything else, numbers included. Pure functions.
 */
#ifndef TC_SPELL_H
#define TC_SPELL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/** A spelling of the protocol's field names. */
enum tc_spelling {
	TC_SPELL_SEED, /**< camelCase, as the CDDL and the seed README write them */
	TC_SPELL_021,  /**< snake_case, as protocol 0.0.21's bindings put them on the wire */
	TC_SPELLINGS
};

/**
 * The name of a protocol field in spelling sp. name is the field in either
 * spelling; a name outside the dictionary (a single word) is returned as is.
 */
const char *tc_spell(const char *name, enum tc_spelling sp);

/**
 * A params member by its protocol name (either spelling given): the member
 * spelled as sp first, then the other spelling. NULL when absent.
 */
cJSON *tc_spell_get(const cJSON *obj, const char *name, enum tc_spelling sp);

/**
 * Respells the protocol field names of JSON text (a whole JSON value) into
 * sp. Keys under a user-owned key are left alone (see spell.c). Returns a
 * new NUL-terminated text with its length in *out_len, or NULL when nothing
 * needed renaming (the text is right as it is). json must be valid JSON.
 */
char *tc_spell_json(const char *json, size_t len, enum tc_spelling sp, size_t *out_len);

/**
 * The same for a stored event {"method":…, "params":{…, "data":…}}: only
 * params.data is respelled, and only for methods whose data the protocol
 * defines (lifecycle, messages, tools, input.requested, input.answered,
 * checkpoints); values, updates, tasks and custom data are the producer's.
 */
char *tc_spell_event(const char *json, size_t len, const char *method, size_t method_len, enum tc_spelling sp,
		     size_t *out_len);

/**
 * Which spelling the protocol field names in v use (user-owned keys aside):
 * TC_SPELL_SEED when some are camelCase and none snake_case, TC_SPELL_021
 * when some are snake_case, -1 when v names none of them.
 */
int tc_spell_guess(const cJSON *v);

/** Respells the keys of a cJSON tree in place, with the same rules. */
void tc_spell_tree(cJSON *v, enum tc_spelling sp);

#endif
