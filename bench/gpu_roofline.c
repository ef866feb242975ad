/* bench/gpu_roofline.c: the floor of one training step on an H100 and an H200, kernel by
 * kernel, from what each GPU launch must do (the ledger, kernels/cuda/cost.h) and the GPUs'
 * published peaks. No GPU needed: under the CUDA emulator (the emulated build) the step runs
 * with PT_EMU_COUNT_ONLY=1, which checks and counts every call but runs none, so the spec's
 * real shapes cost neither compute nor memory. On a real GPU the same program runs the step.
 *
 *   gpu_roofline [SPEC] [--set KEY=VALUE ...] [--direct] [--raw] [--execute] [--time]
 *
 * SPEC (default bench/gpt2_small.yaml) runs as one process on pipeline.device gpu. The ledger
 * is taken over one step after WARMUP_STEPS warm-up steps: room a bf16 table keeps (its kept
 * copies, kernels/cuda/ops_linear.cu) grows to what a step asked for, which may take more than
 * one step where the first asks were refused (a step with one block has no later block's asks
 * to learn from within the step). The costs are closed forms in the number L of
 * the spec's repeated block (the layer type that occurs most often): each block launches the
 * same kernels on the same shapes, and the optimizer's work is linear in the parameters, so
 * every row is a + b L. The ledger is measured at 1 and 2 blocks and scaled:
 *   row(L) = row(1) + (L - 1) (row(2) - row(1))
 * (launches, FLOPs and bytes alike; tests/gpu/roofline_check.py checks it against a direct run).
 * --direct runs the spec as it is instead. --raw prints the ledger rows only, exactly
 * ("row NAME LAUNCHES TENSOR OTHER BYTES SECONDS HOST_BOUND", the last two 0 unless timed), the
 * memory line's bytes ("memory PLANNED PEAK WORKSPACE DEVICE", memory_line), and when timed
 * "time TIMED UNTIMED" (seconds). --execute runs the kernels under the emulator too (for the
 * test: the counts must not change).
 * --time (implies --direct and, under the emulator, --execute): measures each row on the device
 * that runs the step, for comparing with its floor row by row (predict, measure, explain each
 * miss). After the warm-up, one step untimed (its wall time, the host waiting for the GPU at its
 * end as every step does), then the ledger's step with a CUDA event before each launch
 * (kernels/cuda/cost.h gpu_cost_time_begin): each launch's time runs to the next launch's
 * start, idle gaps included, so a row's time over its floor says what that kernel, or the host
 * queueing behind it, costs. The table gains the measured time, measured / floor against the
 * GPU the device names (an H200's floor on an H200, else the H100's), and the share of the
 * row's time in which the GPU waited for the host (kernels/cuda/cost.h host_bound_seconds);
 * under the emulator the times are the CPU's emulating the kernels, which says nothing of a
 * GPU's (the mechanics are what its test checks).
 *
 * The model: kernels run one after another on one stream; a kernel row's floor is
 *   max(tensor / P_tensor + other / P_fp32, bytes / BW)
 * over its launches' totals (compute on tensor cores and on the ordinary cores do not overlap;
 * memory traffic overlaps compute). P_tensor is the dense bf16 peak for train.precision bf16,
 * the TF32 peak for tf32. The step's floor is the sum of the rows'. The achievable estimate
 * divides by ACHIEVE_TENSOR of the tensor peak and ACHIEVE_OTHER of the fp32 peak and of the
 * bandwidth. MFU = model FLOPs / (time x dense bf16 peak), model FLOPs per token =
 * 6 params + 12 L dim seq_len (PaLM, appendix B; the convention of llm.c and nanoGPT; attention
 * counted whole, not causal half). Launch overhead: launches per step x LAUNCH_US. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "device/device.h"
#include "engine/train.h"
#include "partition/memory.h"
#include "kernels/cuda/cost.h"

/* Published dense peaks (no sparsity). H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet
 * (2023): BF16 989.4 TFLOP/s, TF32 494.7, FP32 66.9, HBM3 3.35 TB/s. H200 SXM: NVIDIA H200
 * datasheet (2024): same compute as the H100 SXM, HBM3e 4.8 TB/s. */
