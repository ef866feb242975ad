/* bench/bench_schedules.c: pipe_train with one more layer type, `sleep`, for measuring schedules.
 * Built from launcher/pipe_train.c plus this file, which defines pipe_train_register_layers():
 *   mpirun -np P bench_schedules SPEC [any pipe_train option: --set, --metrics, --quiet, ...]
 * A sleep layer passes its input through unchanged (out = in, din = dout) and spends a fixed
 * wall time in each step: forward_ms in forward, input_ms in backward_input, weight_ms in
 * backward_weight. So 8 ranks fit on 2 cores: each waits rather than computes, and the step
 * time is the schedule's alone (bench/schedules.py compares it with the closed form). Its one
 * parameter (a [dim] bias, never read) gives the optimizer and the reductions something to do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "layers/layer.h"
#include "spec/spec.h"

static void sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec t = {(time_t)(ms / 1e3), (long)((ms - 1e3 * (double)(time_t)(ms / 1e3)) * 1e6)};
  while (nanosleep(&t, &t) != 0) { /* EINTR: sleep the rest */ }
}

static const pt_setting_decl sleep_settings[] = {
    {"forward_ms", PT_SETTING_NUM, 0.0, NULL, 0.0, 1e4, 0, "wall time spent in forward"},
    {"input_ms", PT_SETTING_NUM, 0.0, NULL, 0.0, 1e4, 0, "wall time spent in backward_input"},
    {"weight_ms", PT_SETTING_NUM, 0.0, NULL, 0.0, 1e4, 0, "wall time spent in backward_weight"},
    {.name = NULL},
};

static void sleep_configure(pt_layer *L, const pt_layer_setup *s, spec_errors *e) {
  if (s->in_tokens) spec_error(e, s->args, 0, "sleep needs float features");
  L->out_dim = s->in_dim;
  layer_add_param(L, "bias", 1, s->in_dim, 0, 0, 0);
}

static void sleep_forward(pt_layer *L, const pt_io *io) {
  io->k->copy(io->k, io->out, io->in, (int64_t)io->B * io->T * L->out_dim);
  sleep_ms(layer_setting_num(L, "forward_ms"));
}

static void sleep_backward_input(pt_layer *L, const pt_io *io) {
  if (io->din) io->k->copy(io->k, io->din, io->dout, (int64_t)io->B * io->T * L->out_dim);
  sleep_ms(layer_setting_num(L, "input_ms"));
}

static void sleep_backward_weight(pt_layer *L, const pt_io *io) {
  sleep_ms(layer_setting_num(L, "weight_ms"));
}

static const pt_layer_type sleep_type = {
    .name = "sleep",
    .kernels_only = 1,
    .settings = sleep_settings,
    .configure = sleep_configure,
    .forward = sleep_forward,
    .backward_input = sleep_backward_input,
    .backward_weight = sleep_backward_weight,
};

void pipe_train_register_layers(void);
void pipe_train_register_layers(void) {
  if (layer_register(&sleep_type) != 0) pt_fatal("cannot register the sleep layer");
}
