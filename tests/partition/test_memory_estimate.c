/* The planner's memory estimate (partition/memory.c) against what the engine really allocates,
 * measured with the pt_alloc_aligned tracker (core/error.h):
 *   - the sequential trainer (all layers on one stage, one micro-batch in flight): the tracked
 *     peak over trainer_init and two steps must be within 10% of memory_estimate_stage(0, n, 1);
 *   - pipeline-like slices (model_alloc(first, last) + stage_init with 3 slots + the optimizer):
 *     the tracked bytes against memory_estimate_stage(first, last, 3), less the last stage's
 *     targets, which the stage itself does not allocate; for split-backward
 *     schedules also w dout sets (stage_alloc_stash) against memory_add_stash(w).
 * Each part (parameters, gradients, optimizer state, activations + workspace) is also compared
 * exactly with what was allocated, so a mismatch names the part. Run from the repository root. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "partition/memory.h"
#include "core/error.h"
#include "device/device.h"
#include "engine/train.h"
#include "kernels/precision.h"
#include "test_util.h"

/* The data and training settings of the token models below. */
#define TOKENS_TRAIN \
  "data: {path: examples/data/tiny.txt, format: bytes}\n" \
  "train:\n" \
  "  steps: 2\n" \
  "  micro_batch_size: 4\n" \
  "  micro_batches: 2\n" \
  "  optimizer: {name: adamw, lr: 1.0e-3}\n" \
  "  seed: 5\n"

static const char *GPT =
    "model: {vocab: 256, seq_len: 32, dim: 64, heads: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - pos_embedding: {}\n"
    "  - transformer_block: {repeat: 6}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    TOKENS_TRAIN;

/* 16 inputs and 4 targets per record; layer widths not multiples of 16 floats */
static const char *MLP_FMT =
    "layers:\n"
    "  - linear: {out: 100}\n"
    "  - relu\n"
    "  - linear: {out: 300}\n"
    "  - gelu\n"
    "  - layernorm\n"
    "  - linear: {out: 50}\n"
    "  - relu\n"
    "  - linear: {out: 4}\n"
    "loss: mse\n"
    "data: {path: %s, format: f32, inputs: 16, targets: 4}\n"
    "train:\n"
    "  steps: 2\n"
    "  micro_batch_size: 64\n"
    "  micro_batches: 2\n"
    "  optimizer: {name: adamw, lr: 1.0e-3}\n"
    "  seed: 5\n";

static char g_f32_path[64];
static char g_mlp[1024];

static void make_data(void) {
  snprintf(g_f32_path, sizeof g_f32_path, "/tmp/pt_test_memory_%ld.f32", (long)getpid());
  FILE *f = fopen(g_f32_path, "wb");
  if (!f) pt_fatal("cannot create %s", g_f32_path);
  for (int i = 0; i < 256 * 20; i++) {
    float v = (float)((i * 53) % 97) / 48.0f - 1.0f;
    fwrite(&v, sizeof v, 1, f);
  }
  fclose(f);
  snprintf(g_mlp, sizeof g_mlp, MLP_FMT, g_f32_path);
}

static int load(pt_spec *s, const char *text, const char *const *over, int n_over) {
  spec_errors e = {0};
  if (spec_load_text(text, strlen(text), "t.yaml", over, n_over, s, &e) != 0) {
    CHECK(0, "spec: %s", e.msg);
    return -1;
  }
  return 0;
}

static void print_parts(const char *name, const pt_stage_memory *est, size_t measured) {
  printf("%-34s measured %9zu  estimated %9lld (params %lld, grads %lld, optim %lld, activ %lld, "
         "work %lld)  %+.2f%%\n",
         name, measured, (long long)est->total, (long long)est->params, (long long)est->grads,
         (long long)est->optimizer, (long long)est->activations, (long long)est->workspace,
         100.0 * ((double)est->total - (double)measured) / (double)measured);
}

static void within_10pct(const char *name, double estimated, double measured) {
  CHECK(fabs(estimated - measured) <= 0.10 * measured,
        "%s: estimate %.0f is %.1f%% off the measured %.0f bytes (limit 10%%)", name, estimated,
        100.0 * (estimated - measured) / measured, measured);
}

