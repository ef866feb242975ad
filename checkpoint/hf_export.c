/* checkpoint/hf_export.c: a pipetrain model of a convertible shape as a transformers directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

static int layer_is(const pt_model *m, int li, const char *type) {
  return li < m->n_layers && !strcmp(m->spec->layers[li].type, type);
}

static int refuse(const pt_model *m, int li, char *err, size_t errsz, const char *why) {
  if (li < m->n_layers)
    snprintf(err, errsz, "%s: layer %d (%s): %s", m->spec->path, li, m->spec->layers[li].type, why);
  else
    snprintf(err, errsz, "%s: the layers end after layer %d: %s", m->spec->path, li - 1, why);
  return -1;
}

/* A block's resolved settings (layers/settings.h), all blocks alike (the window, which Gemma 2
 * alternates, is read apart: check_blocks). */
typedef struct {
  int64_t heads, kv_heads, ffn;
  double eps, theta;
  pt_rope_scaling rope; /* llama_block's rope_scaling (its pt_rope state) */
  int64_t qkv_bias, head_dim, qk_norm, mlp_bias;
  /* Gemma 2's options: norm_offset, post_norms, mlp_act gelu_tanh, attn_softcap, attn_scale */
  double norm_offset, attn_softcap, attn_scale;
  int64_t post_norms, gelu;
} block_shape;

/* A number setting of L, or def where L's type does not declare it (GPT-2's transformer_block
 * has no window). */
static double setting_or(const pt_layer *L, const char *name, double def) {
  for (const pt_setting_decl *d = L->type->settings; d && d->name; d++)
    if (!strcmp(d->name, name))
      return d->kind == PT_SETTING_NUM ? layer_setting_num(L, name)
                                       : (double)layer_setting_int(L, name);
  return def;
}

/* Whether block li's MLP gates with the tanh GELU (mlp_act: gelu_tanh, read by configure). */
static int64_t block_gelu(const pt_model *m, int li) {
  char act[32];
  spec_errors e = {0};
  spec_get_str(m->spec->layers[li].args, "mlp_act", 0, "silu", act, sizeof act, &e);
  return !strcmp(act, "gelu_tanh");
}

static block_shape read_block(const pt_model *m, int li) {
  const pt_layer *L = &m->layers[li];
  block_shape b;
  memset(&b, 0, sizeof b); /* padding too: blocks are compared with memcmp */
  b.heads = layer_setting_int(L, "heads");
  if (layer_is(m, li, "llama_block")) {
    b.kv_heads = layer_setting_int(L, "kv_heads");
    b.ffn = layer_setting_int(L, "ffn_dim");
    b.eps = layer_setting_num(L, "eps");
    b.theta = layer_setting_num(L, "rope_theta");
    memcpy(&b.rope, &((const pt_rope *)L->state)->scaling, sizeof b.rope);
    b.rope.theta = 0; /* hf_config keeps it in rope_theta */
    b.qkv_bias = layer_setting_bool(L, "qkv_bias");
    b.qk_norm = layer_setting_bool(L, "qk_norm");
    b.mlp_bias = layer_setting_bool(L, "mlp_bias");
    b.head_dim = layer_setting_int(L, "head_dim");
    if (!b.head_dim) b.head_dim = m->spec->dim / b.heads;
    b.norm_offset = layer_setting_num(L, "norm_offset");
    b.post_norms = layer_setting_bool(L, "post_norms");
    b.gelu = block_gelu(m, li);
    b.attn_softcap = layer_setting_num(L, "attn_softcap");
    b.attn_scale = layer_setting_num(L, "attn_scale");
  }
  return b;
}

/* Gemma 2's settings into c: every block's window (the sliding ones alike), the attention's
 * soft-cap and scale; -1 with err unless the model has all of Gemma 2's options or none. */
