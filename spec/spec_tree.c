/* spec/spec_tree.c: YAML text -> spec_node tree (libyaml event API), and error recording.
 *
 * The tree is built by recursive descent over parser events; recursion depth is bounded by
 * SPEC_MAX_DEPTH, which is checked before descending. Any rejected construct stops the build
 * at once: the partial tree is freed and the first error is what the user sees.
 */
#include "spec/spec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "core/error.h"
#include "core/file.h"

/* Shared by spec/spec_*.c only; spec.h is the public contract and stays free of them. */
spec_node *spec_node_new(spec_kind kind, const char *own_origin);
void spec_node_push(spec_node *parent, spec_node *child);
spec_node *spec_tree_parse_value(const char *text, const char *origin, spec_errors *e);

/* --- Errors --------------------------------------------------------------------------------- */

/* The message is formatted whole, then long words (an argument of 100 KB) are shortened, so
 * the reason and the fix always fit e->msg. */
static void spec_verror(spec_errors *e, const char *origin, int line, int col, const char *fmt,
                        va_list ap) {
  if (e->failed) return;
  e->failed = 1;
  va_list again;
  va_copy(again, ap);
  int len = vsnprintf(NULL, 0, fmt, again);
  va_end(again);
  char *what = pt_calloc(len > 0 ? (size_t)len + 1 : 1, 1);
  if (len > 0) vsnprintf(what, (size_t)len + 1, fmt, ap);
  if (line > 0)
    pt_errorf_short(e->msg, sizeof e->msg, "%s:%d:%d: error: %s", origin, line, col, what);
  else
    pt_errorf_short(e->msg, sizeof e->msg, "%s: error: %s", origin ? origin : "spec", what);
  free(what);
}

void spec_error(spec_errors *e, const spec_node *n, int at_key, const char *fmt, ...) {
  int line = 0, col = 0;
  const char *origin = NULL;
  if (n) {
    origin = n->origin;
    line = n->line, col = n->col;
    /* Sequence items have no key: fall back to the value's own position. */
    if (at_key && n->key_line > 0) line = n->key_line, col = n->key_col;
  }
  va_list ap;
  va_start(ap, fmt);
  spec_verror(e, origin, line, col, fmt, ap);
  va_end(ap);
}

/* --- Nodes ---------------------------------------------------------------------------------- */

/* With own_origin, the node carries its own copy of that text in the same allocation, so nodes
 * made by --set (and the root, for the file path) own their origin without a side list and
 * release it with the node. */
spec_node *spec_node_new(spec_kind kind, const char *own_origin) {
  size_t extra = own_origin ? strlen(own_origin) + 1 : 0;
  spec_node *n = pt_calloc(1, sizeof *n + extra);
  n->kind = kind;
  if (own_origin) {
    char *copy = (char *)(n + 1);
    memcpy(copy, own_origin, extra);
    n->origin = copy;
  }
  return n;
}

void spec_node_push(spec_node *parent, spec_node *child) {
  if (parent->n_items == parent->cap_items) {
    int cap = parent->cap_items ? 2 * parent->cap_items : 4;
    spec_node **items = pt_calloc((size_t)cap, sizeof *items);
    if (parent->n_items) memcpy(items, parent->items, (size_t)parent->n_items * sizeof *items);
    free(parent->items);
    parent->items = items;
    parent->cap_items = cap;
  }
  parent->items[parent->n_items++] = child;
  child->parent = parent;
}

void spec_tree_free(spec_node *root) {
  if (!root) return;
  for (int i = 0; i < root->n_items; i++) spec_tree_free(root->items[i]);
  free(root->items);
  free(root->value);
  free(root->key);
  free(root);
}

/* --- Builder state -------------------------------------------------------------------------- */

typedef struct {
  yaml_parser_t parser;
  const char *text;
  size_t len;
  const char *origin;      /* for messages; caller-owned */
  const char *node_origin; /* what file nodes point at: the root's own copy */
  int value_mode;          /* --set VALUE: nodes own their origin, positions are 0 */
  int n_nodes;
  spec_errors *e;
} spec_builder;

