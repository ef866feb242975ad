/* spec/spec_override.c: --set KEY=VALUE applied to a parsed spec tree.
 *
 * Every node an override makes carries the whole "--set KEY=VALUE" text as its origin (and
 * position 0:0), so a later type error names the argument to fix instead of a file line.
 */
#include "spec/spec.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Shared by spec/spec_*.c only; spec.h is the public contract and stays free of them. */
spec_node *spec_node_new(spec_kind kind, const char *own_origin);
void spec_node_push(spec_node *parent, spec_node *child);
spec_node *spec_tree_parse_value(const char *text, const char *origin, spec_errors *e);
const char *spec_node_path(const spec_node *n, char *buf, size_t size);

typedef struct {
  char *origin;                   /* "--set KEY=VALUE" */
  char *key;                      /* KEY, split in place at '.' */
  char *parts[SPEC_MAX_DEPTH];
  int n_parts;
  const char *value;              /* VALUE, inside the caller's text */
} spec_assignment;

static void spec_assignment_free(spec_assignment *a) {
  free(a->origin);
  free(a->key);
}

/* Lookup without marking the node used: an override is not a read. */
static spec_node *spec_override_child(spec_node *map, const char *key) {
  for (int i = 0; i < map->n_items; i++)
    if (!strcmp(map->items[i]->key, key)) return map->items[i];
  return NULL;
}

static int spec_assignment_split(spec_assignment *a, const spec_node *at, spec_errors *e) {
  char *p = a->key;
  for (;;) {
    char *dot = strchr(p, '.');
    if (dot) *dot = '\0';
    if (!*p) {
      spec_error(e, at, 0, "empty name in the key path; write KEY as names joined by '.', "
                 "e.g. --set train.optimizer.lr=1e-4");
      return 0;
    }
    if (a->n_parts == SPEC_MAX_DEPTH) {
      spec_error(e, at, 0, "the key path is deeper than %d levels", SPEC_MAX_DEPTH);
      return 0;
    }
    a->parts[a->n_parts++] = p;
    if (!dot) return 1;
    p = dot + 1;
  }
}

static int spec_assignment_parse(spec_assignment *a, const char *text, const spec_node *at,
                                 spec_errors *e) {
  const char *eq = strchr(text, '=');
  if (!eq || eq == text) {
    spec_error(e, at, 0, "--set expects KEY=VALUE, e.g. --set pipeline.stages=2");
    return 0;
  }
  size_t klen = (size_t)(eq - text);
  a->key = pt_calloc(klen + 1, 1);
  memcpy(a->key, text, klen);
  a->value = eq + 1;
  return spec_assignment_split(a, at, e);
}

/* Returns the map that receives the last key, creating missing maps on the way. */
static spec_node *spec_override_walk(spec_node *map, const spec_assignment *a,
                                     const spec_node *at, spec_errors *e) {
  for (int i = 0; i + 1 < a->n_parts; i++) {
    spec_node *child = spec_override_child(map, a->parts[i]);
    if (!child) {
      child = spec_node_new(SPEC_MAP, a->origin);
      child->key = pt_strdup(a->parts[i]);
      spec_node_push(map, child);
    } else if (spec_node_is_null(child)) {
      /* `train:` with nothing under it is an empty section: fill it in. */
      free(child->value);
      child->value = NULL;
      child->kind = SPEC_MAP;
    } else if (child->kind != SPEC_MAP) {
      char path[256], where[512];
      spec_node_path(child, path, sizeof path);
      if (child->line > 0)
        snprintf(where, sizeof where, "%s:%d:%d", child->origin, child->line, child->col);
      else
        snprintf(where, sizeof where, "from %s", child->origin);
      spec_error(e, at, 0, "cannot set a key inside '%s': it is a %s (%s), not a mapping", path,
                 child->kind == SPEC_SEQ ? "sequence" : "single value", where);
      return NULL;
    }
    map = child;
  }
  return map;
}

/* Replaces map[key] in place (its position in the map is kept) or appends it. */
static void spec_override_put(spec_node *map, const char *key, spec_node *value) {
  value->key = pt_strdup(key);
  value->parent = map;
  for (int i = 0; i < map->n_items; i++) {
    if (strcmp(map->items[i]->key, key)) continue;
    spec_tree_free(map->items[i]);
    map->items[i] = value;
    return;
  }
  spec_node_push(map, value);
}

int spec_tree_override(spec_node *root, const char *assignment, spec_errors *e) {
  if (e->failed) return -1;
  spec_assignment a;
  memset(&a, 0, sizeof a);
  size_t len = strlen(assignment) + sizeof "--set ";
  a.origin = pt_calloc(len, 1);
  snprintf(a.origin, len, "--set %s", assignment);
  spec_node at; /* where messages about the argument itself point */
  memset(&at, 0, sizeof at);
  at.origin = a.origin;
  spec_node *value = NULL, *map = NULL;
  if (!root || root->kind != SPEC_MAP)
    spec_error(e, &at, 0, "no spec to apply the override to");
  else if (spec_assignment_parse(&a, assignment, &at, e))
    value = spec_tree_parse_value(a.value, a.origin, e);
  if (value) map = spec_override_walk(root, &a, &at, e);
  if (map)
    spec_override_put(map, a.parts[a.n_parts - 1], value);
  else
    spec_tree_free(value);
  spec_assignment_free(&a);
  return map ? 0 : -1;
}
