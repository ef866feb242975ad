/* tests/fuzz/fuzz_checkpoint.c: libFuzzer target for the checkpoint reader
 * (checkpoint/checkpoint_load.c) and the safetensors parser (checkpoint/safetensors.c).
 *
 * On the first input a small valid checkpoint (4 layers with a tie, AdamW state, one stage) is
 * written into a fresh directory under $TMPDIR (or /tmp) and its three files are kept in
 * memory. Input: one selector byte, then the replacement content of one file:
 *   byte % 3 == 0  manifest.json           (the other files stay intact, so their CRCs match)
 *   byte % 3 == 1  model-s000.safetensors
 *   byte % 3 == 2  optim-s000.safetensors
 * The files are written into a scratch copy of the checkpoint and read the ways the programs
 * read them:
 *   - a replaced safetensors file is opened directly (st_open, st_find, st_read_f32 of every
 *     tensor), because checkpoint_load's CRC check would stop most mutations before the parser;
 *     then the manifest is rewritten with that file's real CRC-32 and size, so checkpoint_load
 *     also gets to the parser and to its own name, shape and dtype checks;
 *   - checkpoint_open, the stored spec loaded as pipe_convert loads it, then checkpoint_load
 *     into a model configured from the same spec, with the optimizer (and, for a replaced
 *     manifest, also without it).
 * The contract checked: every failure returns -1 with a message; nothing exits, aborts, reads or
 * writes out of bounds, or leaks. Files are removed at exit (atexit); a crashing run leaves its
 * directory behind (scripts/fuzz.sh points TMPDIR into the build directory).
 *
 * PT_FUZZ_VERBOSE=1 prints every call's result (to see how far an input gets).
 * PT_FUZZ_CKPT_SEEDS=DIR writes the three valid files, each with its selector byte, into DIR as
 * seed inputs (how tests/fuzz/corpus/checkpoint/seed-* were made). Parameters and optimizer
 * state are a fixed pattern rather than the model's random init, so the files, and the CRCs in
 * the manifest seed, are byte-identical whatever compiler or flags built the harness. Changing
 * k_spec_text changes those files: regenerate the seeds then (and drop the corpus's other
 * inputs, which were derived from the old ones).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "spec/spec.h"
#include "checkpoint/checkpoint.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "checkpoint/safetensors.h"
#include "fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small, so inputs stay a few KB and a run is quick, but with what the reader must handle: a
 * tie (lm_head borrows the embedding's weight, stored once), 1-D and 2-D tensors, AdamW state
 * (two tensors per parameter in the optim file). */
static const char k_spec_text[] =
    "model: {vocab: 8, dim: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - linear: {out: 4}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    "train: {micro_batch_size: 1, optimizer: {name: adamw, lr: 1.0e-3}}\n";
static const char k_spec_origin[] = "fuzz_checkpoint.yaml";

enum { FUZZ_MANIFEST, FUZZ_MODEL, FUZZ_OPTIM, FUZZ_N_FILES };
static const char *const k_file_names[FUZZ_N_FILES] = {
    "manifest.json", "model-s000.safetensors", "optim-s000.safetensors"};
static const char *const k_seed_names[FUZZ_N_FILES] = {"seed-manifest", "seed-model",
                                                       "seed-optim"};

typedef struct {
  char root[4096];         /* mkdtemp directory */
  char ckpt[4200];         /* the valid checkpoint as written by the library */
  char run[4200];          /* the scratch copy each input is written into */
  pt_spec spec;
  pt_model model;          /* configured from spec, storage for every layer */
  pt_optimizer opt;
  fuzz_blob orig[FUZZ_N_FILES];
  cJSON *manifest;         /* the valid manifest, for rewriting one file's crc32 and bytes */
  int run_is_orig[FUZZ_N_FILES]; /* run/ holds the valid file: no need to write it again */
} fuzz_state;

static fuzz_state *g_state;

#define T "fuzz_checkpoint"

static void fuzz_ckpt_die(const char *what, const char *detail) { fuzz_die(T, what, detail); }

/* The contract under test, per tensor (not printed even with PT_FUZZ_VERBOSE). */
static void fuzz_ckpt_check_msg(int rc, const char *err, const char *call) {
  if (rc != 0 && rc != -1) fuzz_ckpt_die(call, "returned neither 0 nor -1");
  if (rc == -1 && !err[0]) fuzz_ckpt_die(call, "returned -1 without a message");
}

/* --- The valid checkpoint ------------------------------------------------------------------- */

/* A fixed pattern in [-0.75, 0.75] (exact in float), and a non-negative one for exp_avg_sq. */
static void fuzz_ckpt_fill(float *dst, int64_t n, int non_negative) {
  for (int64_t i = 0; i < n; i++) {
    float v = (float)(i % 13 - 6) * 0.125f;
    dst[i] = non_negative && v < 0 ? -v : v;
  }
}

