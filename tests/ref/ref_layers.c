/* tests/ref/ref_layers.c: double-precision reference layers (see ref_layers.h).
 *
 * Deliberately naive: one row at a time, no blocking, no shared code with layers/. Only the
 * C standard library is used so any test can link it.
 */
#include "tests/ref/ref_layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_LN_EPS 1e-5 /* transformer_block's LayerNorms, and layernorm's default */

ref_shape ref_shape_default(int vocab, int seq_len, int dim, int heads) {
  ref_shape s;
  memset(&s, 0, sizeof s);
  s.vocab = vocab;
  s.seq_len = seq_len;
  s.dim = dim;
  s.heads = heads;
  s.in_dim = dim;
  s.out_dim = dim;
  s.has_bias = 1;
  s.eps = REF_LN_EPS;
  return s;
}

static int linear_out(const ref_shape *s) { return s->out_dim > 0 ? s->out_dim : s->dim; }

int ref_out_features(const char *type, const ref_shape *s) {
  if (!strcmp(type, "embedding") || !strcmp(type, "pos_embedding") ||
      !strcmp(type, "transformer_block") || !strcmp(type, "llama_block"))
    return s->dim;
  if (!strcmp(type, "layernorm") || !strcmp(type, "gelu") || !strcmp(type, "relu") ||
      !strcmp(type, "rmsnorm"))
    return s->in_dim;
  if (!strcmp(type, "linear")) return linear_out(s);
  if (!strcmp(type, "lm_head")) return s->vocab;
  return -1;
}

/* Appends parameter name with shape [d0] (d1 == 0) or [d0, d1] to out[*n]. */
static void add_param(ref_param *out, int *n, const char *name, int64_t d0, int64_t d1) {
  ref_param *p = &out[(*n)++];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->ndim = d1 > 0 ? 2 : 1;
  p->shape[0] = d0;
  p->shape[1] = d1 > 0 ? d1 : 0;
  p->numel = d1 > 0 ? d0 * d1 : d0;
}

static int block_params(int64_t d, ref_param *out) {
  int n = 0;
  add_param(out, &n, "ln1.weight", d, 0);
  add_param(out, &n, "ln1.bias", d, 0);
  add_param(out, &n, "attn.qkv.weight", 3 * d, d);
  add_param(out, &n, "attn.qkv.bias", 3 * d, 0);
  add_param(out, &n, "attn.proj.weight", d, d);
  add_param(out, &n, "attn.proj.bias", d, 0);
  add_param(out, &n, "ln2.weight", d, 0);
  add_param(out, &n, "ln2.bias", d, 0);
  add_param(out, &n, "mlp.fc.weight", 4 * d, d);
  add_param(out, &n, "mlp.fc.bias", 4 * d, 0);
  add_param(out, &n, "mlp.proj.weight", d, 4 * d);
  add_param(out, &n, "mlp.proj.bias", d, 0);
  return n;
}

static int llama_kv_heads(const ref_shape *s) { return s->kv_heads > 0 ? s->kv_heads : s->heads; }
static int llama_head_dim(const ref_shape *s) {
  return s->head_dim > 0 ? s->head_dim : s->dim / s->heads;
}

static int llama_params(const ref_shape *s, ref_param *out) {
  int n = 0, d = s->dim, hd = llama_head_dim(s), K = llama_kv_heads(s), F = s->ffn_dim;
  add_param(out, &n, "attn_norm.weight", d, 0);
  add_param(out, &n, "attn.q.weight", (int64_t)s->heads * hd, d);
  add_param(out, &n, "attn.k.weight", (int64_t)K * hd, d);
  add_param(out, &n, "attn.v.weight", (int64_t)K * hd, d);
  add_param(out, &n, "attn.o.weight", d, (int64_t)s->heads * hd);
  add_param(out, &n, "mlp_norm.weight", d, 0);
  add_param(out, &n, "mlp.gate.weight", F, d);
  add_param(out, &n, "mlp.up.weight", F, d);
  add_param(out, &n, "mlp.down.weight", d, F);
  if (s->qkv_bias) {
    add_param(out, &n, "attn.q.bias", (int64_t)s->heads * hd, 0);
    add_param(out, &n, "attn.k.bias", (int64_t)K * hd, 0);
    add_param(out, &n, "attn.v.bias", (int64_t)K * hd, 0);
  }
  if (s->qk_norm) {
    add_param(out, &n, "attn.q_norm.weight", hd, 0);
    add_param(out, &n, "attn.k_norm.weight", hd, 0);
  }
  if (s->mlp_bias) {
    add_param(out, &n, "mlp.gate.bias", F, 0);
    add_param(out, &n, "mlp.up.bias", F, 0);
    add_param(out, &n, "mlp.down.bias", d, 0);
  }
  if (s->post_norms) {
    add_param(out, &n, "attn_post_norm.weight", d, 0);
    add_param(out, &n, "mlp_post_norm.weight", d, 0);
  }
  return n;
}