static int gemma2_from_blocks(const pt_model *m, const block_shape *b, int first, int end,
                              hf_config *c, char *err, size_t errsz) {
  int gemma = b->norm_offset == 1 && b->post_norms && b->gelu;
  for (int li = first; gemma && li < end; li++) { /* another family's window: its own */
    int64_t w = layer_setting_int(&m->layers[li], "window"); /* Gemma 2: llama_block */
    if (w && c->sliding_window && w != c->sliding_window)
      return refuse(m, li, err, errsz, "its window differs from an earlier block's; Gemma 2's "
                    "config has one sliding_window");
    if (w) c->sliding_window = w;
    if (li - first < HF_MAX_GEMMA2_LAYERS) c->sliding[li - first] = w > 0;
  }
  if (!gemma && (b->norm_offset != 0 || b->post_norms || b->gelu || b->attn_softcap ||
                 b->attn_scale))
    return refuse(m, first, err, errsz, "Gemma 2's block options convert only together "
                  "(norm_offset 1, post_norms, mlp_act gelu_tanh: Gemma2ForCausalLM)");
  if (!gemma) return 0;
  if (b->qkv_bias)
    return refuse(m, first, err, errsz, "Gemma 2's attention has no q, k, v biases");
  if (end - first > HF_MAX_GEMMA2_LAYERS)
    return refuse(m, first, err, errsz, "too many blocks for a Gemma 2 config");
  c->gemma2 = 1; /* pick_arch then takes Gemma2ForCausalLM */
  c->attn_softcap = b->attn_softcap;
  c->query_scalar = b->attn_scale > 0 ? 1.0 / (b->attn_scale * b->attn_scale)
                                      : (double)b->head_dim;
  return 0;
}

/* The Llama-family architecture of blocks like b: `arch` if named, else the first that fits. */
static int pick_arch(const pt_model *m, int li, const char *arch, hf_config *c, char *err,
                     size_t errsz) {
  const int window = c->window > 0; /* outside Gemma 2: Mistral's or Phi-3's sliding_window */
  const hf_arch *a = arch ? hf_arch_find(arch)
                          : hf_arch_for_blocks(c->qkv_bias, c->qk_norm, c->mlp_bias, c->gemma2,
                                               window);
  if (arch && !a) {
    snprintf(err, errsz, "--hf-arch %s: unknown; pipe_convert converts %s", arch, hf_arch_list());
    return -1;
  }
  if (a && a->prefix) {
    snprintf(err, errsz, "--hf-arch %s: pipetrain converts only its language model, and writes "
             "that as a text model: leave --hf-arch out (or name Gemma3ForCausalLM)", arch);
    return -1;
  }
  if (a && window && a->window == HF_OPT_NO)
    return refuse(m, li, err, errsz, "its window (sliding attention) exports only as "
                  "MistralForCausalLM or Phi3ForCausalLM; name one with --hf-arch or drop the "
                  "window");
  if (!a || !hf_arch_fits(a, c->qkv_bias, c->qk_norm, c->mlp_bias, c->gemma2, window)) {
    char why[512];
    if (a)
      snprintf(why, sizeof why, "%s cannot hold its blocks (qkv_bias %d, qk_norm %d, mlp_bias %d, "
               "Gemma 2's options %d)", a->architecture, c->qkv_bias, c->qk_norm, c->mlp_bias,
               c->gemma2);
    else
      snprintf(why, sizeof why, "qkv_bias %d, qk_norm %d, mlp_bias %d, Gemma 2's options %d "
               "together fit no transformers architecture: Qwen2ForCausalLM has q/k/v biases, "
               "Qwen3ForCausalLM q/k norms, LlamaForCausalLM MLP biases, Gemma2ForCausalLM "
               "Gemma 2's options, one at a time, and Gemma3ForCausalLM Gemma 2's options with "
               "q/k norms", c->qkv_bias, c->qk_norm, c->mlp_bias, c->gemma2);
    return refuse(m, li, err, errsz, why);
  }
  if (!a->rope_per_type && (c->local_rope_theta != c->rope_theta ||
                            memcmp(&c->local_rope, &c->rope, sizeof c->rope) != 0))
    return refuse(m, li, err, errsz, "its blocks with a window have another rope than those "
                  "without; only Gemma3ForCausalLM has a rope per layer type (with Gemma's "
                  "options and qk_norm): give every block the same rope_theta and rope_scaling");
  c->arch = a;
  return 0;
}

/* The blocks' ropes: one for the blocks with a window, one for those without (Gemma 3 has a
 * rope per layer type; pick_arch refuses two for any other architecture), each alike in its
 * blocks. b->theta and b->rope are cleared, so that blocks compare without them. */
static int rope_of_block(const pt_model *m, int li, block_shape *b, block_shape kind[2],
                         int have[2], char *err, size_t errsz) {
  const int sliding = setting_or(&m->layers[li], "window", 0) > 0;
  if (!have[sliding]) {
    have[sliding] = 1, kind[sliding].theta = b->theta, kind[sliding].rope = b->rope;
  } else if (b->theta != kind[sliding].theta ||
             memcmp(&b->rope, &kind[sliding].rope, sizeof b->rope) != 0) {
    return refuse(m, li, err, errsz, sliding ? "its rope differs from an earlier block's with a "
                  "window; a transformers config has one rope for all sliding layers" :
                  "its rope differs from an earlier block's without a window; a transformers "
                  "config has one rope for all full-attention layers");
  }
  b->theta = 0;
  memset(&b->rope, 0, sizeof b->rope);
  return 0;
}

