/* The model's logits under bf16 storage (engine/stage_store.h): forward leaves them unrounded in
 * their working buffer for the loss, which rounds them as it reads them (kernels.h
 * loss_rounds_bf16); they go to rest (packed) only when another micro-batch needs the buffer
 * first, and their finiteness check is the loss's (stage_loss_check). On the cpu's bf16 table
 * inside the timing table (kernels/kernels_timed.h), which counts the calls. The gate's GPT, the
 * whole model on one stage with 3 slots:
 *  - what stage_output hands any reader: the logits rounded, bit for bit the rounding of the
 *    unrounded ones, and packed at rest (one round_pack_bf16 more than a loss's read);
 *  - sequential (F L B): no pack, no rounding, no finite check of the logits; every other
 *    output's check made by the pass rounding and packing it (round_pack_bf16's mark), none of
 *    its own; the loss and its gradient bit for bit the plain loss's on the rounded logits;
 *  - GPipe (F0 F1 F2, then the losses of 2, 0, 1): the logits of 0 and 1 packed once each, by
 *    the next forward; every loss and gradient as on the rounded logits; a NaN put in the logits
 *    of 0 before it went to rest raises the mark to its forward's check (the layer named is the
 *    head), that loss's value only; the checks owed are taken once;
 *  - a NaN weight in layer 2: the mark names it, with no check of its own (the packing pass's);
 *  - checkpointing: a recomputation of the last segment keeps the earlier check owed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "device/stats.h"
#include "engine/stage.h"
#include "kernels/kernels_timed.h"
#include "kernels/precision.h"
#include "test_util.h"

#define SLOTS 3

static pt_kernels_timed g_timed;

static const pt_kernels *wrap(const pt_kernels *table, void *arg) {
  return kernels_timed_wrap(arg, table);
}

static int64_t calls(pt_kernel_entry e) { return g_timed.entry[e].calls; }

typedef struct {
  pt_model m;
  pt_stage st;
  int B, T, F;
  int64_t n;     /* floats of one slot's logits */
  int32_t mark;  /* the stage's finite mark (host memory on the cpu) */
  int32_t *targets;
} fixture;

static void fill_input(fixture *x, int slot) {
  int32_t *in = stage_input_host(&x->st, slot);
  for (int i = 0; i < x->B * x->T; i++) in[i] = (i * 7 + 11 * slot) % x->F;
  stage_input_commit(&x->st, slot);
}

static void open_fixture(fixture *x, int ckpt) {
  const char *over[] = {"train.precision=bf16"};
  pt_spec s;
  spec_errors e = {0};
  if (spec_load("tests/pipeline/gate.yaml", over, 1, &s, &e) != 0) pt_fatal("%s", e.msg);
  if (model_configure(&x->m, &s, &e) != 0) pt_fatal("%s", e.msg);
  model_alloc(&x->m, 0, x->m.n_layers);
  x->B = (int)s.train.micro_batch_size, x->T = (int)s.seq_len;
  x->F = x->m.layers[x->m.n_layers - 1].out_dim;
  x->n = (int64_t)x->B * x->T * x->F;
  stage_init(&x->st, &x->m, 0, x->m.n_layers, x->B, x->T, SLOTS, ckpt);
  x->st.check_finite = 1;
  x->mark = 0;
  x->st.finite_mark = &x->mark;
  stage_begin_step(&x->st);
  x->targets = pt_calloc((size_t)(x->B * x->T), sizeof(int32_t));
  for (int i = 0; i < x->B * x->T; i++) x->targets[i] = (i * 5 + 3) % x->F;
  spec_free(&s);
}

static void close_fixture(fixture *x) {
  stage_free(&x->st);
  model_free(&x->m);
  free(x->targets);
}

static float *copy_of(const float *y, int64_t n) {
  float *c = pt_calloc((size_t)n, sizeof(float));
  memcpy(c, y, sizeof(float) * (size_t)n);
  return c;
}

/* The loss of slot as engine/part.c computes it (over the logits, with the check owed); the
 * gradient copied into *grad. */
static double loss_of(fixture *x, int slot, float **grad) {
  float *y = stage_loss_gradient(&x->st, slot);
  int32_t check = stage_loss_check(&x->st, slot);
  double sum = 0.0;
  device_loss_acc(x->m.dev, LOSS_CROSS_ENTROPY, y, x->targets, sizeof(int32_t) * x->B * x->T,
                  x->B * x->T, x->F, 0.5f, y, NULL, &sum, check ? x->st.finite_mark : NULL, check);
  *grad = copy_of(y, x->n);
  return sum;
}

