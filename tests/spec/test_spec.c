/* tests/spec/test_spec.c: the YAML spec loader (spec/spec_*.c).
 *
 * Usage: test_spec FIXTURE_DIR (tests/spec). Every failed check prints FILE:LINE of the check
 * (for table rows, the row's line) and the program exits non-zero if any failed. Error cases
 * assert the exact FILE:LINE:COL the message starts with, since pointing at the right place is
 * the point of the loader.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

static int g_checks, g_failures;
static const char *g_dir;

static void check_at(int ok, const char *file, int line, const char *what) {
  g_checks++;
  if (ok) return;
  g_failures++;
  fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
}
#define CHECK(cond) check_at((cond) != 0, __FILE__, __LINE__, #cond)
#define CHECK_INT(a, b)                                                                 \
  do {                                                                                  \
    long long a_ = (long long)(a), b_ = (long long)(b);                                 \
    if (a_ != b_) fprintf(stderr, "  %s = %lld, expected %lld\n", #a, a_, b_);          \
    CHECK(a_ == b_);                                                                    \
  } while (0)
#define CHECK_NUM(a, b) CHECK(fabs((double)(a) - (double)(b)) <= 1e-12 * fabs((double)(b)))
#define CHECK_STR(a, b)                                                                 \
  do {                                                                                  \
    const char *a_ = (a), *b_ = (b);                                                    \
    if (strcmp(a_, b_)) fprintf(stderr, "  %s = \"%s\", expected \"%s\"\n", #a, a_, b_); \
    CHECK(!strcmp(a_, b_));                                                             \
  } while (0)

static const char *fixture(const char *name) {
  static char buf[4][1024];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
  return p;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

static int load_text(const char *text, const char *const *sets, int n_sets, pt_spec *s,
                     spec_errors *e) {
  return spec_load_text(text, strlen(text), fixture("inline.yaml"), sets, n_sets, s, e);
}

/* Checks that msg starts with "ORIGIN:POS: error: " (or "ORIGIN: error: " for an empty POS)
 * and contains frag; line is the line of the test case for the report. */
static void check_message(int line, const spec_errors *e, const char *origin, const char *pos,
                          const char *frag) {
  char prefix[1200];
  snprintf(prefix, sizeof prefix, "%s%s%s: error: ", origin, *pos ? ":" : "", pos);
  int ok = e->failed && !strncmp(e->msg, prefix, strlen(prefix)) && strstr(e->msg, frag);
  check_at(ok, __FILE__, line, "error message position and text");
  if (!ok)
    fprintf(stderr, "  got:      %s\n  expected: %s...%s...\n", e->failed ? e->msg : "(no error)",
            prefix, frag);
}

/* --- The reference spec --------------------------------------------------------------------- */

static void test_reference_layers(const pt_spec *s) {
  static const char *const types[] = {"embedding", "pos_embedding", "transformer_block",
                                      "transformer_block", "transformer_block",
                                      "transformer_block", "transformer_block",
                                      "transformer_block", "layernorm", "lm_head"};
  CHECK_INT(s->n_layers, 10);
  for (int i = 0; i < s->n_layers && i < 10; i++) {
    CHECK_STR(s->layers[i].type, types[i]);
    CHECK_INT(s->layers[i].index, i);
    CHECK(s->layers[i].args && s->layers[i].args->kind == SPEC_MAP);
    CHECK_STR(s->layers[i].tie, (i == 0 || i == 9) ? "wte" : "");
  }
  /* repeat expands one entry: same args node, same entry, consecutive indices */
  for (int i = 3; i <= 7; i++) {
    CHECK(s->layers[i].args == s->layers[2].args);
    CHECK(s->layers[i].entry == s->layers[2].entry);
  }
  CHECK(s->layers[8].args != s->layers[2].args);
  CHECK_INT(s->layers[2].entry->line, 5);
  CHECK_INT(s->layers[2].entry->col, 5);
  CHECK_INT(s->layers[1].args->n_items, 0);
  CHECK_INT(s->layers[1].args->line, 4);
  /* repeat and tie are consumed, so the layer types see them as used */
  CHECK(spec_find(s->layers[2].args, "repeat")->used);
  CHECK(spec_find(s->layers[0].args, "tie")->used);
}

static void test_reference_train(const spec_train *t) {
  CHECK_INT(t->steps, 200);
  CHECK_INT(t->micro_batch_size, 8);
  CHECK_INT(t->micro_batches, 8);
  CHECK_INT(t->optimizer, SPEC_OPTIMIZER_ADAMW);
  CHECK_NUM(t->lr, 3.0e-4);
  CHECK_NUM(t->beta1, 0.9);
  CHECK_NUM(t->beta2, 0.95);
  CHECK_NUM(t->eps, 1.0e-8);
  CHECK_NUM(t->weight_decay, 0.1);
  CHECK_NUM(t->momentum, 0.0);
  CHECK_NUM(t->grad_clip, 1.0);
  CHECK_INT(t->seed, 1234);
  CHECK_INT(t->activation_checkpoint_interval, 0);
  CHECK_INT(t->lr_schedule, SPEC_LR_CONSTANT);
  CHECK_INT(t->warmup_steps, 0);
  CHECK_NUM(t->min_lr, 0.0);
}

