/* tests/layers/test_layer_grads.c: numerical tests of every built-in layer against tests/ref.
 *
 * For each layer type and several seeded random shapes, the layer is built the way the model
 * builder does it (spec text -> layer_find -> configure -> init) and run through the pt_io
 * contract of layers/layer.h. With random inputs x and a random projection R of the output,
 * f = sum(out * R), so dout = R and the exact gradients of f are what backward must produce.
 * Checked per case:
 *   - declared parameters (names, shapes) match the reference, init is deterministic;
 *   - float forward vs the double reference forward, and forward is bitwise deterministic;
 *   - din from backward_input vs central finite differences of f on the double reference;
 *   - g[p] from backward_weight vs finite differences (all elements, or a random subset);
 *   - gradients accumulate (a second backward_weight doubles g);
 *   - backward_weight does not depend on din being requested (din = NULL rerun).
 * Then the losses of kernels/loss.h: value vs reference, dy vs scale * finite differences.
 *
 * Every buffer is allocated with its exact size so AddressSanitizer sees overruns, saved and
 * scratch are filled with NaN bytes before use so reading what a layer never wrote shows up, and
 * din is pre-filled with garbage to catch accumulate-instead-of-write.
 *
 * Output: one FAIL line per bad element (a few per tensor), then
 *   "layer grads: N checks passed, M failed"; exit status 1 if M > 0. -v prints, per kind of
 * check, the worst error as a fraction of its tolerance (how much margin the tolerances have).
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign: 64-byte aligned buffers of exact size */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "spec/spec.h"
#include "kernels/loss.h"
#include "tests/ref/ref_layers.h"

/* --- Tolerances ----------------------------------------------------------------------------
 * All are relative to the largest reference magnitude of the tensor compared (never below a
 * floor), because float32 rounding error scales with the magnitude of the sums that produce the
 * tensor, not with each element: |analytic - ref| <= RTOL * max(FLOOR, max|ref|).
 *
 * Forward: float32 dot products of <= 4*dim = 96 terms of O(1) with relative unit roundoff
 * 6e-8 give ~1e-6 absolute error at worst (2e-7 is what the CPU kernels show); fast vectorised
 * exp/tanh add ~1e-6 relative. 2e-5 leaves an order of magnitude of margin over the worst case
 * and still catches small constant errors (e.g. a GELU coefficient off by 1e-3). */
#define FWD_RTOL 2e-5
#define FWD_FLOOR 1.0
/* Gradients vs double central differences: the finite differences themselves are accurate to
 * ~h^2 * f''' + 1e-16 * |f| / h ~ 1e-9 (h = 1e-5 * scale, in double), so the error is the float32
 * backward's: a few 1e-6 relative after chains of layernorm/softmax/GEMM. 2e-4 keeps a wide
 * margin; the floor 1e-2 (dout = R is O(1)) stops all-but-zero tensors from demanding accuracy
 * below float32 resolution of the O(1) intermediates. */
#define GRAD_RTOL 2e-4
#define GRAD_FLOOR 1e-2
/* Accumulation: a second backward_weight must add the same g again. Doubling is exact in
 * float, but a BLAS GEMM with beta = 1 adds K-blocked partial sums into g one block at a time,
 * so the second sum can round differently: allow 1e-5 of the tensor's largest gradient. */
#define ACC_RTOL 1e-5
/* din = NULL rerun: the same computation; only allowed to differ by reassociation. */
#define RERUN_RTOL 1e-6
/* Loss value: per-row float32 max/exp-sum (relative error ~1e-6 of the row's logsumexp), rows
 * summed in double, so 1e-5 of the total (floor 1) has an order of magnitude of margin. */
#define LOSS_RTOL 1e-5

#define FD_REL_STEP 1e-5       /* h = FD_REL_STEP * max(1, |x|) */
#define FD_ALL_LIMIT 400       /* parameters up to this size are checked element by element */
#define FD_SUBSET 96           /* random elements checked for larger parameters (>= 64) */
#define MAX_PRINT 6            /* failing elements printed per tensor */
#define MAX_CASES 128

/* --- Results ------------------------------------------------------------------------------ */

enum { K_SETUP, K_FWD, K_DIN, K_GRAD, K_ACC, K_RERUN, K_LOSS, K_COUNT };
static const char *const kind_names[K_COUNT] = {"setup/shapes",  "forward",   "din vs FD",
                                                "g vs FD",       "accumulate", "din=NULL rerun",
                                                "loss"};
static int g_pass, g_fail;
static double g_worst[K_COUNT]; /* worst |err| / tol seen, per kind */

static void record(int ok) {
  if (ok) g_pass++;
  else g_fail++;
}

/* --- Deterministic random numbers (splitmix64) -------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }
static double rng_sym(uint64_t *s, double a) { return a * (2.0 * rng_unit(s) - 1.0); }
static int rng_int(uint64_t *s, int lo, int hi) {
  return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* --- Cases -------------------------------------------------------------------------------- */

static const char *const rope_types[] = {"default", "linear", "llama3", "yarn"};

typedef struct {
  const char *type;
  int B, T;
  ref_shape s;   /* model settings, input features and arguments, as the reference sees them */
  int out_arg;   /* linear: write `out:` (else the default, model.dim) */
  int bias_arg;  /* linear: -1 leave the default, else write `bias: true/false` */
  int eps_arg;   /* layernorm: write `eps:` (else the default 1e-5); rmsnorm, llama_block: write
                    `eps:` from s.rms_eps (else the default 1e-6) */
  uint64_t seed; /* inputs, parameters, R and FD subsets */
  char desc[224];
} lcase;

/* The types whose `eps` is an RMSNorm's (ref_shape.rms_eps). */
static int is_rms(const lcase *c) {
  return !strcmp(c->type, "rmsnorm") || !strcmp(c->type, "llama_block");
}

/* Gemma 2's options of a case, as the spec writes them: "key: value, " each. */
static void gemma_args(const ref_shape *s, const char *type, char *buf, size_t sz) {
  size_t n = 0;
  buf[0] = '\0';
  if (s->norm_offset != 0)
    n += (size_t)snprintf(buf + n, sz - n, "%s: %.17g, ",
                          !strcmp(type, "rmsnorm") ? "weight_offset" : "norm_offset",
                          s->norm_offset);
  if (s->post_norms) n += (size_t)snprintf(buf + n, sz - n, "post_norms: true, ");
  if (s->gelu_mlp) n += (size_t)snprintf(buf + n, sz - n, "mlp_act: gelu_tanh, ");
  if (s->embed_scale) n += (size_t)snprintf(buf + n, sz - n, "scale_sqrt_dim: true, ");
  if (s->softcap > 0) snprintf(buf + n, sz - n, "softcap: %.17g, ", s->softcap);
}

