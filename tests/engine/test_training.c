/* Whole-model training behaviour of the sequential path: determinism, activation checkpointing,
 * tied-weight gradients, gradient-accumulation scaling, learning. Run from the repo root. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/train.h"
#include "test_util.h"

static const char *SMALL =
    "model: {vocab: 256, seq_len: 16, dim: 32, heads: 4}\n"
    "layers:\n"
    "  - embedding: {tie: wte}\n"
    "  - pos_embedding: {}\n"
    "  - transformer_block: {repeat: 3}\n"
    "  - layernorm: {}\n"
    "  - lm_head: {tie: wte}\n"
    "data: {path: examples/data/tiny.txt, format: bytes}\n"
    "train:\n"
    "  steps: 4\n"
    "  micro_batch_size: 2\n"
    "  micro_batches: 4\n"
    "  optimizer: {name: adamw, lr: 1.0e-3, weight_decay: 0.1}\n"
    "  grad_clip: 1.0\n"
    "  seed: 99\n";

static void load(pt_spec *s, const char *text, const char **over, int n_over) {
  spec_errors e = {0};
  if (spec_load_text(text, strlen(text), "test.yaml", over, n_over, s, &e) != 0)
    pt_fatal("spec: %s", e.msg);
}

static void start(pt_trainer *t, pt_spec *s, const char *text, const char **over, int n_over) {
  load(s, text, over, n_over);
  char err[1024];
  if (trainer_init(t, s, err, sizeof err) != 0) pt_fatal("trainer: %s", err);
}

static void finish(pt_trainer *t, pt_spec *s) {
  trainer_free(t);
  spec_free(s);
}

/* Runs `steps` steps, storing losses; returns the trainer for inspection (caller finishes). */
static void run_losses(pt_trainer *t, pt_spec *s, const char **over, int n_over, double *loss,
                       int steps) {
  start(t, s, SMALL, over, n_over);
  for (int i = 0; i < steps; i++) {
    pt_step_metrics m;
    trainer_step(t, &m);
    loss[i] = m.loss;
  }
}

static void test_determinism(void) {
  pt_trainer a, b;
  pt_spec sa, sb;
  double la[4], lb[4];
  run_losses(&a, &sa, NULL, 0, la, 4);
  run_losses(&b, &sb, NULL, 0, lb, 4);
  CHECK(memcmp(la, lb, sizeof la) == 0, "same seed gave losses %.9g vs %.9g", la[3], lb[3]);
  CHECK(memcmp(a.part.model.params, b.part.model.params,
               sizeof(float) * a.part.model.n_floats) == 0,
        "same seed gave different parameters");
  finish(&a, &sa);
  finish(&b, &sb);
}

/* Gradients of one accumulated step (before clipping/optimizer), for comparisons. */
static float *step_grads(const char **over, int n_over, size_t *bytes, size_t *act_bytes) {
  pt_trainer t;
  pt_spec s;
  start(&t, &s, SMALL, over, n_over);
  pt_step_metrics m;
  trainer_step(&t, &m); /* one full step so the weights are not at their init values */
  s.train.lr = 0.0;     /* second step: unclipped gradients of the updated weights */
  s.train.grad_clip = 0.0;
  trainer_step(&t, &m);
  *bytes = sizeof(float) * (size_t)t.part.model.n_floats;
  float *g = malloc(*bytes);
  memcpy(g, t.part.model.grads, *bytes);
  if (act_bytes) *act_bytes = t.part.stage.bytes;
  finish(&t, &s);
  return g;
}

static void test_checkpointing(void) {
  size_t n0, act0;
  float *g0 = step_grads(NULL, 0, &n0, &act0);
  for (int k = 1; k <= 4; k++) {
    char opt[64];
    snprintf(opt, sizeof opt, "train.activation_checkpoint_interval=%d", k);
    const char *over[1] = {opt};
    size_t nk, actk;
    float *gk = step_grads(over, 1, &nk, &actk);
    CHECK(nk == n0 && memcmp(g0, gk, n0) == 0, "k=%d: gradients differ from k=0", k);
    /* with 3 blocks in 7 layers, segments of 3+ layers each still hold every block's state */
    if (k <= 2)
      CHECK(actk < act0, "k=%d: activation memory %zu not below k=0's %zu", k, actk, act0);
    free(gk);
  }
  free(g0);
}