/* The plain float32 loss (no rounding on read) on logits y as they were rounded before. */
static double loss_want(fixture *x, const float *y, float **grad) {
  *grad = pt_calloc((size_t)x->n, sizeof(float));
  return loss_forward_backward(LOSS_CROSS_ENTROPY, y, x->targets, x->B * x->T, x->F, 0.5f,
                               *grad);
}

static void expect_loss(fixture *x, int slot, const float *rounded, const char *what) {
  float *got, *want;
  double lg = loss_of(x, slot, &got), lw = loss_want(x, rounded, &want);
  CHECK(!memcmp(&lg, &lw, sizeof lg) && !memcmp(got, want, sizeof(float) * (size_t)x->n),
        "%s: slot %d: loss %.17g and gradient against %.17g on the rounded logits", what, slot,
        lg, lw);
  free(got), free(want);
}

static int32_t check_of(const fixture *x, int pass, int li) {
  return INT32_MAX - (pass * x->st.n + li);
}

/* stage_output's logits (rounded, kept) against the unrounded ones a loss is handed. */
static float *reference(fixture *x, int slot) {
  fill_input(x, slot);
  stage_forward(&x->st, slot, x->B, x->T);
  float *raw = copy_of(stage_loss_output(&x->st, slot), x->n);
  fill_input(x, slot);
  stage_forward(&x->st, slot, x->B, x->T);
  int64_t rp = calls(PT_KT_round_pack_bf16);
  float *kept = copy_of(stage_output(&x->st, slot), x->n);
  CHECK(calls(PT_KT_round_pack_bf16) == rp + 1, "stage_output: one round_pack_bf16 for the "
        "logits, %lld", (long long)(calls(PT_KT_round_pack_bf16) - rp));
  int64_t unrounded = 0, wrong = 0;
  for (int64_t i = 0; i < x->n; i++) {
    unrounded += raw[i] != kept[i];
    wrong += pt_round_bf16(raw[i]) != kept[i];
  }
  CHECK(unrounded > 0 && wrong == 0, "slot %d: %lld of %lld logits handed to the loss unrounded "
        "(want some), %lld whose rounding differs from stage_output's (want none)", slot,
        (long long)unrounded, (long long)x->n, (long long)wrong);
  free(raw);
  return kept;
}

static void sequential_and_gpipe(void) {
  fixture x;
  open_fixture(&x, 0);
  float *rounded[SLOTS];
  for (int s = 0; s < SLOTS; s++) rounded[s] = reference(&x, s);
  stage_begin_step(&x.st);

  /* sequential: forward, loss: nothing done to the logits but the loss */
  int64_t fin = calls(PT_KT_finite_check);
  fill_input(&x, 0);
  stage_forward(&x.st, 0, x.B, x.T);
  CHECK(calls(PT_KT_finite_check) == fin, "forward: %lld finite checks of their own, want none "
        "(each output's in the pass packing it, the logits' the loss's)",
        (long long)(calls(PT_KT_finite_check) - fin));
  CHECK(x.st.loss_check[0] == check_of(&x, 0, x.st.n - 1), "the check owed: %d, want the "
        "forward's %d", x.st.loss_check[0], check_of(&x, 0, x.st.n - 1));
  int64_t pack = calls(PT_KT_pack_bf16), rp = calls(PT_KT_round_pack_bf16);
  int64_t rnd = calls(PT_KT_round_bf16);
  expect_loss(&x, 0, rounded[0], "sequential");
  CHECK(calls(PT_KT_pack_bf16) == pack && calls(PT_KT_round_bf16) == rnd &&
            calls(PT_KT_round_pack_bf16) == rp && x.st.loss_check[0] == 0,
        "sequential: the loss packed or rounded the logits, or left its check owed");
  CHECK(x.mark == 0, "finite logits marked %d", x.mark);
  stage_backward(&x.st, 0, stage_loss_gradient(&x.st, 0), 0, NULL);
  CHECK(calls(PT_KT_pack_bf16) == pack, "backward put the logits to rest after their loss");

  /* GPipe: forwards first; the logits of 0 get a NaN while they wait unrounded */
  stage_begin_step(&x.st);
  pack = calls(PT_KT_pack_bf16);
  for (int s = 0; s < SLOTS; s++) {
    fill_input(&x, s);
    const float *y = stage_forward(&x.st, s, x.B, x.T);
    if (s == 0) ((float *)y)[5 * x.F + 7] = NAN; /* the loss reads it from rest */
    CHECK(calls(PT_KT_pack_bf16) - pack == s, "forward %d: %lld packs, want %d", s,
          (long long)(calls(PT_KT_pack_bf16) - pack), s);
  }
  float *nan0 = copy_of(rounded[0], x.n);
  nan0[5 * x.F + 7] = NAN;
  int order[SLOTS] = {2, 0, 1};
  for (int i = 0; i < SLOTS; i++) {
    int s = order[i];
    expect_loss(&x, s, s == 0 ? nan0 : rounded[s], "gpipe");
    CHECK(x.mark == (s == 2 ? 0 : check_of(&x, 0, x.st.n - 1)), "gpipe, after loss %d: mark %d",
          s, x.mark);
    stage_backward(&x.st, s, stage_loss_gradient(&x.st, s), 0, NULL);
  }
  CHECK(calls(PT_KT_pack_bf16) - pack == SLOTS - 1, "gpipe: %lld packs, want %d",
        (long long)(calls(PT_KT_pack_bf16) - pack), SLOTS - 1);
  stage_take_mark(&x.st, x.mark);
  CHECK(x.st.bad_layer == x.m.n_layers - 1, "the NaN logits named layer %d", x.st.bad_layer);
  free(nan0);
  for (int s = 0; s < SLOTS; s++) free(rounded[s]);
  close_fixture(&x);
}