static void test_reference(void) {
  spec_errors e = {0, ""};
  pt_spec s;
  int rc = spec_load(fixture("reference.yaml"), NULL, 0, &s, &e);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  CHECK_INT(rc, 0);
  if (rc) return;
  CHECK_STR(s.path, fixture("reference.yaml"));
  CHECK(s.model && s.model->kind == SPEC_MAP);
  CHECK_INT(s.vocab, 256);
  CHECK_INT(s.seq_len, 128);
  CHECK_INT(s.dim, 256);
  CHECK_INT(s.heads, 8);
  test_reference_layers(&s);
  CHECK_INT(s.loss, SPEC_LOSS_CROSS_ENTROPY);
  /* resolves in the working directory (the repository root) or next to the spec */
  CHECK(ends_with(s.data.path, "examples/data/tiny.txt"));
  FILE *f = fopen(s.data.path, "rb");
  CHECK(f != NULL);
  if (f) fclose(f);
  CHECK_INT(s.data.format, SPEC_DATA_BYTES);
  CHECK_INT(s.data.inputs, 0);
  CHECK(s.data.node && s.data.node->kind == SPEC_MAP);
  test_reference_train(&s.train);
  CHECK_INT(s.pipeline.stages, 4);
  CHECK_INT(s.pipeline.data_parallel, 2);
  CHECK_INT(s.pipeline.partition, SPEC_PARTITION_PARAMETERS);
  CHECK_STR(s.pipeline.schedule, "1f1b");
  CHECK(s.pipeline.node && spec_find(s.pipeline.node, "stages"));
  CHECK_INT(s.log_every, 1);
  CHECK(s.hash != 0);
  spec_free(&s);
  CHECK(s.root == NULL && s.layers == NULL);
}

/* --- Other valid specs ---------------------------------------------------------------------- */

static void test_layer_forms_args(const pt_spec *s) {
  spec_errors e = {0, ""};
  spec_node *block = s->layers[4].args, *linear = s->layers[7].args;
  CHECK_INT(spec_get_int(block, "ffn_mult", 0, 4, 1, 16, &e), 2);
  spec_check_unused(block, "layers[4].transformer_block", NULL, &e);
  CHECK(!e.failed);
  CHECK_INT(spec_get_bool(linear, "bias", 0, &e), 1);
  spec_check_unused(linear, "linear", NULL, &e);
  CHECK(e.failed && strstr(e.msg, "unknown key 'out' in linear"));
  /* model keys are left for the layer types */
  spec_errors e2 = {0, ""};
  CHECK_INT(spec_get_int(s->model, "ffn_mult", 0, 0, 1, 8, &e2), 4);
}

static void test_layer_forms(void) {
  static const char *const types[] = {"embedding", "gelu", "dropout", "layernorm",
                                      "transformer_block", "transformer_block",
                                      "transformer_block", "linear", "lm_head"};
  spec_errors e = {0, ""};
  pt_spec s;
  int rc = spec_load(fixture("layers_forms.yaml"), NULL, 0, &s, &e);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  CHECK_INT(rc, 0);
  if (rc) return;
  CHECK_INT(s.n_layers, 9);
  for (int i = 0; i < s.n_layers && i < 9; i++) {
    CHECK_STR(s.layers[i].type, types[i]);
    CHECK_INT(s.layers[i].index, i);
    CHECK(s.layers[i].args && s.layers[i].args->kind == SPEC_MAP);
  }
  CHECK_STR(s.layers[0].tie, "shared.wte-1");
  CHECK_STR(s.layers[8].tie, "shared.wte-1");
  CHECK_INT(s.layers[1].args->n_items, 0);  /* - gelu */
  CHECK_INT(s.layers[1].args->line, 5);     /* positioned at the entry */
  CHECK_INT(s.layers[2].args->n_items, 0);  /* - dropout: */
  test_layer_forms_args(&s);
  CHECK_INT(s.loss, SPEC_LOSS_MSE);
  CHECK_INT(s.data.format, SPEC_DATA_F32);
  CHECK_INT(s.data.inputs, 3);
  CHECK_INT(s.data.targets, 1);
  CHECK_STR(s.data.path, fixture("f32.bin")); /* found next to the spec */
  CHECK_INT(s.train.optimizer, SPEC_OPTIMIZER_SGD);
  CHECK_NUM(s.train.momentum, 0.9);
  CHECK_INT(s.train.lr_schedule, SPEC_LR_COSINE);
  CHECK_INT(s.train.warmup_steps, 10);
  CHECK_NUM(s.train.min_lr, 1.0e-5);
  CHECK_INT(s.log_every, 5);
  spec_free(&s);
}

static void test_defaults(void) {
  spec_errors e = {0, ""};
  pt_spec s;
  CHECK_INT(load_text("layers: [gelu]\ntrain: {steps: ~, seed: }\ndata:\n", NULL, 0, &s, &e), 0);
  if (e.failed) return;
  CHECK(s.model == NULL);
  CHECK_INT(s.vocab + s.seq_len + s.dim + s.heads, 0);
  CHECK_INT(s.n_layers, 1);
  CHECK_INT(s.loss, SPEC_LOSS_CROSS_ENTROPY);
  CHECK_STR(s.data.path, "");
  CHECK_INT(s.data.format, SPEC_DATA_BYTES);
  CHECK(s.data.node == NULL);
  CHECK_INT(s.train.steps, 100);
  CHECK_INT(s.train.micro_batch_size, 1);
  CHECK_INT(s.train.micro_batches, 1);
  CHECK_INT(s.train.optimizer, SPEC_OPTIMIZER_ADAMW);
  CHECK_NUM(s.train.lr, 1e-3);
  CHECK_NUM(s.train.beta1, 0.9);
  CHECK_NUM(s.train.beta2, 0.999);
  CHECK_NUM(s.train.eps, 1e-8);
  CHECK_NUM(s.train.weight_decay, 0.0);
  CHECK_NUM(s.train.grad_clip, 0.0);
  CHECK_INT(s.train.seed, 1234);
  CHECK_INT(s.train.lr_schedule, SPEC_LR_CONSTANT);
  CHECK_INT(s.pipeline.stages, 1);
  CHECK_INT(s.pipeline.data_parallel, 1);
  CHECK_INT(s.pipeline.partition, SPEC_PARTITION_PARAMETERS);
  CHECK_STR(s.pipeline.schedule, "1f1b");
  CHECK(s.pipeline.node == NULL);
  CHECK_INT(s.log_every, 1);
  spec_free(&s);
}

/* train.seq_len_schedule: the documented ramp, its end at model.seq_len (not a multiple of 8
 * here), huge steps and warm-ups without overflow; no schedule: model.seq_len every step. */