static void spec_builder_fail(spec_builder *b, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void spec_builder_fail(spec_builder *b, yaml_mark_t mark, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (b->value_mode)
    spec_verror(b->e, b->origin, 0, 0, fmt, ap);
  else
    spec_verror(b->e, b->origin, (int)mark.line + 1, (int)mark.column + 1, fmt, ap);
  va_end(ap);
}

/* Reader errors (bad encoding) carry only a byte offset: turn it into a mark. */
static yaml_mark_t spec_offset_mark(const spec_builder *b, size_t offset) {
  yaml_mark_t m = {0, 0, 0};
  for (size_t i = 0; i < offset && i < b->len; i++) {
    if (b->text[i] == '\n') m.line++, m.column = 0;
    else m.column++;
  }
  m.index = offset;
  return m;
}

static void spec_builder_syntax_error(spec_builder *b) {
  yaml_parser_t *p = &b->parser;
  if (p->error == YAML_MEMORY_ERROR) pt_fatal("libyaml: out of memory");
  yaml_mark_t m = p->error == YAML_READER_ERROR ? spec_offset_mark(b, p->problem_offset)
                                                : p->problem_mark;
  const char *problem = p->problem ? p->problem : "syntax error";
  if (b->value_mode) { /* one line of text: a column says all */
    spec_builder_fail(b, m, "invalid YAML in the value at column %d: %s; check brackets and "
                      "quote text that contains ':', ',' or '#'", (int)m.index + 1, problem);
    return;
  }
  const char *hint = "check the indentation, the ':' after each key and closing brackets";
  if (p->error == YAML_READER_ERROR) hint = "a spec must be UTF-8 text";
  if (m.index < b->len && b->text[m.index] == '\t')
    hint = "YAML does not allow tabs for indentation; use spaces";
  if (p->context)
    spec_builder_fail(b, m, "invalid YAML: %s (%s that starts at line %d); %s", problem,
                      p->context, (int)p->context_mark.line + 1, hint);
  else
    spec_builder_fail(b, m, "invalid YAML: %s; %s", problem, hint);
}

static int spec_builder_next(spec_builder *b, yaml_event_t *ev) {
  if (yaml_parser_parse(&b->parser, ev)) return 1;
  spec_builder_syntax_error(b);
  return 0;
}

/* --- Events -> nodes ------------------------------------------------------------------------ */

static spec_node *spec_build_node(spec_builder *b, yaml_event_t *ev, int depth);

/* Anchors, aliases and tags would make values depend on other places in the file (or on
 * types we do not model); every message they produce would point at the wrong line. */
static int spec_check_plain_event(spec_builder *b, const yaml_event_t *ev) {
  const yaml_char_t *anchor = NULL, *tag = NULL;
  if (ev->type == YAML_ALIAS_EVENT) anchor = ev->data.alias.anchor;
  if (ev->type == YAML_SCALAR_EVENT) anchor = ev->data.scalar.anchor, tag = ev->data.scalar.tag;
  if (ev->type == YAML_SEQUENCE_START_EVENT)
    anchor = ev->data.sequence_start.anchor, tag = ev->data.sequence_start.tag;
  if (ev->type == YAML_MAPPING_START_EVENT)
    anchor = ev->data.mapping_start.anchor, tag = ev->data.mapping_start.tag;
  if (anchor || ev->type == YAML_ALIAS_EVENT) {
    spec_builder_fail(b, ev->start_mark,
                      "anchors and aliases are not supported; write the value out");
    return 0;
  }
  if (tag) {
    /* libyaml expands "!!int" to the full tag: show it the way it was written. */
    const char *t = (const char *)tag, *std = "tag:yaml.org,2002:";
    int is_std = !strncmp(t, std, strlen(std));
    spec_builder_fail(b, ev->start_mark, "tags ('%s%s') are not supported; remove the tag "
                      "(quote the value to make it a string)", is_std ? "!!" : "",
                      is_std ? t + strlen(std) : t);
    return 0;
  }
  return 1;
}

static spec_node *spec_builder_new(spec_builder *b, spec_kind kind, const yaml_event_t *ev) {
  if (++b->n_nodes > SPEC_MAX_NODES) {
    spec_builder_fail(b, ev->start_mark, "more than %d values in the spec (the limit); "
                      "shrink it", SPEC_MAX_NODES);
    return NULL;
  }
  /* The first node of a file is the root: it owns the path that all file nodes point at. */
  int own = b->value_mode || !b->node_origin;
  spec_node *n = spec_node_new(kind, own ? b->origin : NULL);
  if (!b->value_mode) {
    if (!b->node_origin) b->node_origin = n->origin;
    n->origin = b->node_origin;
    n->line = (int)ev->start_mark.line + 1;
    n->col = (int)ev->start_mark.column + 1;
  }
  return n;
}

static char *spec_builder_text(spec_builder *b, const yaml_event_t *ev) {
  size_t len = ev->data.scalar.length;
  if (len > SPEC_MAX_SCALAR) {
    spec_builder_fail(b, ev->start_mark, "value is %zu bytes long; at most %d are allowed", len,
                      SPEC_MAX_SCALAR);
    return NULL;
  }
  if (memchr(ev->data.scalar.value, '\0', len)) {
    spec_builder_fail(b, ev->start_mark, "value contains a NUL character; remove it");
    return NULL;
  }
  char *s = pt_calloc(len + 1, 1);
  memcpy(s, ev->data.scalar.value, len);
  return s;
}

static spec_node *spec_build_scalar(spec_builder *b, const yaml_event_t *ev) {
  char *text = spec_builder_text(b, ev);
  if (!text) return NULL;
  spec_node *n = spec_builder_new(b, SPEC_SCALAR, ev);
  if (!n) {
    free(text);
    return NULL;
  }
  n->value = text;
  /* Block scalars (| and >) are strings too: never null, never a number. */
  n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE &&
              ev->data.scalar.style != YAML_ANY_SCALAR_STYLE;
  return n;
}

static spec_node *spec_build_seq(spec_builder *b, spec_node *seq, int depth) {
  for (;;) {
    yaml_event_t ev;
    if (!spec_builder_next(b, &ev)) break;
    if (ev.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&ev);
      return seq;
    }
    spec_node *item = spec_build_node(b, &ev, depth + 1);
    if (!item) break;
    spec_node_push(seq, item);
  }
  spec_tree_free(seq);
  return NULL;
}