int ref_params(const char *type, const ref_shape *s, ref_param out[REF_MAX_PARAMS]) {
  int n = 0;
  if (!strcmp(type, "embedding") || !strcmp(type, "lm_head")) {
    add_param(out, &n, "weight", s->vocab, s->dim);
  } else if (!strcmp(type, "pos_embedding")) {
    add_param(out, &n, "weight", s->seq_len, s->dim);
  } else if (!strcmp(type, "layernorm")) {
    add_param(out, &n, "weight", s->in_dim, 0);
    add_param(out, &n, "bias", s->in_dim, 0);
  } else if (!strcmp(type, "linear")) {
    add_param(out, &n, "weight", linear_out(s), s->in_dim);
    if (s->has_bias) add_param(out, &n, "bias", linear_out(s), 0);
  } else if (!strcmp(type, "transformer_block")) {
    n = block_params(s->dim, out);
  } else if (!strcmp(type, "rmsnorm")) {
    add_param(out, &n, "weight", s->in_dim, 0);
  } else if (!strcmp(type, "llama_block")) {
    n = llama_params(s, out);
  } else if (strcmp(type, "gelu") != 0 && strcmp(type, "relu") != 0) {
    return -1;
  }
  return n;
}

/* --- Building blocks, one row each -------------------------------------------------------- */

/* y[o] = sum_i w[o, i] x[i] + (b ? b[o] : 0), w is [n_out, n_in] (PyTorch nn.Linear layout). */
static void ref_affine(const double *w, const double *b, const double *x, int n_in, int n_out,
                       double *y) {
  for (int o = 0; o < n_out; o++) {
    double acc = b ? b[o] : 0.0;
    for (int i = 0; i < n_in; i++) acc += w[(int64_t)o * n_in + i] * x[i];
    y[o] = acc;
  }
}

/* LayerNorm of one row of n values with the biased variance (divide by n, like PyTorch). */
static void ref_ln(const double *x, const double *w, const double *b, int n, double eps,
                   double *y) {
  double mean = 0.0, var = 0.0;
  for (int i = 0; i < n; i++) mean += x[i];
  mean /= n;
  for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  var /= n;
  double rstd = 1.0 / sqrt(var + eps);
  for (int i = 0; i < n; i++) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

static double ref_gelu(double x) {
  const double k = sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

/* --- Layers ------------------------------------------------------------------------------- */

static void fwd_embedding(const ref_shape *s, double *const *p, const int32_t *tok, int64_t rows,
                          double *out) {
  /* scale_sqrt_dim: sqrt(dim) rounded to float32, as Gemma's normalizer */
  double scale = s->embed_scale ? (double)(float)sqrt((double)s->dim) : 1.0;
  for (int64_t r = 0; r < rows; r++)
    for (int i = 0; i < s->dim; i++) out[r * s->dim + i] = p[0][(int64_t)tok[r] * s->dim + i] * scale;
}

static void fwd_pos_embedding(const ref_shape *s, double *const *p, const double *in, int B,
                              int T, double *out) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int i = 0; i < s->dim; i++) {
        int64_t k = ((int64_t)b * T + t) * s->dim + i;
        out[k] = in[k] + p[0][(int64_t)t * s->dim + i];
      }
}

static void fwd_layernorm(const ref_shape *s, double *const *p, const double *in, int64_t rows,
                          double *out) {
  double eps = s->eps > 0 ? s->eps : REF_LN_EPS;
  for (int64_t r = 0; r < rows; r++)
    ref_ln(in + r * s->in_dim, p[0], p[1], s->in_dim, eps, out + r * s->in_dim);
}