static void test_seq_len_schedule(void) {
  spec_errors e = {0, ""};
  pt_spec s;
  CHECK_INT(load_text("model: {seq_len: 30}\nlayers: [gelu]\ntrain: {seq_len_schedule: {start: 8, "
                      "warmup_steps: 4, multiple: 8}}\ndata:\n", NULL, 0, &s, &e), 0);
  if (e.failed) return;
  const int64_t want[] = {8, 8, 16, 24, 30, 30};
  for (int i = 0; i < 6; i++) CHECK_INT(spec_seq_len_at(&s, i), want[i]);
  CHECK_INT(spec_seq_len_at(&s, INT64_MAX), 30);
  s.train.seq_warmup = INT64_MAX; /* 8 + 22 (2^63 - 2) / (2^63 - 1) = 29, rounded down to 24 */
  CHECK_INT(spec_seq_len_at(&s, INT64_MAX - 1), 24);
  s.train.seq_start = 0;
  CHECK_INT(spec_seq_len_at(&s, 0), 30);
  spec_free(&s);
}

static void test_absolute_data_path(void) {
  spec_errors e = {0, ""};
  pt_spec s;
  CHECK_INT(load_text("layers: [gelu]\ndata: {path: /no/such/tokens.bin}\n", NULL, 0, &s, &e), 0);
  if (!e.failed) CHECK_STR(s.data.path, "/no/such/tokens.bin");
  spec_free(&s);
}

/* --- --set overrides ------------------------------------------------------------------------ */

static int load_reference(const char *const *sets, int n, pt_spec *s, spec_errors *e) {
  return spec_load(fixture("reference.yaml"), sets, n, s, e);
}

static void test_override_values(void) {
  static const char *const sets[] = {
      "train.steps=5", "pipeline.schedule=gpipe", "train.optimizer.betas=[0.8, 0.85]",
      "train.lr_schedule.name=cosine", "log.every=10", "model.vocab=512",
      "layers=[embedding, {transformer_block: {repeat: 2}}, lm_head]"};
  spec_errors e = {0, ""};
  pt_spec s;
  int rc = load_reference(sets, 7, &s, &e);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  CHECK_INT(rc, 0);
  if (rc) return;
  CHECK_INT(s.train.steps, 5);
  CHECK_STR(s.pipeline.schedule, "gpipe");
  CHECK_NUM(s.train.beta1, 0.8);
  CHECK_NUM(s.train.beta2, 0.85);
  CHECK_INT(s.train.lr_schedule, SPEC_LR_COSINE); /* lr_schedule was absent: created */
  CHECK_INT(s.log_every, 10);               /* log was absent too */
  CHECK_INT(s.vocab, 512);
  CHECK_INT(s.n_layers, 4);
  CHECK_STR(s.layers[2].type, "transformer_block");
  CHECK_STR(s.layers[3].type, "lm_head");
  /* a replaced key keeps its place and carries the --set text as its origin */
  spec_node *vocab = s.model->items[0];
  CHECK_STR(vocab->key, "vocab");
  CHECK_STR(vocab->value, "512");
  CHECK_STR(vocab->origin, "--set model.vocab=512");
  CHECK_INT(vocab->line, 0);
  CHECK(vocab->parent == s.model);
  spec_free(&s);
}

static void test_override_map_value(void) {
  const char *set = "train.optimizer={name: sgd, lr: 0.1, momentum: 0.5}";
  spec_errors e = {0, ""};
  pt_spec s;
  CHECK_INT(load_reference(&set, 1, &s, &e), 0);
  if (e.failed) return;
  CHECK_INT(s.train.optimizer, SPEC_OPTIMIZER_SGD);
  CHECK_NUM(s.train.lr, 0.1);
  CHECK_NUM(s.train.momentum, 0.5);
  CHECK_NUM(s.train.weight_decay, 0.0); /* the whole map was replaced */
  spec_free(&s);
}

/* --- Enum settings -------------------------------------------------------------------------- */

typedef struct {
  const char *key;
  const char *const *names;
  int count; /* values of the enum */
} enum_case;

static int enum_field(const pt_spec *s, const char *key) {
  if (!strcmp(key, "loss")) return (int)s->loss;
  if (!strcmp(key, "data.format")) return (int)s->data.format;
  if (!strcmp(key, "train.optimizer.name")) return (int)s->train.optimizer;
  if (!strcmp(key, "train.lr_schedule.name")) return (int)s->train.lr_schedule;
  if (!strcmp(key, "train.on_nonfinite")) return (int)s->train.on_nonfinite;
  if (!strcmp(key, "train.precision")) return (int)s->train.precision;
  if (!strcmp(key, "pipeline.partition")) return (int)s->pipeline.partition;
  if (!strcmp(key, "pipeline.device")) return (int)s->pipeline.device;
  if (!strcmp(key, "comm.dp_reduce")) return (int)s->dp_reduce;
  return (int)s->comm_backend;
}

