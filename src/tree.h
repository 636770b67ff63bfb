/*
 * tree.h — the agent tree of a thread's current run, from its tree index.
 *
 * The tree index (store.h) maps each namespace the run touched to its latest
 * lifecycle status and graph name. These pure builders turn its entries into
 * the two shapes the protocol answers with: agent.getTree's AgentTreeNode
 * (every namespace under its longest present prefix) and
 * subscription.reconnect's currentNamespaces (a flat list). No I/O.
 */
#ifndef TC_TREE_H
#define TC_TREE_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "store.h"

/**
 * Sorts entries by encoded namespace, which puts every prefix before what
 * it prefixes. Both builders expect sorted entries.
 */
void tc_tree_sort(struct tc_store_pair *e, size_t n);

/**
 * agent.getTree's tree: {namespace, status, graphName, children?}, each
 * namespace under its longest present prefix. NULL when the root namespace
 * is absent (the thread has no run); namespaces without a present parent
 * hang under the root.
 */
cJSON *tc_tree_build(const struct tc_store_pair *e, size_t n);

/** currentNamespaces: [{namespace, status}, …] in sorted order. */
cJSON *tc_tree_namespaces(const struct tc_store_pair *e, size_t n);

#endif
