/* tests/ref/ref_layers.h: naive double-precision reference forwards of the built-in layers.
 *
 * Written from the layer math (see the layer descriptions below), not from the float32
 * implementation, so tests can compare the two and take finite differences in double.
 * Everything is plain loops: slow and obviously correct is the point.
 *
 * Tensors are row-major doubles. Activations are [B, T, F]; a layer's input has s->in_dim
 * features (or is int32 token ids [B, T] for "embedding") and its output has
 * ref_out_features() features. Parameters are passed as params[p], in the same order and with
 * the same [out, in] layout as the float layers declare them (ref_params() lists names and
 * shapes):
 *
 *   embedding          weight [vocab, dim]                  out[b,t,:] = weight[tok[b,t], :]
 *   pos_embedding      weight [seq_len, dim]                out[b,t,:] = in[b,t,:] + weight[t,:]
 *   layernorm          weight [in], bias [in]               (x-mean)/sqrt(var+eps)*w + b
 *                                                           (biased variance, per row)
 *   linear             weight [out, in], bias [out] (if has_bias)   in . weight^T + bias
 *   gelu, relu         (none)                               tanh-approximate GELU, max(x, 0)
 *   lm_head            weight [vocab, dim]                  in . weight^T
 *   transformer_block  GPT-2 pre-LayerNorm block, 12 params in this order:
 *                      ln1.weight [d], ln1.bias [d], attn.qkv.weight [3d, d],
 *                      attn.qkv.bias [3d], attn.proj.weight [d, d], attn.proj.bias [d],
 *                      ln2.weight [d], ln2.bias [d], mlp.fc.weight [4d, d], mlp.fc.bias [4d],
 *                      mlp.proj.weight [d, 4d], mlp.proj.bias [d]
 *                      x1 = x + proj(causal_attn(ln1(x))); y = x1 + mlp.proj(gelu(mlp.fc(ln2(x1))))
 *                      (q/k/v = columns [0,d), [d,2d), [2d,3d) of qkv; head j uses columns
 *                      j*hd..(j+1)*hd-1 of each; scores scaled by 1/sqrt(hd); LayerNorm eps 1e-5)
 *   rmsnorm            weight [in]                          x / sqrt(mean(x^2) + eps) * w
 *   llama_block        Llama decoder layer, 9 params in this order (H heads, K kv_heads,
 *                      hd = dim/H, F ffn_dim): attn_norm.weight [d], attn.q.weight [H hd, d],
 *                      attn.k.weight [K hd, d], attn.v.weight [K hd, d], attn.o.weight [d, H hd],
 *                      mlp_norm.weight [d], mlp.gate.weight [F, d], mlp.up.weight [F, d],
 *                      mlp.down.weight [d, F], then the optional ones (ref_shape: qkv_bias,
 *                      qk_norm, mlp_bias, in that order)
 *                      h = x + o(attn(rope(q(n1 x)), rope(k(n1 x)), v(n1 x))) (with qk_norm,
 *                      each q and k head RMSNormed over hd before rope);
 *                      y = h + down(silu(gate(n2 h)) * up(n2 h)), n1, n2 RMSNorms with eps;
 *                      query head j reads kv head j / (H/K); causal, scale 1/sqrt(hd) (or
 *                      attn_scale), optional window and soft-cap (ref_shape); rope
 *                      rotates pairs (i, i + hd/2) of each q and k head at position t by the
 *                      angle t * inv_freq[i], inv_freq[i] = 1 / theta^(2i/hd), that angle as
 *                      float32 computes it (the convention's definition), cos/sin in double;
 *                      with rope_type set, inv_freq[i] scaled as transformers' linear, llama3
 *                      or yarn formula says, evaluated in double (then rounded to float), and
 *                      cos/sin times yarn's attention factor 0.1 ln(factor) + 1
 *
 * Batches are independent in every layer: ref_forward(B=1) on the slice of batch b gives the
 * rows of batch b, which lets finite-difference loops recompute only the batch they perturb.
 */
#ifndef PT_TESTS_REF_LAYERS_H
#define PT_TESTS_REF_LAYERS_H

#include <stdint.h>

#define REF_MAX_PARAMS 24