static void fwd_linear(const ref_shape *s, double *const *p, const double *in, int64_t rows,
                       double *out) {
  int n_out = linear_out(s);
  for (int64_t r = 0; r < rows; r++)
    ref_affine(p[0], s->has_bias ? p[1] : NULL, in + r * s->in_dim, s->in_dim, n_out,
               out + r * n_out);
}

static void fwd_pointwise(int is_gelu, const double *in, int64_t n, double *out) {
  for (int64_t i = 0; i < n; i++) out[i] = is_gelu ? ref_gelu(in[i]) : (in[i] > 0 ? in[i] : 0.0);
}

static void fwd_lm_head(const ref_shape *s, double *const *p, const double *in, int64_t rows,
                        double *out) {
  for (int64_t r = 0; r < rows; r++) {
    double *z = out + r * s->vocab;
    ref_affine(p[0], NULL, in + r * s->dim, s->dim, s->vocab, z);
    for (int v = 0; s->softcap > 0 && v < s->vocab; v++) z[v] = tanh(z[v] / s->softcap) * s->softcap;
  }
}

/* Causal multi-head attention of one sequence: qkv is [T, 3d], o is [T, d]. p is scratch [T]. */
static void ref_attention(const double *qkv, int T, int d, int heads, double *p, double *o) {
  int hd = d / heads;
  double scale = 1.0 / sqrt((double)hd);
  for (int h = 0; h < heads; h++)
    for (int t = 0; t < T; t++) {
      const double *q = qkv + (int64_t)t * 3 * d + h * hd;
      double mx = -INFINITY, sum = 0.0;
      for (int u = 0; u <= t; u++) {
        const double *k = qkv + (int64_t)u * 3 * d + d + h * hd;
        double dot = 0.0;
        for (int i = 0; i < hd; i++) dot += q[i] * k[i];
        p[u] = dot * scale;
        if (p[u] > mx) mx = p[u];
      }
      for (int u = 0; u <= t; u++) sum += (p[u] = exp(p[u] - mx));
      double *ot = o + (int64_t)t * d + h * hd;
      for (int i = 0; i < hd; i++) ot[i] = 0.0;
      for (int u = 0; u <= t; u++) {
        const double *v = qkv + (int64_t)u * 3 * d + 2 * d + h * hd;
        for (int i = 0; i < hd; i++) ot[i] += p[u] / sum * v[i];
      }
    }
}

/* Temporaries of one sequence of the block, allocated once per call. */
typedef struct {
  double *ln, *qkv, *att, *proj, *x1, *fc, *p;
} block_tmp;

static int block_tmp_alloc(block_tmp *m, int T, int d) {
  m->ln = malloc(sizeof(double) * T * d);
  m->qkv = malloc(sizeof(double) * T * 3 * d);
  m->att = malloc(sizeof(double) * T * d);
  m->proj = malloc(sizeof(double) * d);
  m->x1 = malloc(sizeof(double) * T * d);
  m->fc = malloc(sizeof(double) * 4 * d);
  m->p = malloc(sizeof(double) * T);
  return m->ln && m->qkv && m->att && m->proj && m->x1 && m->fc && m->p ? 0 : -1;
}

static void block_tmp_free(block_tmp *m) {
  free(m->ln);
  free(m->qkv);
  free(m->att);
  free(m->proj);
  free(m->x1);
  free(m->fc);
  free(m->p);
}

/* x1 = x + attn.proj(attention(ln1(x))) for one sequence x [T, d]. */
static void block_attn_half(double *const *p, const double *x, int T, int d, int heads,
                            block_tmp *m) {
  for (int t = 0; t < T; t++) {
    ref_ln(x + (int64_t)t * d, p[0], p[1], d, REF_LN_EPS, m->ln + (int64_t)t * d);
    ref_affine(p[2], p[3], m->ln + (int64_t)t * d, d, 3 * d, m->qkv + (int64_t)t * 3 * d);
  }
  ref_attention(m->qkv, T, d, heads, m->p, m->att);
  for (int t = 0; t < T; t++) {
    ref_affine(p[4], p[5], m->att + (int64_t)t * d, d, d, m->proj);
    for (int i = 0; i < d; i++) m->x1[(int64_t)t * d + i] = x[(int64_t)t * d + i] + m->proj[i];
  }
}

