/* spec/spec_access.c: typed reads of spec nodes, with errors that name the dotted path,
 * the expected type and range, and the value that was found. */
#include "spec/spec.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shared by spec/spec_*.c only; spec.h is the public contract and stays free of them. */
const char *spec_node_path(const spec_node *n, char *buf, size_t size);
void spec_fail_expected(spec_errors *e, spec_node *n, const char *want);

#define SPEC_PATH_MAX 256
#define SPEC_SHOW_MAX 48

/* --- Describing nodes in messages ----------------------------------------------------------- */

static int spec_item_index(const spec_node *n) {
  for (int i = 0; n->parent && i < n->parent->n_items; i++)
    if (n->parent->items[i] == n) return i;
  return -1;
}

static size_t spec_path_write(const spec_node *n, char *buf, size_t size) {
  if (!n || !n->parent) return 0; /* the root has no name */
  size_t pos = spec_path_write(n->parent, buf, size);
  char *dst = pos < size ? buf + pos : NULL;
  size_t room = pos < size ? size - pos : 0;
  int w = n->key ? snprintf(dst, room, "%s%s", pos ? "." : "", n->key)
                 : snprintf(dst, room, "[%d]", spec_item_index(n));
  return pos + (w > 0 ? (size_t)w : 0);
}

/* "train.optimizer.lr", "layers[2].transformer_block.heads"; "" for the root. */
const char *spec_node_path(const spec_node *n, char *buf, size_t size) {
  buf[0] = '\0';
  spec_path_write(n, buf, size);
  return buf;
}

int spec_node_is_null(const spec_node *n) {
  if (!n || n->kind != SPEC_SCALAR || n->quoted) return 0;
  const char *v = n->value;
  return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
         !strcmp(v, "NULL");
}

/* What was found, for "got ...": 'eight', a mapping, the quoted string "8". */
static const char *spec_got(const spec_node *n, char *buf, size_t size) {
  if (n->kind == SPEC_MAP) return "a mapping";
  if (n->kind == SPEC_SEQ) return "a sequence";
  if (spec_node_is_null(n)) return "an empty value";
  const char *dots = strlen(n->value) > SPEC_SHOW_MAX ? "..." : "";
  if (n->quoted)
    snprintf(buf, size, "the quoted string \"%.*s%s\" (quoted values are strings)",
             SPEC_SHOW_MAX, n->value, dots);
  else
    snprintf(buf, size, "'%.*s%s'", SPEC_SHOW_MAX, n->value, dots);
  return buf;
}

/* Records "PATH: expected WANT, got GOT". */
void spec_fail_expected(spec_errors *e, spec_node *n, const char *want) {
  char path[SPEC_PATH_MAX], got[160];
  spec_node_path(n, path, sizeof path);
  spec_error(e, n, 0, "%s%sexpected %s, got %s", path, *path ? ": " : "", want,
             spec_got(n, got, sizeof got));
}