/* The same global batch split as M=4 x B=2, M=1 x B=8, or 2 replicas x M=2 x B=2. */
static void test_accumulation_scaling(void) {
  size_t n, n1, n2;
  float *ga = step_grads(NULL, 0, &n, NULL);
  const char *one[2] = {"train.micro_batches=1", "train.micro_batch_size=8"};
  float *gb = step_grads(one, 2, &n1, NULL);
  const char *dp[2] = {"train.micro_batches=2", "pipeline.data_parallel=2"};
  float *gc = step_grads(dp, 2, &n2, NULL);
  double worst = 0.0, worst_dp = 0.0, scale = 0.0;
  for (size_t i = 0; i < n / sizeof(float); i++) {
    worst = fmax(worst, fabs((double)ga[i] - gb[i]));
    worst_dp = fmax(worst_dp, fabs((double)ga[i] - gc[i]));
    scale = fmax(scale, fabs((double)ga[i]));
  }
  /* different GEMM shapes, or replicas summed apart, round differently: float32 agreement */
  CHECK(worst <= 1e-4 * scale, "M=4,B=2 vs M=1,B=8: max diff %.3g (scale %.3g)", worst, scale);
  CHECK(n2 == n && worst_dp <= 1e-5 * scale, "2 replicas x M=2 vs 1 x M=4: max diff %.3g",
        worst_dp);
  free(ga), free(gb), free(gc);
}

/* Tied weight gradient = embedding's + lm_head's gradient in an untied copy of the model. */
static void test_tied_gradient(void) {
  const char *untie_text =
      "model: {vocab: 256, seq_len: 16, dim: 32, heads: 4}\n"
      "layers:\n  - embedding: {}\n  - pos_embedding: {}\n  - transformer_block: {repeat: 3}\n"
      "  - layernorm: {}\n  - lm_head: {}\n"
      "data: {path: examples/data/tiny.txt, format: bytes}\n"
      "train: {steps: 1, micro_batch_size: 2, micro_batches: 4, seed: 99,\n"
      "        optimizer: {name: adamw}}\n";
  pt_trainer tt, tu;
  pt_spec st, su;
  start(&tt, &st, SMALL, NULL, 0);
  start(&tu, &su, untie_text, NULL, 0);
  st.train.grad_clip = su.train.grad_clip = 0.0; /* compare raw gradients */
  /* same starting point: untied head := embedding */
  memcpy(tu.part.model.layers[6].w[0], tu.part.model.layers[0].w[0], sizeof(float) * 256 * 32);
  pt_step_metrics m;
  trainer_step(&tt, &m);
  trainer_step(&tu, &m);
  const float *gt = tt.part.model.layers[0].g[0], *ge = tu.part.model.layers[0].g[0],
              *gh = tu.part.model.layers[6].g[0];
  CHECK(tt.part.model.layers[6].w[0] == tt.part.model.layers[0].w[0],
        "tied copies do not share the weight");
  CHECK(tt.part.model.layers[6].g[0] != gt,
        "a tied copy must accumulate apart (summed per replica)");
  double worst = 0.0, scale = 0.0;
  for (int i = 0; i < 256 * 32; i++) {
    worst = fmax(worst, fabs((double)gt[i] - ((double)ge[i] + gh[i])));
    scale = fmax(scale, fabs((double)gt[i]));
  }
  CHECK(scale > 0.0 && worst <= 1e-5 * scale, "tied grad != emb + head grads: %.3g (scale %.3g)",
        worst, scale);
  CHECK(model_param_count(&tt.part.model) + 256 * 32 == model_param_count(&tu.part.model),
        "tied weight not counted once");
  finish(&tt, &st);
  finish(&tu, &su);
}

static void test_learns(void) {
  const char *over[3] = {"train.steps=40", "train.optimizer.lr=3.0e-3", "train.grad_clip=0"};
  pt_trainer t;
  pt_spec s;
  double loss[40];
  run_losses(&t, &s, over, 3, loss, 40);
  CHECK(fabs(loss[0] - log(256.0)) < 0.3, "initial loss %.4f is not near ln(256)", loss[0]);
  CHECK(loss[39] < loss[0] - 1.5, "loss %.4f -> %.4f: not learning", loss[0], loss[39]);
  finish(&t, &s);
}

int main(void) {
  test_determinism();
  test_checkpointing();
  test_accumulation_scaling();
  test_tied_gradient();
  test_learns();
  return test_summary("training");
}