typedef struct {
  const char *name;
  double bf16, tf32, fp32, bw; /* FLOP/s, FLOP/s, FLOP/s, bytes/s */
} gpu_peaks;
static const gpu_peaks k_gpus[] = {
    {"H100", 989.4e12, 494.7e12, 66.9e12, 3.35e12},
    {"H200", 989.4e12, 494.7e12, 66.9e12, 4.8e12},
};
#define N_GPUS 2

/* Stated achievable fractions: cuBLAS bf16 products at these shapes reach about 70% of the
 * tensor peak, streaming kernels about 80% of HBM bandwidth. */
#define ACHIEVE_TENSOR 0.70
#define ACHIEVE_OTHER 0.80
/* Host cost of one kernel launch: NVIDIA, "Getting Started with CUDA Graphs" (2019): 3.8 us
 * per short kernel launched back to back, against 2.9 us of kernel; a launch the GPU has to
 * wait for costs its whole submission, about 4 us. Both bounds are printed. */
#define LAUNCH_US 4.0
#define LAUNCH_GAP_US 1.0

typedef struct {
  char name[96];
  double launches, tensor, other, bytes, seconds, host_bound;
} roof_row;

typedef struct {
  roof_row rows[GPU_COST_MAX_ROWS];
  int n;
  double params, tokens, blocks; /* per step */
  double attn;                   /* 12 L dim seq_len: the model FLOPs' attention term a token */
  /* bytes (memory_line): the plan's total, the measured peak, the plan's workspace; the most
   * the device counted in use at a step's end, and what it had in use when the first run
   * opened it (engine/part.h gpu_used_open, gpu_grown). Absolute, not each run's growth: the
   * kernel table's scratch outlives a run, so the 2-block run would not count it again. */
  double planned, peak, work, driver, opened;
  int tf32;                      /* train.precision tf32: products on the TF32 tensor peak */
  /* --time: the timed step's seconds (first event to last), the untimed step's wall seconds,
   * and the device that ran them (its model name) */
  double timed_s, untimed_s;
  char device[128];
} roof_ledger;

typedef struct {
  const char *path;
  const char *over[72];
  int n_over, direct, raw, timed;
} roof_args;

/* The layer type occurring most often (the repeated block), and how often. */
static const char *block_type(const pt_spec *s, int *count) {
  const char *best = NULL;
  *count = 0;
  for (int i = 0; i < s->n_layers; i++) {
    int c = 0;
    for (int j = 0; j < s->n_layers; j++) c += !strcmp(s->layers[j].type, s->layers[i].type);
    if (c > *count) *count = c, best = s->layers[i].type;
  }
  return best;
}

/* Keeps the first `keep` layers of type `type`, drops the rest (indices renumbered). */
static void keep_blocks(pt_spec *s, const char *type, int keep) {
  char kept_type[SPEC_NAME_MAX];
  snprintf(kept_type, sizeof kept_type, "%s", type);
  int n = 0, seen = 0;
  for (int i = 0; i < s->n_layers; i++) {
    if (!strcmp(s->layers[i].type, kept_type) && seen++ >= keep) continue;
    s->layers[n] = s->layers[i];
    s->layers[n].index = n;
    n++;
  }
  s->n_layers = n;
}

static void ledger_add(roof_ledger *l, const char *name, double w, const roof_row *add) {
  int i = 0;
  while (i < l->n && strcmp(l->rows[i].name, name)) i++;
  if (i == l->n) {
    snprintf(l->rows[l->n++].name, sizeof l->rows[0].name, "%s", name);
    l->rows[i].launches = l->rows[i].tensor = l->rows[i].other = l->rows[i].bytes = 0;
    l->rows[i].seconds = l->rows[i].host_bound = 0;
  }
  l->rows[i].launches += w * add->launches;
  l->rows[i].tensor += w * add->tensor;
  l->rows[i].other += w * add->other;
  l->rows[i].bytes += w * add->bytes;
  l->rows[i].seconds += w * add->seconds;
  l->rows[i].host_bound += w * add->host_bound;
}

