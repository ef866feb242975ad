/* tests/fuzz/fuzz_spec.c: libFuzzer target for the YAML spec loader (spec/spec_*.c).
 *
 * Input: YAML text, optionally followed by a NUL byte and NUL-separated --set assignments
 * (KEY=VALUE, at most FUZZ_MAX_SETS, applied with spec_tree_override through spec_load_text).
 * libyaml rejects NUL in a document, so the split costs no YAML coverage and every plain .yaml
 * file is a seed as it is.
 *
 * The contract checked: spec_load_text returns 0, or -1 with a message in spec_errors; it never
 * exits (libFuzzer reports an exit as a crash), never touches memory it does not own
 * (ASan/UBSan) and leaks nothing (LeakSanitizer). On success the typed accessors read every
 * layer's arguments and the planner's raw pipeline nodes the way their consumers do, so
 * hostile scalars reach the number parsers and the error formatting too.
 *
 * The loader opens no data file: it only stat()s data.path to resolve it. Inputs of odd length
 * run with spec_set_resolve_data(1) (a path that does not resolve is an error; the spec's
 * directory is joined in), even ones with 0 (kept as written), so both branches are covered.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

#define FUZZ_MAX_SETS 8
/* A directory in the origin makes the loader try "fuzz/<path>" for relative data paths. */
#define FUZZ_ORIGIN "fuzz/spec.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* abort(), not exit(): libFuzzer and the replay test both report it as a crash with a stack. */
static void fuzz_spec_die(const char *what, const spec_errors *e) {
  if (e)
    fprintf(stderr, "fuzz_spec: %s (failed=%d, msg=\"%s\")\n", what, e->failed, e->msg);
  else
    fprintf(stderr, "fuzz_spec: %s\n", what);
  abort();
}

/* PT_FUZZ_VERBOSE=1 prints each input's outcome: why a corpus file stops where it does. */
static int fuzz_spec_verbose(void) {
  static int verbose = -1;
  if (verbose < 0) {
    const char *v = getenv("PT_FUZZ_VERBOSE");
    verbose = v && *v && strcmp(v, "0") != 0;
  }
  return verbose;
}

/* The first error wins and later reads become no-ops, so every probe gets fresh errors. */
static void fuzz_spec_check_error(const spec_errors *e) {
  if (e->failed && !e->msg[0]) fuzz_spec_die("an error was recorded without a message", e);
}

/* Reads a map entry with every typed getter, as a layer type reading its arguments would. */
static void fuzz_spec_read_key(spec_node *map, const char *key) {
  char small[8], big[SPEC_MAX_SCALAR + 1];
  spec_errors e[6] = {{0, ""}, {0, ""}, {0, ""}, {0, ""}, {0, ""}, {0, ""}};
  spec_get_int(map, key, 1, 0, INT64_MIN, INT64_MAX, &e[0]);
  spec_get_int(map, key, 0, 1, 1, 1 << 24, &e[1]);
  spec_get_num(map, key, 1, 0.0, -1e300, 1e300, &e[2]);
  spec_get_bool(map, key, 0, &e[3]);
  spec_get_str(map, key, 0, "", small, sizeof small, &e[4]); /* "longer than" errors */
  spec_get_str(map, key, 1, NULL, big, sizeof big, &e[5]);
  for (int i = 0; i < 6; i++) fuzz_spec_check_error(&e[i]);
}

/* Walks a node: scalars through the single-node converters, maps through the getters. The
 * tree's depth is bounded by SPEC_MAX_DEPTH, so the recursion is too. */
static void fuzz_spec_read_node(spec_node *n) {
  if (!n) return;
  spec_errors e[3] = {{0, ""}, {0, ""}, {0, ""}};
  if (n->kind == SPEC_SCALAR) {
    spec_node_int(n, 0, INT32_MAX, &e[0]);
    spec_node_num(n, 0.0, 1.0, &e[1]);
    (void)spec_node_is_null(n);
  } else {
    spec_expect_map(n, n->kind == SPEC_MAP ? NULL : "a fuzzed value", &e[2]);
    for (int i = 0; i < n->n_items; i++) {
      if (n->kind == SPEC_MAP) fuzz_spec_read_key(n, n->items[i]->key);
      fuzz_spec_read_node(n->items[i]);
    }
  }
  for (int i = 0; i < 3; i++) fuzz_spec_check_error(&e[i]);
}

static void fuzz_spec_read_loaded(pt_spec *s) {
  static const char *const known[] = {"repeat", "tie", "out", "bias", "heads", NULL};
  for (int i = 0; i < s->n_layers; i++) {
    spec_layer *l = &s->layers[i];
    if (!l->args || !l->entry || l->index != i) fuzz_spec_die("a layer without args", NULL);
    /* repeat: N shares one args map among N layers: read it once */
    if (i > 0 && s->layers[i - 1].args == l->args) continue;
    fuzz_spec_read_node(l->args);
    spec_errors e = {0, ""};
    spec_check_unused(l->args, l->type, known, &e);
    fuzz_spec_check_error(&e);
  }
  fuzz_spec_read_node(s->pipeline.boundaries);
  fuzz_spec_read_node(s->pipeline.stage_layers);
  fuzz_spec_read_node(s->pipeline.max_memory);
  fuzz_spec_read_node(s->pipeline.devices);
  fuzz_spec_read_node(s->pipeline.offload);
  /* the model map is read by layer types with the getters too */
  fuzz_spec_read_node(s->model);
}

/* Splits the input into the YAML text (an exact-size copy, so ASan sees any read past len) and
 * the --set strings after the first NUL. Returns the number of --set strings. */
static int fuzz_spec_split(const uint8_t *data, size_t size, char **text, size_t *len,
                           char **tail, const char **sets) {
  const uint8_t *nul = memchr(data, 0, size);
  *len = nul ? (size_t)(nul - data) : size;
  *text = malloc(*len ? *len : 1);
  if (*len) memcpy(*text, data, *len);
  *tail = NULL;
  if (!nul) return 0;
  size_t rest = size - *len - 1;
  *tail = malloc(rest + 1);
  memcpy(*tail, nul + 1, rest);
  (*tail)[rest] = '\0';
  int n = 0;
  for (char *p = *tail; p < *tail + rest && n < FUZZ_MAX_SETS; p += strlen(p) + 1) sets[n++] = p;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text, *tail;
  size_t len;
  const char *sets[FUZZ_MAX_SETS];
  int n_sets = fuzz_spec_split(data, size, &text, &len, &tail, sets);
  spec_set_resolve_data((int)(size & 1));
  pt_spec s;
  spec_errors e = {0, ""};
  int rc = spec_load_text(text, len, FUZZ_ORIGIN, sets, n_sets, &s, &e);
  if (rc != 0 && rc != -1) fuzz_spec_die("spec_load_text returned neither 0 nor -1", &e);
  if (rc == -1 && (!e.failed || !e.msg[0])) fuzz_spec_die("-1 without an error message", &e);
  if (rc == 0 && e.failed) fuzz_spec_die("0 with an error recorded", &e);
  if (fuzz_spec_verbose()) fprintf(stderr, "fuzz_spec: %s\n", rc ? e.msg : "loaded");
  if (rc == 0) {
    if (!s.root || s.n_layers < 1) fuzz_spec_die("a loaded spec without layers", &e);
    fuzz_spec_read_loaded(&s);
    spec_free(&s);
  }
  free(text);
  free(tail);
  return 0;
}