static void gemma_desc(const ref_shape *s, const char *type, char *buf, size_t sz) {
  char args[200];
  gemma_args(s, type, args, sizeof args);
  if (args[0]) snprintf(buf, sz, " %s", args);
}

static void describe(lcase *c) {
  char in[16] = "tokens";
  if (strcmp(c->type, "embedding") != 0) snprintf(in, sizeof in, "%d", c->s.in_dim);
  snprintf(c->desc, sizeof c->desc, "%s B=%d T=%d in=%s vocab=%d seq_len=%d dim=%d heads=%d",
           c->type, c->B, c->T, in, c->s.vocab, c->s.seq_len, c->s.dim, c->s.heads);
  size_t n = strlen(c->desc);
  if (c->out_arg) n += snprintf(c->desc + n, sizeof c->desc - n, " out=%d", c->s.out_dim);
  if (c->bias_arg >= 0) n += snprintf(c->desc + n, sizeof c->desc - n, " bias=%d", c->bias_arg);
  if (c->eps_arg)
    n += snprintf(c->desc + n, sizeof c->desc - n, " eps=%g", is_rms(c) ? c->s.rms_eps : c->s.eps);
  if (!strcmp(c->type, "llama_block"))
    n += snprintf(c->desc + n, sizeof c->desc - n, " kv_heads=%d ffn_dim=%d rope_theta=%g",
                  c->s.kv_heads, c->s.ffn_dim, c->s.rope_theta);
  if (c->s.rope_type)
    n += snprintf(c->desc + n, sizeof c->desc - n, " rope_scaling=%s", rope_types[c->s.rope_type]);
  if (c->s.qkv_bias) n += snprintf(c->desc + n, sizeof c->desc - n, " qkv_bias");
  if (c->s.head_dim) n += snprintf(c->desc + n, sizeof c->desc - n, " head_dim=%d", c->s.head_dim);
  if (c->s.qk_norm) n += snprintf(c->desc + n, sizeof c->desc - n, " qk_norm");
  if (c->s.mlp_bias) n += snprintf(c->desc + n, sizeof c->desc - n, " mlp_bias");
  if (c->s.window) n += snprintf(c->desc + n, sizeof c->desc - n, " window=%d", c->s.window);
  if (c->s.attn_softcap > 0)
    n += snprintf(c->desc + n, sizeof c->desc - n, " attn_softcap=%g", c->s.attn_softcap);
  if (c->s.attn_scale > 0)
    n += snprintf(c->desc + n, sizeof c->desc - n, " attn_scale=%g", c->s.attn_scale);
  gemma_desc(&c->s, c->type, c->desc + n, sizeof c->desc - n);
}

/* llama_block's rope_scaling map of ref_shape's rope fields ("" for none). */
static void rope_yaml(const ref_shape *s, char *buf, size_t sz) {
  buf[0] = '\0';
  if (s->rope_type == 1) snprintf(buf, sz, "rope_scaling: {type: linear, factor: %.17g}, ",
                                  s->rope_factor);
  if (s->rope_type == 2)
    snprintf(buf, sz, "rope_scaling: {type: llama3, factor: %.17g, low_freq_factor: %.17g, "
             "high_freq_factor: %.17g, original_max_position_embeddings: %d}, ", s->rope_factor,
             s->rope_low, s->rope_high, s->rope_orig);
  if (s->rope_type == 3)
    snprintf(buf, sz, "rope_scaling: {type: yarn, factor: %.17g, "
             "original_max_position_embeddings: %d}, ", s->rope_factor, s->rope_orig);
}

/* A llama_block case with rope scaling (ref_shape's rope_type): the factors chosen so that
 * short sequences see every branch (llama3's three bands, yarn's ramp). */
static void set_rope(lcase *c, int type) {
  c->s.rope_type = type;
  c->s.rope_factor = type == 1 ? 2.5 : 4.0;
  c->s.rope_low = 1.0;
  c->s.rope_high = 4.0;
  c->s.rope_orig = 8;
}

/* A random case of type: B 1..3, T 1..7 (seq_len T..T+3), dim 4..24 with heads | dim,
 * vocab 5..13, input features 3..20 where the type allows any. llama_block: an even head dim
 * 2..8, kv_heads dividing heads, ffn_dim 1..12 (sizes of any multiple). */
static lcase random_case(const char *type, uint64_t *rng) {
  lcase c;
  memset(&c, 0, sizeof c);
  c.type = type;
  c.B = rng_int(rng, 1, 3);
  c.T = rng_int(rng, 1, 7);
  int heads = rng_int(rng, 1, 4);
  int dim = heads * rng_int(rng, (4 + heads - 1) / heads, 24 / heads);
  c.s = ref_shape_default(rng_int(rng, 5, 13), c.T + rng_int(rng, 0, 3), dim, heads);
  c.bias_arg = -1;
  int free_in = !strcmp(type, "linear") || !strcmp(type, "layernorm") ||
                !strcmp(type, "rmsnorm") ||
                !strcmp(type, "gelu") || !strcmp(type, "relu");
  if (free_in) c.s.in_dim = rng_int(rng, 3, 20);
  if (!strcmp(type, "linear")) { /* explicit or default `out`, with or without bias */
    c.out_arg = rng_int(rng, 0, 1);
    if (c.out_arg) c.s.out_dim = rng_int(rng, 1, 20);
    c.bias_arg = rng_int(rng, -1, 1);
    c.s.has_bias = c.bias_arg != 0;
  }
  if (!strcmp(type, "layernorm") && rng_int(rng, 0, 1)) { /* a large eps changes the gradient */
    c.eps_arg = 1;
    c.s.eps = 0.1 * rng_unit(rng) + 1e-6;
  }
  if (!strcmp(type, "rmsnorm") && rng_int(rng, 0, 1)) {
    c.eps_arg = 1;
    c.s.rms_eps = 0.1 * rng_unit(rng) + 1e-6;
  }
  if (!strcmp(type, "llama_block")) {
    c.s.dim = heads * 2 * rng_int(rng, 1, 4);
    c.s.in_dim = c.s.out_dim = c.s.dim;
    do c.s.kv_heads = rng_int(rng, 1, heads); while (heads % c.s.kv_heads != 0);
    c.s.ffn_dim = rng_int(rng, 1, 12);
    c.s.rope_theta = rng_int(rng, 0, 1) ? 10000.0 : 100.0;
    if (rng_int(rng, 0, 1)) set_rope(&c, rng_int(rng, 1, 3));
    c.s.qkv_bias = rng_int(rng, 0, 1);
    if (rng_int(rng, 0, 1)) c.s.head_dim = 2 * rng_int(rng, 1, 4);
    c.s.qk_norm = rng_int(rng, 0, 1);
    c.s.mlp_bias = rng_int(rng, 0, 1);
    if (rng_int(rng, 0, 2) == 0) c.s.window = rng_int(rng, 1, 6);
    if (rng_int(rng, 0, 2) == 0) { /* Gemma 2's block */
      c.s.norm_offset = 1.0;
      c.s.post_norms = c.s.gelu_mlp = 1;
    }
  }
  c.seed = rng_next(rng);
  return c;
}

