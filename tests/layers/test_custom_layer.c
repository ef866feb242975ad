/* tests/layers/test_custom_layer.c: custom layer types and the kernel table (docs/layers.md).
 *
 *   - the CPU kernel table has every entry;
 *   - layer_register refuses a type without a required function, with one line naming it, and
 *     takes one without init, whose parameters then start at zero;
 *   - a type written only against the kernel table gives the built-in's bits (forward, input
 *     and weight gradients);
 *   - the device policy: a type with host code is refused on a gpu with one line naming the
 *     layer's index and type and the fix, runs on cpu and emulated, and never makes `auto`
 *     choose the cpu (a GPU device is faked: device_check_layers only reads its traits).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "device/device.h"
#include "engine/stage.h"
#include "kernels/kernels.h"
#include "layers/layer.h"
#include "model/model.h"
#include "test_util.h"

enum { B = 2, T = 4 };

/* --- Two custom types: a linear layer written against the table, and a host-code one ---- */

static void tlin_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  L->out_dim = (int)s->spec->dim;
  layer_add_param(L, "weight", 2, L->out_dim, s->in_dim, 0, 0);
  layer_add_param(L, "bias", 1, L->out_dim, 0, 0, 0);
}

static void tlin_forward(pt_layer *L, const pt_io *io) {
  io->k->linear_forward(io->k, io->out, io->in, L->w[0], L->w[1], io->B * io->T, L->in_dim,
                        L->out_dim);
}

static void tlin_backward_input(pt_layer *L, const pt_io *io) {
  if (io->din)
    io->k->linear_backward_input(io->k, io->din, io->dout, L->w[0], io->B * io->T, L->in_dim,
                                 L->out_dim, 0);
}

static void tlin_backward_weight(pt_layer *L, const pt_io *io) {
  io->k->linear_backward_weight(io->k, L->g[0], L->g[1], io->dout, io->in, io->B * io->T,
                                L->in_dim, L->out_dim);
}

/* No init: its parameters start at zero. */
static const pt_layer_type table_linear = {
    .name = "table_linear",
    .kernels_only = 1,
    .configure = tlin_configure,
    .forward = tlin_forward,
    .backward_input = tlin_backward_input,
    .backward_weight = tlin_backward_weight,
};

static void dbl_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  L->out_dim = s->in_dim;
}

static void dbl_forward(pt_layer *L, const pt_io *io) { /* host code on io's buffers */
  const float *x = io->in;
  for (int64_t i = 0; i < (int64_t)io->B * io->T * L->out_dim; i++) io->out[i] = 2.0f * x[i];
}

static void dbl_backward_input(pt_layer *L, const pt_io *io) {
  for (int64_t i = 0; io->din && i < (int64_t)io->B * io->T * L->out_dim; i++)
    io->din[i] = 2.0f * io->dout[i];
}

static void no_weights(pt_layer *L, const pt_io *io) {}

static const pt_layer_type host_double = {
    .name = "host_double",
    .configure = dbl_configure,
    .forward = dbl_forward,
    .backward_input = dbl_backward_input,
    .backward_weight = no_weights,
};

/* --- Helpers -------------------------------------------------------------------------------- */

static void load_model(pt_model *m, pt_spec *s, const char *middle) {
  char yaml[512];
  snprintf(yaml, sizeof yaml,
           "model: {vocab: 13, seq_len: %d, dim: 8}\n"
           "layers:\n  - embedding: {}\n  - %s: {}\n  - relu: {}\n  - lm_head: {}\n", T, middle);
  spec_errors e = {0};
  if (spec_load_text(yaml, strlen(yaml), "custom.yaml", NULL, 0, s, &e) != 0 ||
      model_configure(m, s, &e) != 0)
    pt_fatal("%s", e.msg);
}

/* layer_register(t) with stderr captured into msg; returns its result. */
static int register_quietly(const pt_layer_type *t, char *msg, size_t msgsz) {
  char path[] = "/tmp/pt_custom_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  if (fd < 0 || saved < 0) pt_fatal("mkstemp/dup");
  fflush(stderr);
  dup2(fd, 2);
  int rc = layer_register(t);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fdopen(fd, "r");
  rewind(f);
  size_t n = fread(msg, 1, msgsz - 1, f);
  msg[n] = '\0';
  fclose(f);
  remove(path);
  return rc;
}