typedef struct {
  int vocab, seq_len, dim, heads; /* the spec's model: settings */
  int in_dim;   /* input features (ignored for embedding) */
  int out_dim;  /* linear only: output features; 0 means dim (the default of `out`) */
  int has_bias; /* linear only: 1 when the layer has a bias (the default) */
  double eps;   /* layernorm only: its `eps` (1e-5 by default); 0 means 1e-5 */
  /* rmsnorm and llama_block: eps of the RMSNorms (0 means 1e-6); llama_block: kv heads (0 means
   * heads), ffn_dim, rope_theta (0 means 10000). */
  double rms_eps, rope_theta;
  int kv_heads, ffn_dim;
  /* llama_block's rope_scaling: rope_type 0 none, 1 linear, 2 llama3, 3 yarn (beta_fast 32,
   * beta_slow 1, truncated, attention factor from factor); rope_factor, llama3's low and high
   * frequency factors, rope_orig (original_max_position_embeddings: llama3, yarn). */
  int rope_type, rope_orig;
  double rope_factor, rope_low, rope_high;
  int qkv_bias; /* llama_block: biases on q, k, v (params attn.q.bias, attn.k.bias, attn.v.bias
                   after mlp.down.weight) */
  int head_dim; /* llama_block: hd (0 means dim / heads); q [H hd, d], o [d, H hd] */
  int qk_norm;  /* llama_block: per-head RMSNorm of q and k before rope (attn.q_norm.weight,
                   attn.k_norm.weight [hd], after the q/k/v biases; the block's eps) */
  int mlp_bias; /* llama_block: biases on gate, up, down (mlp.gate.bias [F], mlp.up.bias [F],
                   mlp.down.bias [d], after the q/k norms) */
  /* llama_block: the sliding window (0: none; query t sees keys t - window < s <= t), the
   * attention-logit soft-cap (0: none; score z -> cap tanh(z / cap) after scaling) and the
   * scores' scale (0: 1/sqrt(hd)) */
  int window;
  double attn_softcap, attn_scale;
  /* Gemma 2's options: rmsnorm and llama_block's norms (q/k norms too) compute with
   * norm_offset + w; llama_block's post_norms (params attn_post_norm.weight,
   * mlp_post_norm.weight last: the attention's and the MLP's outputs normed before the residual
   * adds) and gelu_mlp (the tanh GELU gates instead of silu); embedding's embed_scale (rows
   * times sqrt(dim) rounded to float); lm_head's softcap (logits z -> tanh(z / softcap) *
   * softcap, 0: none). */
  double norm_offset, softcap;
  int post_norms, gelu_mlp, embed_scale;
} ref_shape;

/* A shape with every argument at its default: in_dim = dim, linear out = dim with bias,
 * eps 1e-5. */
ref_shape ref_shape_default(int vocab, int seq_len, int dim, int heads);

/* Output features of type on shape s, or -1 for an unknown type. */
int ref_out_features(const char *type, const ref_shape *s);

/* One parameter as the layer declares it: state-dict suffix, rank and shape ([out, in] for
 * matrices), element count. */
typedef struct {
  char name[48];
  int ndim;
  int64_t shape[2];
  int64_t numel;
} ref_param;

/* Parameters of type on shape s, in declaration order: returns their number (-1 for an unknown
 * type) and fills out[0..n). */
int ref_params(const char *type, const ref_shape *s, ref_param out[REF_MAX_PARAMS]);

/* Forward of one layer on B x T rows: out is [B, T, ref_out_features()]. Token input
 * (embedding) comes in tokens, every other type reads in ([B, T, s->in_dim]); the unused one may
 * be NULL. T must not exceed s->seq_len for pos_embedding. Returns 0, or -1 for an unknown type. */
int ref_forward(const char *type, const ref_shape *s, double *const *params, const double *in,
                const int32_t *tokens, int B, int T, double *out);

/* Sum over the N rows of -log softmax(logits[row, :])[targets[row]]; logits is [N, V]. */
double ref_cross_entropy_sum(const double *logits, const int32_t *targets, int N, int V);

/* Sum over the N rows of sum_f (y - t)^2 / F; y and t are [N, F]. */
double ref_mse_sum(const double *y, const double *t, int N, int F);

#endif
