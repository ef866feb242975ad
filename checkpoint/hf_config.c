/* checkpoint/hf_config.c: config.json in (with everything pipetrain cannot represent refused,
 * naming the key) and out, and the spec of a converted model. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/hf.h"
#include "core/error.h"
#include "spec/spec.h"

#define LLAMA_SEQ_CAP 2048 /* default seq_len of an imported Llama-family model */

typedef struct {
  const char *path;
  cJSON *root; /* the model's config: the file's object, or its text_config */
  char *err;
  size_t errsz;
  int failed;
  char scope[40]; /* "text_config." in messages where root is that, else "" */
} cfg_reader;

static void cfg_fail(cfg_reader *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cfg_fail(cfg_reader *r, const char *key, const char *fmt, ...) {
  if (r->failed) return;
  r->failed = 1;
  int n = snprintf(r->err, r->errsz, "%s: %s%s: ", r->path, r->scope, key);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < r->errsz) vsnprintf(r->err + n, r->errsz - (size_t)n, fmt, ap);
  va_end(ap);
}

static const cJSON *cfg_item(const cfg_reader *r, const char *key) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(r->root, key);
  return it && !cJSON_IsNull(it) ? it : NULL;
}

/* An integer in [lo, hi]; def when absent or null (required: an error then). */
static int64_t cfg_int(cfg_reader *r, const char *key, int required, int64_t def, int64_t lo,
                       int64_t hi) {
  const cJSON *it = cfg_item(r, key);
  if (!it) {
    if (required) cfg_fail(r, key, "missing; a %s config needs it", "model");
    return def;
  }
  double v = it->valuedouble;
  if (!cJSON_IsNumber(it) || v != floor(v) || v < (double)lo || v > (double)hi) {
    cfg_fail(r, key, "expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    return def;
  }
  return (int64_t)v;
}

static double cfg_num(cfg_reader *r, const char *key, double def) {
  const cJSON *it = cfg_item(r, key);
  if (!it) return def;
  if (!cJSON_IsNumber(it) || !(it->valuedouble > 0) || !isfinite(it->valuedouble)) {
    cfg_fail(r, key, "%g: expected a positive number", cJSON_IsNumber(it) ? it->valuedouble : NAN);
    return def;
  }
  return it->valuedouble;
}

static int cfg_bool(cfg_reader *r, const char *key, int def) {
  const cJSON *it = cfg_item(r, key);
  if (!it) return def;
  if (!cJSON_IsBool(it)) cfg_fail(r, key, "expected true or false");
  return cJSON_IsTrue(it);
}

static const char *cfg_str(cfg_reader *r, const char *key, const char *def) {
  const cJSON *it = cfg_item(r, key);
  if (!it) return def;
  if (!cJSON_IsString(it)) cfg_fail(r, key, "expected a string");
  return cJSON_IsString(it) ? it->valuestring : def;
}

/* A setting that must have the value pipetrain's layer computes with. */
static void cfg_require_bool(cfg_reader *r, const char *key, int def, int want, const char *why) {
  if (cfg_bool(r, key, def) != want) cfg_fail(r, key, "%s is not supported: %s", want ? "false" : "true", why);
}

static void read_gpt2(cfg_reader *r, hf_config *c, int64_t seq_len) {
  c->vocab = cfg_int(r, "vocab_size", 1, 0, 1, INT32_MAX);
  int64_t n_pos = cfg_int(r, "n_positions", 1, 0, 1, INT32_MAX);
  c->dim = cfg_int(r, "n_embd", 1, 0, 1, 1 << 20);
  c->layers = cfg_int(r, "n_layer", 1, 0, 1, 100000);
  c->heads = cfg_int(r, "n_head", 1, 0, 1, 1 << 16);
  c->kv_heads = c->heads;
  c->ffn = cfg_int(r, "n_inner", 0, 4 * c->dim, 1, INT32_MAX);
  if (!r->failed && c->ffn != 4 * c->dim)
    cfg_fail(r, "n_inner", "%lld is not supported: transformer_block's MLP is 4 * n_embd = %lld",
             (long long)c->ffn, (long long)(4 * c->dim));
  if (!r->failed && c->dim % c->heads != 0)
    cfg_fail(r, "n_head", "%lld does not divide n_embd %lld", (long long)c->heads, (long long)c->dim);
  const char *act = cfg_str(r, "activation_function", "gelu_new");
  if (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
    cfg_fail(r, "activation_function", "'%s' is not supported: transformer_block uses the tanh "
             "GELU (gelu_new)", act);
  c->eps = cfg_num(r, "layer_norm_epsilon", 1e-5);
  if (!r->failed && c->eps != 1e-5)
    cfg_fail(r, "layer_norm_epsilon", "%g is not supported: transformer_block's LayerNorm uses "
             "1e-05", c->eps);
  cfg_require_bool(r, "scale_attn_weights", 1, 1, "attention is scaled by 1/sqrt(head_dim)");
  cfg_require_bool(r, "scale_attn_by_inverse_layer_idx", 0, 0, "no per-layer attention scale");
  cfg_require_bool(r, "add_cross_attention", 0, 0, "decoder-only blocks have no cross-attention");
  c->tied = cfg_bool(r, "tie_word_embeddings", 1);
  c->seq_len = seq_len ? seq_len : n_pos;
  if (!r->failed && c->seq_len != n_pos)
    cfg_fail(r, "n_positions", "%lld, but the spec's seq_len is %lld: pos_embedding holds exactly "
             "seq_len positions", (long long)n_pos, (long long)c->seq_len);
}

/* A config value as an error line shows it: 'text', a number, true/false, or its JSON type. */
static const char *cfg_value_text(const cJSON *it, char *buf, size_t n) {
  if (cJSON_IsString(it)) snprintf(buf, n, "'%s'", it->valuestring);
  else if (cJSON_IsNumber(it)) snprintf(buf, n, "%g", it->valuedouble);
  else if (cJSON_IsBool(it)) snprintf(buf, n, "%s", cJSON_IsTrue(it) ? "true" : "false");
  else snprintf(buf, n, "(%s)", cJSON_IsNull(it) ? "null" : cJSON_IsArray(it) ? "a list"
                                : cJSON_IsObject(it) ? "an object" : "a value");
  return buf;
}

/* One rope_scaling / rope_parameters entry into c->rope: 1 if the key is one llama_block
 * represents (its value checked), 0 if not. */
static int read_rope_key(cfg_reader *r, const char *key, const cJSON *it, hf_config *c) {
  const char *k = it->string;
  int num = cJSON_IsNumber(it) && it->valuedouble > 0 && isfinite(it->valuedouble);
  if (!strcmp(k, "rope_type") || !strcmp(k, "type")) {
    int t = cJSON_IsString(it) ? spec_name_index(pt_rope_type_names, it->valuestring) : -1;
    char v[160];
    if (t < 0)
      cfg_fail(r, key, "%s %s is not supported: llama_block implements the rope types "
               "default, linear, llama3 and yarn", k, cfg_value_text(it, v, sizeof v));
    else
      c->rope.type = (pt_rope_type)t;
    return 1;
  }
  if (!strcmp(k, "truncate") && cJSON_IsBool(it)) {
    c->rope.truncate = cJSON_IsTrue(it);
    return 1;
  }
  /* null: transformers' default (beta_fast 32, beta_slow 1, yarn's attention factor) */
  if (cJSON_IsNull(it) && (!strcmp(k, "beta_fast") || !strcmp(k, "beta_slow") ||
                           !strcmp(k, "attention_factor")))
    return 1;
  if (!num) return 0;
  double v = it->valuedouble;
  if (!strcmp(k, "rope_theta")) c->rope_theta = v;
  else if (!strcmp(k, "factor")) c->rope.factor = v;
  else if (!strcmp(k, "low_freq_factor")) c->rope.low_freq_factor = v;
  else if (!strcmp(k, "high_freq_factor")) c->rope.high_freq_factor = v;
  else if (!strcmp(k, "original_max_position_embeddings") && v == floor(v) && v <= INT32_MAX)
    c->rope.original_max_position_embeddings = (int64_t)v;
  else if (!strcmp(k, "beta_fast")) c->rope.beta_fast = v;
  else if (!strcmp(k, "beta_slow")) c->rope.beta_slow = v;
  else if (!strcmp(k, "attention_factor")) c->rope.attention_factor = v;
  else return 0;
  return 1;
}

/* What each rope type needs that the config left out: transformers' defaults, or a refusal. */
static void finish_rope(cfg_reader *r, const char *key, hf_config *c, int64_t max_pos) {
  pt_rope_scaling *p = &c->rope;
  if (p->type == PT_ROPE_DEFAULT) {
    memset(p, 0, sizeof *p);
    return;
  }
  if (p->type != PT_ROPE_YARN) p->truncate = 0;
  if ((p->type == PT_ROPE_LLAMA3 || p->type == PT_ROPE_YARN) &&
      !p->original_max_position_embeddings)
    p->original_max_position_embeddings = max_pos;
  if (p->type == PT_ROPE_YARN) {
    if (!p->factor) p->factor = (double)max_pos / (double)p->original_max_position_embeddings;
    if (!p->beta_fast) p->beta_fast = 32;
    if (!p->beta_slow) p->beta_slow = 1;
  }
  const char *missing = !p->factor ? "factor"
                        : p->type == PT_ROPE_LLAMA3 && !p->low_freq_factor ? "low_freq_factor"
                        : p->type == PT_ROPE_LLAMA3 && !p->high_freq_factor ? "high_freq_factor"
                                                                             : NULL;
  if (missing)
    cfg_fail(r, key, "rope_type '%s' needs %s", pt_rope_type_names[p->type], missing);
  else if (p->type == PT_ROPE_LLAMA3 && !(p->high_freq_factor > p->low_freq_factor))
    cfg_fail(r, key, "high_freq_factor %g must exceed low_freq_factor %g", p->high_freq_factor,
             p->low_freq_factor);
}

/* RoPE: rope_theta and rope_scaling (transformers 4), or rope_parameters (5): the default type
 * or llama3, linear, yarn with the parameters llama_block's rope_scaling takes
 * (layers/rope_freqs.h); any other key is refused, naming it. */
/* One rope object's entries (key names it in messages) into c->rope and c->rope_theta. */
static void read_rope_object(cfg_reader *r, const char *key, const cJSON *p, hf_config *c) {
  const cJSON *it;
  if (!cJSON_IsObject(p)) {
    cfg_fail(r, key, "expected an object or null");
    return;
  }
  cJSON_ArrayForEach(it, p) {
    if (!strcmp(it->string, "rope_theta") && !(cJSON_IsNumber(it) && it->valuedouble > 0 &&
                                               isfinite(it->valuedouble))) {
      cfg_fail(r, key, "rope_theta %g: expected a positive number (RoPE's base, e.g. 10000)",
               cJSON_IsNumber(it) ? it->valuedouble : NAN);
      return;
    }
    if (!strcmp(it->string, "partial_rotary_factor")) { /* Phi-3's, in transformers 5 */
      if (cJSON_IsNumber(it) && it->valuedouble == 1.0) continue;
      cfg_fail(r, key, "partial_rotary_factor %g is not supported: llama_block rotates every "
               "pair of a head (1.0)", cJSON_IsNumber(it) ? it->valuedouble : NAN);
      return;
    }
    if (read_rope_key(r, key, it, c)) continue;
    char v[160];
    cfg_fail(r, key, "%s %s is not supported: llama_block's rope_scaling takes rope_type "
             "default, linear, llama3 or yarn with factor, low_freq_factor, high_freq_factor, "
             "original_max_position_embeddings, beta_fast, beta_slow, attention_factor, "
             "truncate", it->string, cfg_value_text(it, v, sizeof v));
    return;
  }
}

static void rope_reset(hf_config *c) {
  memset(&c->rope, 0, sizeof c->rope);
  c->rope.truncate = 1;
}

static void read_rope(cfg_reader *r, hf_config *c, int64_t max_pos) {
  const char *keys[] = {"rope_scaling", "rope_parameters"};
  rope_reset(c);
  const char *seen = NULL;
  for (int k = 0; k < 2 && !r->failed; k++) {
    const cJSON *p = cfg_item(r, keys[k]);
    if (p) seen = keys[k], read_rope_object(r, keys[k], p, c);
  }
  if (!r->failed) finish_rope(r, seen ? seen : "rope_scaling", c, max_pos);
}

/* A rope per layer type (Gemma 3): rope_parameters' sliding_attention and full_attention
 * (transformers 5), else rope_theta and rope_scaling for the full-attention layers and
 * rope_local_base_freq for the sliding ones, unscaled (4); Gemma3TextConfig's bases when
 * absent. The sliding layers' go to local_rope_theta and local_rope. */
static void read_rope_per_type(cfg_reader *r, hf_config *c, int64_t max_pos) {
  static const char *types[2] = {"sliding_attention", "full_attention"};
  static const double bases[2] = {10000.0, 1000000.0};
  const cJSON *p = cfg_item(r, "rope_parameters"), *it;
  const cJSON *sub[2];
  for (int t = 0; t < 2; t++) {
    sub[t] = p ? cJSON_GetObjectItemCaseSensitive(p, types[t]) : NULL;
    if (cJSON_IsNull(sub[t])) sub[t] = NULL; /* null: the type's default rope */
  }
  if (!sub[0] && !sub[1]) {
    c->rope_theta = cfg_num(r, "rope_theta", bases[1]);
    read_rope(r, c, max_pos);
    c->local_rope_theta = cfg_num(r, "rope_local_base_freq", bases[0]);
    memset(&c->local_rope, 0, sizeof c->local_rope);
    return;
  }
  cJSON_ArrayForEach(it, p)
    if (strcmp(it->string, types[0]) && strcmp(it->string, types[1]))
      cfg_fail(r, "rope_parameters", "'%s' is not a layer type: a rope per layer type is given "
               "for sliding_attention and full_attention", it->string);
  char key[64];
  for (int t = 0; t < 2 && !r->failed; t++) {
    snprintf(key, sizeof key, "rope_parameters.%s", types[t]);
    rope_reset(c);
    c->rope_theta = bases[t];
    if (sub[t]) read_rope_object(r, key, sub[t], c);
    if (!r->failed) finish_rope(r, key, c, max_pos);
    if (t == 0) c->local_rope_theta = c->rope_theta, c->local_rope = c->rope;
  }
}

/* A soft-cap: null is none (0), absent is the config class's default. */
static double cfg_cap(cfg_reader *r, const char *key, double def) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(r->root, key);
  return it && cJSON_IsNull(it) ? 0 : cfg_num(r, key, def);
}

/* layer_types into c->sliding. Without them, the config class's default: Gemma2Config's
 * alternate, sliding first; Gemma3TextConfig's make every sliding_window_pattern-th layer full
 * (transformers 5 writes the pattern as _sliding_window_pattern). */
static void read_layer_types(cfg_reader *r, hf_config *c) {
  const cJSON *types = cfg_item(r, "layer_types"), *it;
  if (c->layers > HF_MAX_GEMMA2_LAYERS) {
    cfg_fail(r, "num_hidden_layers", "%lld: at most %d layers of Gemma convert",
             (long long)c->layers, HF_MAX_GEMMA2_LAYERS);
    return;
  }
  int64_t pattern = c->arch->window_pattern;
  if (pattern) {
    const char *key = cfg_item(r, "sliding_window_pattern") ? "sliding_window_pattern"
                                                             : "_sliding_window_pattern";
    pattern = cfg_int(r, key, 0, pattern, 1, INT32_MAX);
  }
  for (int64_t i = 0; i < c->layers; i++)
    c->sliding[i] = pattern ? (i + 1) % pattern != 0 : i % 2 == 0;
  if (!types) return;
  if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->layers) {
    cfg_fail(r, "layer_types", "expected a list of num_hidden_layers (%lld) entries",
             (long long)c->layers);
    return;
  }
  int i = 0;
  cJSON_ArrayForEach(it, types) {
    const char *t = cJSON_IsString(it) ? it->valuestring : "";
    if (strcmp(t, "sliding_attention") && strcmp(t, "full_attention"))
      cfg_fail(r, "layer_types", "entry %d '%s' is not supported: llama_block attends "
               "sliding_attention or full_attention", i, t);
    c->sliding[i++] = !strcmp(t, "sliding_attention");
  }
}

