/* tests/gpu/test_attention_memory.c: what a transformer block keeps per micro-batch on the GPU,
 * whose fused attention saves B*H*T log-sum-exps instead of the CPU's B*H*T*T probabilities.
 * Sizes only (kernels_gpu_sizing, device_kernels_for): no GPU is opened, so it runs in every
 * GPU build.
 *   1. layer_saved_bytes of a block with each table against the closed form of
 *      layers/transformer_block.c's saved views (each rounded up to 16 floats):
 *        4 * (4 r(N) + 7 r(N d) + 2 r(3 N d) + 2 r(4 N d) + r(A)),  N = B T,
 *      A = B H T T (cpu) or B H T (gpu).
 *   2. The planner's estimate (memory_estimate_stage) of a GPT-2-like model with
 *      pipeline.device gpu against cpu: the activations differ by exactly
 *      blocks * 4 * (r(B H T T) - r(B H T)), and on the GPU they are linear in T (doubling
 *      seq_len doubles them exactly) where the CPU's have the T^2 term.
 *   3. Prints the figures at GPT-2 small (d 768, 12 heads, T 1024, B 8) for the docs.
 */
#include <stdio.h>
#include <string.h>

#include "../test_util.h"
#include "device/device.h"
#include "kernels/cuda/kernels_gpu.h"
#include "model/model.h"
#include "partition/memory.h"

static int64_t r16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static int64_t block_closed_form(int64_t B, int64_t T, int64_t d, int64_t attn) {
  int64_t N = B * T;
  return 4 * (4 * r16(N) + 7 * r16(N * d) + 2 * r16(3 * N * d) + 2 * r16(4 * N * d) + r16(attn));
}

static int configure(pt_spec *s, pt_model *m, int seq_len, int B, int dim, int heads,
                     const char *device) {
  char text[1024];
  snprintf(text, sizeof text,
           "model: {vocab: 256, seq_len: %d, dim: %d, heads: %d}\n"
           "layers:\n  - embedding: {tie: wte}\n  - pos_embedding: {}\n"
           "  - transformer_block: {repeat: 3}\n  - layernorm: {}\n  - lm_head: {tie: wte}\n"
           "pipeline: {device: %s}\n"
           "train: {micro_batch_size: %d, micro_batches: 2}\n",
           seq_len, dim, heads, device, B);
  spec_errors e = {0};
  if (spec_load_text(text, strlen(text), "attn_mem.yaml", NULL, 0, s, &e) != 0 ||
      model_configure(m, s, &e) != 0) {
    CHECK(0, "configure: %s", e.msg);
    return -1;
  }
  return 0;
}

static const pt_layer *first_block(const pt_model *m) {
  for (int li = 0; li < m->n_layers; li++)
    if (!strcmp(m->layers[li].type->name, "transformer_block")) return &m->layers[li];
  return NULL;
}

static void test_block_closed_form(int B, int T, int d, int H) {
  pt_spec s;
  pt_model m;
  if (configure(&s, &m, T, B, d, H, "cpu") != 0) return;
  const pt_layer *L = first_block(&m);
  int64_t cpu = (int64_t)layer_saved_bytes(L, &kernels_cpu, B, T);
  int64_t gpu = (int64_t)layer_saved_bytes(L, &kernels_gpu_sizing, B, T);
  int64_t cpu_cf = block_closed_form(B, T, d, (int64_t)B * H * T * T);
  int64_t gpu_cf = block_closed_form(B, T, d, (int64_t)B * H * T);
  CHECK(cpu == cpu_cf, "B=%d T=%d d=%d H=%d: cpu block saves %lld bytes, closed form %lld", B, T,
        d, H, (long long)cpu, (long long)cpu_cf);
  CHECK(gpu == gpu_cf, "B=%d T=%d d=%d H=%d: gpu block saves %lld bytes, closed form %lld", B, T,
        d, H, (long long)gpu, (long long)gpu_cf);
  CHECK(layer_scratch_bytes(L, &kernels_gpu_sizing, B, T) == 4 * (size_t)(5 * B * T * d + 64),
        "B=%d T=%d: gpu block scratch holds an attention term", B, T);
  model_free(&m);
  spec_free(&s);
}

static int64_t activations(int T, int B, const char *device) {
  pt_spec s;
  pt_model m;
  if (configure(&s, &m, T, B, 64, 4, device) != 0) return -1;
  pt_stage_memory est;
  memory_estimate_stage(&m, 0, m.n_layers, 1, &est);
  model_free(&m);
  spec_free(&s);
  return est.activations;
}

static void test_plan_estimate(int T, int B) {
  const int64_t blocks = 3, H = 4;
  int64_t cpu = activations(T, B, "cpu"), gpu = activations(T, B, "gpu");
  int64_t want = blocks * 4 * (r16((int64_t)B * H * T * T) - r16((int64_t)B * H * T));
  CHECK(cpu - gpu == want, "T=%d B=%d: estimate cpu %lld - gpu %lld = %lld, expected %lld", T, B,
        (long long)cpu, (long long)gpu, (long long)(cpu - gpu), (long long)want);
  int64_t gpu2 = activations(2 * T, B, "gpu"), cpu2 = activations(2 * T, B, "cpu");
  CHECK(gpu2 == 2 * gpu, "T=%d B=%d: gpu activations %lld at 2T, not twice %lld (a T^2 term?)", T,
        B, (long long)gpu2, (long long)gpu);
  CHECK(cpu2 - 2 * cpu == blocks * 4 * 2 * (int64_t)B * H * T * T,
        "T=%d B=%d: cpu activations' T^2 term %lld, expected %lld", T, B,
        (long long)(cpu2 - 2 * cpu), (long long)(blocks * 4 * 2 * (int64_t)B * H * T * T));
}

int main(void) {
  test_block_closed_form(2, 37, 48, 3);
  test_block_closed_form(8, 1024, 768, 12);
  test_plan_estimate(32, 4);
  test_plan_estimate(64, 2);
  /* GPT-2 small, one block, one micro-batch of 8 x 1024 */
  int64_t B = 8, T = 1024, d = 768, H = 12;
  int64_t cpu = block_closed_form(B, T, d, B * H * T * T), gpu = block_closed_form(B, T, d, B * H * T);
  printf("GPT-2 small block (B=8 T=1024 d=768 H=12) saved per micro-batch: cpu %.2f MiB "
         "(probabilities %.2f MiB), gpu %.2f MiB (log-sum-exps %.3f MiB)\n",
         cpu / 1048576.0, 4.0 * B * H * T * T / 1048576.0, gpu / 1048576.0,
         4.0 * B * H * T / 1048576.0);
  return test_summary("test_attention_memory");
}