static lcase edge_case(const char *type, int B, int T, int seq_len, int dim, int heads, int vocab,
                       int in_dim, uint64_t *rng) {
  lcase c;
  memset(&c, 0, sizeof c);
  c.type = type;
  c.B = B;
  c.T = T;
  c.s = ref_shape_default(vocab, seq_len, dim, heads);
  c.s.in_dim = in_dim > 0 ? in_dim : dim;
  c.bias_arg = -1;
  c.seed = rng_next(rng);
  return c;
}

static lcase llama_case(int B, int T, int dim, int heads, int kv_heads, int ffn_dim,
                        double theta, double eps, uint64_t *rng) {
  lcase c = edge_case("llama_block", B, T, T + 1, dim, heads, 7, 0, rng);
  c.s.kv_heads = kv_heads;
  c.s.ffn_dim = ffn_dim;
  c.s.rope_theta = theta;
  c.eps_arg = eps > 0;
  c.s.rms_eps = eps;
  return c;
}

static int add(lcase *cases, int n, lcase c) {
  if (n >= MAX_CASES) return n;
  describe(&c);
  cases[n] = c;
  return n + 1;
}

/* Gemma 2's options, each alone and together (llama_block: after q, k, v biases, grouped-query;
 * the random cases add them on longer sequences), the scaled embedding, the (1 + w) rmsnorm and the soft-capped head (cap 2: logits
 * of O(1) reach tanh's bend); written to out, returns how many. */
static int gemma_cases(lcase *out, uint64_t *rng) {
  static const struct {
    int B, T, dim, heads, kv_heads, ffn_dim, qkv_bias, post, gelu;
    double offset;
  } g[] = {{2, 5, 8, 4, 2, 6, 0, 1, 1, 1.0}, {2, 3, 8, 2, 1, 5, 1, 1, 0, 0.0},
           {2, 4, 12, 3, 3, 7, 0, 0, 1, 0.0}, {1, 5, 8, 2, 2, 3, 1, 0, 0, 1.0}};
  int n = 0;
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
    lcase c = llama_case(g[i].B, g[i].T, g[i].dim, g[i].heads, g[i].kv_heads, g[i].ffn_dim,
                         10000.0, 0.0, rng);
    c.s.qkv_bias = g[i].qkv_bias, c.s.post_norms = g[i].post, c.s.gelu_mlp = g[i].gelu;
    c.s.norm_offset = g[i].offset;
    describe(&c);
    out[n++] = c;
  }
  lcase c = edge_case("embedding", 2, 5, 5, 6, 1, 5, 0, rng);
  c.s.embed_scale = 1;
  describe(&c);
  out[n++] = c;
  c = edge_case("rmsnorm", 2, 4, 4, 8, 1, 7, 0, rng);
  c.s.norm_offset = 1.0;
  describe(&c);
  out[n++] = c;
  c = edge_case("lm_head", 2, 3, 3, 4, 1, 9, 0, rng);
  c.s.softcap = 2.0;
  describe(&c);
  out[n++] = c;
  return n;
}

/* Hand-picked cases that random shapes rarely hit, then random ones for every registered type
 * (the built-ins: each needs a reference in ref/ref_layers.c, run_case fails without). */
