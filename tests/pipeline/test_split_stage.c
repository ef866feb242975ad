/* Split backward in the stage executor (engine/stage.h): stage_backward_input now and
 * stage_backward_weight later must leave the same gradients and return the same input gradients,
 * bit for bit, as stage_backward, with several micro-batches interleaved the way a zero-bubble
 * schedule runs them (forwards between a micro-batch's I and W, two Ws pending at once). Cases:
 * the gate's GPT with a tied embedding/head (whole model: both copies on one stage; and slices
 * that send an input gradient), an MLP with parameter-free layers between the linear ones, and activation
 * checkpointing (where I is the fused backward and W does nothing). Also checks the dout sets'
 * bytes. Run from the repository root. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/stage.h"
#include "test_util.h"

#define M 4 /* micro-batches */

/* The gate's model (tests/pipeline/gate.yaml): 0 embedding, 1 pos_embedding, 2-7 blocks,
 * 8 layernorm, 9 lm_head tied to 0. */
static const char *GATE = "tests/pipeline/gate.yaml";

static const char *MLP =
    "layers:\n"
    "  - linear: {out: 24}\n"
    "  - relu\n"
    "  - linear: {out: 40}\n"
    "  - gelu\n"
    "  - layernorm\n"
    "  - linear: {out: 3}\n"
    "loss: mse\n"
    "data: {path: examples/data/tiny.txt, format: f32, inputs: 5, targets: 3}\n"
    "train: {micro_batch_size: 6, micro_batches: 4, seed: 7}\n";

typedef struct {
  pt_model *m;
  int first, last, B, T, in_n, out_n; /* in_n, out_n: floats (or tokens) of one input, dout */
  float *grads;                       /* the run's gradients, copied out */
  float *din[M];                      /* the run's input gradients (NULL when none) */
} run_result;

static void fill_input(const run_result *r, pt_stage *st, int slot, int mb) {
  void *in = stage_input(st, slot);
  const pt_layer *L = &r->m->layers[r->first];
  for (int i = 0; i < r->in_n; i++)
    if (L->in_tokens) ((int32_t *)in)[i] = (i * 7 + 3 * mb) % 64;
    else ((float *)in)[i] = (float)((i * 5 + mb) % 13) / 13.0f - 0.5f;
}

static void fill_dout(const run_result *r, float *dout, int mb) {
  for (int i = 0; i < r->out_n; i++) dout[i] = 1e-2f * (float)((i * 3 + mb) % 7 - 3);
}

/* One micro-batch's backward, fused or its input half; keeps the returned input gradient. */
static void backward(run_result *r, pt_stage *st, int mb, int split) {
  float *dout = pt_calloc((size_t)r->out_n, sizeof(float));
  fill_dout(r, dout, mb);
  int need = r->first > 0;
  const float *din = split ? stage_backward_input(st, mb, dout, need, NULL)
                           : stage_backward(st, mb, dout, need, NULL);
  memset(dout, 0xff, sizeof(float) * (size_t)r->out_n); /* I must not keep the caller's buffer */
  free(dout);
  if (!din) return;
  size_t n = (size_t)r->B * r->T * r->m->layers[r->first].in_dim;
  r->din[mb] = pt_calloc(n, sizeof(float));
  memcpy(r->din[mb], din, n * sizeof(float));
}

/* Script letters: F forward, B fused backward, I and W the halves; digits are micro-batches. */
static void run_script(run_result *r, int ckpt, int n_sets, const char *script) {
  pt_stage st;
  stage_init(&st, r->m, r->first, r->last, r->B, r->T, M, ckpt);
  size_t before = st.bytes;
  stage_alloc_stash(&st, n_sets);
  int64_t stash = 0;
  for (int li = r->first; li < r->last && !st.ckpt; li++)
    if (r->m->layers[li].n_params > 0)
      stash += 4 * (int64_t)r->B * r->T * r->m->layers[li].out_dim;
  CHECK((int64_t)(st.bytes - before) == n_sets * stash, "[%d,%d) ckpt %d: dout sets %zu bytes, "
        "want %lld", r->first, r->last, ckpt, st.bytes - before, (long long)(n_sets * stash));
  model_zero_grads(r->m);
  for (const char *c = script; *c; c += 2) {
    int mb = c[1] - '0';
    if (*c == 'F') fill_input(r, &st, mb, mb), stage_forward(&st, mb, r->B, r->T);
    else if (*c == 'W') stage_backward_weight(&st, mb);
    else backward(r, &st, mb, *c == 'I');
  }
  r->grads = pt_calloc((size_t)r->m->n_grad_floats, sizeof(float));
  memcpy(r->grads, r->m->grads, sizeof(float) * (size_t)r->m->n_grad_floats);
  stage_free(&st);
}