/* The checks made in the packing pass: a NaN weight in the first block (layer 2) makes its
 * output and every later one non-finite; the mark is that output's check, the earliest. */
static void checked_as_packed(void) {
  fixture x;
  open_fixture(&x, 0);
  x.m.layers[2].w[0][0] = NAN;
  int64_t fin = calls(PT_KT_finite_check);
  fill_input(&x, 0);
  stage_forward(&x.st, 0, x.B, x.T);
  CHECK(calls(PT_KT_finite_check) == fin, "a forward made finite checks of its own");
  CHECK(x.mark == check_of(&x, 0, 2), "a NaN weight in layer 2: mark %d, want layer 2's %d",
        x.mark, check_of(&x, 0, 2));
  stage_take_mark(&x.st, x.mark);
  CHECK(x.st.bad_layer == 2, "the layer named: %d, want 2", x.st.bad_layer);
  close_fixture(&x);
}

static void checkpointing(void) {
  fixture x;
  open_fixture(&x, 2);
  float *rounded[2];
  for (int s = 0; s < 2; s++) rounded[s] = reference(&x, s);
  stage_begin_step(&x.st);
  for (int s = 0; s < 2; s++) {
    fill_input(&x, s);
    stage_forward(&x.st, s, x.B, x.T);
  }
  /* slot 0's last segment is recomputed (pass 2): the first pass's check stays owed */
  int64_t fin = calls(PT_KT_finite_check);
  stage_loss_gradient(&x.st, 0);
  CHECK(calls(PT_KT_finite_check) - fin == x.st.ckpt - 1, "recomputation: %lld finite checks",
        (long long)(calls(PT_KT_finite_check) - fin));
  CHECK(x.st.loss_check[0] == check_of(&x, 0, x.st.n - 1), "after a recomputation the check "
        "owed is %d, want the first pass's %d", x.st.loss_check[0], check_of(&x, 0, x.st.n - 1));
  for (int s = 0; s < 2; s++) {
    expect_loss(&x, s, rounded[s], "checkpointing");
    stage_backward(&x.st, s, stage_loss_gradient(&x.st, s), 0, NULL);
  }
  for (int s = 0; s < 2; s++) free(rounded[s]);
  close_fixture(&x);
}

int main(void) {
  device_interpose_kernels(wrap, &g_timed);
  char err[256];
  if (device_select(SPEC_DEVICE_CPU, 0, err, sizeof err) != 0) pt_fatal("%s", err);
  device_set_precision(device_current(), SPEC_PRECISION_BF16);
  CHECK(device_current()->k->loss_rounds_bf16, "the cpu's bf16 table rounds the logits on read");
  sequential_and_gpipe();
  checked_as_packed();
  checkpointing();
  device_interpose_kernels(NULL, NULL);
  return test_summary("stage_logits");
}