/* Each names table has one name per enum value, and every name loads as its value. */
static void test_enum_names(void) {
  static const enum_case cases[] = {
      {"loss", spec_loss_names, SPEC_LOSS_MSE + 1},
      {"data.format", spec_data_format_names, SPEC_DATA_U32 + 1},
      {"train.optimizer.name", spec_optimizer_names, SPEC_OPTIMIZER_SGD + 1},
      {"train.lr_schedule.name", spec_lr_schedule_names, SPEC_LR_COSINE + 1},
      {"train.on_nonfinite", spec_nonfinite_names, SPEC_NONFINITE_SKIP + 1},
      {"train.precision", spec_precision_names, SPEC_PRECISION_BF16 + 1},
      {"pipeline.partition", spec_partition_names, SPEC_PARTITION_AUTO + 1},
      {"pipeline.device", spec_device_names, SPEC_DEVICE_EMULATED + 1},
      {"comm.backend", spec_comm_backend_names, SPEC_COMM_MPI + 1},
      {"comm.dp_reduce", spec_dp_reduce_names, SPEC_DP_REDUCE_ALLREDUCE + 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const enum_case *k = &cases[c];
    int n = 0;
    while (k->names[n]) n++;
    CHECK_INT(n, k->count);
    for (int i = 0; i < n; i++) {
      if (!strcmp(k->names[i], "f32")) continue; /* needs inputs and targets: test_layer_forms */
      /* type: takes a regex after it; quoted, since an unquoted 'type:x' would be a map */
      const char *regex = k->names[i][strlen(k->names[i]) - 1] == ':' ? "^trans" : "";
      char set[128];
      snprintf(set, sizeof set, "%s='%s%s'", k->key, k->names[i], regex);
      const char *sets[1] = {set};
      spec_errors e = {0, ""};
      pt_spec s;
      int rc = load_reference(sets, 1, &s, &e);
      if (rc) fprintf(stderr, "  %s: %s\n", set, e.msg);
      CHECK_INT(rc, 0);
      if (rc) continue;
      CHECK_INT(enum_field(&s, k->key), i);
      CHECK_INT(spec_name_index(k->names, k->names[i]), i);
      if (*regex) CHECK_STR(s.pipeline.partition_types, regex);
      spec_free(&s);
    }
  }
}

/* The tree API directly: override on a parsed tree, then read back. */
static void test_override_tree(void) {
  spec_errors e = {0, ""};
  const char *text = "a: {b: 1}\nc: ~\n";
  spec_node *root = spec_tree_parse(text, strlen(text), "t.yaml", &e);
  CHECK(root != NULL);
  CHECK_INT(spec_tree_override(root, "a.x.y=[1, 2, 3]", &e), 0);
  CHECK_INT(spec_tree_override(root, "c.d=''", &e), 0); /* a null section becomes a map */
  CHECK_INT(spec_tree_override(root, "e=", &e), 0);     /* an empty value is null */
  spec_node *y = spec_find(spec_find(spec_find(root, "a"), "x"), "y");
  CHECK(y && y->kind == SPEC_SEQ && y->n_items == 3);
  if (y && y->n_items == 3) CHECK_INT(spec_node_int(y->items[2], 0, 9, &e), 3);
  spec_node *d = spec_find(spec_find(root, "c"), "d");
  CHECK(d && d->quoted && !strcmp(d->value, ""));
  CHECK_INT(spec_get_int(root, "e", 0, 7, 0, 9, &e), 7);
  CHECK(!e.failed);
  CHECK_INT(spec_tree_override(root, "a.b.z=1", &e), -1);
  check_message(__LINE__, &e, "--set a.b.z=1", "", "'a.b': it is a single value (t.yaml:1:8)");
  spec_tree_free(root);
}

/* --- Hash ----------------------------------------------------------------------------------- */

static uint64_t hash_of(const char *text, const char *set) {
  spec_errors e = {0, ""};
  pt_spec s;
  int n = set ? 1 : 0;
  if (text ? load_text(text, &set, n, &s, &e) : load_reference(&set, n, &s, &e)) {
    fprintf(stderr, "  %s\n", e.msg);
    return 0;
  }
  uint64_t h = s.hash;
  spec_free(&s);
  return h;
}

static void test_hash(void) {
  const char *block = "layers:\n  - gelu: {p: 1}\ntrain:\n  steps: 5   # five\n";
  const char *flow = "{layers: [{gelu: {p: 1}}], train: {steps: 5}}";
  uint64_t ref = hash_of(NULL, NULL);
  CHECK(ref != 0);
  CHECK(hash_of(NULL, NULL) == ref);
  CHECK(hash_of(NULL, "train.steps=200") == ref); /* same value from --set: same spec */
  CHECK(hash_of(NULL, "train.steps=201") != ref);
  CHECK(hash_of(NULL, "train.optimizer.lr=3.0e-3") != ref);
  CHECK(hash_of(block, NULL) == hash_of(flow, NULL)); /* layout and comments do not count */
  CHECK(hash_of(block, "train.steps=6") != hash_of(flow, NULL));
}

/* --- Errors --------------------------------------------------------------------------------- */

typedef struct {
  int line;         /* of the row, for the report */
  const char *text; /* inline spec (origin DIR/inline.yaml); NULL: reference.yaml */
  const char *set;  /* one --set argument, or NULL */
  const char *pos;  /* "LINE:COL" in the spec file; "" when the message names the --set text */
  const char *frag; /* must appear in the message */
} error_case;

#define L __LINE__
static const error_case g_text_errors[] = {
    /* tree: YAML constructs and syntax */
    {L, "layers: [gelu]\ntrain: {steps: *s}\n", NULL, "2:16",
     "anchors and aliases are not supported; write the value out"},
    {L, "layers: &l [gelu]\n", NULL, "1:9", "anchors and aliases are not supported"},
    {L, "layers: [gelu]\nloss: !!str mse\n", NULL, "2:7", "tags ('!!str') are not supported"},
    {L, "layers: [gelu]\n---\nlayers: [relu]\n", NULL, "2:1", "more than one YAML document"},
    {L, "layers: [gelu]\nlayers: [relu]\n", NULL, "2:1",
     "duplicate key 'layers' (first given at line 1)"},
    {L, "layers: [gelu]\ntrain: {[a]: 1}\n", NULL, "2:9", "mapping keys must be plain names"},
    {L, "[gelu]\n", NULL, "1:1", "top level of a spec must be a mapping"},
    {L, "layers: [gelu\n", NULL, "2:1", "invalid YAML: did not find expected ',' or ']'"},
    {L, "layers: [gelu]\nkey: x\n  y: 2\n", NULL, "3:4", "invalid YAML: mapping values"},
    {L, "", NULL, "1:1", "the spec is empty"},
    {L, "# only a comment\n", NULL, "1:1", "the spec is empty"},
    {L, "---\n", NULL, "1:1", "the spec is empty"},
    {L, "layers: [\"a\\0b\"]\n", NULL, "1:10", "NUL character"},
    /* scalars and types */
    {L, "layers: [gelu]\ntrain: {steps: 99999999999999999999}\n", NULL, "2:16",
     "train.steps: integer out of range: '99999999999999999999'"},
    {L, "layers: [gelu]\ntrain: {seed: 9223372036854775808}\n", NULL, "2:15",
     "integer out of range"},
    {L, "layers: [gelu]\ntrain: {seed: -1}\n", NULL, "2:15",
     "train.seed: expected an integer >= 0, got '-1'"},
    {L, "layers: [gelu]\ntrain: {steps: 1e3}\n", NULL, "2:16",
     "train.steps: expected an integer >= 0, got '1e3'"},
    {L, "layers: [gelu]\ntrain: {steps: \"5\"}\n", NULL, "2:16",
     "expected an integer >= 0, got the quoted string \"5\""},
    {L, "layers: [gelu]\ntrain: {steps: {a: 1}}\n", NULL, "2:16",
     "train.steps: expected an integer >= 0, got a mapping"},
    {L, "layers: [gelu]\ntrain: {grad_clip: [1]}\n", NULL, "2:20",
     "train.grad_clip: expected a number >= 0, got a sequence"},
    {L, "layers: [gelu]\ntrain: {grad_clip: 1e999}\n", NULL, "2:20",
     "expected a number >= 0, got '1e999'"},
    {L, "layers: [gelu]\ntrain: {grad_clip: .nan}\n", NULL, "2:20", "expected a number >= 0"},
    {L, "layers: [gelu]\ntrain: 5\n", NULL, "2:8",
     "train: expected a mapping (key: value pairs), got '5'"},
    /* sections and keys */
    {L, "layers: [gelu]\nlayer_norm_eps: 1e-5\n", NULL, "2:1",
     "unknown key 'layer_norm_eps' in the spec; known keys: model, layers, loss, data, train, "
     "pipeline, comm, log"},
    {L, "layers: [gelu]\ntrain: {micro_batch: 4}\n", NULL, "2:9",
     "unknown key 'micro_batch' in train; known keys: steps, micro_batch_size, micro_batches, "
     "optimizer, grad_clip, seed, activation_checkpoint_interval, lr_schedule, checkpoint, on_nonfinite, precision, seq_len_schedule; did you mean "
     "'micro_batches'?"},
    {L, "model: {dim: 256, heads: 7}\nlayers: [gelu]\n", NULL, "1:26",
     "model.dim (256) is not divisible by model.heads (7); choose heads that divide dim"},
    {L, "model: {vocab: 0}\nlayers: [gelu]\n", NULL, "1:16",
     "model.vocab: expected an integer in [1, 2147483647], got '0'"},
    {L, "layers: [gelu]\nloss: hinge\n", NULL, "2:7",
     "loss: expected one of cross_entropy, mse, got 'hinge'"},
    /* train */
    {L, "layers: [gelu]\ntrain:\n  optimizer: {lr: 0}\n", NULL, "3:19",
     "train.optimizer.lr: expected a number > 0, got '0'"},
    {L, "layers: [gelu]\ntrain:\n  optimizer: {betas: [0.9, 1.0]}\n", NULL, "3:28",
     "train.optimizer.betas[1]: expected a number in [0, 1), got '1.0'"},
    {L, "layers: [gelu]\ntrain:\n  optimizer: {betas: 0.9}\n", NULL, "3:22",
     "train.optimizer.betas: expected two numbers [beta1, beta2], got '0.9'"},
    {L, "layers: [gelu]\ntrain:\n  optimizer: {momentum: 0.5}\n", NULL, "3:15",
     "train.optimizer.momentum only applies to name: sgd"},
    {L, "layers: [gelu]\ntrain:\n  optimizer: {name: sgd, momentum: 1}\n", NULL, "3:36",
     "train.optimizer.momentum: expected a number in [0, 1), got '1'"},
    {L, "layers: [gelu]\ntrain:\n  optimizer: {name: sgd, nesterov: true}\n", NULL, "3:26",
     "unknown key 'nesterov' in train.optimizer"},
    {L, "layers: [gelu]\ntrain:\n  optimizer: {name: adam}\n", NULL, "3:21",
     "train.optimizer.name: expected one of adamw, sgd, got 'adam'"},
    {L, "layers: [gelu]\ntrain:\n  lr_schedule: {name: cosine, warmup: 5}\n", NULL, "3:31",
     "unknown key 'warmup' in train.lr_schedule; known keys: name, warmup_steps, min_lr"},
    {L, "layers: [gelu]\ntrain:\n  lr_schedule: {name: linear}\n", NULL, "3:23",
     "expected one of constant, cosine, got 'linear'"},
    /* pipeline, log */
    {L, "layers: [gelu]\npipeline: {stages: 2, microbatches: 4}\n", NULL, "2:23",
     "unknown key 'microbatches' in pipeline"},
    {L, "layers: [gelu]\npipeline: {partition: layers}\n", NULL, "2:23",
     "unknown pipeline.partition 'layers'; use parameters, uniform, balanced, type:REGEX, auto, or "
     "give pipeline.boundaries"},
    {L, "layers: [gelu]\npipeline: {schedule: [1f1b]}\n", NULL, "2:22",
     "pipeline.schedule: expected a string, got a sequence"},
    {L, "layers: [gelu]\npipeline: {stages: 0}\n", NULL, "2:20",
     "pipeline.stages: expected an integer in [1, 2147483647], got '0'"},
    {L, "layers: [gelu]\nlog: {every: 5, format: json}\n", NULL, "2:17",
     "unknown key 'format' in log; known keys: every"},
    {L, "layers: [gelu]\npipeline: {device: tpu}\n", NULL, "2:20",
     "pipeline.device: expected one of auto, cpu, gpu, emulated, got 'tpu'"},
    {L, "layers: [gelu]\ncomm: {backend: gloo}\n", NULL, "2:17",
     "comm.backend: expected one of auto, nccl, mpi, got 'gloo'"},
    {L, "layers: [gelu]\ncomm: {dp_reduce: ring}\n", NULL, "2:19",
     "comm.dp_reduce: expected one of chain, allreduce, got 'ring'"},
    {L, "layers: [gelu]\ntrain: {on_nonfinite: carry_on_regardless}\n", NULL, "2:23",
     "train.on_nonfinite: expected one of abort, skip, got 'carry_on_regardless'"},
    {L, "layers: [gelu]\ntrain: {precision: fp16}\n", NULL, "2:20",
     "train.precision: expected one of fp32, tf32, bf16, got 'fp16'"},
    {L, "layers: [gelu]\nloss: {name: mse}\n", NULL, "2:7",
     "loss: expected one of cross_entropy, mse, got a mapping"},
    /* data */
    {L, "layers: [gelu]\ndata: {path: /dev/null, format: u8}\n", NULL, "2:33",
     "data.format: expected one of bytes, u16, f32, u32, got 'u8'"},
    {L, "layers: [gelu]\ndata: {format: bytes}\n", NULL, "2:7",
     "data: missing required key 'path'"},
    {L, "layers: [gelu]\ndata: {path: /dev/null, format: f32}\n", NULL, "2:7",
     "data: missing required key 'inputs'"},
    {L, "layers: [gelu]\ndata: {path: /dev/null, format: u16, targets: 2}\n", NULL, "2:38",
     "data.targets only applies to format f32"},
    /* layers */
    {L, "model: {dim: 8}\n", NULL, "1:1", "missing required section 'layers'"},
    {L, "layers: {gelu: {}}\n", NULL, "1:9", "layers: expected a sequence of layers"},
    {L, "layers: []\n", NULL, "1:9", "layers: the list is empty"},
    {L, "layers:\n  - Embedding\n", NULL, "2:5", "'Embedding' is not a layer type name"},
    {L, "layers:\n  - gelu\n  - Linear: {out: 4}\n", NULL, "3:5",
     "'Linear' is not a layer type name"},
    {L, "layers:\n  - {linear: {}, out: 4}\n", NULL, "2:5",
     "layers[0]: a layer entry has exactly one key"},
    {L, "layers:\n  - [gelu]\n", NULL, "2:5",
     "layers[0]: expected a layer type name or 'type: {args}', got a sequence"},
    {L, "layers:\n  -\n  - gelu\n", NULL, "2:4", "got an empty value"},
    {L, "layers:\n  - linear: 4\n", NULL, "2:13",
     "layers[0].linear: expected a mapping of layer arguments (or nothing), got '4'"},
    {L, "layers:\n  - block: {repeat: 0}\n", NULL, "2:21",
     "layers[0].block.repeat: expected an integer in [1, 100000], got '0'"},
    {L, "layers:\n  - block: {repeat: 2, tie: t}\n", NULL, "2:24",
     "layers[0].block.tie: tie cannot be combined with repeat > 1"},
    {L, "layers:\n  - embedding: {tie: 'w te'}\n", NULL, "2:22",
     "expected a tie key of letters, digits, '_', '.' and '-', got the quoted string \"w te\""},
    {L, "layers:\n  - a: {repeat: 100000}\n  - b\n", NULL, "3:5",
     "the layer list expands to more than 100000 layers"},
    /* issue 29: a link to nothing, a file that is a directory, settings that never act */
    {L, "layers:\n  - embedding: {tie: wte}\n  - lm_head: {tie: wtf}\n", NULL, "2:22",
     "layer 0 (embedding): tie 'wte' names no other layer, so nothing would be tied"},
    {L, "layers: [embedding]\ndata:\n  path: .\n", NULL, "3:9",
     "data file '.' is a directory, not a regular file"},
    {L, "layers: [gelu]\npipeline: {schedule_file: .}\n", NULL, "2:27",
     "schedule file '.' is a directory, not a regular file"},
    {L, "layers: [embedding]\ndata:\n  path: /dev/zero\n", NULL, "3:9",
     "data file '/dev/zero' is a device, not a regular file"},
    /* --set */
    {L, NULL, "train.steps=abc", "", "train.steps: expected an integer >= 0, got 'abc'"},
    {L, NULL, "train.steps", "", "--set expects KEY=VALUE, e.g. --set pipeline.stages=2"},
    {L, NULL, "=5", "", "--set expects KEY=VALUE, e.g. --set pipeline.stages=2"},
    {L, NULL, "train..steps=5", "", "empty name in the key path"},
    {L, NULL, "layers.x=1", "", "cannot set a key inside 'layers': it is a sequence ("},
    {L, NULL, "train.optimizer.betas=[0.9", "", "invalid YAML in the value at column 5"},
    {L, NULL, "train.stepz=1", "", "unknown key 'stepz' in train"},
    {L, NULL, "train.steps=*a", "", "anchors and aliases are not supported"},
    {L, NULL, "model.heads=7", "", "model.dim (256) is not divisible by model.heads (7)"},
    {L, NULL, "data.format=f32", "9:7", "data: missing required key 'inputs'"},
    {L, NULL, "train.checkpoint={dir: ckpts, every: 0}", "",
     "train.checkpoint.every: 0 would never save a checkpoint; give a step count >= 1"},
    {L, NULL, "train.checkpoint={dir:/x}", "",
     "'dir:/x' is read as one key with no value (YAML needs a space after ':'); write 'dir: /x'"},
    {L, "layers: [gelu]\n", "layers=[{gelu: {repeat: x}}]", "",
     "layers[0].gelu.repeat: expected an integer in [1, 100000], got 'x'"},
};
#undef L

static void test_text_errors(void) {
  for (size_t i = 0; i < sizeof g_text_errors / sizeof g_text_errors[0]; i++) {
    const error_case *c = &g_text_errors[i];
    spec_errors e = {0, ""};
    pt_spec s;
    int n = c->set ? 1 : 0;
    int rc = c->text ? load_text(c->text, &c->set, n, &s, &e) : load_reference(&c->set, n, &s, &e);
    check_at(rc == -1, __FILE__, c->line, "load fails");
    char origin[1100];
    if (!*c->pos)
      snprintf(origin, sizeof origin, "--set %s", c->set);
    else
      snprintf(origin, sizeof origin, "%s", fixture(c->text ? "inline.yaml" : "reference.yaml"));
    check_message(c->line, &e, origin, c->pos, c->frag);
    if (!rc) spec_free(&s);
  }
}

typedef struct {
  int line;
  const char *name, *pos, *frag;
} file_case;

#define L __LINE__
static const file_case g_file_errors[] = {
    {L, "bad_type.yaml", "7:21", "train.micro_batch_size: expected an integer >= 1, got 'eight'"},
    {L, "bad_alias.yaml", "1:8", "anchors and aliases are not supported; write the value out"},
    {L, "bad_alias_ref.yaml", "4:16", "anchors and aliases are not supported"},
    {L, "bad_tag.yaml", "3:10", "tags ('!!int') are not supported"},
    {L, "bad_multidoc.yaml", "2:1", "more than one YAML document"},
    {L, "bad_dupkey.yaml", "5:3", "duplicate key 'steps' (first given at line 3)"},
    {L, "bad_complex_key.yaml", "3:5", "mapping keys must be plain names; got a sequence"},
    {L, "bad_root.yaml", "1:1", "got a sequence"},
    {L, "bad_syntax.yaml", "4:2", "invalid YAML: did not find expected key"},
    {L, "bad_tabs.yaml", "3:1", "YAML does not allow tabs for indentation"},
    {L, "empty.yaml", "1:1", "the spec is empty"},
    {L, "bad_unknown_key.yaml", "5:3", "unknown key 'stpes' in train; known keys: steps, "},
    {L, "bad_unknown_section.yaml", "2:1", "unknown key 'layer' in the spec"},
    {L, "bad_heads.yaml", "3:10", "model.dim (256) is not divisible by model.heads (7)"},
    {L, "bad_layer_entry.yaml", "3:5", "layers[1]: a layer entry has exactly one key"},
    {L, "bad_repeat_tie.yaml", "3:36", "tie cannot be combined with repeat > 1"},
    {L, "bad_betas.yaml", "5:12", "train.optimizer.betas: expected two numbers [beta1, beta2]"},
    {L, "bad_f32_inputs.yaml", "5:3", "data.inputs only applies to format f32"},
    {L, "bad_data_path.yaml", "3:9", "data file 'no/such/file.txt' not found (looked in "
                                     "./no/such/file.txt and "},
    {L, "no_such_spec.yaml", "", "cannot open the spec file"},
    {L, ".", "", "it is a directory, not a file"},
};
#undef L

/* An argument of several KB: the reason still reaches the message whole (issue 29 case 12). */
static void test_long_argument(void) {
  static char set[4200];
  int n = snprintf(set, sizeof set, "model.dim=");
  memset(set + n, '7', 4000);
  const char *sets[1] = {set};
  spec_errors e = {0, ""};
  pt_spec s;
  int rc = load_reference(sets, 1, &s, &e);
  CHECK(rc == -1);
  CHECK(strstr(e.msg, "model.dim: integer out of range") != NULL);
  CHECK(strstr(e.msg, "expected an integer in [1, 2147483647]") != NULL);
  CHECK(strlen(e.msg) < 600);
  if (!rc) spec_free(&s);
}

static void test_file_errors(void) {
  for (size_t i = 0; i < sizeof g_file_errors / sizeof g_file_errors[0]; i++) {
    const file_case *c = &g_file_errors[i];
    spec_errors e = {0, ""};
    pt_spec s;
    const char *path = fixture(c->name);
    int rc = spec_load(path, NULL, 0, &s, &e);
    check_at(rc == -1, __FILE__, c->line, "load fails");
    check_message(c->line, &e, path, c->pos, c->frag);
    if (!rc) spec_free(&s);
  }
  /* the not-found message names both places it looked */
  spec_errors e = {0, ""};
  pt_spec s;
  char frag[1200];
  snprintf(frag, sizeof frag, "and %s/no/such/file.txt)", g_dir);
  spec_load(fixture("bad_data_path.yaml"), NULL, 0, &s, &e);
  check_message(__LINE__, &e, fixture("bad_data_path.yaml"), "3:9", frag);
  spec_errors e2 = {0, ""};
  spec_load(fixture("no_such_spec.yaml"), NULL, 0, &s, &e2);
  CHECK(strstr(e2.msg, "no_such_spec.yaml': No such file or directory") != NULL);
}

/* --- Limits against hostile input ----------------------------------------------------------- */

static char *repeat_text(const char *head, const char *unit, int n, const char *tail) {
  size_t len = strlen(head) + strlen(unit) * (size_t)n + strlen(tail) + 1;
  char *s = malloc(len), *p = s;
  p += sprintf(p, "%s", head);
  for (int i = 0; i < n; i++) p += sprintf(p, "%s", unit);
  sprintf(p, "%s", tail);
  return s;
}

static void expect_text_error(int line, char *text, const char *pos, const char *frag) {
  spec_errors e = {0, ""};
  pt_spec s;
  int rc = load_text(text, NULL, 0, &s, &e);
  check_at(rc == -1, __FILE__, line, "load fails");
  check_message(line, &e, fixture("inline.yaml"), pos, frag);
  if (!rc) spec_free(&s);
  free(text);
}

static void test_limits(void) {
  /* root is depth 1, the first '[' (column 8) depth 2: the 32nd '[' is depth 33 */
  char *deep = repeat_text("layers: [gelu]\nmodel: ", "[", 40, "");
  expect_text_error(__LINE__, deep, "2:39", "nesting deeper than 32 levels");
  char *ok_deep = repeat_text("layers: [gelu]\nmodel: {x: ", "[", 30, "");
  char *tail = repeat_text(ok_deep, "]", 30, "}\n");
  spec_errors e = {0, ""};
  pt_spec s;
  CHECK_INT(load_text(tail, NULL, 0, &s, &e), 0);
  if (!e.failed) spec_free(&s);
  free(ok_deep);
  free(tail);
  /* root, the sequence, then items at column 10 + 2j: node 100001 is item 99998 */
  char *wide = repeat_text("layers: [", "1,", SPEC_MAX_NODES + 1, "]\n");
  expect_text_error(__LINE__, wide, "1:200006", "more than 100000 values in the spec");
  char *long_scalar = repeat_text("layers: [", "a", SPEC_MAX_SCALAR + 1, "]\n");
  expect_text_error(__LINE__, long_scalar, "1:10", "at most 4096 are allowed");
  char *long_name = repeat_text("layers: [", "a", SPEC_NAME_MAX, "]\n");
  expect_text_error(__LINE__, long_name, "1:10", "is longer than 63 characters");
  expect_text_error(__LINE__, repeat_text("x: &a 1\ny: ", "*a", 1, "\n"), "1:4",
                    "anchors and aliases are not supported");
  expect_text_error(__LINE__, repeat_text("layers: [gelu]\ntrain: {steps: ", "9", 30, "}\n"),
                    "2:16", "integer out of range");
}

/* Many keys in one map exercise the duplicate-key index past its first growth. */
static void test_many_keys(void) {
  char *keys = malloc(64 * 50), *p = keys;
  p += sprintf(p, "layers: [gelu]\nmodel:\n");
  for (int i = 0; i < 40; i++) p += sprintf(p, "  k%d: %d\n", i, i);
  sprintf(p, "  k7: 2\n");
  expect_text_error(__LINE__, keys, "43:3", "duplicate key 'k7' (first given at line 10)");
}

/* --- Accessors ------------------------------------------------------------------------------ */

static spec_node *parse(const char *text, spec_errors *e) {
  return spec_tree_parse(text, strlen(text), "acc.yaml", e);
}

static void test_access_bool(void) {
  spec_errors e = {0, ""};
  spec_node *r = parse("a: yes\nb: Off\nc: TRUE\nd: maybe\ne: 'true'\n", &e);
  CHECK_INT(spec_get_bool(r, "a", 0, &e), 1);
  CHECK_INT(spec_get_bool(r, "b", 1, &e), 0);
  CHECK_INT(spec_get_bool(r, "c", 0, &e), 1);
  CHECK_INT(spec_get_bool(r, "missing", 1, &e), 1);
  CHECK(!e.failed);
  CHECK_INT(spec_get_bool(r, "d", 1, &e), 1);
  check_message(__LINE__, &e, "acc.yaml", "4:4", "d: expected true or false, got 'maybe'");
  spec_errors e2 = {0, ""};
  spec_get_bool(r, "e", 0, &e2);
  check_message(__LINE__, &e2, "acc.yaml", "5:4", "got the quoted string \"true\"");
  spec_tree_free(r);
}

static void test_access_misc(void) {
  spec_errors e = {0, ""};
  spec_node *r = parse("n: {lr: 2.5e-1, k: -3, s: hello, q: '12', z: ~}\nm: [1, 2]\n", &e);
  spec_node *n = spec_find(r, "n");
  char buf[8];
  CHECK(n && n->used);
  CHECK_NUM(spec_get_num(n, "lr", 1, 0.0, 0.0, 1.0, &e), 0.25);
  CHECK_INT(spec_get_int(n, "k", 1, 0, -5, 5, &e), -3);
  CHECK_STR(spec_get_str(n, "s", 1, "x", buf, sizeof buf, &e), "hello");
  CHECK_STR(spec_get_str(n, "q", 1, "x", buf, sizeof buf, &e), "12");
  CHECK_STR(spec_get_str(n, "z", 0, "dflt", buf, sizeof buf, &e), "dflt");
  CHECK_INT(spec_get_int(n, "z", 0, 42, 0, 100, &e), 42);
  CHECK_INT(spec_expect_map(n, "n", &e), 1);
  CHECK(!e.failed);
  spec_check_unused(n, "n", NULL, &e);
  CHECK(!e.failed);
  CHECK_INT(spec_expect_map(spec_find(r, "m"), "m", &e), 0);
  check_message(__LINE__, &e, "acc.yaml", "2:4", "m: expected a mapping (key: value pairs), "
                "got a sequence");
  /* once an error is recorded every accessor returns its default */
  CHECK_INT(spec_get_int(n, "k", 0, 9, -5, 5, &e), 9);
  spec_errors e2 = {0, ""};
  CHECK_INT(spec_get_int(n, "k", 0, 0, 0, 5, &e2), 0);
  check_message(__LINE__, &e2, "acc.yaml", "1:20", "n.k: expected an integer in [0, 5], got '-3'");
  spec_errors e3 = {0, ""};
  spec_get_str(n, "s", 0, "", buf, 4, &e3);
  check_message(__LINE__, &e3, "acc.yaml", "1:27", "n.s: value is longer than 3 characters");
  spec_errors e4 = {0, ""};
  spec_get_num(n, "missing", 1, 0.0, 0.0, 1.0, &e4);
  check_message(__LINE__, &e4, "acc.yaml", "1:4", "n: missing required key 'missing'");
  spec_tree_free(r);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FIXTURE_DIR (e.g. tests/spec)\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  test_reference();
  test_layer_forms();
  test_defaults();
  test_absolute_data_path();
  test_seq_len_schedule();
  test_override_values();
  test_override_map_value();
  test_enum_names();
  test_override_tree();
  test_hash();
  test_text_errors();
  test_file_errors();
  test_long_argument();
  test_limits();
  test_many_keys();
  test_access_bool();
  test_access_misc();
  printf("test_spec: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