static void spec_int_want(int64_t lo, int64_t hi, char *buf, size_t size) {
  if (lo > INT64_MIN && hi < INT64_MAX)
    snprintf(buf, size, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
  else if (lo > INT64_MIN)
    snprintf(buf, size, "an integer >= %lld", (long long)lo);
  else if (hi < INT64_MAX)
    snprintf(buf, size, "an integer <= %lld", (long long)hi);
  else
    snprintf(buf, size, "an integer");
}

static void spec_num_want(double lo, double hi, char *buf, size_t size) {
  int has_lo = lo > -DBL_MAX, has_hi = hi < DBL_MAX;
  if (has_lo && has_hi)
    snprintf(buf, size, "a number in [%g, %g]", lo, hi);
  else if (has_lo)
    snprintf(buf, size, "a number >= %g", lo);
  else if (has_hi)
    snprintf(buf, size, "a number <= %g", hi);
  else
    snprintf(buf, size, "a number");
}

/* --- Lookup --------------------------------------------------------------------------------- */

spec_node *spec_find(spec_node *map, const char *key) {
  if (!map || map->kind != SPEC_MAP) return NULL;
  for (int i = 0; i < map->n_items; i++) {
    if (!strcmp(map->items[i]->key, key)) {
      map->items[i]->used = 1;
      return map->items[i];
    }
  }
  return NULL;
}

/* A null value counts as absent, so `lr:` with nothing after it means "use the default". */
/* YAML reads {dir:/x} as one key "dir:/x" with no value: such an entry gets its own line
 * (returns 1) rather than "missing key 'dir'" or "unknown key 'dir:/x'". */
static int spec_glued_key(spec_node *map, spec_errors *e) {
  for (int i = 0; map && map->kind == SPEC_MAP && i < map->n_items; i++) {
    spec_node *n = map->items[i];
    const char *colon = n->key ? strchr(n->key, ':') : NULL;
    if (!colon || colon == n->key || colon[1] == ' ' || !spec_node_is_null(n)) continue;
    spec_error(e, n, 1, "'%.*s' is read as one key with no value (YAML needs a space after ':'); "
               "write '%.*s: %.*s'", SPEC_SHOW_MAX, n->key, (int)(colon - n->key), n->key,
               SPEC_SHOW_MAX, colon + 1);
    return 1;
  }
  return 0;
}

static spec_node *spec_lookup(spec_node *map, const char *key, int required, spec_errors *e) {
  if (e->failed) return NULL;
  spec_node *n = spec_find(map, key);
  if (n && !spec_node_is_null(n)) return n;
  if (required && !spec_glued_key(map, e)) {
    char path[SPEC_PATH_MAX];
    spec_node_path(map, path, sizeof path);
    spec_error(e, n ? n : map, 0, "%s%smissing required key '%s'; add '%s: VALUE'", path,
               *path ? ": " : "", key, key);
  }
  return NULL;
}

/* --- Scalars -------------------------------------------------------------------------------- */

static int spec_starts_number(const char *s) {
  if (*s == '+' || *s == '-') s++;
  return (*s >= '0' && *s <= '9') || (*s == '.' && s[1] >= '0' && s[1] <= '9');
}

/* Returns 1 when n is a plain scalar; otherwise records the type error. */
static int spec_expect_plain(spec_node *n, const char *want, spec_errors *e) {
  n->used = 1;
  if (n->kind == SPEC_SCALAR && !n->quoted && !spec_node_is_null(n)) return 1;
  spec_fail_expected(e, n, want);
  return 0;
}

int64_t spec_node_int(spec_node *n, int64_t lo, int64_t hi, spec_errors *e) {
  char want[96];
  if (e->failed || !n) return lo;
  spec_int_want(lo, hi, want, sizeof want);
  if (!spec_expect_plain(n, want, e)) return lo;
  char *end;
  errno = 0;
  long long v = strtoll(n->value, &end, 10);
  int whole = spec_starts_number(n->value) && *end == '\0' && end != n->value;
  if (whole && errno == ERANGE) {
    char path[SPEC_PATH_MAX];
    spec_node_path(n, path, sizeof path);
    spec_error(e, n, 0, "%s%sinteger out of range: '%.*s'; expected %s", path,
               *path ? ": " : "", SPEC_SHOW_MAX, n->value, want);
    return lo;
  }
  if (!whole || v < lo || v > hi) {
    spec_fail_expected(e, n, want);
    return lo;
  }
  return v;
}

double spec_node_num(spec_node *n, double lo, double hi, spec_errors *e) {
  char want[96];
  if (e->failed || !n) return lo;
  spec_num_want(lo, hi, want, sizeof want);
  if (!spec_expect_plain(n, want, e)) return lo;
  char *end;
  double v = strtod(n->value, &end);
  /* strtod also takes "inf" and "nan": insisting on a leading digit keeps values finite. */
  int ok = spec_starts_number(n->value) && *end == '\0' && isfinite(v);
  if (!ok || v < lo || v > hi) {
    spec_fail_expected(e, n, want);
    return lo;
  }
  return v;
}

static int spec_word_is(const char *s, const char *lower) {
  for (; *s && *lower; s++, lower++) {
    char c = (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : *s;
    if (c != *lower) return 0;
  }
  return !*s && !*lower;
}

int spec_get_bool(spec_node *map, const char *key, int def, spec_errors *e) {
  spec_node *n = spec_lookup(map, key, 0, e);
  if (!n) return def;
  const char *want = "true or false";
  if (!spec_expect_plain(n, want, e)) return def;
  const char *v = n->value;
  if (spec_word_is(v, "true") || spec_word_is(v, "yes") || spec_word_is(v, "on")) return 1;
  if (spec_word_is(v, "false") || spec_word_is(v, "no") || spec_word_is(v, "off")) return 0;
  spec_fail_expected(e, n, want);
  return def;
}

int64_t spec_get_int(spec_node *map, const char *key, int required, int64_t def, int64_t lo,
                     int64_t hi, spec_errors *e) {
  spec_node *n = spec_lookup(map, key, required, e);
  if (!n) return def;
  int64_t v = spec_node_int(n, lo, hi, e);
  return e->failed ? def : v;
}

int64_t spec_get_int_or_auto(spec_node *map, const char *key, int64_t def, int64_t lo, int64_t hi,
                             spec_errors *e) {
  spec_node *n = spec_lookup(map, key, 0, e);
  if (n && n->kind == SPEC_SCALAR && spec_word_is(n->value, "auto")) {
    n->used = 1;
    return SPEC_AUTO;
  }
  return spec_get_int(map, key, 0, def, lo, hi, e);
}

double spec_get_num(spec_node *map, const char *key, int required, double def, double lo,
                    double hi, spec_errors *e) {
  spec_node *n = spec_lookup(map, key, required, e);
  if (!n) return def;
  double v = spec_node_num(n, lo, hi, e);
  return e->failed ? def : v;
}

const char *spec_get_str(spec_node *map, const char *key, int required, const char *def,
                         char *out, size_t outsz, spec_errors *e) {
  if (def != out) snprintf(out, outsz, "%s", def ? def : "");
  spec_node *n = spec_lookup(map, key, required, e);
  if (!n) return out;
  if (n->kind != SPEC_SCALAR) {
    spec_fail_expected(e, n, "a string");
    return out;
  }
  if (strlen(n->value) >= outsz) {
    char path[SPEC_PATH_MAX];
    spec_node_path(n, path, sizeof path);
    spec_error(e, n, 0, "%s: value is longer than %zu characters; shorten it", path,
               outsz - 1);
    return out;
  }
  snprintf(out, outsz, "%s", n->value);
  return out;
}

/* --- Names ---------------------------------------------------------------------------------- */

int spec_name_index(const char *const *names, const char *name) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(names[i], name)) return i;
  return -1;
}