/* y = x1 + mlp.proj(gelu(mlp.fc(ln2(x1)))) for one sequence. */
static void block_mlp_half(double *const *p, int T, int d, block_tmp *m, double *y) {
  for (int t = 0; t < T; t++) {
    const double *x1 = m->x1 + (int64_t)t * d;
    ref_ln(x1, p[6], p[7], d, REF_LN_EPS, m->ln);
    ref_affine(p[8], p[9], m->ln, d, 4 * d, m->fc);
    for (int i = 0; i < 4 * d; i++) m->fc[i] = ref_gelu(m->fc[i]);
    ref_affine(p[10], p[11], m->fc, 4 * d, d, m->proj);
    for (int i = 0; i < d; i++) y[(int64_t)t * d + i] = x1[i] + m->proj[i];
  }
}

static int fwd_block(const ref_shape *s, double *const *p, const double *in, int B, int T,
                     double *out) {
  int d = s->dim;
  block_tmp m;
  if (s->heads <= 0 || d % s->heads != 0) return -1;
  if (block_tmp_alloc(&m, T, d) != 0) {
    block_tmp_free(&m);
    return -1;
  }
  for (int b = 0; b < B; b++) {
    block_attn_half(p, in + (int64_t)b * T * d, T, d, s->heads, &m);
    block_mlp_half(p, T, d, &m, out + (int64_t)b * T * d);
  }
  block_tmp_free(&m);
  return 0;
}

/* --- Llama ------------------------------------------------------------------------------- */

#define REF_RMS_EPS 1e-6
#define REF_ROPE_THETA 10000.0