static int check_blocks(const pt_model *m, int first, int end, hf_config *c, char *err,
                        size_t errsz) {
  block_shape b0 = read_block(m, first), kind[2];
  int have[2] = {0, 0};
  memset(kind, 0, sizeof kind);
  if (rope_of_block(m, first, &b0, kind, have, err, errsz) != 0) return -1;
  for (int li = first + 1; li < end; li++) {
    block_shape b = read_block(m, li);
    if (rope_of_block(m, li, &b, kind, have, err, errsz) != 0) return -1;
    if (memcmp(&b, &b0, sizeof b) != 0)
      return refuse(m, li, err, errsz, "its settings differ from the first block's; a "
                    "transformers config has one set for all blocks");
  }
  const block_shape *full = &kind[!have[0]], *local = &kind[have[1]];
  c->rope_theta = full->theta, c->rope = full->rope;
  c->local_rope_theta = local->theta, c->local_rope = local->rope;
  c->heads = b0.heads, c->kv_heads = b0.kv_heads ? b0.kv_heads : b0.heads, c->ffn = b0.ffn;
  c->eps = b0.eps, c->qkv_bias = (int)b0.qkv_bias;
  c->head_dim = b0.head_dim, c->qk_norm = (int)b0.qk_norm, c->mlp_bias = (int)b0.mlp_bias;
  c->layers = end - first;
  if (gemma2_from_blocks(m, &b0, first, end, c, err, errsz) != 0) return -1;
  if (c->gemma2) return 0; /* its windows alternate: gemma2_from_blocks took them */
  /* Mistral's one window for all blocks; as long as the sequence it masks nothing */
  int64_t w0 = (int64_t)setting_or(&m->layers[first], "window", 0);
  for (int li = first + 1; li < end; li++)
    if ((int64_t)setting_or(&m->layers[li], "window", 0) != w0)
      return refuse(m, li, err, errsz, "its window differs from the first block's; outside "
                    "Gemma 2 a transformers config has one sliding_window for all blocks");
  c->window = w0 < m->spec->seq_len ? w0 : 0;
  return 0;
}

/* Gemma 2's embedding scale, final norm offset and head soft-cap, which only it converts. */
static int check_gemma2_ends(const pt_model *m, int norm, hf_config *c, char *err, size_t errsz) {
  const int gemma = c->gemma2, head = norm + 1;
  if (layer_setting_bool(&m->layers[0], "scale_sqrt_dim") != gemma)
    return refuse(m, 0, err, errsz, gemma ? "Gemma 2 scales the embedding: set scale_sqrt_dim"
                                          : "scale_sqrt_dim converts only as Gemma 2");
  if (layer_is(m, norm, "rmsnorm") &&
      layer_setting_num(&m->layers[norm], "weight_offset") != (gemma ? 1.0 : 0.0))
    return refuse(m, norm, err, errsz, gemma ? "Gemma 2's final norm has weight_offset 1"
                                             : "weight_offset converts only as Gemma 2");
  c->final_softcap = layer_setting_num(&m->layers[head], "softcap");
  if (c->final_softcap > 0 && !gemma)
    return refuse(m, head, err, errsz, "softcap converts only as Gemma 2");
  return 0;
}

int hf_config_from_model(const pt_model *m, hf_config *c, char *err, size_t errsz) {
  return hf_config_from_model_as(m, NULL, c, err, errsz);
}