static int ledger_launches(void) {
  uint64_t n = 0;
  for (int i = 0; i < gpu_cost_count(); i++) n += gpu_cost_row_at(i)->launches;
  return (int)n;
}

/* --time: one step untimed (its wall time), then the ledger's step timed launch by launch. */
static int timed_step(pt_trainer *t, pt_step_metrics *m, roof_ledger *out) {
  gpu_cost_reset();
  double t0 = pt_now_s();
  if (trainer_step(t, m) < 0) return -1;
  out->untimed_s = pt_now_s() - t0;
  pt_device *d = t->part.model.dev;
  snprintf(out->device, sizeof out->device, "%s", device_gpu_name(d));
  gpu_cost_time_begin(device_stream(d), 2 * ledger_launches() + 64);
  gpu_cost_reset();
  int rc = trainer_step(t, m);
  out->timed_s = gpu_cost_time_end();
  return rc;
}

enum { WARMUP_STEPS = 2 };

/* One step of the spec with `keep` blocks (-1: all) after the warm-up steps; the ledger of that
 * step into out. Exits 2 on bad input. */
static void measure(const roof_args *a, int keep, roof_ledger *out) {
  pt_spec spec;
  spec_errors e = {0};
  if (spec_load(a->path, a->over, a->n_over, &spec, &e) != 0) {
    fprintf(stderr, "%s\n", e.msg);
    exit(2);
  }
  int count = 0;
  const char *type = block_type(&spec, &count);
  if (keep >= 0) keep_blocks(&spec, type, keep);
  pt_trainer t;
  char err[1024];
  size_t base = pt_mem_current();
  pt_mem_reset_peak();
  if (trainer_init(&t, &spec, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    exit(2);
  }
  pt_step_metrics m;
  int failed = 0;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < WARMUP_STEPS && !failed; i++) failed = trainer_step(&t, &m) < 0;
  if (failed || (a->timed ? timed_step(&t, &m, out)
                          : (gpu_cost_reset(), trainer_step(&t, &m))) < 0) {
    fprintf(stderr, "gpu_roofline: %s: the step failed: %s\n", a->path, t.part.error);
    exit(1);
  }
  for (int i = 0; i < gpu_cost_count(); i++) {
    const gpu_cost_row *r = gpu_cost_row_at(i);
    const roof_row add = {.launches = (double)r->launches, .tensor = r->tensor_flops,
                          .other = r->other_flops, .bytes = r->bytes, .seconds = r->seconds,
                          .host_bound = r->host_bound_seconds};
    ledger_add(out, r->kernel, 1.0, &add);
  }
  const double tokens_seq = (double)spec.train.micro_batch_size * spec.train.micro_batches *
                            (spec.pipeline.data_parallel > 0 ? spec.pipeline.data_parallel : 1);
  out->blocks = keep >= 0 ? (keep < count ? keep : count) : count;
  out->params = (double)model_param_count(&t.part.model);
  out->tokens = tokens_seq * (double)spec.seq_len;
  out->attn = 12.0 * out->blocks * (double)spec.dim * (double)spec.seq_len;
  out->tf32 = spec.train.precision == SPEC_PRECISION_TF32;
  pt_stage_memory plan;
  memory_estimate_stage(&t.part.model, 0, t.part.model.n_layers, 1, &plan);
  out->planned = (double)plan.total;
  out->work = (double)plan.workspace;
  out->peak = (double)(pt_mem_peak() - base);
  out->driver = (double)(t.part.gpu_used_open + t.part.gpu_grown);
  out->opened = (double)t.part.gpu_used_open;
  trainer_free(&t);
  spec_free(&spec);
}