/* --- The sequential trainer --------------------------------------------------------------------- */

static void trainer_case(const char *name, const char *text, const char *const *over, int n_over) {
  pt_spec s;
  if (load(&s, text, over, n_over) != 0) return;
  size_t before = pt_mem_current();
  pt_mem_reset_peak();
  pt_trainer t;
  char err[1024];
  if (trainer_init(&t, &s, err, sizeof err) != 0) {
    CHECK(0, "%s: trainer_init: %s", name, err);
    spec_free(&s);
    return;
  }
  pt_step_metrics sm;
  trainer_step(&t, &sm);
  trainer_step(&t, &sm);
  CHECK(isfinite(sm.loss), "%s: loss %g", name, sm.loss);
  size_t measured = pt_mem_peak() - before;
  pt_stage_memory est;
  memory_estimate_stage(&t.part.model, 0, t.part.model.n_layers, 1, &est);
  print_parts(name, &est, measured);
  within_10pct(name, (double)est.total, (double)measured);

  /* part by part, against what was asked for (before the tracker's 64-byte rounding) */
  const pt_model *m = &t.part.model;
  int sgd = s.train.optimizer == SPEC_OPTIMIZER_SGD;
  int64_t B = s.train.micro_batch_size, T = m->input_tokens ? s.seq_len : 1;
  int64_t tcols = m->input_tokens ? 1 : s.data.targets;
  CHECK(est.params == 4 * m->n_floats, "%s: params %lld, allocated %lld", name,
        (long long)est.params, (long long)(4 * m->n_floats));
  CHECK(est.grads == 4 * m->n_grad_floats, "%s: grads %lld, allocated %lld", name,
        (long long)est.grads, (long long)(4 * m->n_grad_floats));
  CHECK(est.optimizer == (sgd ? 1 : 2) * 4 * m->n_floats, "%s: optimizer %lld, allocated %lld",
        name, (long long)est.optimizer, (long long)((sgd ? 1 : 2) * 4 * m->n_floats));
  /* the stage's activations and workspace, plus the targets of one micro-batch (the loss
   * gradient goes over the logits: no buffer) */
  int64_t rest = (int64_t)t.part.stage.bytes + 4 * B * T * tcols;
  CHECK(est.activations + est.workspace == rest,
        "%s: activations + workspace %lld, the stage + loss buffers allocate %lld", name,
        (long long)(est.activations + est.workspace), (long long)rest);
  trainer_free(&t);
  CHECK(pt_mem_current() == before, "%s: %zd tracked bytes left after trainer_free", name,
        (ssize_t)(pt_mem_current() - before));
  spec_free(&s);
}

/* --- Pipeline-like slices ------------------------------------------------------------------------ */

