/* Cost estimates (what the partitioner will plan with) from configuration alone, checked
 * against closed forms for the reference model. */
#include <string.h>

#include "core/error.h"
#include "model/model.h"
#include "test_util.h"

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
  return test_summary("layer cost");
}