static void fuzz_ckpt_build_model(fuzz_state *s) {
  spec_errors e = {0, ""};
  spec_set_resolve_data(0);
  if (spec_load_text(k_spec_text, strlen(k_spec_text), k_spec_origin, NULL, 0, &s->spec, &e) != 0 ||
      model_configure(&s->model, &s->spec, &e) != 0)
    fuzz_ckpt_die("the built-in spec does not load", e.msg);
  model_alloc(&s->model, 0, s->model.n_layers);
  optimizer_init(&s->opt, &s->spec.train, s->model.n_floats);
  fuzz_ckpt_fill(s->model.params, s->model.n_floats, 0);
  fuzz_ckpt_fill(s->opt.m, s->model.n_floats, 0);
  fuzz_ckpt_fill(s->opt.v, s->model.n_floats, 1);
  s->opt.t = 7;
}

static void fuzz_ckpt_write_valid(fuzz_state *s) {
  char err[1024] = "";
  ckpt_stage_files files;
  int bounds[2] = {0, s->model.n_layers};
  ckpt_layout lay = {.n_chunks = 1, .stages = 1, .data_parallel = 1, .bounds = bounds};
  pt_spec_source src = {k_spec_text, k_spec_origin, NULL, 0};
  if (mkdir(s->ckpt, 0700) != 0 || mkdir(s->run, 0700) != 0)
    fuzz_ckpt_die("cannot create the checkpoint directories under", s->root);
  if (checkpoint_write_stage(s->ckpt, &s->model, &s->opt, 0, 0, s->model.n_layers, &files, err,
                             sizeof err) != 0 ||
      checkpoint_write_manifest(s->ckpt, &s->model, &src, 7, s->opt.t, &lay, &files, err,
                                sizeof err) != 0)
    fuzz_ckpt_die("cannot write the valid checkpoint", err);
  for (int i = 0; i < FUZZ_N_FILES; i++) {
    char path[8400];
    fuzz_path(T, path, sizeof path, s->ckpt, k_file_names[i]);
    s->orig[i] = fuzz_read_file(T, path);
  }
  char *text = malloc(s->orig[FUZZ_MANIFEST].size + 1);
  memcpy(text, s->orig[FUZZ_MANIFEST].data, s->orig[FUZZ_MANIFEST].size);
  text[s->orig[FUZZ_MANIFEST].size] = '\0';
  s->manifest = cJSON_Parse(text);
  free(text);
  if (!s->manifest) fuzz_ckpt_die("the written manifest is not JSON", s->ckpt);
}

/* Seeds for the corpus: the selector byte, then the valid file. */
static void fuzz_ckpt_dump_seeds(const fuzz_state *s, const char *dir) {
  for (int i = 0; i < FUZZ_N_FILES; i++) {
    char path[8400];
    fuzz_path(T, path, sizeof path, dir, k_seed_names[i]);
    uint8_t *buf = malloc(s->orig[i].size + 1);
    buf[0] = (uint8_t)i;
    memcpy(buf + 1, s->orig[i].data, s->orig[i].size);
    fuzz_write_file(T, path, buf, s->orig[i].size + 1);
    free(buf);
  }
}

static void fuzz_ckpt_cleanup(void) {
  fuzz_state *s = g_state;
  if (!s) return;
  fuzz_remove_dir(s->run);
  fuzz_remove_dir(s->ckpt);
  rmdir(s->root);
  for (int i = 0; i < FUZZ_N_FILES; i++) free(s->orig[i].data);
  cJSON_Delete(s->manifest);
  optimizer_free(&s->opt);
  model_free(&s->model);
  spec_free(&s->spec);
  free(s);
  g_state = NULL;
}

static fuzz_state *fuzz_ckpt_state(void) {
  if (g_state) return g_state;
  fuzz_state *s = calloc(1, sizeof *s);
  fuzz_make_dir(T, "ckpt", s->root, sizeof s->root);
  fuzz_path(T, s->ckpt, sizeof s->ckpt, s->root, "ckpt");
  fuzz_path(T, s->run, sizeof s->run, s->root, "run");
  g_state = s;
  atexit(fuzz_ckpt_cleanup);
  fuzz_ckpt_build_model(s);
  fuzz_ckpt_write_valid(s);
  const char *seeds = getenv("PT_FUZZ_CKPT_SEEDS");
  if (seeds && *seeds) fuzz_ckpt_dump_seeds(s, seeds);
  return s;
}

/* --- Per input ------------------------------------------------------------------------------ */

static void fuzz_ckpt_put(fuzz_state *s, int which, const uint8_t *data, size_t size, int orig) {
  char path[8400];
  fuzz_path(T, path, sizeof path, s->run, k_file_names[which]);
  fuzz_write_file(T, path, data, size);
  s->run_is_orig[which] = orig;
}

/* The manifest, with crc32 and bytes of file `which` set to those of its replacement. */
static void fuzz_ckpt_put_manifest_for(fuzz_state *s, int which, const uint8_t *data, size_t size) {
  uLong crc = crc32(crc32(0L, Z_NULL, 0), data, (uInt)size);
  cJSON *m = cJSON_Duplicate(s->manifest, 1), *it; /* the other file keeps its valid record */
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(m, "files")) {
    cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
    if (!cJSON_IsString(name) || strcmp(name->valuestring, k_file_names[which]) != 0) continue;
    cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(it, "crc32"), (double)crc);
    cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(it, "bytes"), (double)size);
  }
  char *text = cJSON_PrintUnformatted(m);
  cJSON_Delete(m);
  if (!text) fuzz_ckpt_die("cannot print the manifest", NULL);
  fuzz_ckpt_put(s, FUZZ_MANIFEST, (const uint8_t *)text, strlen(text), 0);
  cJSON_free(text);
}

