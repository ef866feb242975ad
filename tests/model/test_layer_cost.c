/* Cost estimates (what the partitioner will plan with) from configuration alone, checked
 * against closed forms for the reference model. */
#include <string.h>

#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

/* llama_block: H = 8 query heads of hd = 32 over K = 2 kv heads, F = 688. */
static void llama_cost(void) {
  const char *yaml =
      "model: {vocab: 256, seq_len: 128, dim: 256, heads: 8}\n"
      "layers:\n  - embedding: {}\n  - llama_block: {repeat: 2, kv_heads: 2, ffn_dim: 688}\n"
      "  - rmsnorm: {}\n  - lm_head: {}\n";
  pt_spec s;
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "llama.yaml", NULL, 0, &s, &e) != 0) pt_fatal("%s", e.msg);
  pt_model m;
  if (model_configure(&m, &s, &e) != 0) pt_fatal("%s", e.msg);
  const double d = 256, T = 128, V = 256, F = 688, W = (8 + 2 * 2) * 32;
  const int64_t block_params = (int64_t)(W * d + d * d + 3 * F * d + 2 * d);
  CHECK(model_param_count(&m) == 2 * block_params + (int64_t)(2 * V * d + d),
        "llama params %lld", (long long)model_param_count(&m));
  pt_layer_cost c;
  layer_cost(&m.layers[1], (int)T, &c);
  CHECK(c.param_bytes == 4 * block_params, "llama block param bytes %lld",
        (long long)c.param_bytes);
  CHECK(c.fwd_flops == 2 * T * (W * d + d * d + 3 * F * d) + 4 * T * T * d,
        "llama block fwd flops %.0f", c.fwd_flops);
  CHECK(c.bwd_flops == 2 * c.fwd_flops, "llama block bwd flops %.0f", c.bwd_flops);
  CHECK(c.saved_bytes == (int64_t)m.layers[1].type->saved_bytes(&m.layers[1], 1, (int)T),
        "llama block saved bytes %lld", (long long)c.saved_bytes);
  /* per sample at least: qkv and its gradient (2 W), 7 d-wide activations, gate|up and its
   * gradient (4 F), the SwiGLU output (F), the CPU's probabilities (H T T) */
  CHECK(c.saved_bytes >= 4 * (int64_t)(T * (2 * W + 7 * d + 5 * F) + 8 * T * T),
        "llama saved %lld too small", (long long)c.saved_bytes);
  layer_cost(&m.layers[3], (int)T, &c);
  CHECK(c.param_bytes == 4 * (int64_t)d && c.out_bytes == 4 * (int64_t)(T * d), "rmsnorm cost");
  model_free(&m);
  spec_free(&s);
}

int main(void) {
  const char *yaml =
      "model: {vocab: 256, seq_len: 128, dim: 256, heads: 8}\n"
      "layers:\n  - embedding: {tie: wte}\n  - pos_embedding: {}\n"
      "  - transformer_block: {repeat: 6}\n  - layernorm: {}\n  - lm_head: {tie: wte}\n";
  pt_spec s;
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "cost.yaml", NULL, 0, &s, &e) != 0) pt_fatal("%s", e.msg);
  pt_model m;
  if (model_configure(&m, &s, &e) != 0) pt_fatal("%s", e.msg);
  CHECK(m.params == NULL && m.n_floats == 0, "configure allocated parameters");
  const double d = 256, T = 128, V = 256;
  const int64_t block_params = 12 * 256 * 256 + 13 * 256;
  int64_t want = 6 * block_params + (int64_t)(V * d + T * d + 2 * d);
  CHECK(model_param_count(&m) == want, "params %lld, want %lld (tied weight once)",
        (long long)model_param_count(&m), (long long)want);
  pt_layer_cost c;
  layer_cost(&m.layers[2], (int)T, &c);
  CHECK(c.param_bytes == 4 * block_params, "block param bytes %lld", (long long)c.param_bytes);
  CHECK(c.fwd_flops == 2 * T * 12 * d * d + 4 * T * T * d, "block fwd flops %.0f", c.fwd_flops);
  CHECK(c.bwd_flops == 2 * c.fwd_flops, "block bwd flops %.0f", c.bwd_flops);
  CHECK(c.saved_bytes == (int64_t)m.layers[2].type->saved_bytes(&m.layers[2], 1, (int)T),
        "block saved bytes %lld", (long long)c.saved_bytes);
  /* per sample: at least the 15 d-wide activations and the T x T attention probabilities */
  CHECK(c.saved_bytes >= 4 * (int64_t)(T * 15 * d + 8 * T * T), "saved %lld too small",
        (long long)c.saved_bytes);
  CHECK(c.out_bytes == 4 * (int64_t)(T * d), "block out bytes %lld", (long long)c.out_bytes);
  layer_cost(&m.layers[9], (int)T, &c);
  CHECK(c.param_bytes == 4 * (int64_t)(V * d) && c.fwd_flops == 2 * T * V * d,
        "lm_head cost: %lld bytes, %.0f flops", (long long)c.param_bytes, c.fwd_flops);
  layer_cost(&m.layers[0], (int)T, &c);
  CHECK(c.fwd_flops == 0 && c.out_bytes == 4 * (int64_t)(T * d), "embedding cost");
  model_free(&m);
  spec_free(&s);
  llama_cost();
  return test_summary("layer cost");
}