int hf_config_from_model_as(const pt_model *m, const char *arch, hf_config *c, char *err,
                            size_t errsz) {
  memset(c, 0, sizeof *c);
  const pt_spec *s = m->spec;
  if (!layer_is(m, 0, "embedding"))
    return refuse(m, 0, err, errsz, "expected an embedding first (GPT-2 or Llama layer order)");
  int gpt2 = layer_is(m, 1, "pos_embedding");
  const char *block = gpt2 ? "transformer_block" : "llama_block";
  const char *norm = gpt2 ? "layernorm" : "rmsnorm";
  c->arch = hf_arch_find(gpt2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
  int first = gpt2 ? 2 : 1, li = first;
  while (layer_is(m, li, block)) li++;
  if (li == first) return refuse(m, li, err, errsz, gpt2 ? "expected transformer_block layers" :
                                 "expected llama_block layers (or pos_embedding for GPT-2)");
  if (check_blocks(m, first, li, c, err, errsz) != 0) return -1;
  if (gpt2 && arch && strcmp(arch, "GPT2LMHeadModel"))
    return refuse(m, first, err, errsz, "GPT-2 layers export as GPT2LMHeadModel only");
  if (!gpt2 && pick_arch(m, first, arch, c, err, errsz) != 0) return -1;
  if (!layer_is(m, li, norm)) return refuse(m, li, err, errsz, gpt2 ? "expected layernorm" :
                                            "expected rmsnorm");
  double norm_eps = layer_setting_num(&m->layers[li], "eps");
  if (gpt2 && norm_eps != 1e-5)
    return refuse(m, li, err, errsz, "GPT-2's config has one layer_norm_epsilon: eps must be 1e-5");
  if (!gpt2 && norm_eps != c->eps)
    return refuse(m, li, err, errsz, "Llama's config has one rms_norm_eps: eps must be the blocks'");
  c->eps = norm_eps;
  if (!layer_is(m, li + 1, "lm_head")) return refuse(m, li + 1, err, errsz, "expected lm_head");
  if (check_gemma2_ends(m, li, c, err, errsz) != 0) return -1;
  ++li;
  const char *t0 = s->layers[0].tie, *th = s->layers[li].tie;
  if (th[0] && strcmp(th, t0))
    return refuse(m, li, err, errsz, "its tie is not the embedding's: only a head tied to the "
                  "embedding converts");
  c->tied = th[0] != '\0';
  if (++li != m->n_layers) return refuse(m, li, err, errsz, "nothing may follow lm_head");
  if (s->loss != SPEC_LOSS_CROSS_ENTROPY)
    return refuse(m, li - 1, err, errsz, "the loss must be cross_entropy");
  c->vocab = s->vocab, c->seq_len = s->seq_len, c->dim = s->dim;
  return 0;
}

int hf_check_spec(const pt_spec *spec, char *err, size_t errsz) {
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, spec, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  hf_config c;
  int rc = hf_config_from_model(&m, &c, err, errsz);
  model_free(&m);
  return rc;
}

static int find_pt_tensor(const pt_model *m, const char *name) {
  for (int i = 0; i < m->n_tensors; i++)
    if (!strcmp(m->tensors[i].name, name)) return i;
  return -1;
}

/* The entries of model.safetensors in the table's order; transposed ones in buffers of their own
 * (bufs[k], freed by the caller). */
static int build_entries(const pt_model *m, const hf_config *c, st_entry *e, float **bufs,
                         char (*names)[256], int max, char *err, size_t errsz) {
  int n = 0;
  for (int k = 0; k < c->arch->n_names; k++) {
    const hf_name *nm = &c->arch->names[k];
    int reps = nm->role == HF_ROLE_BLOCK ? (int)c->layers : 1;
    for (int b = 0; b < reps; b++) {
      int li = hf_role_layer(c->arch->family, nm->role, b, (int)c->layers);
      char pt[256];
      snprintf(pt, sizeof pt, "%d.%s", li, nm->pt);
      int ti = find_pt_tensor(m, pt);
      if (ti < 0 && nm->role == HF_ROLE_HEAD && c->tied) continue; /* transformers re-ties it */
      if (ti < 0 && nm->optional) continue;
      if (ti < 0 || n == max)
        return refuse(m, li, err, errsz, "no tensor of the expected name (see docs/checkpoint.md)");
      const pt_tensor *t = &m->tensors[ti];
      const pt_param_desc *d = &m->layers[t->layer].params[t->param];
      const float *src = m->host_params + t->offset;
      snprintf(names[n], 256, nm->hf, b);
      e[n] = (st_entry){.name = names[n], .data = src, .ndim = d->ndim};
      for (int i = 0; i < d->ndim; i++) e[n].shape[i] = d->shape[i];
      for (int f = 1; f < nm->fused; f++) /* the group's next members follow in storage */
        e[n].shape[0] += d[f].shape[0];
      if (nm->transpose) {
        int64_t rows = d->shape[0], cols = d->shape[1];
        float *tr = bufs[n] = pt_calloc((size_t)(rows * cols), sizeof *tr);
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++) tr[j * rows + i] = src[i * cols + j];
        e[n].data = tr, e[n].shape[0] = cols, e[n].shape[1] = rows;
      }
      n++;
    }
  }
  return n;
}