/* --- Mappings: duplicate keys are found with a small open-addressing index, because a hostile
 * file may hold a mapping with SPEC_MAX_NODES keys and a linear scan per key is quadratic. --- */

typedef struct {
  int *slots; /* item index + 1; 0 = empty */
  size_t cap; /* power of two */
} spec_key_index;

static uint64_t spec_hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int spec_key_index_find(const spec_key_index *ix, spec_node *const *items,
                               const char *key) {
  if (!ix->cap) return -1;
  size_t mask = ix->cap - 1;
  for (size_t h = spec_hash_str(key) & mask;; h = (h + 1) & mask) {
    int s = ix->slots[h];
    if (!s) return -1;
    if (!strcmp(items[s - 1]->key, key)) return s - 1;
  }
}

static void spec_key_index_put(spec_key_index *ix, spec_node *const *items, int idx) {
  size_t mask = ix->cap - 1;
  size_t h = spec_hash_str(items[idx]->key) & mask;
  while (ix->slots[h]) h = (h + 1) & mask;
  ix->slots[h] = idx + 1;
}

/* Adds items[n - 1] (its key is known to be new); keeps the load factor at most 1/2. */
static void spec_key_index_add(spec_key_index *ix, spec_node *const *items, int n) {
  if ((size_t)n * 2 > ix->cap) {
    free(ix->slots);
    ix->cap = ix->cap ? ix->cap * 2 : 16;
    ix->slots = pt_calloc(ix->cap, sizeof *ix->slots);
    for (int i = 0; i < n - 1; i++) spec_key_index_put(ix, items, i);
  }
  spec_key_index_put(ix, items, n - 1);
}

static const char *spec_event_kind(const yaml_event_t *ev) {
  return ev->type == YAML_SEQUENCE_START_EVENT ? "a sequence" : "a mapping";
}

/* Consumes the key event; returns the key text, or NULL with an error recorded. */
static char *spec_build_key(spec_builder *b, const spec_node *map, const spec_key_index *ix,
                            yaml_event_t *ev) {
  char *key = NULL;
  if (!spec_check_plain_event(b, ev)) {
  } else if (ev->type != YAML_SCALAR_EVENT) {
    spec_builder_fail(b, ev->start_mark, "mapping keys must be plain names; got %s as a key",
                      spec_event_kind(ev));
  } else if ((key = spec_builder_text(b, ev))) {
    int dup = spec_key_index_find(ix, map->items, key);
    if (dup >= 0) {
      int first_line = map->items[dup]->key_line;
      if (first_line > 0)
        spec_builder_fail(b, ev->start_mark, "duplicate key '%.64s' (first given at line %d); "
                          "keep only one", key, first_line);
      else
        spec_builder_fail(b, ev->start_mark, "duplicate key '%.64s'; keep only one", key);
      free(key);
      key = NULL;
    }
  }
  yaml_event_delete(ev);
  return key;
}

