/* The sequential engine: pt_trainer behind the engine interface (engine/engine.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/signals.h"
#include "engine/engine.h"
#include "engine/eval.h"
#include "engine/train.h"

typedef struct {
  pt_trainer t;
  double idle, peak, gpu; /* the one stage's figures of the last step: never idle */
} sequential;

static int sequential_step(pt_engine *e, pt_step_metrics *out) {
  sequential *s = e->impl;
  int status = trainer_step(&s->t, out);
  s->peak = (double)pt_mem_peak(), s->gpu = (double)s->t.part.gpu_grown;
  out->n_stages = 1, out->bubble = &s->idle, out->peak_bytes = &s->peak;
  if (device_memory_bytes(device_current()) > 0) out->gpu_bytes = &s->gpu;
  return status;
}

static double sequential_eval(pt_engine *e) {
  return eval_sequential(&((sequential *)e->impl)->t);
}

static int sequential_save(pt_engine *e, const char *dir, const pt_spec_source *src, char *err,
                           size_t errsz) {
  return trainer_save(&((sequential *)e->impl)->t, dir, src, err, errsz);
}

static int sequential_load(pt_engine *e, const char *path, char *err, size_t errsz) {
  return trainer_load(&((sequential *)e->impl)->t, path, err, errsz);
}

static void sequential_gather(pt_engine *e, const char *path, const char *what) {
  trainer_gather(&((sequential *)e->impl)->t, path, what);
}

static int sequential_agree_signal(pt_engine *e) { return signals_pending(); }

static void sequential_describe(const pt_engine *e, char *out, size_t n) {
  const pt_spec *s = e->part->spec;
  snprintf(out, n, "%d layers, %lld parameters, %lld steps of %lld sequences, one process",
           e->part->model.n_layers, (long long)model_param_count(&e->part->model),
           (long long)s->train.steps, (long long)e->part->G);
}

static void sequential_finish(pt_engine *e, int quiet) {}

static void sequential_free(pt_engine *e) {
  trainer_free(&((sequential *)e->impl)->t);
  free(e->impl);
  e->impl = NULL, e->part = NULL;
}

static const pt_engine_ops sequential_ops = {
    .step = sequential_step, .eval = sequential_eval, .save = sequential_save, .load = sequential_load,
    .gather = sequential_gather, .agree_signal = sequential_agree_signal,
    .describe = sequential_describe, .finish = sequential_finish, .free = sequential_free};

int engine_open_sequential(pt_engine *e, const pt_spec *spec, char *err, size_t errsz) {
  sequential *s = pt_calloc(1, sizeof *s);
  if (trainer_init(&s->t, spec, err, errsz) != 0) {
    free(s);
    return -1;
  }
  *e = (pt_engine){.ops = &sequential_ops, .part = &s->t.part, .rank = 0, .ranks = 1, .impl = s};
  if (spec->pipeline.shard_optimizer) /* the replicas run in this one process: nothing to share */
    pt_notice("pipeline.shard_optimizer has no effect under --sequential: its one process keeps "
              "the whole optimizer state (the same bits)");
  return 0;
}
