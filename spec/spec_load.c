/* spec/spec_load.c: spec tree -> pt_spec (typed settings and the expanded layer list).
 *
 * Every section is read with the spec_get_* accessors, so each bad value is reported at its
 * own file:line:col (or --set argument); unknown keys are reported after a section is read.
 * The "model" map is left unchecked on purpose: layer types read their own keys from it and the
 * model builder checks for leftovers once all of them have.
 */
#define _POSIX_C_SOURCE 200809L
#include "spec/spec.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

/* Shared by spec/spec_*.c only; spec.h is the public contract and stays free of them. */
spec_node *spec_node_new(spec_kind kind, const char *own_origin);
void spec_node_push(spec_node *parent, spec_node *child);
const char *spec_node_path(const spec_node *n, char *buf, size_t size);
void spec_fail_expected(spec_errors *e, spec_node *n, const char *want);
void spec_load_seq_schedule(pt_spec *s, spec_node *train, spec_errors *e); /* spec_seq_schedule.c */

#define SPEC_PATH_MAX 256

/* --- Helpers -------------------------------------------------------------------------------- */

/* A section is a mapping or absent (missing or null): NULL then, and every getter defaults. */
static spec_node *spec_section(spec_node *map, const char *key, const char *what,
                               spec_errors *e) {
  spec_node *n = spec_find(map, key);
  return spec_expect_map(n, what, e) ? n : NULL;
}

/* A setting from a fixed set of names, as the index of its enum; absent or null: def. */
static int spec_get_enum(spec_node *map, const char *key, int def, const char *const *names,
                         spec_errors *e) {
  spec_node *n = spec_find(map, key);
  if (e->failed || !n || spec_node_is_null(n)) return def;
  int i = spec_node_choice(n, names, e);
  return i < 0 ? def : i;
}

/* Numbers with an open end ("> 0", "[0, 1)"), which spec_node_num's closed ranges cannot say;
 * want is the whole expectation for the message. */
static double spec_node_num_open(spec_node *n, double lo, double hi, int lo_open, int hi_open,
                                 const char *want, spec_errors *e) {
  spec_errors probe = {0, ""};
  double v = spec_node_num(n, lo, hi, &probe);
  if (!probe.failed && !(lo_open && v <= lo) && !(hi_open && v >= hi)) return v;
  spec_fail_expected(e, n, want);
  return lo;
}

static double spec_get_num_open(spec_node *map, const char *key, double def, double lo,
                                double hi, int lo_open, int hi_open, const char *want,
                                spec_errors *e) {
  spec_node *n = spec_find(map, key);
  if (e->failed || !n || spec_node_is_null(n)) return def;
  double v = spec_node_num_open(n, lo, hi, lo_open, hi_open, want, e);
  return e->failed ? def : v;
}

static int spec_present(spec_node *map, const char *key) {
  spec_node *n = spec_find(map, key);
  return n && !spec_node_is_null(n);
}

/* --- model ---------------------------------------------------------------------------------- */

static void spec_load_model(pt_spec *s, spec_errors *e) {
  spec_node *m = spec_section(s->root, "model", "model", e);
  s->model = m;
  s->vocab = spec_get_int(m, "vocab", 0, 0, 1, INT32_MAX, e);
  s->seq_len = spec_get_int(m, "seq_len", 0, 0, 1, INT32_MAX, e);
  s->dim = spec_get_int(m, "dim", 0, 0, 1, INT32_MAX, e);
  s->heads = spec_get_int(m, "heads", 0, 0, 1, INT32_MAX, e);
  if (!e->failed && s->dim && s->heads && s->dim % s->heads)
    spec_error(e, spec_find(m, "heads"), 0, "model.dim (%lld) is not divisible by model.heads "
               "(%lld); choose heads that divide dim", (long long)s->dim, (long long)s->heads);
}

/* --- layers --------------------------------------------------------------------------------- */