static int spec_build_entry(spec_builder *b, spec_node *map, spec_key_index *ix,
                            yaml_event_t *key_ev, int depth) {
  yaml_mark_t key_mark = key_ev->start_mark;
  char *key = spec_build_key(b, map, ix, key_ev);
  if (!key) return 0;
  yaml_event_t ev;
  spec_node *v = spec_builder_next(b, &ev) ? spec_build_node(b, &ev, depth + 1) : NULL;
  if (!v) {
    free(key);
    return 0;
  }
  v->key = key;
  if (!b->value_mode) {
    v->key_line = (int)key_mark.line + 1;
    v->key_col = (int)key_mark.column + 1;
  }
  spec_node_push(map, v);
  spec_key_index_add(ix, map->items, map->n_items);
  return 1;
}

static spec_node *spec_build_map(spec_builder *b, spec_node *map, int depth) {
  spec_key_index ix = {NULL, 0};
  for (;;) {
    yaml_event_t ev;
    if (!spec_builder_next(b, &ev)) break;
    if (ev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&ev);
      free(ix.slots);
      return map;
    }
    if (!spec_build_entry(b, map, &ix, &ev, depth)) break;
  }
  free(ix.slots);
  spec_tree_free(map);
  return NULL;
}

/* Consumes ev (the node's first event) and the events of its contents. */
static spec_node *spec_build_node(spec_builder *b, yaml_event_t *ev, int depth) {
  spec_node *n = NULL;
  int is_seq = ev->type == YAML_SEQUENCE_START_EVENT;
  int is_map = ev->type == YAML_MAPPING_START_EVENT;
  if (!spec_check_plain_event(b, ev)) {
  } else if (ev->type == YAML_SCALAR_EVENT) {
    n = spec_build_scalar(b, ev);
  } else if (!is_seq && !is_map) {
    spec_builder_fail(b, ev->start_mark, "invalid YAML: unexpected event %d", (int)ev->type);
  } else if (depth > SPEC_MAX_DEPTH) {
    spec_builder_fail(b, ev->start_mark, "nesting deeper than %d levels; flatten the spec",
                      SPEC_MAX_DEPTH);
  } else {
    n = spec_builder_new(b, is_seq ? SPEC_SEQ : SPEC_MAP, ev);
  }
  yaml_event_delete(ev);
  if (n && is_seq) return spec_build_seq(b, n, depth);
  if (n && is_map) return spec_build_map(b, n, depth);
  return n;
}

/* --- Documents ------------------------------------------------------------------------------ */

static int spec_is_null_event(const yaml_event_t *ev) {
  if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return 0;
  const char *v = (const char *)ev->data.scalar.value;
  return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
         !strcmp(v, "NULL");
}

static void spec_builder_fail_empty(spec_builder *b) {
  yaml_mark_t start = {0, 0, 0};
  spec_builder_fail(b, start, "the spec is empty; it needs at least a 'layers:' list");
}

/* A spec file must be a mapping of sections; say so before building anything else. */
static int spec_check_root(spec_builder *b, const yaml_event_t *ev) {
  if (ev->type == YAML_MAPPING_START_EVENT) return 1;
  if (spec_is_null_event(ev)) {
    spec_builder_fail_empty(b);
    return 0;
  }
  spec_builder_fail(b, ev->start_mark, "the top level of a spec must be a mapping of sections "
                    "(model:, layers:, train:, ...); got %s",
                    ev->type == YAML_SCALAR_EVENT ? "a single value" : spec_event_kind(ev));
  return 0;
}

/* An empty --set VALUE means null, like an empty value in a file. */
static spec_node *spec_build_empty(spec_builder *b) {
  if (!b->value_mode) {
    spec_builder_fail_empty(b);
    return NULL;
  }
  spec_node *n = spec_node_new(SPEC_SCALAR, b->origin);
  n->value = pt_strdup("");
  return n;
}