static int make_cases(lcase *cases, uint64_t *rng) {
  int n = 0;
  lcase c;
  /* Attention: a single token (softmax over one key), one head, hd = 1, T = 64 and T > 64
   * (the edges of any 64-wide tiling of the score matrix), and a wide model. */
  n = add(cases, n, edge_case("transformer_block", 2, 1, 4, 8, 2, 7, 0, rng));
  n = add(cases, n, edge_case("transformer_block", 2, 5, 5, 6, 1, 7, 0, rng));
  n = add(cases, n, edge_case("transformer_block", 1, 6, 9, 4, 4, 7, 0, rng));
  n = add(cases, n, edge_case("transformer_block", 1, 64, 64, 4, 2, 7, 0, rng));
  n = add(cases, n, edge_case("transformer_block", 2, 70, 72, 8, 2, 7, 0, rng));
  n = add(cases, n, edge_case("transformer_block", 2, 3, 3, 24, 3, 7, 0, rng));
  /* linear: no bias, an explicit out != dim, in != dim. */
  c = edge_case("linear", 2, 3, 4, 6, 1, 7, 5, rng);
  c.bias_arg = 0;
  c.s.has_bias = 0;
  n = add(cases, n, c);
  c = edge_case("linear", 3, 2, 4, 6, 1, 7, 9, rng);
  c.out_arg = 1;
  c.s.out_dim = 11;
  c.bias_arg = 1;
  n = add(cases, n, c);
  c = edge_case("layernorm", 2, 4, 4, 8, 1, 7, 0, rng);
  c.eps_arg = 1;
  c.s.eps = 1e-3;
  n = add(cases, n, c);
  /* Embedding with many repeated tokens (gradient scatter-add collisions); pos_embedding with
   * T well below seq_len (rows >= T must get zero gradient). */
  n = add(cases, n, edge_case("embedding", 3, 7, 7, 5, 1, 5, 0, rng));
  n = add(cases, n, edge_case("pos_embedding", 2, 2, 9, 6, 1, 7, 0, rng));
  n = add(cases, n, edge_case("lm_head", 1, 1, 1, 4, 1, 13, 0, rng));
  /* llama_block: grouped-query (heads 4, kv_heads 2), heads == kv_heads, multi-query, odd T,
   * one token, T > 64 (the CPU attention's row blocks), a large eps and another theta. */
  n = add(cases, n, llama_case(2, 5, 8, 4, 2, 6, 10000.0, 0.0, rng));
  n = add(cases, n, llama_case(1, 7, 16, 4, 4, 12, 500.0, 0.0, rng));
  n = add(cases, n, llama_case(2, 3, 16, 2, 1, 10, 10000.0, 1e-2, rng));
  n = add(cases, n, llama_case(2, 1, 8, 2, 2, 2, 10000.0, 0.0, rng));
  n = add(cases, n, llama_case(1, 70, 8, 2, 1, 4, 100.0, 0.0, rng));
  /* sizes no multiple of 16 (refused before parameter groups): q 36, k 12, gate 30 floats;
   * dim 40, heads 5, kv_heads 1, ffn_dim 7: gate 280 floats */
  n = add(cases, n, llama_case(2, 3, 6, 3, 1, 5, 10000.0, 0.0, rng));
  n = add(cases, n, llama_case(1, 3, 40, 5, 1, 7, 10000.0, 0.0, rng));
  /* rope_scaling: each type, hd 8 and theta 100 (llama3: pairs in all three bands at
   * original context 8), T 7 and T > 64 */
  for (int type = 1; type <= 3; type++) {
    c = llama_case(2, 7, 16, 2, 1, 6, 100.0, 0.0, rng);
    set_rope(&c, type);
    n = add(cases, n, c);
    c = llama_case(1, 70, 16, 2, 2, 4, 10000.0, 0.0, rng);
    set_rope(&c, type);
    n = add(cases, n, c);
  }
  /* qkv_bias (Qwen2): grouped-query, and with llama3 rope (Qwen2.5 configs may scale); head_dim
   * independent of dim / heads: wider (H hd > dim), narrower, and 3 heads of 6 over dim 12 (the
   * spec's model needs heads to divide dim); qk_norm (Qwen3: grouped-query, head_dim apart
   * from dim / heads, with qkv_bias) and mlp_bias, alone and with both */
  static const struct {
    int B, T, dim, heads, kv_heads, ffn_dim;
    double theta;
    int qkv_bias, rope_type, head_dim, qk_norm, mlp_bias;
  } opts[] = {{2, 5, 8, 4, 2, 6, 10000.0, 1, 0, 0, 0, 0},  {1, 70, 16, 2, 1, 4, 100.0, 1, 2, 0, 0, 0},
              {2, 5, 8, 2, 1, 6, 10000.0, 0, 0, 8, 0, 0},  {1, 70, 16, 4, 2, 4, 100.0, 0, 0, 2, 0, 0},
              {2, 3, 12, 3, 1, 5, 10000.0, 0, 0, 6, 0, 0}, {2, 5, 8, 4, 2, 6, 10000.0, 0, 0, 6, 1, 0},
              {1, 70, 16, 2, 1, 4, 100.0, 1, 2, 0, 1, 0},  {2, 5, 8, 2, 1, 6, 10000.0, 0, 0, 0, 0, 1},
              {2, 3, 12, 4, 2, 5, 10000.0, 1, 0, 4, 1, 1}};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    c = llama_case(opts[i].B, opts[i].T, opts[i].dim, opts[i].heads, opts[i].kv_heads,
                   opts[i].ffn_dim, opts[i].theta, 0.0, rng);
    c.s.qkv_bias = opts[i].qkv_bias;
    c.s.head_dim = opts[i].head_dim;
    c.s.qk_norm = opts[i].qk_norm;
    c.s.mlp_bias = opts[i].mlp_bias;
    if (opts[i].rope_type) set_rope(&c, opts[i].rope_type);
    n = add(cases, n, c);
  }
  /* window, soft-cap and scale: a window shorter than T (1, a few keys, with T > 64 too), one
   * longer than T (no effect), soft-capping tight enough to bend the scores, another scale,
   * Gemma 2's mix of all three, and a window with soft-capping at hd 32 (the CPU's tile path) */
  static const struct {
    int B, T, dim, heads, kv_heads, window;
    double softcap, scale;
  } attn[] = {{2, 7, 8, 4, 2, 3, 0.0, 0.0},  {1, 70, 8, 2, 1, 17, 0.0, 0.0},
              {2, 5, 8, 2, 2, 1, 0.0, 0.0},  {1, 4, 8, 2, 1, 9, 0.0, 0.0},
              {2, 6, 8, 4, 2, 0, 0.5, 0.0},  {2, 6, 16, 2, 1, 0, 0.0, 0.7},
              {2, 9, 16, 4, 2, 4, 0.8, 0.35}, {1, 9, 64, 2, 1, 4, 1.0, 0.0}};
  for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++) {
    c = llama_case(attn[i].B, attn[i].T, attn[i].dim, attn[i].heads, attn[i].kv_heads, 6,
                   10000.0, 0.0, rng);
    c.s.window = attn[i].window;
    c.s.attn_softcap = attn[i].softcap;
    c.s.attn_scale = attn[i].scale;
    n = add(cases, n, c);
  }
  c = edge_case("rmsnorm", 2, 4, 4, 8, 1, 7, 0, rng);
  c.eps_arg = 1;
  c.s.rms_eps = 1e-3;
  n = add(cases, n, c);
  if (n + 8 <= MAX_CASES) n += gemma_cases(cases + n, rng);
  for (int t = 0; layer_type_at(t); t++)
    for (int k = 0; k < 4; k++) n = add(cases, n, random_case(layer_type_at(t)->name, rng));
  return n;
}

/* --- Layer construction through the spec -------------------------------------------------- */