/* Gemma2ForCausalLM's and Gemma 3's keys beyond the Llama family's (Gemma2Config's defaults
 * when absent; Gemma 3's are in its registry entry's defaults, hf_arch.c). */
static void read_gemma2(cfg_reader *r, hf_config *c) {
  c->gemma2 = 1;
  const char *act = cfg_str(r, "hidden_activation", "gelu_pytorch_tanh");
  if (strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_new"))
    cfg_fail(r, "hidden_activation", "'%s' is not supported: llama_block's mlp_act gelu_tanh is "
             "the tanh GELU (gelu_pytorch_tanh)", act);
  c->attn_softcap = cfg_cap(r, "attn_logit_softcapping", 50.0);
  c->final_softcap = cfg_cap(r, "final_logit_softcapping", 30.0);
  c->query_scalar = cfg_num(r, "query_pre_attn_scalar", 256.0);
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(r->root, "sliding_window");
  c->sliding_window = w && cJSON_IsNull(w) ? 0 : cfg_int(r, "sliding_window", 0, 4096, 1, INT32_MAX);
  cfg_require_bool(r, "use_bidirectional_attention", 0, 0, "llama_block's attention is causal");
  read_layer_types(r, c);
  if (!r->failed && c->arch->rope_per_type && !c->sliding_window)
    cfg_fail(r, "sliding_window", "null is not supported with a rope per layer type: pipetrain "
             "tells the sliding_attention layers (and so their rope) by their window");
}

static void read_llama(cfg_reader *r, hf_config *c, int64_t seq_len) {
  c->vocab = cfg_int(r, "vocab_size", 1, 0, 1, INT32_MAX);
  c->dim = cfg_int(r, "hidden_size", 1, 0, 1, 1 << 20);
  c->ffn = cfg_int(r, "intermediate_size", 1, 0, 1, INT32_MAX);
  c->layers = cfg_int(r, "num_hidden_layers", 1, 0, 1, 100000);
  c->heads = cfg_int(r, "num_attention_heads", 1, 0, 1, 1 << 16);
  c->kv_heads = cfg_int(r, "num_key_value_heads", 0, c->heads, 1, 1 << 16);
  int64_t max_pos = cfg_int(r, "max_position_embeddings", 0, LLAMA_SEQ_CAP, 1, INT32_MAX);
  c->eps = cfg_num(r, "rms_norm_eps", 1e-6);
  c->rope_theta = cfg_num(r, "rope_theta", 10000.0);
  const int gemma2 = c->arch->gemma2 == HF_OPT_YES;
  c->tied = cfg_bool(r, "tie_word_embeddings", gemma2); /* Gemma2Config ties by default */
  if (r->failed) return;
  if (c->dim % c->heads != 0) /* the spec's model.heads must divide model.dim */
    cfg_fail(r, "num_attention_heads", "%lld does not divide hidden_size %lld",
             (long long)c->heads, (long long)c->dim);
  if (c->heads % c->kv_heads != 0)
    cfg_fail(r, "num_key_value_heads", "%lld does not divide num_attention_heads %lld",
             (long long)c->kv_heads, (long long)c->heads);
  c->head_dim = cfg_int(r, "head_dim", 0, gemma2 ? 256 : c->dim / c->heads, 2,
                        2 * PT_ROPE_MAX_PAIRS);
  if (!r->failed && c->head_dim % 2 != 0)
    cfg_fail(r, "head_dim", "%lld is not supported: the rotary embedding needs an even head_dim",
             (long long)c->head_dim);
  if (gemma2) read_gemma2(r, c);
  const char *want = gemma2 ? "gelu_pytorch_tanh" : "silu";
  const char *act = cfg_str(r, "hidden_act", want);
  if (strcmp(act, want))
    cfg_fail(r, "hidden_act", "'%s' is not supported: llama_block's MLP is %s", act,
             gemma2 ? "Gemma 2's GeGLU (gelu_pytorch_tanh)" : "SwiGLU (silu)");
  if (c->arch->rope_per_type) {
    read_rope_per_type(r, c, max_pos);
  } else {
    read_rope(r, c, max_pos);
    c->local_rope_theta = c->rope_theta, c->local_rope = c->rope;
  }
  /* Qwen2's attention has q/k/v biases and no o bias whatever the config says; Llama's and
   * Qwen3's attention_bias would add o's too. The architecture's entry says which options its
   * blocks have (hf_arch.c). */
  const hf_arch *a = c->arch;
  c->qkv_bias = a->qkv_bias == HF_OPT_YES;
  c->qk_norm = a->qk_norm == HF_OPT_YES;
  if (!c->qkv_bias)
    cfg_require_bool(r, "attention_bias", 0, 0, "llama_block's projections have no biases "
                     "but q, k, v's (Qwen2ForCausalLM)");
  if (a->mlp_bias == HF_OPT_CONFIG)
    c->mlp_bias = cfg_bool(r, "mlp_bias", 0);
  else
    cfg_require_bool(r, "mlp_bias", 0, 0, "this architecture's MLP has no biases");
  cfg_require_bool(r, "use_sliding_window", 0, 0, "Qwen2's window (layers from "
                   "max_window_layers on) is not mapped to llama_block's window; Mistral's is");
  if (!r->failed && cfg_item(r, "partial_rotary_factor") &&
      cfg_num(r, "partial_rotary_factor", 1.0) != 1.0)
    cfg_fail(r, "partial_rotary_factor", "%g is not supported: llama_block rotates every pair of "
             "a head (1.0)", cfg_num(r, "partial_rotary_factor", 1.0));
  c->seq_len = seq_len ? seq_len : (max_pos < LLAMA_SEQ_CAP ? max_pos : LLAMA_SEQ_CAP);
  /* Mistral's and Phi-3's band mask (transformers' sliding_window: keys after query -
   * window) is llama_block's window; one at least seq_len long masks nothing */
  int64_t window = cfg_int(r, "sliding_window", 0, 0, 0, INT64_MAX / 2);
  if (!r->failed && window > 0 && window < c->seq_len && a->window == HF_OPT_CONFIG)
    c->window = window;
}

static char *read_text(const char *path, char *err, size_t errsz) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, errsz, "%s: is a %s, not a file: --from-hf wants the model directory that holds "
             "config.json as a file", path, S_ISDIR(st.st_mode) ? "directory" : "special file");
    return NULL;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errsz, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = pt_calloc(cap, 1);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char *bigger = pt_calloc(cap * 2, 1);
      memcpy(bigger, buf, n);
      free(buf);
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  buf[n] = '\0';
  return buf;
}