/* Consumes DOCUMENT_END and what follows it: only the end of the stream is accepted. */
static int spec_build_tail(spec_builder *b) {
  yaml_event_t ev;
  if (!spec_builder_next(b, &ev)) return 0;
  yaml_event_delete(&ev);
  if (!spec_builder_next(b, &ev)) return 0;
  int ok = ev.type == YAML_STREAM_END_EVENT;
  if (!ok)
    spec_builder_fail(b, ev.start_mark, "more than one YAML document ('---'); a spec is one "
                      "document: remove the second one");
  yaml_event_delete(&ev);
  return ok;
}

static spec_node *spec_build_document(spec_builder *b) {
  yaml_event_t ev;
  if (!spec_builder_next(b, &ev)) return NULL; /* STREAM_START */
  yaml_event_delete(&ev);
  if (!spec_builder_next(b, &ev)) return NULL;
  int empty = ev.type == YAML_STREAM_END_EVENT;
  yaml_event_delete(&ev); /* DOCUMENT_START, or STREAM_END when there is no document */
  if (empty) return spec_build_empty(b);
  if (!spec_builder_next(b, &ev)) return NULL;
  if (!b->value_mode && !spec_check_root(b, &ev)) {
    yaml_event_delete(&ev);
    return NULL;
  }
  spec_node *root = spec_build_node(b, &ev, 1);
  if (root && !spec_build_tail(b)) {
    spec_tree_free(root);
    root = NULL;
  }
  return root;
}

static spec_node *spec_parse(const char *text, size_t len, const char *origin, int value_mode,
                             spec_errors *e) {
  spec_builder b;
  memset(&b, 0, sizeof b);
  if (!yaml_parser_initialize(&b.parser)) pt_fatal("libyaml: cannot initialise the parser");
  yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
  b.text = text, b.len = len, b.origin = origin, b.value_mode = value_mode, b.e = e;
  spec_node *root = spec_build_document(&b);
  yaml_parser_delete(&b.parser);
  return root;
}

spec_node *spec_tree_parse(const char *text, size_t len, const char *origin, spec_errors *e) {
  if (e->failed) return NULL;
  return spec_parse(text, len, origin ? origin : "spec", 0, e);
}

/* origin is the whole "--set KEY=VALUE" text: messages then name the argument to fix. */
spec_node *spec_tree_parse_value(const char *text, const char *origin, spec_errors *e) {
  if (e->failed) return NULL;
  return spec_parse(text, strlen(text), origin, 1, e);
}

/* --- Files ---------------------------------------------------------------------------------- */

#define SPEC_MAX_FILE (16u << 20)

static void spec_fail_file(spec_errors *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void spec_fail_file(spec_errors *e, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  spec_verror(e, path, 0, 0, fmt, ap);
  va_end(ap);
}

/* Returns the whole file (NUL-terminated, *len bytes), or NULL with an error recorded. */
static char *spec_read_file(const char *path, size_t *len, spec_errors *e) {
  const char *why = NULL;
  int fd = pt_open_regular_file(path, &why);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    spec_fail_file(e, path, "cannot open the spec file '%s': %s", path, why ? why : strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  size_t cap = 4096, n = 0, got;
  char *buf = pt_calloc(cap + 1, 1);
  while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n < cap) continue;
    if (cap >= SPEC_MAX_FILE) break;
    char *bigger = pt_calloc(2 * cap + 1, 1);
    memcpy(bigger, buf, n);
    free(buf);
    buf = bigger, cap *= 2;
  }
  int read_failed = ferror(f), saved = errno;
  fclose(f);
  if (read_failed || n >= SPEC_MAX_FILE) {
    if (read_failed)
      spec_fail_file(e, path, "cannot read the spec file '%s': %s", path, strerror(saved));
    else
      spec_fail_file(e, path, "the spec file is larger than %u MiB; a model spec is small",
                     SPEC_MAX_FILE >> 20);
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

spec_node *spec_tree_parse_file(const char *path, spec_errors *e) {
  if (e->failed) return NULL;
  size_t len = 0;
  char *text = spec_read_file(path, &len, e);
  if (!text) return NULL;
  spec_node *root = spec_tree_parse(text, len, path, e);
  free(text);
  return root;
}