/* The one-layer spec of case c: the model map and a single `- TYPE: {ARGS}` entry. */
static void case_yaml(const lcase *c, char *buf, size_t sz) {
  char args[512] = "";
  size_t n = 0;
  if (c->out_arg) n += (size_t)snprintf(args + n, sizeof args - n, "out: %d, ", c->s.out_dim);
  if (c->bias_arg >= 0)
    n += (size_t)snprintf(args + n, sizeof args - n, "bias: %s, ", c->bias_arg ? "true" : "false");
  if (c->eps_arg)
    n += (size_t)snprintf(args + n, sizeof args - n, "eps: %.17g, ",
                          is_rms(c) ? c->s.rms_eps : c->s.eps);
  if (!strcmp(c->type, "llama_block")) {
    char rope[200];
    rope_yaml(&c->s, rope, sizeof rope);
    n += (size_t)snprintf(args + n, sizeof args - n,
                          "kv_heads: %d, ffn_dim: %d, rope_theta: %.17g, %s%s", c->s.kv_heads,
                          c->s.ffn_dim, c->s.rope_theta, rope,
                          c->s.qkv_bias ? "qkv_bias: true, " : "");
    if (c->s.head_dim)
      n += (size_t)snprintf(args + n, sizeof args - n, "head_dim: %d, ", c->s.head_dim);
    n += (size_t)snprintf(args + n, sizeof args - n, "%s%s", c->s.qk_norm ? "qk_norm: true, " : "",
                          c->s.mlp_bias ? "mlp_bias: true, " : "");
    if (c->s.window) n += (size_t)snprintf(args + n, sizeof args - n, "window: %d, ", c->s.window);
    if (c->s.attn_softcap > 0)
      n += (size_t)snprintf(args + n, sizeof args - n, "attn_softcap: %.17g, ", c->s.attn_softcap);
    if (c->s.attn_scale > 0)
      n += (size_t)snprintf(args + n, sizeof args - n, "attn_scale: %.17g, ", c->s.attn_scale);
  }
  char gemma[200];
  gemma_args(&c->s, c->type, gemma, sizeof gemma);
  n += (size_t)snprintf(args + n, sizeof args - n, "%s", gemma);
  if (n >= 2) args[n - 2] = '\0'; /* drop the last ", " */
  snprintf(buf, sz,
           "model: {vocab: %d, seq_len: %d, dim: %d, heads: %d}\n"
           "layers:\n  - %s: {%s}\n",
           c->s.vocab, c->s.seq_len, c->s.dim, c->s.heads, c->type, args);
}

/* Loads the spec and configures the layer; 0 on success, else prints why and returns -1 (one
 * failed check). *loaded tells whether spec must be freed. */
static int build_layer(const lcase *c, pt_spec *spec, int *loaded, pt_layer *L) {
  char yaml[1400];
  spec_errors e;
  memset(&e, 0, sizeof e);
  memset(spec, 0, sizeof *spec);
  memset(L, 0, sizeof *L);
  case_yaml(c, yaml, sizeof yaml);
  if (spec_load_text(yaml, strlen(yaml), "test_layer_grads.yaml", NULL, 0, spec, &e) != 0) {
    printf("FAIL %s: spec_load_text: %s\n", c->desc, e.msg);
    record(0);
    return -1;
  }
  *loaded = 1;
  L->type = layer_find(c->type);
  if (!L->type || spec->n_layers != 1) {
    printf("FAIL %s: layer type not registered or spec has %d layers\n", c->desc, spec->n_layers);
    record(0);
    return -1;
  }
  int tokens = !strcmp(c->type, "embedding");
  pt_layer_setup st = {spec->layers[0].args, spec, tokens ? 0 : c->s.in_dim, tokens};
  L->index = 0;
  L->in_dim = st.in_dim;
  L->in_tokens = tokens;
  layer_settings_parse(L, &st, &e);
  if (!e.failed) L->type->configure(L, &st, &e);
  if (!e.failed) spec_check_unused(spec->layers[0].args, c->type, NULL, &e);
  if (e.failed) {
    printf("FAIL %s: configure: %s\n", c->desc, e.msg);
    record(0);
    return -1;
  }
  return 0;
}

/* Declared parameters and output width must match the reference exactly. */
static int check_declaration(const lcase *c, const pt_layer *L) {
  ref_param rp[REF_MAX_PARAMS];
  int n = ref_params(c->type, &c->s, rp), ok = L->n_params == n;
  ok = ok && L->out_dim == ref_out_features(c->type, &c->s);
  for (int p = 0; ok && p < n; p++) {
    const pt_param_desc *d = &L->params[p];
    ok = !strcmp(d->name, rp[p].name) && d->ndim == rp[p].ndim && d->numel == rp[p].numel &&
         d->shape[0] == rp[p].shape[0] && (d->ndim < 2 || d->shape[1] == rp[p].shape[1]);
    if (!ok)
      printf("FAIL %s: param %d is '%s' ndim %d numel %lld, expected '%s' ndim %d numel %lld\n",
             c->desc, p, d->name, d->ndim, (long long)d->numel, rp[p].name, rp[p].ndim,
             (long long)rp[p].numel);
  }
  if (L->n_params != n || L->out_dim != ref_out_features(c->type, &c->s))
    printf("FAIL %s: %d params, out_dim %d; expected %d params, out_dim %d\n", c->desc,
           L->n_params, L->out_dim, n, ref_out_features(c->type, &c->s));
  record(ok);
  return ok ? 0 : -1;
}

/* --- Buffers ------------------------------------------------------------------------------ */