static void compare(const char *what, const run_result *a, const run_result *b) {
  int64_t n = a->m->n_grad_floats;
  CHECK(!memcmp(a->grads, b->grads, sizeof(float) * (size_t)n), "%s: gradients differ", what);
  for (int mb = 0; mb < M; mb++) {
    size_t k = (size_t)a->B * a->T * a->m->layers[a->first].in_dim;
    CHECK((a->din[mb] == NULL) == (b->din[mb] == NULL), "%s: mb %d: input gradient missing",
          what, mb);
    if (a->din[mb] && b->din[mb])
      CHECK(!memcmp(a->din[mb], b->din[mb], k * sizeof(float)), "%s: mb %d: input gradients "
            "differ", what, mb);
  }
}

static void release(run_result *r) {
  free(r->grads);
  for (int mb = 0; mb < M; mb++) free(r->din[mb]);
}

/* Fused in ascending order against two split orders: I and W back to back, and a zero-bubble
 * shape with forwards between them and two micro-batches pending. */
/* The model of spec (a file, or YAML text when it has a newline). */
static void load_spec(const char *spec, const char *ckpt_set, pt_spec *s) {
  const char *over[1] = {ckpt_set};
  spec_errors e = {0};
  int rc = strchr(spec, '\n')
               ? spec_load_text(spec, strlen(spec), "split.yaml", over, ckpt_set ? 1 : 0, s, &e)
               : spec_load(spec, over, ckpt_set ? 1 : 0, s, &e);
  if (rc != 0) pt_fatal("%s", e.msg);
}

static void split_case(const char *name, const char *spec, const char *ckpt_set, int first,
                       int last) {
  pt_spec s;
  spec_errors e = {0};
  load_spec(spec, ckpt_set, &s);
  pt_model m;
  if (model_configure(&m, &s, &e) != 0) pt_fatal("%s", e.msg);
  if (last < 0) last = m.n_layers;
  model_alloc(&m, first, last);
  int ckpt = (int)s.train.activation_checkpoint_interval;
  run_result base = {.m = &m, .first = first, .last = last, .B = (int)s.train.micro_batch_size,
                     .T = m.input_tokens ? (int)s.seq_len : 1};
  base.in_n = base.B * base.T * (m.layers[first].in_tokens ? 1 : m.layers[first].in_dim);
  base.out_n = base.B * base.T * m.layers[last - 1].out_dim;
  run_result fused = base, pairs = base, zb = base;
  run_script(&fused, ckpt, 0, "F0F1F2B0F3B1B2B3");
  run_script(&pairs, ckpt, 1, "F0F1I0W0F2I1W1F3I2W2I3W3");
  run_script(&zb, ckpt, 2, "F0F1I0F2I1W0F3I2W1I3W2W3");
  char what[128];
  snprintf(what, sizeof what, "%s [%d,%d)%s%s, I W pairs", name, first, last,
           ckpt_set ? " " : "", ckpt_set ? ckpt_set : "");
  compare(what, &fused, &pairs);
  snprintf(what, sizeof what, "%s [%d,%d)%s%s, zero-bubble order", name, first, last,
           ckpt_set ? " " : "", ckpt_set ? ckpt_set : "");
  compare(what, &fused, &zb);
  release(&fused), release(&pairs), release(&zb);
  model_free(&m);
  spec_free(&s);
}

int main(void) {
  split_case("gpt whole (local tie)", GATE, NULL, 0, -1);
  split_case("gpt first", GATE, NULL, 0, 3);
  split_case("gpt middle", GATE, NULL, 2, 6);
  split_case("gpt last", GATE, NULL, 7, -1);
  split_case("gpt", GATE, "train.activation_checkpoint_interval=1", 0, -1);
  split_case("gpt", GATE, "train.activation_checkpoint_interval=3", 2, -1);
  split_case("mlp whole", MLP, NULL, 0, -1);
  split_case("mlp from a parameter-free layer", MLP, NULL, 1, 5);
  split_case("mlp", MLP, "train.activation_checkpoint_interval=2", 1, -1);
  return test_summary("split_stage");
}