static void slice_case(const char *name, const char *text, const char *const *over, int n_over,
                       int first, int last, int n_slots, int w_pending) {
  pt_spec s;
  if (load(&s, text, over, n_over) != 0) return;
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, &s, &e) != 0) {
    CHECK(0, "%s: %s", name, e.msg);
    spec_free(&s);
    return;
  }
  if (last < 0) last = m.n_layers + 1 + last; /* -1: the last layer's end */
  int B = (int)s.train.micro_batch_size, T = m.input_tokens ? (int)s.seq_len : 1;
  int ckpt = (int)s.train.activation_checkpoint_interval;
  size_t before = pt_mem_current();
  pt_mem_reset_peak();
  model_alloc(&m, first, last);
  pt_stage st;
  stage_init(&st, &m, first, last, B, T, n_slots, ckpt);
  stage_alloc_stash(&st, w_pending);
  pt_optimizer o;
  optimizer_init(&o, &s.train, m.n_floats);
  size_t measured = pt_mem_current() - before;
  CHECK(pt_mem_peak() - before == measured, "%s: peak above the held bytes", name);

  pt_stage_memory est;
  memory_estimate_stage(&m, first, last, n_slots, &est);
  memory_add_stash(&m, first, last, w_pending, &est);
  /* the estimate also holds what the pipeline engine allocates beside the stage (gradient and
   * target slots, data buffers): not built here, checked by the MPI tests
   * pipeline_memory_* against real runs */
  int64_t extra = memory_engine_bytes(&m, first, last, n_slots);
  pt_stage_memory shown = est;
  shown.total -= extra;
  shown.workspace -= extra;
  char label[96];
  snprintf(label, sizeof label, "%s [%d,%d) x%d%s", name, first, last, n_slots,
           w_pending ? " split" : "");
  print_parts(label, &shown, measured);
  within_10pct(label, (double)(est.total - extra), (double)measured);

  int sgd = s.train.optimizer == SPEC_OPTIMIZER_SGD;
  CHECK(est.params == 4 * m.n_floats, "%s: params %lld, allocated %lld", label,
        (long long)est.params, (long long)(4 * m.n_floats));
  CHECK(est.grads == 4 * m.n_grad_floats, "%s: grads %lld, allocated %lld", label,
        (long long)est.grads, (long long)(4 * m.n_grad_floats));
  CHECK(est.optimizer == (sgd ? 1 : 2) * 4 * m.n_floats, "%s: optimizer %lld", label,
        (long long)est.optimizer);
  CHECK(est.activations + est.workspace - extra == (int64_t)st.bytes,
        "%s: activations + workspace %lld, the stage allocates %zu", label,
        (long long)(est.activations + est.workspace - extra), st.bytes);
  CHECK(est.in_flight == n_slots, "%s: in_flight %d", label, est.in_flight);
  CHECK(est.w_pending == w_pending && (est.stash > 0) == (w_pending > 0 && ckpt == 0),
        "%s: stash %lld for %d pending", label, (long long)est.stash, est.w_pending);

  /* a forward and backward pass over every slot allocates nothing more */
  for (int slot = 0; slot < n_slots; slot++) {
    void *in = stage_input(&st, slot);
    if (m.layers[first].in_tokens)
      for (int i = 0; i < B * T; i++) ((int32_t *)in)[i] = (i * 7 + slot) % (int)s.vocab;
    else
      for (int i = 0; i < B * T * m.layers[first].in_dim; i++)
        ((float *)in)[i] = (float)((i + slot) % 13) / 13.0f - 0.5f;
    stage_forward(&st, slot, B, T);
  }
  float *dout = pt_calloc((size_t)B * T * m.layers[last - 1].out_dim, sizeof(float));
  for (int i = 0; i < B * T * m.layers[last - 1].out_dim; i++) dout[i] = 1e-3f * (float)(i % 5);
  for (int slot = n_slots - 1; slot >= 0; slot--) {
    if (!w_pending) {
      stage_backward(&st, slot, dout, first > 0, NULL);
      continue;
    }
    if (slot + w_pending < n_slots) stage_backward_weight(&st, slot + w_pending);
    stage_backward_input(&st, slot, dout, first > 0, NULL); /* then all w sets are in use */
  }
  for (int slot = 0; w_pending && slot < w_pending && slot < n_slots; slot++)
    stage_backward_weight(&st, slot);
  free(dout);
  CHECK(pt_mem_peak() - before == measured, "%s: forward/backward allocated %zu more bytes",
        label, pt_mem_peak() - before - measured);

  optimizer_free(&o);
  stage_free(&st);
  model_free(&m);
  CHECK(pt_mem_current() == before, "%s: %zd tracked bytes left after freeing", label,
        (ssize_t)(pt_mem_current() - before));
  spec_free(&s);
}

/* --- train.precision bf16: activations kept packed (engine/stage_store.h) ---------------------- */

static const char *LLAMA =
    "model: {vocab: 256, seq_len: 32, dim: 64, heads: 8}\n"
    "layers:\n"
    "  - embedding: {}\n"
    "  - llama_block: {repeat: 4, kv_heads: 2, ffn_dim: 96}\n"
    "  - rmsnorm: {}\n"
    "  - lm_head: {}\n"
    TOKENS_TRAIN;

/* The bytes a stage of [first, last) allocates per micro-batch in flight (n_slots 3 less 2) at
 * precision p on the current device, then (bf16 on the cpu) a forward and backward of every slot
 * (split with two dout sets when split is set, counted apart in *stash); the estimate's figure
 * must be the same:
 * its activations per slot, less the engine's slot buffers, which the stage does not allocate. */