/* 64-byte aligned allocation of exactly bytes (no rounding, so ASan catches overruns). */
static void *alloc64(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) {
    fprintf(stderr, "test_layer_grads: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

/* Everything one case owns. Inputs exist in float (what the layer sees) and in double (the same
 * values, for the reference), so the two only differ by the layer's own rounding. */
typedef struct {
  const lcase *c;
  pt_layer L;
  int in_feat, out_feat;
  int64_t n_in, n_out; /* elements of the input (floats or tokens) and output */
  float *x, *out, *dout, *din;
  int32_t *tok;
  double *xd, *R, *wd[PT_MAX_PARAMS];
  void *saved, *scratch;
  size_t saved_sz, scratch_sz;
  float *wblock, *gblock; /* the tensors' values and gradients (also for layers with none) */
} lrun;

static void alloc_run(lrun *r) {
  const lcase *c = r->c;
  r->in_feat = r->L.in_tokens ? 1 : c->s.in_dim;
  r->out_feat = r->L.out_dim;
  r->n_in = (int64_t)c->B * c->T * r->in_feat;
  r->n_out = (int64_t)c->B * c->T * r->out_feat;
  r->x = alloc64(sizeof(float) * r->n_in);
  r->tok = alloc64(sizeof(int32_t) * r->n_in);
  r->xd = alloc64(sizeof(double) * r->n_in);
  r->out = alloc64(sizeof(float) * r->n_out);
  r->dout = alloc64(sizeof(float) * r->n_out);
  r->din = alloc64(sizeof(float) * r->n_in);
  r->R = alloc64(sizeof(double) * r->n_out);
  /* NULL size functions mean "none needed", as the engine (engine/stage.c) treats them. */
  const pt_layer_type *ty = r->L.type;
  r->saved_sz = ty->saved_bytes ? ty->saved_bytes(&r->L, c->B, c->T) : 0;
  r->scratch_sz = layer_scratch_bytes(&r->L, &kernels_cpu, c->B, c->T);
  r->saved = alloc64(r->saved_sz);
  r->scratch = alloc64(r->scratch_sz);
  /* The layer's tensors in one block each for values and gradients, laid out as the model's
   * (layer_param_stride): llama_block's parameter groups q|k|v and gate|up adjacent. */
  int64_t total = 0, off = 0;
  for (int p = 0; p < r->L.n_params; p++) total += layer_param_stride(&r->L, p);
  float *w = r->wblock = alloc64(sizeof(float) * total);
  float *g = r->gblock = alloc64(sizeof(float) * total);
  for (int p = 0; p < r->L.n_params; p++) {
    int64_t n = r->L.params[p].numel;
    r->L.w[p] = w + off;
    r->L.g[p] = g + off;
    off += layer_param_stride(&r->L, p);
    r->wd[p] = alloc64(sizeof(double) * n);
  }
}

static void free_run(lrun *r) {
  free(r->x);
  free(r->tok);
  free(r->xd);
  free(r->out);
  free(r->dout);
  free(r->din);
  free(r->R);
  free(r->saved);
  free(r->scratch);
  free(r->wblock);
  free(r->gblock);
  for (int p = 0; p < r->L.n_params; p++) free(r->wd[p]);
  layer_state_free(&r->L);
}

/* Random values of a scale that keeps every layer in its interesting range: matrices with
 * std 1/sqrt(fan_in) (attention scores O(1), softmax not saturated), LayerNorm gains 1 +- 0.5
 * (not all ones, which would hide a wrong gain index), biases +- 0.5 (not zero). */
static void randomize_params(lrun *r, uint64_t *rng) {
  for (int p = 0; p < r->L.n_params; p++) {
    const pt_param_desc *d = &r->L.params[p];
    size_t len = strlen(d->name);
    int gain = d->ndim == 1 && len >= 6 && !strcmp(d->name + len - 6, "weight");
    double a = d->ndim >= 2 ? sqrt(3.0 / (double)d->shape[1]) : 0.5;
    for (int64_t i = 0; i < d->numel; i++) {
      r->L.w[p][i] = (float)((gain ? 1.0 : 0.0) + rng_sym(rng, a));
      r->wd[p][i] = r->L.w[p][i];
    }
  }
}

/* Inputs in [-1.5, 1.5], with |x| >= 0.01 so no FD step crosses ReLU's kink; tokens uniform. */
static void randomize_inputs(lrun *r, uint64_t *rng) {
  for (int64_t i = 0; i < r->n_in; i++) {
    double v = rng_sym(rng, 1.5);
    if (fabs(v) < 0.01) v = v < 0 ? -0.01 : 0.01;
    r->x[i] = (float)v;
    r->xd[i] = r->x[i];
    r->tok[i] = (int32_t)(rng_next(rng) % (uint64_t)r->c->s.vocab);
  }
  for (int64_t i = 0; i < r->n_out; i++) {
    r->dout[i] = (float)rng_sym(rng, 1.0);
    r->R[i] = r->dout[i];
  }
}

static pt_io make_io(lrun *r, float *din) {
  pt_io io = {&kernels_cpu, r->c->B, r->c->T,
              r->L.in_tokens ? (const void *)r->tok : (const void *)r->x, r->out, r->saved,
              r->scratch, r->dout, din, NULL, NULL, 0};
  return io;
}

/* NaN bytes: a layer that reads saved/scratch it did not write gets NaN results. */
static void poison(void *p, size_t n) { memset(p, 0xFF, n); }

/* --- Comparison --------------------------------------------------------------------------- */

/* Compares a[idx[k]] (float, from the layer; NULL idx = all) with ref[k] for k < n under
 * |a - ref| <= rtol * max(min_scale, max|ref|). One check; prints the first failing elements. */
static int compare(const char *desc, int kind, const char *what, const float *a,
                   const double *ref, const int64_t *idx, int64_t n, double rtol, double min_scale) {
  double scale = min_scale;
  for (int64_t k = 0; k < n; k++)
    if (fabs(ref[k]) > scale) scale = fabs(ref[k]);
  double tol = rtol * scale;
  int64_t bad = 0;
  for (int64_t k = 0; k < n; k++) {
    int64_t i = idx ? idx[k] : k;
    double err = fabs((double)a[i] - ref[k]);
    if (!(err <= tol)) { /* also catches NaN */
      if (bad++ < MAX_PRINT)
        printf("FAIL %s: %s[%lld]: analytic %.9g reference %.9g (|diff| %.3g > tol %.3g)\n",
               desc, what, (long long)i, a[i], ref[k], err, tol);
    } else if (err / tol > g_worst[kind]) {
      g_worst[kind] = err / tol;
    }
  }
  if (bad > MAX_PRINT)
    printf("FAIL %s: %s: %lld elements failed in all\n", desc, what, (long long)bad);
  record(bad == 0);
  return bad == 0 ? 0 : -1;
}

/* --- Reference objective and finite differences ------------------------------------------ */

/* f = sum(out * R) over batches [b0, b0 + nb) of the reference forward. */
static double ref_objective(lrun *r, int b0, int nb, double *tmp) {
  const lcase *c = r->c;
  int64_t in_off = (int64_t)b0 * c->T * r->in_feat, out_off = (int64_t)b0 * c->T * r->out_feat;
  ref_forward(c->type, &c->s, r->wd, r->xd + in_off, r->tok + in_off, nb, c->T, tmp);
  double f = 0.0;
  for (int64_t i = 0; i < (int64_t)nb * c->T * r->out_feat; i++) f += tmp[i] * r->R[out_off + i];
  return f;
}

/* Central difference of f in *v, which belongs to batches [b0, b0 + nb). */
static double central_diff(lrun *r, double *v, int b0, int nb, double *tmp) {
  double v0 = *v, h = FD_REL_STEP * fmax(1.0, fabs(v0));
  *v = v0 + h;
  double fp = ref_objective(r, b0, nb, tmp);
  *v = v0 - h;
  double fm = ref_objective(r, b0, nb, tmp);
  *v = v0;
  return (fp - fm) / (2.0 * h);
}

/* Reference din by FD; each input element only affects its own batch, so recompute only that. */
static void fd_input(lrun *r, double *grad, double *tmp) {
  int64_t per_batch = (int64_t)r->c->T * r->in_feat;
  for (int64_t i = 0; i < r->n_in; i++)
    grad[i] = central_diff(r, &r->xd[i], (int)(i / per_batch), 1, tmp);
}

/* The elements of a parameter to check: all of a small one, a random subset of a large one. */
static int64_t pick_indices(int64_t numel, uint64_t *rng, int64_t *idx) {
  if (numel <= FD_ALL_LIMIT) {
    for (int64_t i = 0; i < numel; i++) idx[i] = i;
    return numel;
  }
  for (int k = 0; k < FD_SUBSET;) { /* distinct: redraw duplicates (numel > 4 * FD_SUBSET) */
    int64_t v = (int64_t)(rng_next(rng) % (uint64_t)numel);
    int dup = 0;
    for (int j = 0; j < k; j++) dup |= idx[j] == v;
    if (!dup) idx[k++] = v;
  }
  return FD_SUBSET;
}

/* --- The checks of one case --------------------------------------------------------------- */

static void check_init(lrun *r) {
  int ok = 1;
  layer_init_params(&r->L, 1234);
  for (int p = 0; p < r->L.n_params; p++)
    memcpy(r->L.g[p], r->L.w[p], sizeof(float) * r->L.params[p].numel);
  layer_init_params(&r->L, 1234);
  for (int p = 0; p < r->L.n_params; p++)
    for (int64_t i = 0; i < r->L.params[p].numel; i++)
      if (memcmp(&r->L.g[p][i], &r->L.w[p][i], sizeof(float)) != 0 || !isfinite(r->L.w[p][i])) {
        if (ok) printf("FAIL %s: init not deterministic/finite: %s[%lld] %.9g then %.9g\n",
                       r->c->desc, r->L.params[p].name, (long long)i, r->L.g[p][i], r->L.w[p][i]);
        ok = 0;
      }
  record(ok);
}

static void run_forward(lrun *r) {
  pt_io io = make_io(r, r->din);
  poison(r->saved, r->saved_sz);
  poison(r->scratch, r->scratch_sz);
  r->L.type->forward(&r->L, &io);
}

static void check_forward(lrun *r, double *tmp) {
  const lcase *c = r->c;
  ref_forward(c->type, &c->s, r->wd, r->xd, r->tok, c->B, c->T, tmp);
  run_forward(r);
  compare(c->desc, K_FWD, "out", r->out, tmp, NULL, r->n_out, FWD_RTOL, FWD_FLOOR);
  /* The engine re-runs forward for activation checkpointing and needs identical bits. */
  float *first = alloc64(sizeof(float) * r->n_out);
  memcpy(first, r->out, sizeof(float) * r->n_out);
  run_forward(r);
  int same = memcmp(first, r->out, sizeof(float) * r->n_out) == 0;
  if (!same) printf("FAIL %s: forward is not bitwise deterministic\n", c->desc);
  record(same);
  free(first);
}

static void run_backward_input(lrun *r, float *din) {
  pt_io io = make_io(r, din);
  if (din)
    for (int64_t i = 0; i < r->n_in; i++) din[i] = 12345.0f; /* must be overwritten */
  poison(r->scratch, r->scratch_sz);
  r->L.type->backward_input(&r->L, &io);
}

static void run_backward_weight(lrun *r) {
  pt_io io = make_io(r, NULL);
  poison(r->scratch, r->scratch_sz);
  r->L.type->backward_weight(&r->L, &io);
}

static void zero_grads(lrun *r) {
  for (int p = 0; p < r->L.n_params; p++)
    memset(r->L.g[p], 0, sizeof(float) * r->L.params[p].numel);
}

static void check_din(lrun *r, double *tmp) {
  run_backward_input(r, r->L.in_tokens ? NULL : r->din);
  if (r->L.in_tokens) return; /* token ids have no gradient */
  double *ref = alloc64(sizeof(double) * r->n_in);
  fd_input(r, ref, tmp);
  compare(r->c->desc, K_DIN, "din", r->din, ref, NULL, r->n_in, GRAD_RTOL, GRAD_FLOOR);
  free(ref);
}

/* g after one backward_weight vs FD; returns a copy of g (the caller frees it) for later checks. */
static float **check_weight_grads(lrun *r, double *tmp, uint64_t *rng) {
  float **g1 = calloc(PT_MAX_PARAMS, sizeof(float *));
  zero_grads(r);
  run_backward_weight(r);
  for (int p = 0; p < r->L.n_params; p++) {
    const pt_param_desc *d = &r->L.params[p];
    int64_t *idx = alloc64(sizeof(int64_t) * d->numel); /* a subset is < numel elements */
    double *ref = alloc64(sizeof(double) * d->numel);
    int64_t n = pick_indices(d->numel, rng, idx);
    for (int64_t k = 0; k < n; k++) ref[k] = central_diff(r, &r->wd[p][idx[k]], 0, r->c->B, tmp);
    char what[80];
    snprintf(what, sizeof what, "g[%s]", d->name);
    compare(r->c->desc, K_GRAD, what, r->L.g[p], ref, idx, n, GRAD_RTOL, GRAD_FLOOR);
    g1[p] = alloc64(sizeof(float) * d->numel);
    memcpy(g1[p], r->L.g[p], sizeof(float) * d->numel);
    free(idx);
    free(ref);
  }
  return g1;
}

/* Compares g with factor * g1 for every parameter. */
static void check_against(lrun *r, float **g1, double factor, int kind, const char *label,
                          double rtol) {
  for (int p = 0; p < r->L.n_params; p++) {
    int64_t n = r->L.params[p].numel;
    double *ref = alloc64(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) ref[i] = factor * g1[p][i];
    char what[96];
    snprintf(what, sizeof what, "%s g[%s]", label, r->L.params[p].name);
    compare(r->c->desc, kind, what, r->L.g[p], ref, NULL, n, rtol, 1e-30);
    free(ref);
  }
}

/* Gradients accumulate: a second backward_weight on the same micro-batch adds g again. Then a
 * fresh micro-batch run with din = NULL (first layer of a model) must give the same g. */
static void check_accumulate_and_rerun(lrun *r, float **g1) {
  run_backward_weight(r);
  check_against(r, g1, 2.0, K_ACC, "2x accumulated", ACC_RTOL);
  if (r->L.in_tokens || r->L.n_params == 0) return;
  run_forward(r);
  run_backward_input(r, NULL);
  zero_grads(r);
  run_backward_weight(r);
  check_against(r, g1, 1.0, K_RERUN, "din=NULL", RERUN_RTOL);
}

static void run_case(const lcase *c) {
  pt_spec spec;
  int loaded = 0;
  lrun r;
  memset(&r, 0, sizeof r);
  r.c = c;
  if (build_layer(c, &spec, &loaded, &r.L) != 0 || check_declaration(c, &r.L) != 0) {
    if (loaded) spec_free(&spec);
    return;
  }
  uint64_t rng = c->seed;
  alloc_run(&r);
  check_init(&r);
  randomize_params(&r, &rng);
  randomize_inputs(&r, &rng);
  double *tmp = alloc64(sizeof(double) * r.n_out);
  check_forward(&r, tmp);
  check_din(&r, tmp);
  float **g1 = check_weight_grads(&r, tmp, &rng);
  check_accumulate_and_rerun(&r, g1);
  for (int p = 0; p < r.L.n_params; p++) free(g1[p]);
  free(g1);
  free(tmp);
  free_run(&r);
  spec_free(&spec);
}

/* --- Losses ------------------------------------------------------------------------------- */

typedef struct {
  pt_loss_kind kind;
  int N, F;
  double logit_scale; /* cross-entropy logits in [-s, s]: large s tests the max-subtraction */
  float scale;        /* the trainer's 1 / (G*T) */
  char desc[96];
} loss_case;

/* Reference loss of y (double) against the case's targets. */
static double ref_loss(const loss_case *c, const double *y, const int32_t *tok, const double *t) {
  return c->kind == LOSS_CROSS_ENTROPY ? ref_cross_entropy_sum(y, tok, c->N, c->F)
                                       : ref_mse_sum(y, t, c->N, c->F);
}

static void run_loss_case(const loss_case *c, uint64_t *rng) {
  int64_t n = (int64_t)c->N * c->F;
  float *y = alloc64(sizeof(float) * n), *tf = alloc64(sizeof(float) * n);
  float *dy = alloc64(sizeof(float) * n);
  double *yd = alloc64(sizeof(double) * n), *td = alloc64(sizeof(double) * n);
  double *ref = alloc64(sizeof(double) * n);
  int32_t *tok = alloc64(sizeof(int32_t) * c->N);
  for (int64_t i = 0; i < n; i++) {
    y[i] = (float)rng_sym(rng, c->logit_scale);
    yd[i] = y[i];
    tf[i] = (float)rng_sym(rng, 1.0);
    td[i] = tf[i];
  }
  for (int i = 0; i < c->N; i++) tok[i] = (int32_t)(rng_next(rng) % (uint64_t)c->F);
  const void *targets = c->kind == LOSS_CROSS_ENTROPY ? (const void *)tok : (const void *)tf;
  double got = loss_forward_backward(c->kind, y, targets, c->N, c->F, c->scale, dy);
  double want = ref_loss(c, yd, tok, td);
  double tol = LOSS_RTOL * fmax(1.0, fabs(want));
  if (!(fabs(got - want) <= tol))
    printf("FAIL %s: loss value: got %.12g reference %.12g (tol %.3g)\n", c->desc, got, want, tol);
  else if (fabs(got - want) / tol > g_worst[K_LOSS])
    g_worst[K_LOSS] = fabs(got - want) / tol;
  record(fabs(got - want) <= tol);
  for (int64_t i = 0; i < n; i++) { /* dy = scale * d(sum)/dy, by central differences */
    double v0 = yd[i], h = FD_REL_STEP * fmax(1.0, fabs(v0));
    yd[i] = v0 + h;
    double fp = ref_loss(c, yd, tok, td);
    yd[i] = v0 - h;
    double fm = ref_loss(c, yd, tok, td);
    yd[i] = v0;
    ref[i] = c->scale * (fp - fm) / (2.0 * h);
  }
  compare(c->desc, K_LOSS, "dy", dy, ref, NULL, n, GRAD_RTOL, GRAD_FLOOR * c->scale);
  void *bufs[] = {y, tf, dy, yd, td, ref, tok};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

static void test_losses(uint64_t *rng) {
  static const struct { pt_loss_kind kind; int N, F; double ls; float scale; } cases[] = {
      {LOSS_CROSS_ENTROPY, 1, 5, 3.0, 1.0f},    {LOSS_CROSS_ENTROPY, 7, 13, 3.0, 0.125f},
      {LOSS_CROSS_ENTROPY, 4, 2, 1.0, 1.0f},    {LOSS_CROSS_ENTROPY, 3, 9, 60.0, 0.5f},
      {LOSS_CROSS_ENTROPY, 5, 1, 2.0, 1.0f},    {LOSS_MSE, 1, 1, 1.0, 1.0f},
      {LOSS_MSE, 6, 4, 2.0, 0.25f},             {LOSS_MSE, 3, 17, 1.0, 1.0f}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    loss_case c = {cases[i].kind, cases[i].N, cases[i].F, cases[i].ls, cases[i].scale, ""};
    snprintf(c.desc, sizeof c.desc, "loss %s N=%d F=%d logits~%g scale=%g",
             c.kind == LOSS_CROSS_ENTROPY ? "cross_entropy" : "mse", c.N, c.F, c.logit_scale,
             (double)c.scale);
    run_loss_case(&c, rng);
  }
}

/* Usage: test_layer_grads [-v] [--seed N]. -v lists the cases and the tolerance margins;
 * --seed draws other random shapes and values (the default seed is what CTest runs). */
int main(int argc, char **argv) {
  static lcase cases[MAX_CASES];
  int verbose = 0;
  uint64_t rng = 20240611;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-v")) verbose = 1;
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng = strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: %s [-v] [--seed N]\n", argv[0]);
      return 2;
    }
  }
  layer_register_builtins();
  int n = make_cases(cases, &rng);
  for (int i = 0; i < n; i++) {
    if (verbose) printf("case %s\n", cases[i].desc);
    run_case(&cases[i]);
  }
  test_losses(&rng);
  if (verbose)
    for (int k = 0; k < K_COUNT; k++)
      printf("  worst passing |err|/tol for %-15s %.3g\n", kind_names[k], g_worst[k]);
  printf("layer grads: %d checks passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