/* RMSNorm of one row: x / sqrt(mean(x^2) + eps) * w. */
static void ref_rms(const double *x, const double *w, int n, double eps, double *y) {
  double ms = 0.0;
  for (int i = 0; i < n; i++) ms += x[i] * x[i];
  double r = 1.0 / sqrt(ms / n + eps);
  for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static double rms_eps(const ref_shape *s) { return s->rms_eps > 0 ? s->rms_eps : REF_RMS_EPS; }

/* The RMSNorm of shape s on one row: its eps, its weight plus s->norm_offset. */
static void ref_norm(const ref_shape *s, const double *x, const double *w, int n, double *y) {
  double *wo = malloc(sizeof(double) * (size_t)n);
  if (!wo) abort();
  for (int i = 0; i < n; i++) wo[i] = s->norm_offset + w[i];
  ref_rms(x, wo, n, rms_eps(s), y);
  free(wo);
}

static void fwd_rmsnorm(const ref_shape *s, double *const *p, const double *in, int64_t rows,
                        double *out) {
  for (int64_t r = 0; r < rows; r++)
    ref_norm(s, in + r * s->in_dim, p[0], s->in_dim, out + r * s->in_dim);
}

/* inv_freq[i] of pair i as transformers' scaled types define it, in double. */
static double ref_scaled_inv_freq(const ref_shape *s, double inv, int i, int hd, double theta) {
  const double pi = 3.141592653589793, f = s->rope_factor;
  if (s->rope_type == 1) return inv / f;
  if (s->rope_type == 2) {
    double wavelen = 2 * pi / inv, orig = s->rope_orig;
    if (wavelen < orig / s->rope_high) return inv;
    if (wavelen > orig / s->rope_low) return inv / f;
    double smooth = (orig / wavelen - s->rope_low) / (s->rope_high - s->rope_low);
    return (1 - smooth) * inv / f + smooth * inv;
  }
  /* yarn: a linear ramp over pairs [low, high) from inv (extrapolation) to inv / f */
  double lo = floor(hd * log(s->rope_orig / (32 * 2 * pi)) / (2 * log(theta)));
  double hi = ceil(hd * log(s->rope_orig / (1 * 2 * pi)) / (2 * log(theta)));
  lo = lo < 0 ? 0 : lo;
  hi = hi > hd - 1 ? hd - 1 : hi;
  if (lo == hi) hi += 0.001;
  double ramp = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
  return inv / f * ramp + inv * (1 - ramp);
}

/* Rotates one head x[hd] at position t in place (rotate-half pairs i, i + hd/2). */
static void ref_rope_head(const ref_shape *s, double *x, int hd, int t, double theta) {
  int half = hd / 2;
  double scale = s->rope_type == 3 && s->rope_factor > 1 ? 0.1 * log(s->rope_factor) + 1 : 1;
  for (int i = 0; i < half; i++) {
    /* the angle exactly as float32 arithmetic defines it (Hugging Face's convention) */
    float inv = (float)(1.0 / (double)(float)pow(theta, (double)((float)(2 * i) / (float)hd)));
    if (s->rope_type) inv = (float)ref_scaled_inv_freq(s, inv, i, hd, theta);
    float ang = (float)t * inv;
    double c = cos((double)ang) * scale, sn = sin((double)ang) * scale, a = x[i], b = x[i + half];
    x[i] = a * c - b * sn;
    x[i + half] = b * c + a * sn;
  }
}

static double ref_silu(double g) { return g / (1.0 + exp(-g)); }

/* One sequence x [T, d] -> y [T, d]. */
static int llama_sequence(const ref_shape *s, double *const *p, const double *x, int T,
                          double *y) {
  int d = s->dim, H = s->heads, hd = llama_head_dim(s), K = llama_kv_heads(s), F = s->ffn_dim;
  double theta = s->rope_theta > 0 ? s->rope_theta : REF_ROPE_THETA;
  double *n = malloc(sizeof(double) * d), *q = malloc(sizeof(double) * T * H * hd);
  double *k = malloc(sizeof(double) * T * K * hd), *v = malloc(sizeof(double) * T * K * hd);
  double *att = malloc(sizeof(double) * H * hd), *h = malloc(sizeof(double) * T * d);
  double *sc = malloc(sizeof(double) * T), *g = malloc(sizeof(double) * F);
  double *u = malloc(sizeof(double) * F), *o = malloc(sizeof(double) * d);
  double *pn = malloc(sizeof(double) * d);
  int ok = n && q && k && v && att && h && sc && g && u && o && pn;
  /* the optional parameters' places (ref_layers.h): after the q/k/v biases; post_norms' last */
  const int qn = 9 + 3 * s->qkv_bias, mb = qn + 2 * s->qk_norm, post = mb + 3 * s->mlp_bias;
  for (int t = 0; ok && t < T; t++) {
    ref_norm(s, x + (int64_t)t * d, p[0], d, n);
    const int bias = s->qkv_bias;
    ref_affine(p[1], bias ? p[9] : NULL, n, d, H * hd, q + (int64_t)t * H * hd);
    ref_affine(p[2], bias ? p[10] : NULL, n, d, K * hd, k + (int64_t)t * K * hd);
    ref_affine(p[3], bias ? p[11] : NULL, n, d, K * hd, v + (int64_t)t * K * hd);
    for (int j = 0; s->qk_norm && j < H; j++) {
      double *qh = q + (int64_t)t * H * hd + j * hd;
      ref_norm(s, qh, p[qn], hd, qh);
    }
    for (int j = 0; s->qk_norm && j < K; j++) {
      double *kh = k + (int64_t)t * K * hd + j * hd;
      ref_norm(s, kh, p[qn + 1], hd, kh);
    }
    for (int j = 0; j < H; j++) ref_rope_head(s, q + (int64_t)t * H * hd + j * hd, hd, t, theta);
    for (int j = 0; j < K; j++) ref_rope_head(s, k + (int64_t)t * K * hd + j * hd, hd, t, theta);
  }
  for (int t = 0; ok && t < T; t++) {
    for (int j = 0; j < H; j++) {
      const double *qt = q + (int64_t)t * H * hd + j * hd;
      int kv = j / (H / K);
      double mx = -INFINITY, sum = 0.0;
      const int lo = s->window > 0 && t - s->window + 1 > 0 ? t - s->window + 1 : 0;
      for (int u2 = lo; u2 <= t; u2++) {
        const double *ku = k + (int64_t)u2 * K * hd + kv * hd;
        double dot = 0.0;
        for (int i = 0; i < hd; i++) dot += qt[i] * ku[i];
        sc[u2] = s->attn_scale > 0 ? dot * s->attn_scale : dot / sqrt((double)hd);
        if (s->attn_softcap > 0) sc[u2] = s->attn_softcap * tanh(sc[u2] / s->attn_softcap);
        if (sc[u2] > mx) mx = sc[u2];
      }
      for (int u2 = lo; u2 <= t; u2++) sum += (sc[u2] = exp(sc[u2] - mx));
      for (int i = 0; i < hd; i++) {
        double acc = 0.0;
        for (int u2 = lo; u2 <= t; u2++)
          acc += sc[u2] / sum * v[(int64_t)u2 * K * hd + kv * hd + i];
        att[j * hd + i] = acc;
      }
    }
    ref_affine(p[4], NULL, att, H * hd, d, o);
    if (s->post_norms) ref_norm(s, memcpy(pn, o, sizeof(double) * d), p[post], d, o);
    for (int i = 0; i < d; i++) h[(int64_t)t * d + i] = x[(int64_t)t * d + i] + o[i];
    ref_norm(s, h + (int64_t)t * d, p[5], d, n);
    ref_affine(p[6], s->mlp_bias ? p[mb] : NULL, n, d, F, g);
    ref_affine(p[7], s->mlp_bias ? p[mb + 1] : NULL, n, d, F, u);
    for (int i = 0; i < F; i++) g[i] = (s->gelu_mlp ? ref_gelu(g[i]) : ref_silu(g[i])) * u[i];
    ref_affine(p[8], s->mlp_bias ? p[mb + 2] : NULL, g, F, d, o);
    if (s->post_norms) ref_norm(s, memcpy(pn, o, sizeof(double) * d), p[post + 1], d, o);
    for (int i = 0; i < d; i++) y[(int64_t)t * d + i] = h[(int64_t)t * d + i] + o[i];
  }
  free(n), free(q), free(k), free(v), free(att), free(h), free(sc), free(g), free(u), free(o);
  free(pn);
  return ok ? 0 : -1;
}

static int fwd_llama(const ref_shape *s, double *const *p, const double *in, int B, int T,
                     double *out) {
  int d = s->dim, K = llama_kv_heads(s);
  if (s->heads <= 0 || (!s->head_dim && d % s->heads != 0) || s->heads % K != 0 ||
      s->ffn_dim <= 0)
    return -1;
  for (int b = 0; b < B; b++)
    if (llama_sequence(s, p, in + (int64_t)b * T * d, T, out + (int64_t)b * T * d) != 0)
      return -1;
  return 0;
}

int ref_forward(const char *type, const ref_shape *s, double *const *params, const double *in,
                const int32_t *tokens, int B, int T, double *out) {
  int64_t rows = (int64_t)B * T;
  if (!strcmp(type, "embedding")) fwd_embedding(s, params, tokens, rows, out);
  else if (!strcmp(type, "pos_embedding")) fwd_pos_embedding(s, params, in, B, T, out);
  else if (!strcmp(type, "layernorm")) fwd_layernorm(s, params, in, rows, out);
  else if (!strcmp(type, "linear")) fwd_linear(s, params, in, rows, out);
  else if (!strcmp(type, "gelu")) fwd_pointwise(1, in, rows * s->in_dim, out);
  else if (!strcmp(type, "relu")) fwd_pointwise(0, in, rows * s->in_dim, out);
  else if (!strcmp(type, "lm_head")) fwd_lm_head(s, params, in, rows, out);
  else if (!strcmp(type, "transformer_block")) return fwd_block(s, params, in, B, T, out);
  else if (!strcmp(type, "rmsnorm")) fwd_rmsnorm(s, params, in, rows, out);
  else if (!strcmp(type, "llama_block")) return fwd_llama(s, params, in, B, T, out);
  else return -1;
  return 0;
}

/* --- Losses ------------------------------------------------------------------------------- */

double ref_cross_entropy_sum(const double *logits, const int32_t *targets, int N, int V) {
  double total = 0.0;
  for (int n = 0; n < N; n++) {
    const double *z = logits + (int64_t)n * V;
    double mx = z[0], sum = 0.0;
    for (int v = 1; v < V; v++)
      if (z[v] > mx) mx = z[v];
    for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
    total += mx + log(sum) - z[targets[n]]; /* -log softmax = logsumexp - z_target */
  }
  return total;
}

double ref_mse_sum(const double *y, const double *t, int N, int F) {
  double total = 0.0;
  for (int64_t i = 0; i < (int64_t)N * F; i++) total += (y[i] - t[i]) * (y[i] - t[i]) / F;
  return total;
}