int spec_node_choice(spec_node *n, const char *const *names, spec_errors *e) {
  if (e->failed || !n) return -1;
  n->used = 1;
  int i = n->kind == SPEC_SCALAR ? spec_name_index(names, n->value) : -1;
  if (i >= 0) return i;
  char want[256] = "one of ";
  size_t pos = strlen(want);
  for (int k = 0; names[k] && pos < sizeof want; k++)
    pos += (size_t)snprintf(want + pos, sizeof want - pos, "%s%s", k ? ", " : "", names[k]);
  spec_fail_expected(e, n, want);
  return -1;
}

/* --- Maps ----------------------------------------------------------------------------------- */

/* A null node is an absent section (returns 0 without an error), like a null scalar. */
int spec_expect_map(spec_node *n, const char *what, spec_errors *e) {
  if (e->failed || !n) return 0;
  n->used = 1;
  if (n->kind == SPEC_MAP) return 1;
  if (spec_node_is_null(n)) return 0;
  char path[SPEC_PATH_MAX], got[160];
  if (!what) what = spec_node_path(n, path, sizeof path);
  spec_error(e, n, 0, "%s: expected a mapping (key: value pairs), got %s", what,
             spec_got(n, got, sizeof got));
  return 0;
}

/* Edit distance for "did you mean"; only short names are compared. */
static int spec_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la >= SPEC_NAME_MAX || lb >= SPEC_NAME_MAX) return SPEC_NAME_MAX;
  int row[SPEC_NAME_MAX + 1];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

static void spec_describe_known(const char *key, const char *const *known, char *buf,
                                size_t size) {
  const char *best = NULL;
  int best_d = 3; /* suggest only near misses */
  size_t pos = (size_t)snprintf(buf, size, "; known keys: ");
  for (int i = 0; known[i]; i++) {
    if (pos < size) pos += (size_t)snprintf(buf + pos, size - pos, "%s%s", i ? ", " : "",
                                            known[i]);
    int d = spec_edit_distance(key, known[i]);
    if (d < best_d && d < (int)strlen(known[i])) best = known[i], best_d = d;
  }
  if (best && pos < size) snprintf(buf + pos, size - pos, "; did you mean '%s'?", best);
}

void spec_check_unused(spec_node *map, const char *what, const char *const *known,
                       spec_errors *e) {
  if (e->failed || !map || map->kind != SPEC_MAP || spec_glued_key(map, e)) return;
  for (int i = 0; i < map->n_items; i++) {
    spec_node *n = map->items[i];
    if (n->used) continue;
    char hint[512] = "";
    if (known) spec_describe_known(n->key, known, hint, sizeof hint);
    spec_error(e, n, 1, "unknown key '%.*s' in %s%s", SPEC_SHOW_MAX, n->key, what, hint);
    return;
  }
}