/* l1 + (L - 1) (l2 - l1), row by row and for the model's sizes. */
static void scale_blocks(const roof_ledger *l1, const roof_ledger *l2, double L, roof_ledger *out) {
  memset(out, 0, sizeof *out);
  for (int pass = 0; pass < 2; pass++) {
    const roof_ledger *l = pass ? l1 : l2;
    double w = pass ? 2.0 - L : L - 1.0; /* l1 (2 - L) + l2 (L - 1) */
    for (int i = 0; i < l->n; i++) ledger_add(out, l->rows[i].name, w, &l->rows[i]);
  }
  out->params = l1->params + (L - 1.0) * (l2->params - l1->params);
  out->attn = l1->attn + (L - 1.0) * (l2->attn - l1->attn);
  out->planned = l1->planned + (L - 1.0) * (l2->planned - l1->planned);
  out->work = l1->work + (L - 1.0) * (l2->work - l1->work);
  out->peak = l1->peak + (L - 1.0) * (l2->peak - l1->peak);
  out->driver = l1->driver + (L - 1.0) * (l2->driver - l1->driver);
  out->opened = l1->opened;
  out->tokens = l1->tokens;
  out->blocks = L;
  out->tf32 = l1->tf32;
}

static double row_floor(const roof_row *r, const gpu_peaks *g, double tensor_peak, double ft,
                        double fo) {
  double compute = r->tensor / (ft * tensor_peak) + r->other / (fo * g->fp32);
  double memory = r->bytes / (fo * g->bw);
  return compute > memory ? compute : memory;
}

/* The GPU whose floors a timed run is held against: the H200 where the device says so, else the
 * H100. */
static int timed_gpu(const roof_ledger *l) { return strstr(l->device, "H200") ? 1 : 0; }

static void print_table(const roof_ledger *l, double tensor_peak[N_GPUS], double floor[N_GPUS]) {
  printf("%-36s %9s %12s %12s %10s", "kernel", "launches", "tensor GF", "other GF", "GB");
  for (int g = 0; g < N_GPUS; g++) printf(" %9s %6s", k_gpus[g].name, "share");
  printf("  bound  ");
  if (l->timed_s > 0) printf(" %9s %6s %8s %6s", "measured", "share", "x floor", "host");
  printf("\n");
  for (int i = 0; i < l->n; i++) {
    const roof_row *r = &l->rows[i];
    printf("%-36s %9.0f %12.3f %12.3f %10.4f", r->name, r->launches, r->tensor / 1e9,
           r->other / 1e9, r->bytes / 1e9);
    for (int g = 0; g < N_GPUS; g++) {
      double f = row_floor(r, &k_gpus[g], tensor_peak[g], 1.0, 1.0);
      printf(" %7.1fus %5.1f%%", f * 1e6, 100.0 * f / floor[g]);
    }
    double c = r->tensor / tensor_peak[0] + r->other / k_gpus[0].fp32;
    printf("  %-7s", c > r->bytes / k_gpus[0].bw ? "compute" : "memory");
    if (l->timed_s > 0) {
      const int g = timed_gpu(l);
      double f = row_floor(r, &k_gpus[g], tensor_peak[g], 1.0, 1.0);
      printf(" %7.1fus %5.1f%%", r->seconds * 1e6, 100.0 * r->seconds / l->timed_s);
      if (f > 0) printf(" %8.2f", r->seconds / f);
      else printf(" %8s", "-");
      printf(" %5.0f%%", r->seconds > 0 ? 100.0 * r->host_bound / r->seconds : 0.0);
    }
    printf("\n");
  }
}