/* The first key that appears twice in one object of o (depth first), or NULL. cJSON keeps both
 * and finds the first, Python's json (and so transformers) keeps the last: such a file means
 * different models to the two, so it is refused rather than read either way. */
static const cJSON *json_duplicate_key(const cJSON *o) {
  const cJSON *it, *later, *d;
  cJSON_ArrayForEach(it, o) {
    if (cJSON_IsObject(o))
      for (later = it->next; later; later = later->next)
        if (!strcmp(it->string, later->string)) return it;
    if ((cJSON_IsObject(it) || cJSON_IsArray(it)) && (d = json_duplicate_key(it))) return d;
  }
  return NULL;
}

/* The architecture's model config: a multimodal model's text_config (the object itself from
 * here on), with the config class's defaults added for the keys it leaves out, as transformers
 * fills them in. */
static void enter_text_config(cfg_reader *r, const hf_arch *a) {
  if (a->text_config) {
    cJSON *text = cJSON_GetObjectItemCaseSensitive(r->root, a->text_config);
    if (!cJSON_IsObject(text)) {
      cfg_fail(r, a->text_config, "missing or not an object: %s keeps its language model's "
               "config there", a->architecture);
      return;
    }
    r->root = text;
    snprintf(r->scope, sizeof r->scope, "%s.", a->text_config);
  }
  cJSON *defaults = a->defaults ? cJSON_Parse(a->defaults) : NULL, *it;
  cJSON_ArrayForEach(it, defaults)
    if (!cJSON_GetObjectItemCaseSensitive(r->root, it->string))
      cJSON_AddItemToObject(r->root, it->string, cJSON_Duplicate(it, 1));
  cJSON_Delete(defaults);
}

