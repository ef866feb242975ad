/* Layer settings tables and parameter groups (layers/settings.h, layers/layer.h):
 *   - docs/spec.md holds the table of the built-in types' settings exactly as the declarations
 *     print it (layer_settings_doc);
 *   - parsing: defaults from the model and from another setting, given values, describe();
 *   - parameter groups: members back to back in the model's buffer, a group 64-byte aligned.
 * Usage: test_layer_settings DOCS_SPEC_MD, or test_layer_settings --print (the table to paste). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "model/model.h"
#include "spec/spec.h"

static int g_fail;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);         \
      printf(__VA_ARGS__);                                \
      printf("\n");                                       \
      g_fail++;                                           \
    }                                                     \
  } while (0)

static const char *const doc_header =
    "| Type | Setting | Kind | Default | Range | Meaning |\n"
    "|------|---------|------|---------|-------|---------|\n";

/* The docs table: the header, then every registered type's rows in registration order. */
static void docs_table(char *out, size_t outsz) {
  size_t used = (size_t)snprintf(out, outsz, "%s", doc_header);
  for (int t = 0; layer_type_at(t) && used < outsz; t++) {
    char rows[4096];
    layer_settings_doc(layer_type_at(t), rows, sizeof rows);
    used += (size_t)snprintf(out + used, outsz - used, "%s", rows);
  }
}

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = calloc((size_t)n + 1, 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = '\0';
  fclose(f);
  return s;
}

static void test_docs(const char *path) {
  char want[16384];
  docs_table(want, sizeof want);
  char *doc = read_all(path);
  CHECK(doc != NULL, "cannot read %s", path);
  if (!doc) return;
  CHECK(strstr(doc, want) != NULL, "%s does not hold the layer settings table the declarations "
        "give; replace it with (test_layer_settings --print):\n%s", path, want);
  free(doc);
}

/* The model of a YAML text, configured; NULL with the error printed. */
static int load(const char *yaml, pt_spec *spec, pt_model *m, char *err, size_t errsz) {
  spec_errors e = {0};
  err[0] = '\0';
  if (spec_load_text(yaml, strlen(yaml), "settings.yaml", NULL, 0, spec, &e) != 0 ||
      model_configure(m, spec, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  return 0;
}

static void test_parse(void) {
  const char *yaml =
      "model: {vocab: 16, seq_len: 8, dim: 6, heads: 3}\n"
      "layers:\n"
      "  - embedding\n"
      "  - llama_block: {ffn_dim: 5, kv_heads: 1}\n"
      "  - llama_block: {ffn_dim: 5, eps: 1.0e-6}\n"
      "  - linear: {bias: false}\n"
      "  - lm_head\n";
  pt_spec spec;
  pt_model m;
  char err[1024];
  int rc = load(yaml, &spec, &m, err, sizeof err);
  CHECK(rc == 0, "load: %s", err);
  if (rc != 0) return;
  const pt_layer *a = &m.layers[1], *b = &m.layers[2], *lin = &m.layers[3];
  CHECK(layer_setting_int(a, "heads") == 3 && layer_setting_int(a, "kv_heads") == 1 &&
            layer_setting_int(a, "ffn_dim") == 5 && layer_setting_num(a, "rope_theta") == 10000.0,
        "llama_block settings: heads %lld kv_heads %lld", (long long)layer_setting_int(a, "heads"),
        (long long)layer_setting_int(a, "kv_heads"));
  CHECK(layer_setting_int(b, "kv_heads") == 3, "kv_heads defaults to heads: %lld",
        (long long)layer_setting_int(b, "kv_heads"));
  CHECK(layer_setting_int(lin, "out") == 6 && !layer_setting_bool(lin, "bias"),
        "linear: out from model.dim, bias false");
  CHECK(a->type_count == 2, "type_count %d", a->type_count);
  char d[256];
  layer_settings_describe(a, d, sizeof d);
  CHECK(!strcmp(d, "kv_heads 1, ffn_dim 5"), "describe: '%s'", d);
  layer_settings_describe(b, d, sizeof d); /* eps given at its default: not shown */
  CHECK(!strcmp(d, "ffn_dim 5"), "describe: '%s'", d);
  layer_settings_describe(lin, d, sizeof d);
  CHECK(!strcmp(d, "bias false"), "describe: '%s'", d);

  /* q 36, k 12, v 12 floats back to back; o starts aligned again; gate 30, up 30 adjacent */
  model_alloc_on(&m, 0, m.n_layers, device_host());
  const pt_layer *L = &m.layers[1];
  CHECK(L->w[2] == L->w[1] + 36 && L->w[3] == L->w[2] + 12 && L->w[7] == L->w[6] + 30,
        "q|k|v and gate|up not adjacent");
  for (int p = 0; p < L->n_params; p++)
    CHECK((p > 0 && L->params[p - 1].group_next) || (L->w[p] - m.params) % 16 == 0,
          "%s not 64-byte aligned", L->params[p].name);
  CHECK(layer_param_stride(L, 3) == 16 && layer_param_stride(L, 1) == 36,
        "strides %lld %lld", (long long)layer_param_stride(L, 3),
        (long long)layer_param_stride(L, 1));
  model_free(&m);
  spec_free(&spec);
}

/* A type whose tied 'weight' is in a parameter group: refused at load, one line. */
static void grouped_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  (void)e;
  L->out_dim = s->in_dim;
  const pt_param_decl g[2] = {{"weight", 2, {4, s->in_dim}}, {"extra", 1, {4}}};
  layer_add_param_group(L, g, 2);
}
static void noop(pt_layer *L, const pt_io *io) { (void)L, (void)io; }
static const pt_layer_type grouped_type = {.name = "grouped_tied", .configure = grouped_configure,
                                           .forward = noop, .backward_input = noop,
                                           .backward_weight = noop};

static void test_group_tie(void) {
  layer_register(&grouped_type);
  const char *yaml =
      "model: {vocab: 16, seq_len: 8, dim: 4, heads: 1}\n"
      "layers:\n"
      "  - embedding: {tie: w}\n"
      "  - grouped_tied: {tie: w}\n"
      "  - lm_head\n";
  pt_spec spec;
  pt_model m;
  char err[1024];
  CHECK(load(yaml, &spec, &m, err, sizeof err) != 0 && strstr(err, "parameter group"),
        "a tied grouped weight must be refused: '%s'", err);
  spec_free(&spec);
}

int main(int argc, char **argv) {
  layer_register_builtins();
  if (argc == 2 && !strcmp(argv[1], "--print")) {
    char table[16384];
    docs_table(table, sizeof table);
    fputs(table, stdout);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s DOCS_SPEC_MD | --print\n", argv[0]);
    return 2;
  }
  test_docs(argv[1]);
  test_parse();
  test_group_tie();
  printf("layer settings: %s\n", g_fail ? "FAILED" : "ok");
  return g_fail ? 1 : 0;
}
