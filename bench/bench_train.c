/* bench/bench_train.c: sequential training throughput against the device's own float32 GEMM.
 *
 *   bench_train [SPEC] [--steps N] [--set KEY=VALUE ...]
 * Default SPEC: examples/gpt.yaml (vocab 256, seq_len 128, dim 256, 6 blocks, 8 heads, B 8,
 * M 8), run as one process on pipeline.device (auto: a GPU when there is one; --set
 * pipeline.device=cpu forces the CPU). Model FLOP/s = tokens * (6 * params + 12 * blocks * dim
 * * seq_len) / time; the baseline is sgemm on 1024^3 (OpenBLAS with one thread on the CPU,
 * cuBLAS float32 on a GPU; 4096^3 there, to fill it), measured between training steps so that
 * both see the same machine state. Prints the median of each and their ratio: the MFU against
 * what the device's GEMM reaches. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "engine/train.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  const char *path = "examples/gpt.yaml";
  const char *over[64] = {"pipeline.stages=1", "pipeline.data_parallel=1"};
  int n_over = 2, steps = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--set") && i + 1 < argc && n_over < 64) over[n_over++] = argv[++i];
    else if (argv[i][0] != '-') path = argv[i];
    else { fprintf(stderr, "usage: bench_train [SPEC] [--steps N] [--set K=V]\n"); return 2; }
  }
  if (steps < 1 || steps > 64) steps = 3;
  kernels_cpu_set_threads(1);
  pt_spec spec;
  spec_errors e = {0};
  if (spec_load(path, over, n_over, &spec, &e) != 0) { fprintf(stderr, "%s\n", e.msg); return 2; }
  pt_trainer t;
  char err[1024];
  if (trainer_init(&t, &spec, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 2; }

  int n = device_current()->ops->gemm_n; /* the MFU yardstick's size */
  char what[160];
  double fpt = model_flops_per_token(&t.part.model), model[64], gemm[64];
  pt_step_metrics m;
  trainer_step(&t, &m); /* warm-up: page faults, OpenBLAS buffers */
  for (int s = 0; s < steps; s++) {
    gemm[s] = device_gemm_flops(device_current(), n, 0.5);
    trainer_step(&t, &m);
    model[s] = m.tokens_per_s * fpt;
  }
  double mm = median(model, steps), gm = median(gemm, steps);
  printf("model: %lld params, %.1f MFLOP/token, loss %.4f\n",
         (long long)model_param_count(&t.part.model), fpt / 1e6, m.loss);
  device_describe(device_current(), what, sizeof what);
  printf("device: %s; training: %.2f GFLOP/s (median of %d steps), sgemm %d^3: %.2f GFLOP/s\n",
         device_name(device_current()), mm / 1e9, steps, n, gm / 1e9);
  printf("ratio (model FLOP/s / float32 sgemm FLOP/s on %s): %.3f\n", what, mm / gm);
  trainer_free(&t);
  spec_free(&spec);
  return 0;
}