int hf_config_read(const char *dir, int64_t seq_len, hf_config *c, char *err, size_t errsz) {
  memset(c, 0, sizeof *c);
  char path[4200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *text = read_text(path, err, errsz);
  if (!text) return -1;
  cfg_reader r = {path, cJSON_Parse(text), err, errsz, 0, {0}};
  free(text);
  if (!r.root || !cJSON_IsObject(r.root)) {
    snprintf(err, errsz, "%s: not a JSON object", path);
    cJSON_Delete(r.root);
    return -1;
  }
  const cJSON *dup = json_duplicate_key(r.root);
  if (dup)
    cfg_fail(&r, dup->string, "the key appears twice in one object (transformers would take the "
             "last, pipetrain the first); keep one");
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(r.root, "architectures");
  const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
  if (r.failed)
    ;
  else if (!cJSON_IsString(a0))
    cfg_fail(&r, "architectures", "missing or not a list of names; expected one of %s",
             hf_arch_list());
  else if (!(c->arch = hf_arch_find(a0->valuestring)))
    cfg_fail(&r, "architectures", "'%s' is not supported; pipe_convert converts %s",
             a0->valuestring, hf_arch_list());
  cJSON *top = r.root;
  if (!r.failed) enter_text_config(&r, c->arch);
  if (!r.failed && c->arch->family == HF_GPT2) read_gpt2(&r, c, seq_len);
  else if (!r.failed) read_llama(&r, c, seq_len);
  cJSON_Delete(top);
  return r.failed ? -1 : 0;
}

/* Shortest text that reads back as the same double. */
static const char *fmt_num(double v, char *buf, size_t n) {
  if (v == floor(v) && fabs(v) < 1e15) {
    snprintf(buf, n, "%.1f", v);
    return buf;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", n - strlen(buf) - 1);
  return buf;
}

/* ", rope_scaling: {...}" of a scaled rope for a llama_block entry ("" for the default). */
static void rope_spec_text(const pt_rope_scaling *p, char *out, size_t n) {
  char a[40], b[40], f[40];
  out[0] = '\0';
  if (p->type == PT_ROPE_DEFAULT) return;
  int k = snprintf(out, n, ", rope_scaling: {type: %s, factor: %s", pt_rope_type_names[p->type],
                   fmt_num(p->factor, f, sizeof f));
  if (p->type == PT_ROPE_LLAMA3)
    k += snprintf(out + k, n - (size_t)k, ", low_freq_factor: %s, high_freq_factor: %s",
                  fmt_num(p->low_freq_factor, a, sizeof a),
                  fmt_num(p->high_freq_factor, b, sizeof b));
  if (p->type != PT_ROPE_LINEAR)
    k += snprintf(out + k, n - (size_t)k, ", original_max_position_embeddings: %lld",
                  (long long)p->original_max_position_embeddings);
  if (p->type == PT_ROPE_YARN) {
    k += snprintf(out + k, n - (size_t)k, ", beta_fast: %s, beta_slow: %s, truncate: %s",
                  fmt_num(p->beta_fast, a, sizeof a), fmt_num(p->beta_slow, b, sizeof b),
                  p->truncate ? "true" : "false");
    if (p->attention_factor > 0)
      k += snprintf(out + k, n - (size_t)k, ", attention_factor: %s",
                    fmt_num(p->attention_factor, f, sizeof f));
  }
  snprintf(out + k, n - (size_t)k, "}");
}

/* Gemma 2's llama_block arguments beyond the Llama family's (none for other models): the block
 * options, the attention's soft-cap and scale where they differ from plain attention. */
static void gemma2_block_text(const hf_config *c, char *out, size_t n) {
  char cap[40], scale[40];
  out[0] = '\0';
  if (!c->gemma2) return;
  int k = snprintf(out, n, ", norm_offset: 1.0, post_norms: true, mlp_act: gelu_tanh");
  if (c->attn_softcap > 0)
    k += snprintf(out + k, n - (size_t)k, ", attn_softcap: %s",
                  fmt_num(c->attn_softcap, cap, sizeof cap));
  if (c->query_scalar != (double)c->head_dim)
    snprintf(out + k, n - (size_t)k, ", attn_scale: %s",
             fmt_num(pow(c->query_scalar, -0.5), scale, sizeof scale));
}

/* Block i's sliding window (llama_block's window), 0 for full attention: Gemma 2's on its
 * sliding layers, Mistral's on every layer. */
static int64_t layer_window(const hf_config *c, int64_t i) {
  if (c->gemma2) return c->sliding[i] ? c->sliding_window : 0;
  return c->window;
}

/* Whether block i computes with the sliding layers' rope (Gemma 3's local one). */
static int layer_local_rope(const hf_config *c, int64_t i) {
  return c->arch->rope_per_type && c->gemma2 && c->sliding[i];
}

/* The llama_block entries: one per run of blocks with the same window and rope (Gemma 2
 * alternates the window, Gemma 3 the rope too). */
static int blocks_text(const hf_config *c, const char *eps, char *s, size_t cap) {
  char rope[400], head_dim[40] = "", gemma[200], theta[40], window[40];
  if (c->head_dim != c->dim / c->heads)
    snprintf(head_dim, sizeof head_dim, ", head_dim: %lld", (long long)c->head_dim);
  gemma2_block_text(c, gemma, sizeof gemma);
  int n = 0;
  for (int64_t i = 0, run; i < c->layers; i += run) {
    for (run = 1; i + run < c->layers && layer_window(c, i + run) == layer_window(c, i) &&
                  layer_local_rope(c, i + run) == layer_local_rope(c, i); run++) {
    }
    const int local = layer_local_rope(c, i);
    rope_spec_text(local ? &c->local_rope : &c->rope, rope, sizeof rope);
    window[0] = '\0';
    if (layer_window(c, i))
      snprintf(window, sizeof window, ", window: %lld", (long long)layer_window(c, i));
    n += snprintf(s + n, cap - (size_t)n, "  - llama_block: {repeat: %lld, kv_heads: %lld, "
                  "ffn_dim: %lld, rope_theta: %s, eps: %s%s%s%s%s%s%s%s}\n",
                  (long long)run, (long long)c->kv_heads, (long long)c->ffn,
                  fmt_num(local ? c->local_rope_theta : c->rope_theta, theta, sizeof theta), eps,
                  c->qkv_bias ? ", qkv_bias: true" : "", c->qk_norm ? ", qk_norm: true" : "",
                  c->mlp_bias ? ", mlp_bias: true" : "", head_dim, rope, gemma, window);
  }
  return n;
}

char *hf_spec_text(const hf_config *c, const char *source) {
  size_t cap = 4096 + 1024 * (size_t)c->layers;
  char *s = pt_calloc(cap, 1), eps[40], softcap[40];
  const char *tie = c->tied ? "tie: wte" : "";
  int n = snprintf(s, cap, "# %s (%s) converted by pipe_convert --from-hf.\n"
                   "model: {vocab: %lld, seq_len: %lld, dim: %lld, heads: %lld}\nlayers:\n"
                   "  - embedding: {%s%s}\n",
                   c->arch->architecture, source, (long long)c->vocab, (long long)c->seq_len,
                   (long long)c->dim, (long long)c->heads, tie,
                   c->gemma2 ? (c->tied ? ", scale_sqrt_dim: true" : "scale_sqrt_dim: true") : "");
  fmt_num(c->eps, eps, sizeof eps);
  if (c->arch->family == HF_GPT2)
    n += snprintf(s + n, cap - (size_t)n, "  - pos_embedding: {}\n"
                  "  - transformer_block: {repeat: %lld}\n  - layernorm: {eps: %s}\n",
                  (long long)c->layers, eps);
  else {
    n += blocks_text(c, eps, s + n, cap - (size_t)n);
    n += snprintf(s + n, cap - (size_t)n, "  - rmsnorm: {eps: %s%s}\n", eps,
                  c->gemma2 ? ", weight_offset: 1.0" : "");
  }
  softcap[0] = '\0';
  if (c->final_softcap > 0) {
    char v[40];
    snprintf(softcap, sizeof softcap, "%ssoftcap: %s", c->tied ? ", " : "",
             fmt_num(c->final_softcap, v, sizeof v));
  }
  snprintf(s + n, cap - (size_t)n,
           "  - lm_head: {%s%s}\nloss: cross_entropy\n"
           "# CHANGE_ME: point data.path at your token file (scripts/tokenize.py writes one with\n"
           "# the model's tokenizer); format %s holds this vocabulary's ids.\n"
           "data: {path: CHANGE_ME.bin, format: %s}\n"
           "train:\n  steps: 100\n  micro_batch_size: 4\n  micro_batches: 8\n"
           "  optimizer: {name: adamw, lr: 1.0e-5, betas: [0.9, 0.95], eps: 1.0e-8, "
           "weight_decay: 0.1}\n  grad_clip: 1.0\n  seed: 1234\n"
           "pipeline: {stages: 2, schedule: 1f1b}\n",
           tie, softcap, c->vocab <= 65536 ? "u16" : "u32", c->vocab <= 65536 ? "u16" : "u32");
  return s;
}

static cJSON *gpt2_json(const hf_config *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model_type", "gpt2");
  cJSON_AddNumberToObject(o, "vocab_size", (double)c->vocab);
  cJSON_AddNumberToObject(o, "n_positions", (double)c->seq_len);
  cJSON_AddNumberToObject(o, "n_ctx", (double)c->seq_len);
  cJSON_AddNumberToObject(o, "n_embd", (double)c->dim);
  cJSON_AddNumberToObject(o, "n_layer", (double)c->layers);
  cJSON_AddNumberToObject(o, "n_head", (double)c->heads);
  cJSON_AddNullToObject(o, "n_inner");
  cJSON_AddStringToObject(o, "activation_function", "gelu_new");
  /* GPT2Config's defaults (50256) lie outside other vocabularies; pipetrain knows no such ids */
  cJSON_AddNullToObject(o, "bos_token_id");
  cJSON_AddNullToObject(o, "eos_token_id");
  cJSON_AddNumberToObject(o, "layer_norm_epsilon", c->eps);
  /* pipetrain trains without dropout */
  cJSON_AddNumberToObject(o, "resid_pdrop", 0.0);
  cJSON_AddNumberToObject(o, "embd_pdrop", 0.0);
  cJSON_AddNumberToObject(o, "attn_pdrop", 0.0);
  return o;
}

/* A rope's transformers parameters: rope_type, rope_theta and the type's own. */
static cJSON *rope_json(const pt_rope_scaling *p, double theta) {
  cJSON *rope = cJSON_CreateObject();
  cJSON_AddStringToObject(rope, "rope_type", pt_rope_type_names[p->type]);
  cJSON_AddNumberToObject(rope, "rope_theta", theta);
  if (p->type != PT_ROPE_DEFAULT) cJSON_AddNumberToObject(rope, "factor", p->factor);
  if (p->type == PT_ROPE_LLAMA3) {
    cJSON_AddNumberToObject(rope, "low_freq_factor", p->low_freq_factor);
    cJSON_AddNumberToObject(rope, "high_freq_factor", p->high_freq_factor);
  }
  if (p->type == PT_ROPE_LLAMA3 || p->type == PT_ROPE_YARN)
    cJSON_AddNumberToObject(rope, "original_max_position_embeddings",
                            (double)p->original_max_position_embeddings);
  if (p->type == PT_ROPE_YARN) {
    cJSON_AddNumberToObject(rope, "beta_fast", p->beta_fast);
    cJSON_AddNumberToObject(rope, "beta_slow", p->beta_slow);
    cJSON_AddBoolToObject(rope, "truncate", p->truncate);
    if (p->attention_factor > 0)
      cJSON_AddNumberToObject(rope, "attention_factor", p->attention_factor);
  }
  return rope;
}

/* A soft-cap: its value written as a float (Gemma2Config refuses an int there), or null. */
static void add_cap(cJSON *o, const char *key, double cap) {
  char v[40];
  if (cap > 0) cJSON_AddRawToObject(o, key, fmt_num(cap, v, sizeof v));
  else cJSON_AddNullToObject(o, key);
}

/* Gemma2Config's own keys. Without any sliding layer, layer_types are all full_attention and
 * sliding_window is seq_len (Gemma2Config wants one). */
static void add_gemma2_json(const hf_config *c, cJSON *o) {
  cJSON_AddStringToObject(o, "hidden_activation", "gelu_pytorch_tanh");
  add_cap(o, "attn_logit_softcapping", c->attn_softcap);
  add_cap(o, "final_logit_softcapping", c->final_softcap);
  double q = c->query_scalar; /* an int in Gemma2Config when it is one */
  cJSON_AddNumberToObject(o, "query_pre_attn_scalar", fabs(q - round(q)) <= 1e-9 * q ? round(q) : q);
  int64_t window = 0;
  cJSON *types = cJSON_AddArrayToObject(o, "layer_types");
  for (int64_t i = 0; i < c->layers; i++) {
    window = c->sliding[i] ? c->sliding_window : window;
    cJSON_AddItemToArray(types, cJSON_CreateString(c->sliding[i] ? "sliding_attention"
                                                                 : "full_attention"));
  }
  cJSON_AddNumberToObject(o, "sliding_window", (double)(window ? window : c->seq_len));
  /* transformers before 4.53 read no layer_types, only Gemma 3's pattern: written where the
   * layers follow one */
  for (int64_t p = 1; c->arch->window_pattern && p <= c->layers; p++) {
    int64_t i = 0;
    while (i < c->layers && c->sliding[i] == ((i + 1) % p != 0)) i++;
    if (i == c->layers) {
      cJSON_AddNumberToObject(o, "sliding_window_pattern", (double)p);
      break;
    }
  }
}

/* The rope keys: rope_parameters (transformers 5; per layer type where the architecture has a
 * rope per type) and transformers 4's rope_theta, rope_scaling (and Gemma 3's
 * rope_local_base_freq: 4 has no scaling of the sliding layers' rope, 5 reads
 * rope_parameters first). */
static void add_rope_json(const hf_config *c, cJSON *o) {
  cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
  if (c->rope.type != PT_ROPE_DEFAULT)
    cJSON_AddItemToObject(o, "rope_scaling", rope_json(&c->rope, c->rope_theta));
  if (!c->arch->rope_per_type) {
    cJSON_AddItemToObject(o, "rope_parameters", rope_json(&c->rope, c->rope_theta));
    return;
  }
  cJSON_AddNumberToObject(o, "rope_local_base_freq", c->local_rope_theta);
  cJSON *per = cJSON_AddObjectToObject(o, "rope_parameters");
  cJSON_AddItemToObject(per, "sliding_attention", rope_json(&c->local_rope, c->local_rope_theta));
  cJSON_AddItemToObject(per, "full_attention", rope_json(&c->rope, c->rope_theta));
}

static cJSON *llama_json(const hf_config *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model_type", c->arch->model_type);
  cJSON_AddNumberToObject(o, "vocab_size", (double)c->vocab);
  cJSON_AddNumberToObject(o, "hidden_size", (double)c->dim);
  cJSON_AddNumberToObject(o, "intermediate_size", (double)c->ffn);
  cJSON_AddNumberToObject(o, "num_hidden_layers", (double)c->layers);
  cJSON_AddNumberToObject(o, "num_attention_heads", (double)c->heads);
  cJSON_AddNumberToObject(o, "num_key_value_heads", (double)c->kv_heads);
  cJSON_AddNumberToObject(o, "head_dim", (double)c->head_dim);
  if (c->gemma2) add_gemma2_json(c, o);
  else cJSON_AddStringToObject(o, "hidden_act", "silu");
  cJSON_AddNumberToObject(o, "max_position_embeddings", (double)c->seq_len);
  cJSON_AddNumberToObject(o, "rms_norm_eps", c->eps);
  add_rope_json(c, o);
  if (!c->qkv_bias) cJSON_AddFalseToObject(o, "attention_bias"); /* Qwen2's q/k/v always have */
  cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias);
  cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
  if (c->arch->window == HF_OPT_CONFIG) {
    if (c->window) cJSON_AddNumberToObject(o, "sliding_window", (double)c->window);
    else cJSON_AddNullToObject(o, "sliding_window");
  }
  if (!strcmp(c->arch->model_type, "phi3")) { /* Phi3Config's defaults outside small vocabularies */
    cJSON_AddNullToObject(o, "pad_token_id");
    cJSON_AddNullToObject(o, "bos_token_id");
    cJSON_AddNullToObject(o, "eos_token_id");
    cJSON_AddNumberToObject(o, "resid_pdrop", 0.0); /* pipetrain trains without dropout */
    cJSON_AddNumberToObject(o, "embd_pdrop", 0.0);
  }
  return o;
}

int hf_config_write(const hf_config *c, const char *path, char *err, size_t errsz) {
  cJSON *o = c->arch->family == HF_GPT2 ? gpt2_json(c) : llama_json(c);
  cJSON *archs = cJSON_AddArrayToObject(o, "architectures");
  cJSON_AddItemToArray(archs, cJSON_CreateString(c->arch->architecture));
  cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tied);
  cJSON_AddStringToObject(o, "torch_dtype", "float32");
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text) pt_fatal("out of memory writing %s", path);
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  ok = f && fflush(f) == 0 && ok;
  if (f && fclose(f) != 0) ok = 0;
  free(text);
  if (!ok || rename(tmp, path) != 0) {
    snprintf(err, errsz, "%s: cannot write: %s", path, strerror(errno));
    remove(tmp);
    return -1;
  }
  return 0;
}