/* --time: the step as measured, against the floor of the GPU it ran on. */
static void print_timed(const roof_ledger *l, const double floor[N_GPUS], double model) {
  const int g = timed_gpu(l);
  const int named = strstr(l->device, k_gpus[g].name) != NULL;
  double waited = 0;
  for (int i = 0; i < l->n; i++) waited += l->rows[i].host_bound;
  printf("measured on %s: the untimed step %.3f ms, %.0f tokens/s, MFU %.1f%% of the %s's dense "
         "bf16 peak; the floor is %.1f%% of it. The timed step (an event before each launch) "
         "%.3f ms, its rows above%s\n", l->device[0] ? l->device : "this device",
         l->untimed_s * 1e3, l->tokens / l->untimed_s,
         100.0 * model / (l->untimed_s * k_gpus[g].bf16), k_gpus[g].name,
         100.0 * floor[g] / l->untimed_s, l->timed_s * 1e3,
         named ? "" : "; not an H100 or H200: held against the H100's floor");
  printf("host-bound: %.3f ms of the timed step (%.1f%%) in launches the GPU ran no slower than "
         "the host queued them (the \"host\" column: of each row's time; CUDA graphs would "
         "take that host time away)\n", waited * 1e3, 100.0 * waited / l->timed_s);
}

static void print_summary(const roof_ledger *l, double tensor_peak[N_GPUS], double floor[N_GPUS]) {
  double launches = 0;
  for (int i = 0; i < l->n; i++) launches += l->rows[i].launches;
  const double model = (6.0 * l->params + l->attn) * l->tokens;
  printf("model FLOPs per step: %.4g (6 x %.4g params + 12 L dim T = %.4g a token, x %.0f "
         "tokens)\n", model, l->params, l->attn, l->tokens);
  for (int g = 0; g < N_GPUS; g++) {
    double achieve = 0;
    for (int i = 0; i < l->n; i++)
      achieve += row_floor(&l->rows[i], &k_gpus[g], tensor_peak[g], ACHIEVE_TENSOR, ACHIEVE_OTHER);
    printf("%s: step floor %.3f ms, %.0f tokens/s, MFU %.1f%% at the floor; at %.0f%% of the "
           "tensor peak and %.0f%% of fp32 and bandwidth: %.3f ms, %.0f tokens/s, MFU %.1f%%\n",
           k_gpus[g].name, floor[g] * 1e3, l->tokens / floor[g],
           100.0 * model / (floor[g] * k_gpus[g].bf16), 100 * ACHIEVE_TENSOR, 100 * ACHIEVE_OTHER,
           achieve * 1e3, l->tokens / achieve, 100.0 * model / (achieve * k_gpus[g].bf16));
  }
  printf("launches per step: %.0f; launch overhead at %.0f us a launch: %.3f ms = %.1f%% of the "
         "H100 floor (at %.0f us, the gap between back-to-back launches: %.1f%%)\n", launches,
         LAUNCH_US, launches * LAUNCH_US * 1e-3, 100.0 * launches * LAUNCH_US * 1e-6 / floor[0],
         LAUNCH_GAP_US, 100.0 * launches * LAUNCH_GAP_US * 1e-6 / floor[0]);
  if (l->timed_s > 0) print_timed(l, floor, model);
}

/* The memory plan (pipe_train --plan's total, partition/memory.h) against the peak the step
 * measured (core/error.h pt_mem_peak): the device's buffers, as every plan-against-peak test
 * counts them; the kernel tables' own scratch (bf16 operand copies, the attention's rooms, the
 * kept copies, cuDNN's workspace) is in neither. Then what the device itself counted taken
 * since it was opened (cudaMemGetInfo; cuBLASLt's fixed workspace was taken before): that
 * scratch too, and on a GPU the pages of managed memory touched (the emulator does not count
 * managed memory). Under the emulator's count-only mode the buffers are allocated as on a
 * GPU, so the figures are the real shape's. */
static void memory_line(const roof_ledger *l) {
  printf("memory (one process, the device's buffers): planned %.3f GiB, measured peak %.3f GiB "
         "(%+.1f%%); the device counted %.3f GiB taken\n", l->planned / 1073741824.0,
         l->peak / 1073741824.0, 100.0 * (l->planned - l->peak) / l->peak,
         (l->driver - l->opened) / 1073741824.0);
}

