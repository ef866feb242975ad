/* tests/fuzz/fuzz_hf.c: libFuzzer target for the Hugging Face readers (checkpoint/hf_config.c,
 * checkpoint/hf_import.c): config.json and model.safetensors.index.json, what
 * `pipe_convert --from-hf DIR` reads from a directory it does not control.
 *
 * Input: one selector byte, then a file's content:
 *   byte % 2 == 0  config.json of a directory without weights, read with seq_len 0 (the
 *                  config's default) or 16 (byte & 2); then what pipe_convert does with an
 *                  accepted config: the spec text, the spec loaded, the model configured (not
 *                  allocated), the weights checked (they are missing: a message);
 *   byte % 2 == 1  model.safetensors.index.json beside a valid config.json and one valid shard
 *                  (a 2-block Llama with GQA written by hf_export at the first input): the
 *                  weights checked, and when they pass, imported into an allocated model.
 * The contract checked: every call returns 0, or -1 with a message; nothing exits, touches
 * memory it does not own or leaks. An accepted config must also make a spec that loads, and a
 * model whose own config (hf_config_from_model, what --to-hf writes) has the same shape.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/hf.h"
#include "fuzz_files.h"
#include "model/model.h"
#include "spec/spec.h"

#define T "fuzz_hf"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small, so an import runs in microseconds, with what the index must map: GQA (k, v narrower
 * than q), an untied head, two blocks. */
static const char k_config[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 16,"
    " \"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"max_position_embeddings\": 16,"
    " \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false}";
static const char k_shard[] = "model-00001-of-00001.safetensors";

typedef struct {
  char root[4096], config_dir[4200], index_dir[4200], index[4400];
  pt_spec spec; /* the valid model's, for imports */
  pt_model model;
  hf_config config;
} fuzz_hf_state;

static fuzz_hf_state *g_state;

/* hf_config_read, then the spec and model pipe_convert makes of it; the model is left
 * configured (and spec loaded) only when 0 is returned. */
static int fuzz_hf_open(const char *dir, int64_t seq_len, hf_config *c, pt_spec *spec,
                        pt_model *m) {
  char err[1024] = "";
  int rc = hf_config_read(dir, seq_len, c, err, sizeof err);
  fuzz_expect_msg(T, rc, err, "hf_config_read");
  if (rc != 0) return -1;
  char *text = hf_spec_text(c, dir);
  spec_errors e = {0, ""};
  spec_set_resolve_data(0);
  rc = spec_load_text(text, strlen(text), "fuzz_hf.yaml", NULL, 0, spec, &e);
  free(text);
  fuzz_expect_msg(T, rc, e.msg, "spec_load_text (the spec of an accepted config)");
  if (rc != 0) return -1;
  rc = model_configure(m, spec, &e);
  fuzz_expect_msg(T, rc, e.msg, "model_configure");
  if (rc != 0) spec_free(spec);
  return rc;
}

static void fuzz_hf_cleanup(void) {
  fuzz_hf_state *s = g_state;
  if (!s) return;
  fuzz_remove_dir(s->config_dir);
  fuzz_remove_dir(s->index_dir);
  rmdir(s->root);
  model_free(&s->model);
  spec_free(&s->spec);
  free(s);
  g_state = NULL;
}

/* The valid directory: config.json and the model's weights in k_shard, made by hf_export. */
static void fuzz_hf_write_valid(fuzz_hf_state *s) {
  char path[4400], from[4400], err[1024] = "";
  fuzz_path(T, path, sizeof path, s->index_dir, "config.json");
  fuzz_write_file(T, path, k_config, strlen(k_config));
  if (fuzz_hf_open(s->index_dir, 0, &s->config, &s->spec, &s->model) != 0)
    fuzz_die(T, "the built-in config does not load", NULL);
  model_alloc(&s->model, 0, s->model.n_layers);
  for (int64_t i = 0; i < s->model.n_floats; i++) s->model.params[i] = (float)(i % 13 - 6) * 0.125f;
  char out[4400];
  fuzz_path(T, out, sizeof out, s->root, "export");
  if (hf_export(&s->model, out, err, sizeof err) != 0) fuzz_die(T, "hf_export failed", err);
  fuzz_path(T, from, sizeof from, out, "model.safetensors");
  fuzz_path(T, path, sizeof path, s->index_dir, k_shard);
  if (rename(from, path) != 0) fuzz_die(T, "cannot move the shard into", s->index_dir);
  fuzz_remove_dir(out);
}

static fuzz_hf_state *fuzz_hf_state_get(void) {
  if (g_state) return g_state;
  fuzz_hf_state *s = calloc(1, sizeof *s);
  fuzz_make_dir(T, "hf", s->root, sizeof s->root);
  fuzz_path(T, s->config_dir, sizeof s->config_dir, s->root, "config");
  fuzz_path(T, s->index_dir, sizeof s->index_dir, s->root, "index");
  if (mkdir(s->config_dir, 0700) != 0 || mkdir(s->index_dir, 0700) != 0)
    fuzz_die(T, "cannot create directories under", s->root);
  fuzz_path(T, s->index, sizeof s->index, s->index_dir, "model.safetensors.index.json");
  g_state = s;
  atexit(fuzz_hf_cleanup);
  fuzz_hf_write_valid(s);
  return s;
}

/* --to-hf's config of the model an accepted config made: the same shape. */
static void fuzz_hf_check_shape(const hf_config *c, const pt_model *m) {
  hf_config back;
  char err[1024] = "";
  if (hf_config_from_model(m, &back, err, sizeof err) != 0)
    fuzz_die(T, "the model of an accepted config does not convert back", err);
  if (back.vocab != c->vocab || back.dim != c->dim || back.layers != c->layers ||
      back.heads != c->heads || back.tied != c->tied)
    fuzz_die(T, "the model of an accepted config converts back to another shape", NULL);
}

static void fuzz_hf_config(fuzz_hf_state *s, const uint8_t *body, size_t n, int64_t seq_len) {
  char path[4400], err[1024] = "";
  fuzz_path(T, path, sizeof path, s->config_dir, "config.json");
  fuzz_write_file(T, path, body, n);
  hf_config c;
  pt_spec spec;
  pt_model m;
  if (fuzz_hf_open(s->config_dir, seq_len, &c, &spec, &m) != 0) return;
  fuzz_hf_check_shape(&c, &m);
  int rc = hf_check_weights(s->config_dir, &c, &m, err, sizeof err);
  if (rc == 0) fuzz_die(T, "hf_check_weights passed a directory without weights", s->config_dir);
  fuzz_expect_msg(T, rc, err, "hf_check_weights (no weights)");
  model_free(&m);
  spec_free(&spec);
}

static void fuzz_hf_index(fuzz_hf_state *s, const uint8_t *body, size_t n) {
  char err[1024] = "";
  fuzz_write_file(T, s->index, body, n);
  int rc = hf_check_weights(s->index_dir, &s->config, &s->model, err, sizeof err);
  fuzz_expect_msg(T, rc, err, "hf_check_weights");
  if (rc != 0) return;
  err[0] = '\0';
  rc = hf_import_weights(s->index_dir, &s->config, &s->model, err, sizeof err);
  if (rc != 0) fuzz_die(T, "hf_import_weights failed after hf_check_weights passed", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  fuzz_hf_state *s = fuzz_hf_state_get();
  if (data[0] % 2 == 0)
    fuzz_hf_config(s, data + 1, size - 1, data[0] & 2 ? 16 : 0);
  else
    fuzz_hf_index(s, data + 1, size - 1);
  return 0;
}
