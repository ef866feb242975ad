/* bench/bench_train.c: sequential training throughput against a physical yardstick, the
 * measured float32 peak of the CPU core, and where the step's time goes.
 *
 *   bench_train [SPEC] [--steps N] [--kernels] [--set KEY=VALUE ...]
 * Default SPEC: examples/gpt.yaml (vocab 256, seq_len 128, dim 256, 6 blocks, 8 heads, B 8,
 * M 8), run as one process on pipeline.device (auto: a GPU when there is one; --set
 * pipeline.device=cpu forces the CPU). Model FLOP/s = tokens * (6 * params + 12 * blocks * dim
 * * seq_len) / time, the median over the steps after a warm-up. It prints:
 *   - on the host kinds (cpu, emulated): the one-core peak (device/cpu_peak.h: an FMA loop at
 *     the widest vector width this CPU runs, the best of 0.2 s runs, 3 before the steps and one
 *     beside each) times the threads, and the training rate as a fraction of it; the BLAS
 *     library's kernel (OpenBLAS core and config);
 *   - sgemm on 1024^3 (OpenBLAS with one thread on the CPU, cuBLAS float32 on a GPU; 4096^3
 *     there, to fill it), measured between the training steps so both see the same machine
 *     state, with its fraction of the peak, and the old ratio of training to sgemm, which a
 *     slow BLAS kernel hides (both fall) and the peak does not;
 *   - on the host kinds, the step broken down by kernel category (kernels/kernels_timed.h, the
 *     device's table wrapped through device_interpose_kernels): share of the step, ms per step,
 *     GFLOP/s (gemm, attention) or GB/s (the rest), calls per step, and the unaccounted rest
 *     (data, engine, device copies and zeroing outside the table). --kernels adds one row per
 *     kernel entry. A GPU's kernels return before they finish, so there it is skipped. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "device/cpu_peak.h"
#include "device/device.h"
#include "engine/train.h"
#include "kernels/cpu/blas_kernel.h"
#include "kernels/kernels_timed.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The device's kernel table, timed (host kinds only). */
static pt_kernels_timed g_timed;
static const pt_kernels *wrap_timed(const pt_kernels *table, void *timed) {
  return kernels_timed_wrap(timed, table);
}

/* One row of the breakdown: its share of the steps' `total` seconds and its rate in its unit. */
static void print_row(const char *name, const pt_kernel_tally *s, int flops, double total,
                      int steps) {
  double rate = s->seconds > 0 ? s->work / s->seconds / 1e9 : 0.0;
  printf("  %-28s %6.1f %9.2f %9.2f %-7s %8.0f\n", name, 100.0 * s->seconds / total,
         1e3 * s->seconds / steps, rate, flops ? "GFLOP/s" : "GB/s", (double)s->calls / steps);
}

/* The kernel categories' shares of `steps` steps that took `total` seconds, and what the table
 * did not see; with `entries`, each kernel entry under its category. */
static void print_breakdown(const pt_kernels_timed *t, double total, int steps, int entries) {
  pt_kernel_tally cat[PT_KCAT_COUNT];
  kernels_timed_by_category(t, cat);
  printf("step breakdown (kernel table timed over %d steps, mean step %.2f ms):\n", steps,
         1e3 * total / steps);
  printf("  %-28s %6s %9s %17s %8s\n", "category", "share%", "ms/step", "rate", "calls");
  double seen = 0;
  for (int c = 0; c < PT_KCAT_COUNT; c++) {
    int flops = kernels_timed_counts_flops((pt_kernel_category)c);
    print_row(kernels_timed_category_name((pt_kernel_category)c), &cat[c], flops, total, steps);
    seen += cat[c].seconds;
    for (int e = 0; entries && e < PT_KT_COUNT; e++)
      if (t->entry[e].calls && t->entry[e].category == (pt_kernel_category)c) {
        char name[40];
        snprintf(name, sizeof name, "  %s", kernels_timed_entry_name((pt_kernel_entry)e));
        print_row(name, &t->entry[e], flops, total, steps);
      }
  }
  double rest = total - seen;
  printf("  %-28s %6.1f %9.2f   (data, engine, copies and zeroing outside the table)\n",
         "unaccounted", 100.0 * rest / total, 1e3 * rest / steps);
}

/* What the steps measured. */
typedef struct {
  int host, steps, n, threads; /* host: a host kind (peak, breakdown); n: the sgemm size */
  pt_cpu_peak peak;            /* the best run of the one-core loop (host kinds) */
  double model, gemm;          /* medians: model FLOP/s, sgemm FLOP/s */
  double total;                /* seconds inside the measured steps */
  pt_step_metrics last;
} bench_run;