/* --- The checks ------------------------------------------------------------------------------ */

/* Every entry of PT_KERNELS_ENTRIES (kernels.h) is set: none may be missing (the precision
 * entries after them are optional, tests/kernels/test_precision.c checks those). */
#define PT_EXPECT_ENTRY(entry) \
  CHECK(kernels_cpu.entry != NULL, "kernels_cpu: entry %s is NULL", #entry);
static void check_cpu_table_complete(void) { PT_KERNELS_ENTRIES(PT_EXPECT_ENTRY) }

static void check_registry(void) {
  char msg[512];
  const char *missing[] = {"configure", "forward", "backward_input", "backward_weight"};
  for (int i = 0; i < 4; i++) {
    pt_layer_type t = table_linear;
    t.name = "broken";
    if (i == 0) t.configure = NULL;
    if (i == 1) t.forward = NULL;
    if (i == 2) t.backward_input = NULL;
    if (i == 3) t.backward_weight = NULL;
    int rc = register_quietly(&t, msg, sizeof msg);
    char want[64];
    snprintf(want, sizeof want, "'broken': %s is NULL", missing[i]);
    CHECK(rc == -1 && strstr(msg, want) && strchr(msg, '\n') == msg + strlen(msg) - 1,
          "no %s: rc %d, message '%s'", missing[i], rc, msg);
  }
  CHECK(layer_find("broken") == NULL, "a refused type was registered");
  CHECK(register_quietly(&table_linear, msg, sizeof msg) == 0 && msg[0] == '\0',
        "a type without init: '%s'", msg);
  CHECK(register_quietly(&host_double, msg, sizeof msg) == 0, "host_double: '%s'", msg);
}

/* One forward and backward of the whole model; the output and gradients stay in m and st. */
static void train_once(pt_model *m, pt_stage *st) {
  int32_t *tok = stage_input_host(st, 0), cls[B * T];
  for (int i = 0; i < B * T; i++) tok[i] = (7 * i + 3) % 13, cls[i] = (5 * i + 1) % 13;
  stage_input_commit(st, 0);
  model_zero_grads(m);
  const float *y = stage_forward(st, 0, B, T);
  float *dy = device_alloc(m->dev, sizeof(float) * B * T * 13);
  device_loss(m->dev, LOSS_CROSS_ENTROPY, y, cls, sizeof cls, B * T, 13, 0.125f, dy);
  stage_backward(st, 0, dy, 0, NULL);
  device_free(m->dev, dy);
}

static void check_table_layer_matches_builtin(void) {
  pt_spec sa, sb;
  pt_model a, b;
  load_model(&a, &sa, "linear");
  load_model(&b, &sb, "table_linear");
  model_alloc(&a, 0, a.n_layers);
  model_alloc(&b, 0, b.n_layers);
  CHECK(a.n_floats == b.n_floats, "layouts differ: %lld vs %lld floats", (long long)a.n_floats,
        (long long)b.n_floats);
  const pt_layer *L = &b.layers[1];
  int64_t zeros = 0, n = L->params[0].numel + L->params[1].numel;
  for (int p = 0; p < 2; p++)
    for (int64_t i = 0; i < L->params[p].numel; i++) zeros += L->w[p][i] == 0.0f;
  CHECK(zeros == n, "no init: %lld of %lld parameters are zero", (long long)zeros, (long long)n);
  memcpy(b.params, a.params, sizeof(float) * (size_t)a.n_floats);
  pt_stage ta, tb;
  stage_init(&ta, &a, 0, a.n_layers, B, T, 1, 0);
  stage_init(&tb, &b, 0, b.n_layers, B, T, 1, 0);
  train_once(&a, &ta);
  train_once(&b, &tb);
  CHECK(!memcmp(stage_output(&ta, 0), stage_output(&tb, 0), sizeof(float) * B * T * 13),
        "table_linear's forward differs from linear's");
  CHECK(!memcmp(a.grads, b.grads, sizeof(float) * (size_t)a.n_grad_floats),
        "table_linear's gradients differ from linear's");
  stage_free(&ta), stage_free(&tb);
  model_free(&a), model_free(&b);
  spec_free(&sa), spec_free(&sb);
}

static void check_device_policy(void) {
  pt_spec sh, sk;
  pt_model host, kern;
  load_model(&host, &sh, "host_double");
  load_model(&kern, &sk, "table_linear");
  char err[512] = "";
  pt_device gpu = {.ops = device_kind(SPEC_DEVICE_GPU)}; /* its traits, never opened */
  int rc = device_check_layers(&gpu, host.layers, 0, host.n_layers, err, sizeof err);
  CHECK(rc == -1 && strstr(err, "layer 1 (host_double) cannot run on the gpu") &&
            strstr(err, "kernels_only") && strstr(err, "pipeline.device: cpu") &&
            !strchr(err, '\n'),
        "host code on a gpu: rc %d, '%s'", rc, err);
  CHECK(device_check_layers(&gpu, host.layers, 2, host.n_layers, err, sizeof err) == 0,
        "a stage without the host-code layer is refused: '%s'", err);
  CHECK(device_check_layers(&gpu, kern.layers, 0, kern.n_layers, err, sizeof err) == 0,
        "a kernels_only custom layer is refused on a gpu: '%s'", err);
  const spec_device host_kinds[] = {SPEC_DEVICE_CPU, SPEC_DEVICE_EMULATED};
  for (int i = 0; i < 2; i++) {
    pt_device d = {.ops = device_kind(host_kinds[i])};
    CHECK(device_check_layers(&d, host.layers, 0, host.n_layers, err, sizeof err) == 0,
          "host code refused on %s: '%s'", device_name(&d), err);
  }
  /* auto never looks at the layers (device_resolve takes none): a GPU when one is visible, and
   * then device_check_layers above refuses the host-code layer */
  spec_device picked = device_resolve(SPEC_DEVICE_AUTO);
  int gpus = device_count(SPEC_DEVICE_GPU);
  CHECK(picked == (gpus > 0 ? SPEC_DEVICE_GPU : SPEC_DEVICE_CPU),
        "auto chose %s with %d GPUs visible", spec_device_names[picked], gpus);
  setenv("PIPETRAIN_AUTO_DEVICE", "gpu", 1);
  picked = device_resolve(SPEC_DEVICE_AUTO);
  CHECK(picked == SPEC_DEVICE_GPU, "auto with a GPU: %s, not gpu (then refused)",
        spec_device_names[picked]);
  unsetenv("PIPETRAIN_AUTO_DEVICE");
  model_free(&host), model_free(&kern);
  spec_free(&sh), spec_free(&sk);
}

/* The host-code layer trains where buffers are host memory, emulated included. */
static void check_host_layer_runs(spec_device kind) {
  char err[256];
  if (device_select(kind, 0, err, sizeof err) != 0) pt_fatal("%s", err);
  pt_spec s;
  pt_model m;
  load_model(&m, &s, "host_double");
  model_alloc(&m, 0, m.n_layers);
  pt_stage st;
  stage_init(&st, &m, 0, m.n_layers, B, T, 1, 0);
  train_once(&m, &st);
  model_to_host(&m);
  double gsum = device_sumsq(m.dev, m.grads, m.n_floats);
  CHECK(gsum > 0.0 && gsum < 1e6, "host_double on %s: gradient sum of squares %g",
        spec_device_names[kind], gsum);
  stage_free(&st);
  model_free(&m);
  spec_free(&s);
  device_select(SPEC_DEVICE_CPU, 0, err, sizeof err);
}

int main(void) {
  unsetenv("PIPETRAIN_AUTO_DEVICE");
  layer_register_builtins();
  check_cpu_table_complete();
  check_registry();
  check_table_layer_matches_builtin();
  check_device_policy();
  check_host_layer_runs(SPEC_DEVICE_CPU);
  check_host_layer_runs(SPEC_DEVICE_EMULATED);
  return test_summary("custom layer");
}