static int64_t per_micro_batch(const char *name, const char *text, const char *device,
                               const char *precision, int first, int last, int split,
                               int64_t *stash) {
  char dev[64], prec[64];
  snprintf(dev, sizeof dev, "pipeline.device=%s", device);
  snprintf(prec, sizeof prec, "train.precision=%s", precision);
  const char *const over[] = {dev, prec};
  int64_t bytes[2] = {0, 0}, est[2] = {0, 0}, sets = 0, est_sets = 0;
  for (int i = 0; i < 2; i++) {
    pt_spec s;
    if (load(&s, text, over, 2) != 0) return -1;
    pt_model m;
    spec_errors e = {0};
    if (model_configure(&m, &s, &e) != 0) {
      CHECK(0, "%s: %s", name, e.msg);
      spec_free(&s);
      return -1;
    }
    if (last < 0) last = m.n_layers + 1 + last;
    int B = (int)s.train.micro_batch_size, T = (int)s.seq_len, n_slots = 2 + i;
    device_set_precision(device_current(), s.train.precision);
    model_alloc(&m, first, last);
    pt_stage st;
    stage_init(&st, &m, first, last, B, T, n_slots, 0);
    size_t before_stash = st.bytes;
    stage_alloc_stash(&st, split ? 2 : 0);
    sets = (int64_t)(st.bytes - before_stash);
    bytes[i] = (int64_t)before_stash;
    pt_stage_memory em;
    memory_estimate_stage(&m, first, last, n_slots, &em);
    est[i] = em.activations - memory_engine_bytes(&m, first, last, n_slots);
    est_sets = memory_stash_bytes(&m, first, last, 2);
    int64_t out_n = (int64_t)B * T * m.layers[last - 1].out_dim;
    float *dout = pt_calloc((size_t)out_n, sizeof(float));
    for (int64_t j = 0; j < out_n; j++) dout[j] = 1e-3f * (float)(j % 5);
    /* the packed slots in use, bf16 on the cpu only (the gates run every device) */
    int run = !strcmp(precision, "bf16") && !strcmp(device, "cpu");
    for (int slot = 0; slot < n_slots && run; slot++) {
      int32_t *in = stage_input_host(&st, slot);
      for (int j = 0; j < B * T; j++) in[j] = (j * 7 + slot) % (int)s.vocab;
      stage_input_commit(&st, slot);
      stage_forward(&st, slot, B, T);
    }
    float *ddev = device_alloc(m.dev, sizeof(float) * (size_t)out_n);
    device_upload(m.dev, ddev, dout, sizeof(float) * (size_t)out_n);
    for (int slot = n_slots - 1; slot >= 0 && run; slot--) {
      if (!split) stage_backward(&st, slot, ddev, 0, NULL);
      else stage_backward_input(&st, slot, ddev, 0, NULL), stage_backward_weight(&st, slot);
    }
    device_free(m.dev, ddev);
    free(dout);
    stage_free(&st);
    model_free(&m);
    device_set_precision(device_current(), SPEC_PRECISION_FP32);
    spec_free(&s);
  }
  int64_t measured = bytes[1] - bytes[0], estimated = est[1] - est[0];
  printf("%-24s %-8s %-4s activations per micro-batch: measured %9lld  estimated %9lld%s\n",
         name, device, precision, (long long)measured, (long long)estimated,
         split ? "  (+2 dout sets)" : "");
  CHECK(measured == estimated, "%s %s %s: %lld bytes per micro-batch allocated, %lld estimated",
        name, device, precision, (long long)measured, (long long)estimated);
  if (split)
    CHECK(sets == est_sets, "%s %s %s: 2 dout sets allocate %lld bytes, estimated %lld", name,
          device, precision, (long long)sets, (long long)est_sets);
  if (stash) *stash = sets;
  return measured;
}

/* bf16 keeps at most 55% of fp32's activation bytes per micro-batch (issue 26), exactly as
 * estimated, whole models and slices, fused and split backward (with its dout sets). */