/* A warm-up step, then r->steps steps, each after an sgemm and a peak run, so all three see the
 * same machine state; the timing table's tallies cover the measured steps only. */
static void measure(pt_trainer *t, bench_run *r) {
  double fpt = model_flops_per_token(&t->part.model), model[64], gemm[64];
  r->peak = r->host ? cpu_peak_measure(0.2, 3) : (pt_cpu_peak){0};
  trainer_step(t, &r->last); /* warm-up: page faults, OpenBLAS buffers */
  kernels_timed_reset(&g_timed);
  for (int s = 0; s < r->steps; s++) {
    gemm[s] = device_gemm_flops(device_current(), r->n, 0.5);
    if (r->host) { /* the best of every run: the peak the core reached in this machine state */
      pt_cpu_peak again = cpu_peak_measure(0.2, 1);
      if (again.flops > r->peak.flops) r->peak = again;
    }
    double t0 = pt_now_s();
    trainer_step(t, &r->last);
    r->total += pt_now_s() - t0;
    model[s] = r->last.tokens_per_s * fpt;
  }
  r->model = median(model, r->steps);
  r->gemm = median(gemm, r->steps);
}

/* The model, the device and BLAS, and the rates against the yardsticks. */
static void print_rates(pt_trainer *t, const bench_run *r) {
  double peak = r->peak.flops * r->threads;
  char what[160];
  printf("model: %lld params, %.1f MFLOP/token, loss %.4f\n",
         (long long)model_param_count(&t->part.model),
         model_flops_per_token(&t->part.model) / 1e6, r->last.loss);
  device_describe(device_current(), what, sizeof what);
  printf("device: %s\n", what);
  const pt_kernels *k = device_current()->k;
  if (r->host && k->precision == PT_PRECISION_BF16)
    printf("precision: bf16, products %s\n", kernels_cpu_bf16_products());
  if (r->host) {
    printf("BLAS: %s; core %s\n", openblas_get_config(), openblas_get_corename());
    printf("peak: %.2f GFLOP/s float32 per core (%s, %d lanes x %d accumulators, best of %d) "
           "x %d thread(s) = %.2f GFLOP/s\n", r->peak.flops / 1e9, r->peak.loop->name,
           r->peak.loop->lanes, r->peak.loop->accumulators, 3 + r->steps, r->threads, peak / 1e9);
  }
  printf("training: %.2f GFLOP/s (median of %d steps)", r->model / 1e9, r->steps);
  if (r->host) printf(", %.3f of peak", r->model / peak);
  printf("\nsgemm %d^3: %.2f GFLOP/s", r->n, r->gemm / 1e9);
  if (r->host) printf(", %.3f of peak", r->gemm / peak);
  printf("\nratio (model FLOP/s / float32 sgemm FLOP/s on %s): %.3f\n", what, r->model / r->gemm);
}

int main(int argc, char **argv) {
  blas_kernel_ensure(argv); /* may restart this process: before anything else */
  const char *path = "examples/gpt.yaml";
  const char *over[64] = {"pipeline.stages=1", "pipeline.data_parallel=1"};
  int n_over = 2, steps = 3, entries = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--set") && i + 1 < argc && n_over < 64) over[n_over++] = argv[++i];
    else if (!strcmp(argv[i], "--kernels")) entries = 1;
    else if (argv[i][0] != '-') path = argv[i];
    else {
      fprintf(stderr, "usage: bench_train [SPEC] [--steps N] [--kernels] [--set K=V]\n");
      return 2;
    }
  }
  if (steps < 1 || steps > 64) steps = 3;
  kernels_cpu_set_threads(1);
  pt_spec spec;
  spec_errors e = {0};
  if (spec_load(path, over, n_over, &spec, &e) != 0) { fprintf(stderr, "%s\n", e.msg); return 2; }
  /* the breakdown times host kernels only: a GPU's return before they finish */
  int host = device_kind(spec.pipeline.device)->is.host_addressable;
  if (host) device_interpose_kernels(wrap_timed, &g_timed);
  pt_trainer t;
  char err[1024];
  if (trainer_init(&t, &spec, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 2; }

  bench_run r = {.host = host, .steps = steps, .n = device_current()->ops->gemm_n,
                 .threads = kernels_cpu_threads()};
  measure(&t, &r);
  print_rates(&t, &r);
  if (host) print_breakdown(&g_timed, r.total, steps, entries);
  else printf("step breakdown: skipped on %s (its kernels return before they finish)\n",
              device_name(device_current()));
  trainer_free(&t);
  spec_free(&spec);
  return 0;
}