static int write_files(const pt_model *m, const hf_config *c, const char *tmp, char *err,
                       size_t errsz) {
  int max = c->arch->n_names * (int)c->layers + 8;
  st_entry *e = pt_calloc((size_t)max, sizeof *e);
  float **bufs = pt_calloc((size_t)max, sizeof *bufs);
  char(*names)[256] = pt_calloc((size_t)max, sizeof *names);
  int n = build_entries(m, c, e, bufs, names, max, err, errsz);
  char path[4400];
  snprintf(path, sizeof path, "%s/model.safetensors", tmp);
  const char *keys[] = {"format"}, *vals[] = {"pt"}; /* transformers requires format: pt */
  int rc = n < 0 ? -1 : st_write(path, e, n, keys, vals, 1, NULL, err, errsz);
  snprintf(path, sizeof path, "%s/config.json", tmp);
  if (rc == 0) rc = hf_config_write(c, path, err, errsz);
  for (int i = 0; i < max; i++) free(bufs[i]);
  free(bufs), free(e), free(names);
  return rc;
}

/* tmp's files into dir: dir itself when it does not exist, else file by file (each rename
 * atomic), weights before the config, so files of dir's other than these two stay. */
static int move_into(const char *tmp, const char *dir, char *err, size_t errsz) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (rename(tmp, dir) == 0) return 0;
    snprintf(err, errsz, "%s: cannot create: %s", dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, errsz, "%s: exists and is not a directory; give a directory for --to-hf", dir);
    return -1;
  }
  const char *files[] = {"model.safetensors", "config.json"};
  for (int i = 0; i < 2; i++) {
    char from[4400], to[4400];
    snprintf(from, sizeof from, "%s/%s", tmp, files[i]);
    snprintf(to, sizeof to, "%s/%s", dir, files[i]);
    if (rename(from, to) != 0) {
      snprintf(err, errsz, "%s: cannot write: %s", to, strerror(errno));
      return -1;
    }
  }
  /* a shard index there would make transformers look for the old shards first */
  char index[4400];
  snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
  if (access(index, F_OK) == 0) {
    char old[4500];
    snprintf(old, sizeof old, "%s.replaced", index);
    if (rename(index, old) == 0)
      fprintf(stderr, "pipe_convert: moved the old shard index aside to %s\n", old);
  }
  rmdir(tmp);
  return 0;
}

int hf_export(const pt_model *m, const char *dir, char *err, size_t errsz) {
  return hf_export_as(m, NULL, dir, err, errsz);
}

int hf_export_as(const pt_model *m, const char *arch, const char *dir, char *err, size_t errsz) {
  hf_config c;
  if (hf_config_from_model_as(m, arch, &c, err, errsz) != 0) return -1;
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
  if (checkpoint_make_dir(tmp, err, errsz) != 0) return -1;
  int rc = write_files(m, &c, tmp, err, errsz);
  size_t n = strlen(tmp);
  if (rc != 0 && !strncmp(err, tmp, n)) { /* name the user's directory, not our temporary */
    char why[1024];
    snprintf(why, sizeof why, "%s", err + n);
    snprintf(err, errsz, "%s%s (nothing was written to %s; free space or choose another "
             "directory)", dir, why, dir);
  }
  if (rc == 0) rc = move_into(tmp, dir, err, errsz);
  if (rc != 0) { /* what is left in tmp is ours */
    char p[4400];
    snprintf(p, sizeof p, "%s/model.safetensors", tmp), remove(p);
    snprintf(p, sizeof p, "%s/config.json", tmp), remove(p);
    rmdir(tmp);
  }
  return rc;
}

int hf_export_sequential_file(const pt_spec *spec, const char *file, const char *dir, char *err,
                              size_t errsz) {
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, spec, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  model_alloc_on(&m, 0, m.n_layers, device_host());
  st_file f;
  int rc = st_open(&f, file, err, errsz), opened = rc == 0;
  for (int i = 0; rc == 0 && i < m.n_tensors; i++) {
    const pt_tensor *t = &m.tensors[i];
    const pt_param_desc *d = &m.layers[t->layer].params[t->param];
    const st_tensor *st = st_find(&f, t->name);
    if (!st) {
      snprintf(err, errsz, "%s: tensor '%s' is missing", file, t->name);
      rc = -1;
    } else {
      rc = st_read_f32(&f, st, d->ndim, d->shape, m.host_params + t->offset, err, errsz);
    }
  }
  if (opened) st_close(&f);
  if (rc == 0) rc = hf_export(&m, dir, err, errsz);
  model_free(&m);
  return rc;
}