static void bf16_case(const char *name, const char *text, const char *device, int first,
                      int last) {
  for (int split = 0; split < 2; split++) {
    int64_t s32 = 0, s16 = 0;
    int64_t f32 = per_micro_batch(name, text, device, "fp32", first, last, split, &s32);
    int64_t b16 = per_micro_batch(name, text, device, "bf16", first, last, split, &s16);
    CHECK(f32 > 0 && b16 > 0 && b16 <= 0.55 * f32,
          "%s %s: bf16 keeps %lld bytes per micro-batch, fp32 %lld: more than 55%%", name,
          device, (long long)b16, (long long)f32);
    if (f32 > 0) printf("%-24s %-8s bf16 / fp32 = %.3f\n", name, device, (double)b16 / f32);
    /* a micro-batch between its I and W holds its slot and a set; bf16's sets also keep the
     * parts only backward_input writes, which fp32 keeps in every slot */
    if (split)
      CHECK(b16 + s16 / 2 <= 0.55 * (f32 + s32 / 2),
            "%s %s: a micro-batch between I and W keeps %lld bytes at bf16, %lld at fp32", name,
            device, (long long)(b16 + s16 / 2), (long long)(f32 + s32 / 2));
  }
}

static int bf16_cases(const char *device) {
  char err[256];
  spec_device kind = !strcmp(device, "gpu") ? SPEC_DEVICE_GPU
                     : !strcmp(device, "emulated") ? SPEC_DEVICE_EMULATED : SPEC_DEVICE_CPU;
  if (kind == SPEC_DEVICE_GPU && device_count(kind) == 0) { /* a real-CUDA build, no GPU here */
    printf("memory_estimate: skipped: no GPU can be used here\n");
    return 77;
  }
  if (device_select(kind, 0, err, sizeof err) != 0) {
    CHECK(0, "device %s: %s", device, err);
    return test_summary("memory_estimate");
  }
  bf16_case("gpt whole", GPT, device, 0, -1);
  bf16_case("gpt first", GPT, device, 0, 5);
  bf16_case("llama whole", LLAMA, device, 0, -1);
  return 0;
}

/* --- train.precision bf16: the weight copy ---------------------------------------------------- */

/* The model's bf16 weight copy (model/model.h's params_bf16): allocated exactly when the plan
 * counts it (weight_copy, params / 2), measured by the tracker, and holding the parameters'
 * bf16 bits once allocated. */
static void weight_copy_case(void) {
  static const char *const bf16[] = {"train.precision=bf16"};
  pt_spec s;
  if (load(&s, GPT, bf16, 1) != 0) return;
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, &s, &e) != 0) {
    CHECK(0, "weight copy: %s", e.msg);
    spec_free(&s);
    return;
  }
  pt_stage_memory planned, est;
  memory_estimate_stage(&m, 0, m.n_layers, 1, &planned);
  device_set_precision(device_current(), SPEC_PRECISION_BF16);
  size_t before = pt_mem_current();
  model_alloc(&m, 0, m.n_layers);
  size_t measured = pt_mem_current() - before;
  memory_estimate_stage(&m, 0, m.n_layers, 1, &est);
  int64_t copy = m.params_bf16 ? 2 * m.n_floats : 0;
  printf("weight copy: %s, %lld bytes planned, %lld allocated\n",
         m.params_bf16 ? "used" : "not used (emulated bf16 products)",
         (long long)planned.weight_copy, (long long)copy);
  CHECK(planned.weight_copy == copy && est.weight_copy == copy,
        "weight copy: planned %lld before allocation, %lld after; allocated %lld",
        (long long)planned.weight_copy, (long long)est.weight_copy, (long long)copy);
  CHECK(measured >= (size_t)(est.params + est.grads + copy) &&
            measured < (size_t)(est.params + est.grads + copy + 3 * 64),
        "weight copy: model_alloc took %zu bytes, the plan's params + grads + copy %lld",
        measured, (long long)(est.params + est.grads + copy));
  int64_t stale = -1;
  for (int64_t i = 0; m.params_bf16 && i < m.n_floats && stale < 0; i++)
    if (m.params_bf16[i] != pt_bf16_bits(m.params[i])) stale = i;
  CHECK(stale < 0, "weight copy: element %lld is not the parameter's bf16 bits", (long long)stale);
  model_free(&m);
  device_set_precision(device_current(), SPEC_PRECISION_FP32);
  CHECK(pt_mem_current() == before, "weight copy: %zd tracked bytes left after model_free",
        (ssize_t)(pt_mem_current() - before));
  spec_free(&s);
}