/* Reads one tensor as F32 with its own shape (fails unless F32) and with a wrong shape (always
 * fails). Offsets were validated by st_open: the data must lie inside the file. */
static void fuzz_ckpt_read_tensor(const st_file *f, const st_tensor *t) {
  char err[1024];
  if (t->begin > t->end || t->end > f->file_size - f->data_start || t->ndim > ST_MAX_DIMS)
    fuzz_ckpt_die("st_open accepted a tensor outside its file", f->path);
  size_t bytes = (size_t)(t->end - t->begin);
  float *dst = malloc(bytes ? bytes : 1);
  err[0] = '\0';
  int rc = st_read_f32(f, t, t->ndim, t->shape, dst, err, sizeof err);
  fuzz_ckpt_check_msg(rc, err, "st_read_f32");
  if (rc == 0 && strcmp(t->dtype, "F32") != 0) fuzz_ckpt_die("st_read_f32 read a non-F32 tensor", t->name);
  int64_t wrong = t->numel + 1;
  err[0] = '\0';
  rc = st_read_f32(f, t, 1, &wrong, dst, err, sizeof err);
  fuzz_ckpt_check_msg(rc, err, "st_read_f32 (wrong shape)");
  if (rc == 0 && !(t->ndim == 1 && t->shape[0] == wrong))
    fuzz_ckpt_die("st_read_f32 accepted a wrong shape", t->name);
  free(dst);
}

/* The parser on its own: what pipe_convert and safetensors_tool do with any file. */
static void fuzz_ckpt_read_direct(const fuzz_state *s, int which) {
  char path[8400], err[1024] = "";
  fuzz_path(T, path, sizeof path, s->run, k_file_names[which]);
  st_file f;
  int rc = st_open(&f, path, err, sizeof err);
  fuzz_expect_msg(T, rc, err, "st_open");
  if (rc != 0) return;
  for (int i = 0; i < f.n_tensors; i++) {
    const st_tensor *t = st_find(&f, f.tensors[i].name);
    if (t != &f.tensors[i]) fuzz_ckpt_die("st_find did not find a listed tensor", f.tensors[i].name);
    fuzz_ckpt_read_tensor(&f, t);
  }
  (void)st_meta(&f, "format");
  (void)st_find(&f, "0.weight");
  st_close(&f);
}

/* pipe_convert's path: the spec stored in the manifest, with its --set options. */
static void fuzz_ckpt_load_stored_spec(const pt_checkpoint *c) {
  const char *text = checkpoint_spec_text(c), *over[16];
  if (!text) return;
  int n = checkpoint_spec_overrides(c, over, 16);
  pt_spec spec;
  spec_errors e = {0, ""};
  spec_set_resolve_data(0);
  int rc = spec_load_text(text, strlen(text), checkpoint_spec_origin(c), over, n, &spec, &e);
  fuzz_expect_msg(T, rc, e.msg, "spec_load_text (the manifest's spec)");
  if (rc == 0) spec_free(&spec);
}

/* Loads run/ as --load does (model and optimizer state); for a replaced manifest also as
 * pipe_convert does without --with-optimizer (model only: no optimizer check, no optim file). */
static void fuzz_ckpt_load(fuzz_state *s, int which) {
  char err[1024] = "";
  pt_checkpoint c;
  int rc = checkpoint_open(&c, s->run, err, sizeof err);
  fuzz_expect_msg(T, rc, err, "checkpoint_open");
  if (rc != 0) return;
  fuzz_ckpt_load_stored_spec(&c);
  err[0] = '\0';
  rc = checkpoint_load(&c, &s->model, &s->opt, err, sizeof err);
  fuzz_expect_msg(T, rc, err, "checkpoint_load");
  if (which == FUZZ_MANIFEST) {
    err[0] = '\0';
    rc = checkpoint_load(&c, &s->model, NULL, err, sizeof err);
    fuzz_expect_msg(T, rc, err, "checkpoint_load (model only)");
  }
  checkpoint_close(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  fuzz_state *s = fuzz_ckpt_state();
  int which = data[0] % FUZZ_N_FILES;
  const uint8_t *body = data + 1;
  size_t n = size - 1;
  /* the other safetensors file valid; the manifest is the input or is rewritten below */
  for (int i = FUZZ_MODEL; i < FUZZ_N_FILES; i++)
    if (i != which && !s->run_is_orig[i]) fuzz_ckpt_put(s, i, s->orig[i].data, s->orig[i].size, 1);
  fuzz_ckpt_put(s, which, body, n, 0);
  if (which != FUZZ_MANIFEST) {
    fuzz_ckpt_read_direct(s, which);
    fuzz_ckpt_put_manifest_for(s, which, body, n);
  }
  fuzz_ckpt_load(s, which);
  return 0;
}
