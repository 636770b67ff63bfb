/*
 * run/assemble.c — the message assembler (assemble.h).
 */
#include "run/assemble.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void tc_msg_asm_init(struct tc_msg_asm *a, const struct tc_msg_ops *ops, void *ctx)
{
	*a = (struct tc_msg_asm){ .ops = ops, .ctx = ctx };
	for (unsigned i = 0; i < TC_MSG_OPEN; i++)
		a->msgs[i].no = i;
}

/* Frees what the message holds; its entry stays, empty. */
static void msg_reset(struct tc_msg *m)
{
	free(m->id);
	free(m->role);
	free(m->tool_call_id);
	free(m->node);
	m->id = m->role = m->tool_call_id = m->node = NULL;
	m->open = false;
	m->ai = false;
	m->had = 0;
}

void tc_msg_asm_clear(struct tc_msg_asm *a)
{
	for (unsigned i = 0; i < TC_MSG_OPEN; i++) {
		msg_reset(&a->msgs[i]);
		tc_slot_clear(&a->msgs[i].slot);
	}
}

/* The message leaves its entry (see tc_msg_ops.drop). */
static void drop(struct tc_msg_asm *a, struct tc_msg *m, bool finished)
{
	if (m->open && a->ops->drop)
		a->ops->drop(a->ctx, m, finished);
	msg_reset(m);
}

/* Where a message comes from: its namespace as sent (node tasks included) and its node. */
static char *msg_key(const struct tc_run_ev *ev)
{
	char *ns = cJSON_PrintUnformatted(ev->namespace_);
	size_t n = strlen(ns) + strlen(ev->node) + 2;
	char *key = tc_xmalloc(n);
	snprintf(key, n, "%s#%s", ns, ev->node);
	free(ns);
	return key;
}

/*
 * The entry of the message the event belongs to: found, or a new one (the
 * least recently used message is evicted when all are taken). A new entry
 * is an AI message until its start says otherwise.
 */
static struct tc_msg *entry(struct tc_msg_asm *a, const struct tc_run_ev *ev, bool *fresh)
{
	char *key = msg_key(ev);
	struct tc_msg *m = tc_slot_find(a->msgs, TC_MSG_OPEN, sizeof(a->msgs[0]), &a->clock, key, true, fresh);
	free(key);
	if (*fresh) {
		drop(a, m, false);
		m->open = true;
		m->ai = true;
		m->node = *ev->node ? tc_xstrdup(ev->node) : NULL;
	}
	return m;
}

static enum tc_block_kind kind_of(const char *type)
{
	if (!type)
		return TC_BLOCK_NONE;
	if (!strcmp(type, "text") || !strcmp(type, "text-delta"))
		return TC_BLOCK_TEXT;
	if (!strcmp(type, "reasoning") || !strcmp(type, "reasoning-delta"))
		return TC_BLOCK_REASONING;
	if (!strcmp(type, "tool_call") || !strcmp(type, "tool_call_chunk"))
		return TC_BLOCK_TOOL;
	return TC_BLOCK_NONE;
}

/* The text a block (or delta) carries, by its kind. */
static const char *text_of(enum tc_block_kind k, const cJSON *content)
{
	switch (k) {
	case TC_BLOCK_TEXT:
		return tc_run_str(content, "text");
	case TC_BLOCK_REASONING:
		return tc_run_str(content, "reasoning");
	case TC_BLOCK_TOOL:
		return tc_run_str(content, "args");
	default:
		return NULL;
	}
}

static char *dup_or_null(const char *s)
{
	return s ? tc_xstrdup(s) : NULL;
}

void tc_msg_asm_event(struct tc_msg_asm *a, const struct tc_run_ev *ev)
{
	const char *e = tc_run_str(ev->data, "event");
	struct tc_msg_part p = { .index = -1 };
	if (!e)
		return;
	if (!strcmp(e, "message-start"))
		p.kind = TC_MSG_START;
	else if (!strcmp(e, "content-block-start"))
		p.kind = TC_MSG_BLOCK_START;
	else if (!strcmp(e, "content-block-delta"))
		p.kind = TC_MSG_BLOCK_DELTA;
	else if (!strcmp(e, "content-block-finish"))
		p.kind = TC_MSG_BLOCK_FINISH;
	else if (!strcmp(e, "message-finish"))
		p.kind = TC_MSG_FINISH;
	else if (!strcmp(e, "error"))
		p.kind = TC_MSG_ERROR;
	else
		return;

	bool fresh;
	struct tc_msg *m = entry(a, ev, &fresh);
	if (p.kind == TC_MSG_START) {
		/* A new message in a place replaces the one that did not finish there. */
		if (!fresh)
			drop(a, m, false);
		const char *role = tc_run_str(ev->data, "role");
		msg_reset(m);
		m->open = true;
		m->id = dup_or_null(tc_run_str(ev->data, "id"));
		m->role = dup_or_null(role);
		m->tool_call_id = dup_or_null(tc_run_str(ev->data, "tool_call_id"));
		m->node = *ev->node ? tc_xstrdup(ev->node) : NULL;
		m->ai = !role || !strcmp(role, "ai") || !strcmp(role, "assistant");
		a->ops->part(a->ctx, m, &p, ev);
		return;
	}
	if (p.kind == TC_MSG_FINISH || p.kind == TC_MSG_ERROR) {
		p.usage = tc_run_get(ev->data, "usage");
		a->ops->part(a->ctx, m, &p, ev);
		drop(a, m, true);
		tc_slot_clear(&m->slot);
		return;
	}
	const cJSON *ix = tc_run_get(ev->data, "index");
	if (cJSON_IsNumber(ix) && ix->valuedouble >= 0 && ix->valuedouble < 1e6)
		p.index = (int)ix->valuedouble;
	uint64_t bit = 1ull << (p.index >= 0 && p.index < 63 ? p.index : 63);
	if (p.kind == TC_MSG_BLOCK_DELTA) {
		const cJSON *delta = tc_run_get(ev->data, "delta");
		p.content = delta;
		p.type = tc_run_str(delta, "type");
		if (p.type && !strcmp(p.type, "block-delta")) {
			p.content = tc_run_get(delta, "fields");
			p.type = tc_run_str(p.content, "type");
			p.wrapped = true;
		}
	} else {
		p.content = tc_run_get(ev->data, "content");
		p.type = tc_run_str(p.content, "type");
	}
	p.block = kind_of(p.type);
	p.text = text_of(p.block, p.content);
	if (p.kind == TC_MSG_BLOCK_START)
		m->had &= ~bit;
	p.had = m->had & bit;
	bool content = p.block == TC_BLOCK_TOOL || (p.block != TC_BLOCK_NONE && p.text && *p.text);
	if (p.kind == TC_MSG_BLOCK_FINISH)
		m->had &= ~bit;
	else if (content)
		m->had |= bit;
	a->ops->part(a->ctx, m, &p, ev);
}