int main(int argc, char **argv) {
  if (argc > 1) { /* a device's bf16 storage only: `gpu` in the emulator build, `emulated` */
    make_data();
    int skipped = bf16_cases(argv[1]) == 77;
    remove(g_f32_path);
    return skipped ? 77 : test_summary("memory_estimate");
  }
  FILE *tiny = fopen("examples/data/tiny.txt", "rb");
  if (!tiny) {
    fprintf(stderr, "test_memory_estimate: examples/data/tiny.txt not found; run from the "
            "repository root\n");
    return 1;
  }
  fclose(tiny);
  make_data();
  static const char *const ckpt1[] = {"train.activation_checkpoint_interval=1"};
  static const char *const ckpt3[] = {"train.activation_checkpoint_interval=3"};
  static const char *const sgd[] = {"train.optimizer={name: sgd, lr: 0.01, momentum: 0.9}"};
  static const char *const sgd_ckpt[] = {"train.optimizer={name: sgd, lr: 0.01}",
                                         "train.activation_checkpoint_interval=2"};
  static const char *const mlp_ckpt[] = {"train.activation_checkpoint_interval=2"};

  trainer_case("gpt adamw", GPT, NULL, 0);
  trainer_case("gpt adamw checkpoint 1", GPT, ckpt1, 1);
  trainer_case("gpt adamw checkpoint 3", GPT, ckpt3, 1);
  trainer_case("gpt sgd", GPT, sgd, 1);
  trainer_case("gpt sgd checkpoint 2", GPT, sgd_ckpt, 2);
  trainer_case("mlp adamw", g_mlp, NULL, 0);
  trainer_case("mlp sgd", g_mlp, sgd, 1);
  trainer_case("mlp adamw checkpoint 2", g_mlp, mlp_ckpt, 1);

  /* GPT: 0 embedding, 1 pos_embedding, 2-7 blocks, 8 layernorm, 9 lm_head (tied to 0) */
  slice_case("gpt middle", GPT, NULL, 0, 3, 7, 3, 0);
  slice_case("gpt middle checkpoint 1", GPT, ckpt1, 1, 3, 7, 3, 0);
  slice_case("gpt middle checkpoint 3", GPT, ckpt3, 1, 2, 8, 3, 0);
  slice_case("gpt first", GPT, NULL, 0, 0, 4, 3, 0);
  slice_case("gpt last (remote tie)", GPT, sgd, 1, 6, -1, 3, 0);
  slice_case("gpt whole (local tie)", GPT, NULL, 0, 0, -1, 3, 0);
  slice_case("mlp middle", g_mlp, NULL, 0, 2, 6, 3, 0);
  slice_case("mlp middle checkpoint 2", g_mlp, mlp_ckpt, 1, 1, 7, 3, 0);
  slice_case("mlp last", g_mlp, sgd, 1, 4, -1, 3, 0);
  /* split backward: the dout sets of 2 or 3 micro-batches between I and W (none when
   * checkpointing, where I is the fused backward) */
  slice_case("gpt middle", GPT, NULL, 0, 3, 7, 3, 2);
  slice_case("gpt last (remote tie)", GPT, NULL, 0, 6, -1, 3, 3);
  slice_case("gpt whole (local tie)", GPT, NULL, 0, 0, -1, 3, 3);
  slice_case("gpt middle checkpoint 3", GPT, ckpt3, 1, 2, 8, 3, 2);
  slice_case("mlp middle", g_mlp, NULL, 0, 2, 6, 3, 2);
  bf16_cases("cpu");
  bf16_cases("emulated");
  weight_copy_case();
  remove(g_f32_path);
  return test_summary("memory_estimate");
}