static int spec_valid_chars(const char *s, const char *extra) {
  if (!*s) return 0;
  for (; *s; s++) {
    int ok = (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_';
    if (!ok && !strchr(extra, *s)) return 0;
  }
  return 1;
}

static int spec_check_type_name(spec_node *n, const char *name, int at_key, spec_errors *e) {
  if (strlen(name) >= SPEC_NAME_MAX) {
    spec_error(e, n, at_key, "layer type name '%.40s...' is longer than %d characters",
               name, SPEC_NAME_MAX - 1);
    return 0;
  }
  if (spec_valid_chars(name, "")) return 1;
  spec_error(e, n, at_key, "'%s' is not a layer type name; names use lowercase letters, "
             "digits and '_' (e.g. transformer_block)", name);
  return 0;
}

static void spec_fail_entry(spec_node *entry, spec_errors *e) {
  char path[SPEC_PATH_MAX];
  spec_node_path(entry, path, sizeof path);
  if (entry->kind == SPEC_MAP)
    spec_error(e, entry, 0, "%s: a layer entry has exactly one key, the layer type, with the "
               "arguments inside it (e.g. '- transformer_block: {repeat: 2}'); got %d keys",
               path, entry->n_items);
  else
    spec_fail_expected(e, entry, "a layer type name or 'type: {args}'");
}

/* Rewrites `- gelu` into `- gelu: {}` so every layer has an argument map to read. */
static spec_node *spec_entry_from_name(spec_node *entry, spec_errors *e) {
  if (!spec_check_type_name(entry, entry->value, 0, e)) return NULL;
  spec_node *args = spec_node_new(SPEC_MAP, NULL);
  args->origin = entry->origin;
  args->line = args->key_line = entry->line;
  args->col = args->key_col = entry->col;
  args->key = entry->value;
  args->used = 1;
  entry->value = NULL;
  entry->kind = SPEC_MAP;
  entry->quoted = 0;
  spec_node_push(entry, args);
  return args;
}

/* Returns the entry's argument map, whose key is the layer type; NULL with an error. */
static spec_node *spec_entry_args(spec_node *entry, spec_errors *e) {
  entry->used = 1;
  if (entry->kind == SPEC_SCALAR && !spec_node_is_null(entry))
    return spec_entry_from_name(entry, e);
  if (entry->kind != SPEC_MAP || entry->n_items != 1) {
    spec_fail_entry(entry, e);
    return NULL;
  }
  spec_node *args = entry->items[0];
  args->used = 1;
  if (!spec_check_type_name(args, args->key, 1, e)) return NULL;
  if (spec_node_is_null(args)) { /* `- gelu:` means no arguments */
    free(args->value);
    args->value = NULL;
    args->kind = SPEC_MAP;
  }
  if (args->kind == SPEC_MAP) return args;
  spec_fail_expected(e, args, "a mapping of layer arguments (or nothing)");
  return NULL;
}

static void spec_layers_reserve(pt_spec *s, int *cap, int more) {
  if (s->n_layers + more <= *cap) return;
  int n = *cap ? *cap : 16;
  while (n < s->n_layers + more) n *= 2;
  spec_layer *grown = pt_calloc((size_t)n, sizeof *grown);
  if (s->n_layers) memcpy(grown, s->layers, (size_t)s->n_layers * sizeof *grown);
  free(s->layers);
  s->layers = grown;
  *cap = n;
}

static void spec_read_tie(spec_node *args, int64_t repeat, char *tie, spec_errors *e) {
  spec_get_str(args, "tie", 0, "", tie, SPEC_NAME_MAX, e);
  spec_node *n = spec_find(args, "tie");
  if (e->failed || !n || spec_node_is_null(n)) return;
  if (!spec_valid_chars(tie, "ABCDEFGHIJKLMNOPQRSTUVWXYZ.-"))
    spec_fail_expected(e, n, "a tie key of letters, digits, '_', '.' and '-'");
  else if (repeat > 1) {
    char path[SPEC_PATH_MAX];
    spec_error(e, n, 1, "%s: tie cannot be combined with repeat > 1; tie single layers (e.g. "
               "embedding and lm_head) or drop the repeat", spec_node_path(n, path, sizeof path));
  }
}

static void spec_load_entry(pt_spec *s, spec_node *entry, int *cap, spec_errors *e) {
  spec_node *args = spec_entry_args(entry, e);
  if (!args) return;
  int64_t repeat = spec_get_int(args, "repeat", 0, 1, 1, SPEC_MAX_LAYERS, e);
  char tie[SPEC_NAME_MAX];
  spec_read_tie(args, repeat, tie, e);
  if (e->failed) return;
  if (s->n_layers + repeat > SPEC_MAX_LAYERS) {
    spec_error(e, entry, 0, "the layer list expands to more than %d layers; lower the "
               "repeat counts", SPEC_MAX_LAYERS);
    return;
  }
  spec_layers_reserve(s, cap, (int)repeat);
  for (int64_t r = 0; r < repeat; r++) {
    spec_layer *l = &s->layers[s->n_layers];
    snprintf(l->type, sizeof l->type, "%s", args->key);
    snprintf(l->tie, sizeof l->tie, "%s", tie);
    l->args = args;
    l->entry = entry;
    l->index = s->n_layers++;
  }
}

/* A tie key links layers: one that no other layer carries (a typo, or its partner removed)
 * would tie nothing and train a different model without a word. */
static void spec_check_ties(const pt_spec *s, spec_errors *e) {
  for (int i = 0; i < s->n_layers && !e->failed; i++) {
    const spec_layer *l = &s->layers[i];
    int partners = 0;
    for (int j = 0; j < s->n_layers && l->tie[0]; j++)
      partners += j != i && !strcmp(s->layers[j].tie, l->tie);
    if (!l->tie[0] || partners) continue;
    spec_error(e, spec_find(l->args, "tie"), 0, "layer %d (%s): tie '%s' names no other layer, "
               "so nothing would be tied; give the layer that shares this weight the same key "
               "(e.g. embedding: {tie: %s} and lm_head: {tie: %s}) or remove it", i, l->type,
               l->tie, l->tie, l->tie);
  }
}

static void spec_load_layers(pt_spec *s, spec_errors *e) {
  spec_node *list = spec_find(s->root, "layers");
  if (!list || spec_node_is_null(list)) {
    spec_error(e, list ? list : s->root, 0, "missing required section 'layers'; add the list "
               "of layers, e.g. 'layers: [embedding, transformer_block, lm_head]'");
    return;
  }
  if (list->kind != SPEC_SEQ) {
    spec_fail_expected(e, list, "a sequence of layers ('- type: {args}' lines)");
    return;
  }
  if (!list->n_items) {
    spec_error(e, list, 0, "layers: the list is empty; add at least one layer");
    return;
  }
  int cap = 0;
  for (int i = 0; i < list->n_items && !e->failed; i++)
    spec_load_entry(s, list->items[i], &cap, e);
  spec_check_ties(s, e);
}

/* --- loss, data ----------------------------------------------------------------------------- */

static void spec_load_loss(pt_spec *s, spec_errors *e) {
  s->loss = spec_get_enum(s->root, "loss", SPEC_LOSS_CROSS_ENTROPY, spec_loss_names, e);
}

static int spec_is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* Relative paths (data, schedule files) work from the working directory and from the spec's
 * own directory, so a spec runs both from the repository root and next to its files. */
static int g_resolve_data = 1;

void spec_set_resolve_data(int on) { g_resolve_data = on; }

/* A path that exists must be a regular file: a directory or a device (/dev/zero) would fail
 * later with the system's words (ENODEV, "empty"), a FIFO would block in open(). */
static void spec_check_regular(spec_node *n, const char *what, char *path, spec_errors *e) {
  struct stat st;
  if (!g_resolve_data || stat(path, &st) != 0 || S_ISREG(st.st_mode)) return;
  spec_error(e, n, 0, "%s '%s' is a %s, not a regular file; give the path of the file itself",
             what, path, S_ISDIR(st.st_mode) ? "directory" : S_ISFIFO(st.st_mode) ? "FIFO"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device" : "special file");
  path[0] = '\0';
}

/* Resolves rel, the value of node n, into out (outsz bytes); what names the file in errors
 * ("data file"). out is "" after an error. */
static void spec_resolve_file(const pt_spec *s, spec_node *n, const char *what, const char *rel,
                              char *out, size_t outsz, spec_errors *e) {
  if (rel[0] == '/' || spec_is_file(rel) || !g_resolve_data) {
    snprintf(out, outsz, "%s", rel);
    spec_check_regular(n, what, out, e);
    return;
  }
  const char *slash = strrchr(s->path, '/');
  if (!slash) {
    spec_error(e, n, 0, "%s '%s' not found (looked in ./%s); paths are relative to the "
               "working directory or to the spec file", what, rel, rel);
    out[0] = '\0';
    return;
  }
  int dir_len = (int)(slash - s->path) + (slash == s->path); /* keep "/" for "/spec.yaml" */
  const char *sep = dir_len > 0 && s->path[dir_len - 1] == '/' ? "" : "/";
  int w = snprintf(out, outsz, "%.*s%s%s", dir_len, s->path, sep, rel);
  if (w > 0 && (size_t)w < outsz && spec_is_file(out)) {
    spec_check_regular(n, what, out, e);
    return;
  }
  snprintf(out, outsz, "%s", rel); /* ./rel is there but a directory */
  spec_check_regular(n, what, out, e);
  if (e->failed) return;
  spec_error(e, n, 0, "%s '%s' not found (looked in ./%s and %.*s%s%s); paths are "
             "relative to the working directory or to the spec file", what, rel, rel, dir_len,
             s->path, sep, rel);
  out[0] = '\0';
}

static void spec_load_data_shape(spec_data *d, spec_node *m, spec_errors *e) {
  if (spec_data_is_records(d->format)) {
    d->inputs = (int)spec_get_int(m, "inputs", 1, 0, 1, INT32_MAX, e);
    d->targets = (int)spec_get_int(m, "targets", 1, 0, 1, INT32_MAX, e);
    return;
  }
  static const char *const f32_only[] = {"inputs", "targets", NULL};
  for (int i = 0; f32_only[i]; i++)
    if (spec_present(m, f32_only[i]))
      spec_error(e, spec_find(m, f32_only[i]), 1, "data.%s only applies to format f32 (records "
                 "of floats); remove it or set format: f32", f32_only[i]);
}

/* data.documents: {eos: TOKEN}: token data packed into whole documents (data/data_pack.h). */
static void spec_load_documents(pt_spec *s, spec_node *m, spec_errors *e) {
  static const char *const keys[] = {"eos", NULL};
  spec_node *d = spec_find(m, "documents");
  if (e->failed || !d || spec_node_is_null(d) || !spec_expect_map(d, "data.documents", e)) return;
  if (spec_data_is_records(s->data.format)) {
    spec_error(e, d, 1, "data.documents applies to token data, not format f32; remove it");
    return;
  }
  int64_t vocab = s->vocab > 0 ? s->vocab : INT32_MAX;
  int64_t eos = spec_get_int(d, "eos", 1, 0, 0, INT64_MAX, e);
  if (!e->failed && eos >= vocab)
    spec_error(e, spec_find(d, "eos"), 1, "data.documents.eos %lld is outside the vocabulary "
               "[0, %lld); use a token id below model.vocab", (long long)eos, (long long)vocab);
  spec_check_unused(d, "data.documents", keys, e);
  if (!e->failed) s->data.documents = 1, s->data.doc_eos = eos;
}

/* data.eval: {path, format, every, batches}; the format's family (tokens or f32 records) must be
 * data.format's, whose shape (seq_len, or inputs/targets) it shares. */
static void spec_load_data_eval(pt_spec *s, spec_node *m, spec_errors *e) {
  static const char *const keys[] = {"path", "format", "every", "batches", NULL};
  spec_data *d = &s->data;
  d->eval_format = d->format;
  spec_node *v = spec_section(m, "eval", "data.eval", e);
  if (e->failed || !v) return;
  char rel[sizeof d->eval_path];
  spec_get_str(v, "path", 1, "", rel, sizeof rel, e);
  d->eval_format = spec_get_enum(v, "format", d->format, spec_data_format_names, e);
  d->eval_every = spec_get_int(v, "every", 0, 0, 0, INT64_MAX, e);
  d->eval_batches = spec_get_int(v, "batches", 0, 1, 1, INT32_MAX, e);
  spec_check_unused(v, "data.eval", keys, e);
  if (!e->failed && !*rel) spec_fail_expected(e, spec_find(v, "path"), "a file path");
  if (!e->failed && spec_data_is_records(d->eval_format) != spec_data_is_records(d->format))
    spec_error(e, spec_find(v, "format"), 1, "data.eval.format %s does not match data.format %s "
               "(token data and f32 records do not mix); use the training data's kind",
               spec_data_format_names[d->eval_format], spec_data_format_names[d->format]);
  if (!e->failed)
    spec_resolve_file(s, spec_find(v, "path"), "data.eval file", rel, d->eval_path,
                      sizeof d->eval_path, e);
}

static void spec_load_data(pt_spec *s, spec_errors *e) {
  static const char *const keys[] = {"path", "format", "inputs", "targets", "order", "eval",
                                     "documents", NULL};
  spec_data *d = &s->data;
  d->format = SPEC_DATA_BYTES;
  spec_node *m = spec_section(s->root, "data", "data", e);
  d->node = m;
  if (!m) return;
  char rel[sizeof d->path];
  spec_get_str(m, "path", 1, "", rel, sizeof rel, e);
  d->format = spec_get_enum(m, "format", SPEC_DATA_BYTES, spec_data_format_names, e);
  spec_load_data_shape(d, m, e);
  spec_load_documents(s, m, e);
  d->order = spec_get_enum(m, "order", SPEC_ORDER_SEQUENTIAL, spec_data_order_names, e);
  spec_load_data_eval(s, m, e);
  if (!e->failed && d->documents && d->eval_path[0]) /* eval reads plain windows */
    spec_error(e, spec_find(m, "eval"), 1, "data.eval does not combine with data.documents yet "
               "(held-out data is read in plain windows); remove one of them");
  spec_check_unused(m, "data", keys, e);
  if (!e->failed && !*rel) spec_fail_expected(e, spec_find(m, "path"), "a file path");
  if (!e->failed)
    spec_resolve_file(s, spec_find(m, "path"), "data file", rel, d->path, sizeof d->path, e);
}

/* --- train ---------------------------------------------------------------------------------- */

static void spec_load_betas(spec_train *t, spec_node *opt, spec_errors *e) {
  t->beta1 = 0.9, t->beta2 = 0.999;
  spec_node *b = spec_find(opt, "betas");
  if (e->failed || !b || spec_node_is_null(b)) return;
  if (b->kind != SPEC_SEQ || b->n_items != 2) {
    char path[SPEC_PATH_MAX];
    spec_node_path(b, path, sizeof path);
    if (b->kind == SPEC_SEQ)
      spec_error(e, b, 0, "%s: expected two numbers [beta1, beta2], got %d", path, b->n_items);
    else
      spec_fail_expected(e, b, "two numbers [beta1, beta2]");
    return;
  }
  t->beta1 = spec_node_num_open(b->items[0], 0, 1, 0, 1, "a number in [0, 1)", e);
  t->beta2 = spec_node_num_open(b->items[1], 0, 1, 0, 1, "a number in [0, 1)", e);
}

static void spec_load_optimizer(spec_train *t, spec_node *train, spec_errors *e) {
  static const char *const keys[] = {"name", "lr", "betas", "eps", "weight_decay", "momentum",
                                     NULL};
  spec_node *m = spec_section(train, "optimizer", "train.optimizer", e);
  t->optimizer = spec_get_enum(m, "name", SPEC_OPTIMIZER_ADAMW, spec_optimizer_names, e);
  t->lr = spec_get_num_open(m, "lr", 1e-3, 0, DBL_MAX, 1, 0, "a number > 0", e);
  spec_load_betas(t, m, e);
  t->eps = spec_get_num_open(m, "eps", 1e-8, 0, DBL_MAX, 1, 0, "a number > 0", e);
  t->weight_decay = spec_get_num(m, "weight_decay", 0, 0.0, 0.0, DBL_MAX, e);
  if (!e->failed && spec_present(m, "momentum") && t->optimizer != SPEC_OPTIMIZER_SGD)
    spec_error(e, spec_find(m, "momentum"), 1, "train.optimizer.momentum only applies to "
               "name: sgd; remove it or set name: sgd");
  t->momentum = spec_get_num_open(m, "momentum", 0.0, 0, 1, 0, 1, "a number in [0, 1)", e);
  spec_check_unused(m, "train.optimizer", keys, e);
}

static void spec_load_schedule(spec_train *t, spec_node *train, spec_errors *e) {
  static const char *const keys[] = {"name", "warmup_steps", "min_lr", NULL};
  spec_node *m = spec_section(train, "lr_schedule", "train.lr_schedule", e);
  t->lr_schedule = spec_get_enum(m, "name", SPEC_LR_CONSTANT, spec_lr_schedule_names, e);
  t->warmup_steps = spec_get_int(m, "warmup_steps", 0, 0, 0, INT64_MAX, e);
  t->min_lr = spec_get_num(m, "min_lr", 0, 0.0, 0.0, DBL_MAX, e);
  spec_check_unused(m, "train.lr_schedule", keys, e);
}

/* train.checkpoint: {dir, every, keep}: periodic checkpoints into DIR/step-NNNNNNNN. Without
 * `every`, dir only receives the checkpoint a signal writes; `every: 0` would never save, so it
 * is refused rather than read as "off". */
static void spec_load_checkpoint(spec_train *t, spec_node *train, spec_errors *e) {
  static const char *const keys[] = {"dir", "every", "keep", NULL};
  spec_node *m = spec_find(train, "checkpoint");
  t->ckpt_keep = 3;
  if (!m || spec_node_is_null(m) || !spec_expect_map(m, "train.checkpoint", e)) return;
  spec_get_str(m, "dir", 1, "", t->ckpt_dir, sizeof t->ckpt_dir, e);
  spec_node *every = spec_find(m, "every");
  if (!e->failed && every && every->kind == SPEC_SCALAR && !strcmp(every->value, "0"))
    spec_error(e, every, 0, "train.checkpoint.every: 0 would never save a checkpoint; give a step "
               "count >= 1 (leave `every` out to use dir only for the checkpoint a signal writes)");
  t->ckpt_every = spec_get_int(m, "every", 0, 0, 1, INT64_MAX, e);
  t->ckpt_keep = spec_get_int(m, "keep", 0, 3, 1, 1000000, e);
  spec_check_unused(m, "train.checkpoint", keys, e);
}

static void spec_load_train(pt_spec *s, spec_errors *e) {
  static const char *const keys[] = {"steps", "micro_batch_size", "micro_batches", "optimizer",
                                     "grad_clip", "seed", "activation_checkpoint_interval",
                                     "lr_schedule", "checkpoint", "on_nonfinite", "precision",
                                     "seq_len_schedule", NULL};
  spec_train *t = &s->train;
  spec_node *m = spec_section(s->root, "train", "train", e);
  t->steps = spec_get_int(m, "steps", 0, 100, 0, INT64_MAX, e);
  t->micro_batch_size = spec_get_int(m, "micro_batch_size", 0, 1, 1, INT64_MAX, e);
  t->micro_batches = spec_get_int(m, "micro_batches", 0, 1, 1, INT64_MAX, e);
  spec_load_optimizer(t, m, e);
  t->grad_clip = spec_get_num(m, "grad_clip", 0, 0.0, 0.0, DBL_MAX, e);
  t->seed = (uint64_t)spec_get_int(m, "seed", 0, 1234, 0, INT64_MAX, e);
  t->activation_checkpoint_interval =
      spec_get_int_or_auto(m, "activation_checkpoint_interval", 0, 0, INT64_MAX, e);
  spec_load_schedule(t, m, e);
  spec_load_checkpoint(t, m, e);
  t->on_nonfinite =
      spec_get_enum(m, "on_nonfinite", SPEC_NONFINITE_ABORT, spec_nonfinite_names, e);
  t->precision = spec_get_enum(m, "precision", SPEC_PRECISION_FP32, spec_precision_names, e);
  spec_load_seq_schedule(s, m, e);
  spec_check_unused(m, "train", keys, e);
}

/* --- pipeline, log -------------------------------------------------------------------------- */

/* map[key] unless absent or null: an empty value means "not given", as everywhere else. */
static spec_node *spec_find_value(spec_node *map, const char *key) {
  spec_node *n = spec_find(map, key);
  return n && !spec_node_is_null(n) ? n : NULL;
}

/* pipeline.partition: a method, or type:REGEX (a regex the planner compiles and matches). */
static void spec_load_partition(spec_pipeline *p, spec_node *m, spec_errors *e) {
  const char *type = spec_partition_names[SPEC_PARTITION_TYPE];
  char text[sizeof p->partition_types];
  spec_get_str(m, "partition", 0, spec_partition_names[SPEC_PARTITION_PARAMETERS], text,
               sizeof text, e);
  p->partition = SPEC_PARTITION_PARAMETERS;
  if (e->failed) return;
  if (!strncmp(text, type, strlen(type))) {
    p->partition = SPEC_PARTITION_TYPE;
    snprintf(p->partition_types, sizeof p->partition_types, "%s", text + strlen(type));
    return;
  }
  int i = spec_name_index(spec_partition_names, text);
  if (i >= 0) p->partition = i;
  else
    spec_error(e, spec_find(m, "partition"), 0, "unknown pipeline.partition '%s'; use "
               "parameters, uniform, balanced, type:REGEX, auto, or give pipeline.boundaries", text);
}

/* pipeline.schedule_file replaces pipeline.schedule: naming both is an error. */
static void spec_load_schedule_file(pt_spec *s, spec_node *m, spec_errors *e) {
  spec_pipeline *p = &s->pipeline;
  char rel[sizeof p->schedule_file] = "";
  spec_get_str(m, "schedule_file", 0, "", rel, sizeof rel, e);
  if (e->failed || !*rel) return;
  spec_node *file = spec_find(m, "schedule_file");
  if (spec_present(m, "schedule"))
    spec_error(e, file, 1, "pipeline.schedule_file and pipeline.schedule both given; keep one "
               "(the file replaces the registered schedule; --set pipeline.schedule= drops it)");
  else
    spec_resolve_file(s, file, "schedule file", rel, p->schedule_file, sizeof p->schedule_file, e);
}

static void spec_load_pipeline(pt_spec *s, spec_errors *e) {
  static const char *const keys[] = {"stages",       "data_parallel", "partition",  "schedule",
                                     "boundaries",   "stage_layers",  "max_memory", "devices",
                                     "tie_check_every", "timeout_s", "device", "virtual_stages",
                                     "schedule_file", "shard_optimizer", "offload", NULL};
  spec_pipeline *p = &s->pipeline;
  spec_node *m = spec_section(s->root, "pipeline", "pipeline", e);
  p->node = m;
  p->stages = spec_get_int(m, "stages", 0, 1, 1, INT32_MAX, e);
  p->data_parallel = spec_get_int_or_auto(m, "data_parallel", 1, 1, INT32_MAX, e);
  spec_load_partition(p, m, e);
  spec_get_str(m, "schedule", 0, "1f1b", p->schedule, sizeof p->schedule, e);
  spec_load_schedule_file(s, m, e);
  p->virtual_stages = spec_get_int(m, "virtual_stages", 0, 0, 1, 64, e);
  /* interpreted and validated by the planner (partition/plan.c), which knows the layer count */
  p->boundaries = spec_find_value(m, "boundaries");
  p->stage_layers = spec_find_value(m, "stage_layers");
  p->max_memory = spec_find_value(m, "max_memory");
  p->devices = spec_find_value(m, "devices");
  p->offload = spec_find_value(m, "offload");
  p->tie_check_every = spec_get_int(m, "tie_check_every", 0, 100, 0, INT64_MAX, e);
  p->timeout_s = spec_get_int(m, "timeout_s", 0, 60, 0, 86400, e);
  p->device = spec_get_enum(m, "device", SPEC_DEVICE_AUTO, spec_device_names, e);
  spec_node *shard = spec_find_value(m, "shard_optimizer");
  p->shard_auto = shard && shard->kind == SPEC_SCALAR && !strcmp(shard->value, "auto");
  spec_errors bad = {0}; /* a bool's message would not name auto */
  if (!p->shard_auto) p->shard_optimizer = spec_get_bool(m, "shard_optimizer", 0, &bad);
  if (bad.failed)
    spec_error(e, shard, 0, "pipeline.shard_optimizer: expected true, false or auto, got '%s'",
               shard->kind == SPEC_SCALAR ? shard->value : "a list or mapping");
  spec_check_unused(m, "pipeline", keys, e);
}

static void spec_load_comm(pt_spec *s, spec_errors *e) {
  static const char *const keys[] = {"backend", "dp_reduce", NULL};
  spec_node *m = spec_section(s->root, "comm", "comm", e);
  s->comm_backend = spec_get_enum(m, "backend", SPEC_COMM_AUTO, spec_comm_backend_names, e);
  s->dp_reduce = spec_get_enum(m, "dp_reduce", SPEC_DP_REDUCE_CHAIN, spec_dp_reduce_names, e);
  spec_check_unused(m, "comm", keys, e);
}

static void spec_load_log(pt_spec *s, spec_errors *e) {
  static const char *const keys[] = {"every", NULL};
  spec_node *m = spec_section(s->root, "log", "log", e);
  s->log_every = spec_get_int(m, "every", 0, 1, 1, INT64_MAX, e);
  spec_check_unused(m, "log", keys, e);
}

/* --- Hash ----------------------------------------------------------------------------------- */

static uint64_t spec_fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Canonical form: kind (null folded to one spelling), key, value, item count, items; no
 * positions or origins, so the same settings from a file or from --set hash the same. */
static uint64_t spec_hash_node(uint64_t h, const spec_node *n) {
  unsigned char kind = spec_node_is_null(n) ? 'z' : n->kind == SPEC_MAP ? 'm'
                       : n->kind == SPEC_SEQ ? 's' : n->quoted ? 'q' : 'p';
  h = spec_fnv(h, &kind, 1);
  /* Map items always have a key and sequence items never do: no marker needed. */
  if (n->key) h = spec_fnv(h, n->key, strlen(n->key) + 1);
  if (kind == 'q' || kind == 'p') h = spec_fnv(h, n->value, strlen(n->value) + 1);
  uint32_t count = (uint32_t)n->n_items;
  h = spec_fnv(h, &count, sizeof count);
  for (int i = 0; i < n->n_items; i++) h = spec_hash_node(h, n->items[i]);
  return h;
}

/* --- Entry points --------------------------------------------------------------------------- */

static void spec_interpret(pt_spec *s, spec_errors *e) {
  static const char *const sections[] = {"model", "layers", "loss", "data", "train",
                                         "pipeline", "comm", "log", NULL};
  /* Unknown sections first: a misspelt "layers" would otherwise surface as "missing". */
  for (int i = 0; sections[i]; i++) spec_find(s->root, sections[i]);
  spec_check_unused(s->root, "the spec", sections, e);
  spec_load_model(s, e);
  spec_load_layers(s, e);
  spec_load_loss(s, e);
  spec_load_data(s, e);
  spec_load_train(s, e);
  spec_load_pipeline(s, e);
  spec_load_comm(s, e);
  spec_load_log(s, e);
}

static int spec_load_root(spec_node *root, const char *origin, const char *const *overrides,
                          int n_overrides, pt_spec *out, spec_errors *e) {
  if (!root) return -1;
  out->root = root;
  size_t len = strlen(origin);
  if (len >= sizeof out->path)
    spec_error(e, root, 0, "the spec path is longer than %zu characters", sizeof out->path - 1);
  else
    memcpy(out->path, origin, len + 1);
  for (int i = 0; i < n_overrides && !e->failed; i++)
    spec_tree_override(root, overrides[i], e);
  if (!e->failed) out->hash = spec_hash_node(1469598103934665603ull, root);
  if (!e->failed) spec_interpret(out, e);
  if (!e->failed) return 0;
  spec_free(out);
  return -1;
}

int spec_load(const char *path, const char *const *overrides, int n_overrides, pt_spec *out,
              spec_errors *e) {
  memset(out, 0, sizeof *out);
  if (e->failed) return -1;
  spec_node *root = spec_tree_parse_file(path, e);
  return spec_load_root(root, path, overrides, n_overrides, out, e);
}

int spec_load_text(const char *text, size_t len, const char *origin,
                   const char *const *overrides, int n_overrides, pt_spec *out, spec_errors *e) {
  memset(out, 0, sizeof *out);
  if (e->failed) return -1;
  if (!origin) origin = "spec";
  spec_node *root = spec_tree_parse(text, len, origin, e);
  return spec_load_root(root, origin, overrides, n_overrides, out, e);
}

void spec_free(pt_spec *s) {
  if (!s) return;
  spec_tree_free(s->root);
  free(s->layers);
  memset(s, 0, sizeof *s);
}