static void print_report(const roof_args *a, const roof_ledger *l) {
  double tensor_peak[N_GPUS], floor[N_GPUS];
  for (int g = 0; g < N_GPUS; g++) {
    tensor_peak[g] = l->tf32 ? k_gpus[g].tf32 : k_gpus[g].bf16;
    floor[g] = 0;
    for (int i = 0; i < l->n; i++)
      floor[g] += row_floor(&l->rows[i], &k_gpus[g], tensor_peak[g], 1.0, 1.0);
  }
  printf("gpu_roofline: %s, %.0f tokens a step, %.0f blocks (%s)\n", a->path, l->tokens,
         l->blocks, a->direct ? "run directly" : "ledger at 1 and 2 blocks, scaled linearly");
  printf("peaks (dense, published): ");
  for (int g = 0; g < N_GPUS; g++)
    printf("%s bf16 %.1f / tf32 %.1f / fp32 %.1f TFLOP/s, %.2f TB/s%s", k_gpus[g].name,
           k_gpus[g].bf16 / 1e12, k_gpus[g].tf32 / 1e12, k_gpus[g].fp32 / 1e12,
           k_gpus[g].bw / 1e12, g + 1 < N_GPUS ? "; " : "\n");
  print_table(l, tensor_peak, floor);
  print_summary(l, tensor_peak, floor);
  memory_line(l);
}

static void parse_args(int argc, char **argv, roof_args *a) {
  *a = (roof_args){.path = "bench/gpt2_small.yaml",
                   .over = {"pipeline.stages=1", "pipeline.data_parallel=1",
                            "pipeline.device=gpu"},
                   .n_over = 3};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--set") && i + 1 < argc && a->n_over < 72)
      a->over[a->n_over++] = argv[++i];
    else if (!strcmp(argv[i], "--direct")) a->direct = 1;
    else if (!strcmp(argv[i], "--raw")) a->raw = 1;
    else if (!strcmp(argv[i], "--execute")) unsetenv("PT_EMU_COUNT_ONLY");
    else if (!strcmp(argv[i], "--time")) a->timed = a->direct = 1, unsetenv("PT_EMU_COUNT_ONLY");
    else if (argv[i][0] != '-') a->path = argv[i];
    else {
      fprintf(stderr, "usage: gpu_roofline [SPEC] [--set K=V] [--direct] [--raw] [--execute] "
                      "[--time]\n");
      exit(2);
    }
  }
}

int main(int argc, char **argv) {
  /* before the first CUDA call: the emulator reads its settings then (a GPU ignores them); the
   * emulated device gets an H100's 80 GiB, which count-only mode never touches */
  setenv("PT_EMU_COUNT_ONLY", "1", 0);
  setenv("PT_EMU_MEMORY_MB", "81920", 0);
  roof_args a;
  parse_args(argc, argv, &a);
  roof_ledger l, l1, l2;
  if (a.direct) {
    measure(&a, -1, &l);
  } else {
    measure(&a, 1, &l1);
    measure(&a, 2, &l2);
    pt_spec spec;
    spec_errors e = {0};
    if (spec_load(a.path, a.over, a.n_over, &spec, &e) != 0) {
      fprintf(stderr, "%s\n", e.msg);
      return 2;
    }
    int count = 0;
    block_type(&spec, &count);
    spec_free(&spec);
    if (count < 2) measure(&a, -1, &l), a.direct = 1;
    else scale_blocks(&l1, &l2, count, &l);
  }
  if (a.raw) {
    for (int i = 0; i < l.n; i++)
      printf("row %s %.17g %.17g %.17g %.17g %.17g %.17g\n", l.rows[i].name, l.rows[i].launches,
             l.rows[i].tensor, l.rows[i].other, l.rows[i].bytes, l.rows[i].seconds,
             l.rows[i].host_bound);
    printf("memory %.17g %.17g %.17g %.17g\n", l.planned, l.peak, l.work, l.driver - l.opened);
    if (a.timed) printf("time %.17g %.17g\n", l.timed_s, l.untimed_s);
    return 0;
  }
  print_report(&a, &l);
  return 0;
}
