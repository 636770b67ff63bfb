/*
 * An intrusive doubly-linked list: the element embeds a struct tc_dlink and
 * the list owns nothing. Every operation is O(1); removing an element that
 * is not on the list does nothing, so owners can unlink unconditionally on
 * their free path.
 *
 *   struct conn { ...; struct tc_dlink quiet; };
 *   tc_dlist_push_tail(&srv->quiet, &c->quiet);
 *   for (struct tc_dlink *n = srv->quiet.head; n; n = n->next) {
 *       struct conn *c = TC_DLIST_ENTRY(n, struct conn, quiet); ...
 */
#ifndef TC_DLIST_H
#define TC_DLIST_H

#include <stdbool.h>
#include <stddef.h>

struct tc_dlink {
	struct tc_dlink *prev, *next;
};

struct tc_dlist {
	struct tc_dlink *head, *tail;
	size_t count;
};

/** The element of type `type` whose member `member` is the link `link`. */
#define TC_DLIST_ENTRY(link, type, member) ((type *)((char *)(link)-offsetof(type, member)))

/** Whether n is on l (n must be on l or on no list). */
static inline bool tc_dlist_linked(const struct tc_dlist *l, const struct tc_dlink *n)
{
	return n->prev || l->head == n;
}

static inline void tc_dlist_push_head(struct tc_dlist *l, struct tc_dlink *n)
{
	n->prev = NULL;
	n->next = l->head;
	if (l->head)
		l->head->prev = n;
	else
		l->tail = n;
	l->head = n;
	l->count++;
}

static inline void tc_dlist_push_tail(struct tc_dlist *l, struct tc_dlink *n)
{
	n->next = NULL;
	n->prev = l->tail;
	if (l->tail)
		l->tail->next = n;
	else
		l->head = n;
	l->tail = n;
	l->count++;
}

/** Unlinks n from l; nothing when n is on no list. */
static inline void tc_dlist_remove(struct tc_dlist *l, struct tc_dlink *n)
{
	if (!tc_dlist_linked(l, n))
		return;
	if (n->prev)
		n->prev->next = n->next;
	else
		l->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = NULL;
	l->count--;
}

#endif
