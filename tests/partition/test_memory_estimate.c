/* The planner's memory estimate (partition/memory.c) against what the engine really allocates,
 * measured with the pt_alloc_aligned tracker (core/error.h):
 *   - the sequential trainer (all layers on one stage, one micro-batch in flight): the tracked
 *     peak over trainer_init and two steps must be within 10% of memory_estimate_stage(0, n, 1);
 *   - pipeline-like slices (model_alloc(first, last) + stage_init with 3 slots + the optimizer):
 *     the tracked bytes against memory_estimate_stage(first, last, 3), less the last stage's
 *     targets and loss gradient, which the stage itself does not allocate; for split-backward
 *     schedules also w dout sets (stage_alloc_stash) against memory_add_stash(w).
 * Each part (parameters, gradients, optimizer state, activations + workspace) is also compared
 * exactly with what was allocated, so a mismatch names the part. Run from the repository root. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "partition/memory.h"
#include "core/error.h"
#include "engine/train.h"
#include "kernels/precision.h"
#include "test_util.h"

static const char *GPT =
    "model: {vocab: 256, seq_len: 32, dim: 64, heads: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - pos_embedding: {}\n"
    "  - transformer_block: {repeat: 6}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    "data: {path: examples/data/tiny.txt, format: bytes}\n"
    "train:\n"
    "  steps: 2\n"
    "  micro_batch_size: 4\n"
    "  micro_batches: 2\n"
    "  optimizer: {name: adamw, lr: 1.0e-3}\n"
    "  seed: 5\n";

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
  int64_t F = m->layers[m->n_layers - 1].out_dim, tcols = m->input_tokens ? 1 : s.data.targets;
  CHECK(est.params == 4 * m->n_floats, "%s: params %lld, allocated %lld", name,
        (long long)est.params, (long long)(4 * m->n_floats));
  CHECK(est.grads == 4 * m->n_grad_floats, "%s: grads %lld, allocated %lld", name,
        (long long)est.grads, (long long)(4 * m->n_grad_floats));
  CHECK(est.optimizer == (sgd ? 1 : 2) * 4 * m->n_floats, "%s: optimizer %lld, allocated %lld",
        name, (long long)est.optimizer, (long long)((sgd ? 1 : 2) * 4 * m->n_floats));
  /* the stage's activations and workspace, plus the trainer's loss gradient [B,T,F] and the
   * targets of one micro-batch */
  int64_t rest = (int64_t)t.part.stage.bytes + 4 * B * T * F + 4 * B * T * tcols;
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
   * target slots, the loss gradient, data buffers): not built here, checked by the MPI tests
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

int main(void) {
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
  weight_copy_case();
  remove(g_f32_path);
  return test_summary("memory_estimate");
}
