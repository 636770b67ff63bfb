#include "tree.h"

#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "store.h"
#include "util.h"

static int cmp_entry(const void *a, const void *b)
{
	const struct tc_store_pair *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->key_len < y->key_len ? x->key_len : y->key_len);
	return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

void tc_tree_sort(struct tc_store_pair *e, size_t n)
{
	if (n > 1)
		qsort(e, n, sizeof(*e), cmp_entry);
}

static cJSON *make_str(const char *s, size_t len)
{
	char *c = tc_xstrndup(s, len);
	cJSON *o = cJSON_CreateString(c);
	free(c);
	return o;
}

/* {namespace, status[, graphName]} of one entry. */
static cJSON *node_of(const struct tc_store_pair *e, bool graph)
{
	struct tc_tree_value v;
	cJSON *node = cJSON_CreateObject();

	tc_store_tree_parse(e->value, e->value_len, &v);
	cJSON_AddItemToObject(node, "namespace", tc_namespace_decode(e->key, e->key_len));
	cJSON_AddItemToObject(node, "status", make_str(v.status, v.status_len));
	if (graph)
		cJSON_AddItemToObject(node, "graphName", make_str(v.graph, v.graph_len));
	return node;
}

cJSON *tc_tree_build(const struct tc_store_pair *e, size_t n)
{
	cJSON **nodes = tc_xcalloc(n ? n : 1, sizeof(*nodes));
	cJSON *root = NULL;

	for (size_t i = 0; i < n; i++) {
		/* A hash has each field once; anything else keeps the first. */
		if (i && !cmp_entry(&e[i - 1], &e[i]))
			continue;
		cJSON *node = nodes[i] = node_of(&e[i], true);
		if (e[i].key_len == 0) {
			root = node;
			continue;
		}
		/* Parent: the longest earlier namespace that is a segment prefix. */
		cJSON *parent = NULL;
		for (size_t p = i; p-- > 0;) {
			if (e[p].key_len < e[i].key_len && !memcmp(e[p].key, e[i].key, e[p].key_len) &&
			    e[i].key[e[p].key_len] == '/') {
				parent = nodes[p];
				break;
			}
		}
		if (!parent)
			parent = root;
		if (!parent) {
			cJSON_Delete(node);
			nodes[i] = NULL;
			continue;
		}
		cJSON *children = cJSON_GetObjectItemCaseSensitive(parent, "children");
		if (!children)
			children = cJSON_AddArrayToObject(parent, "children");
		cJSON_AddItemToArray(children, node);
	}
	free(nodes);
	return root;
}

cJSON *tc_tree_namespaces(const struct tc_store_pair *e, size_t n)
{
	cJSON *list = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		if (!i || cmp_entry(&e[i - 1], &e[i]))
			cJSON_AddItemToArray(list, node_of(&e[i], false));
	return list;
}
