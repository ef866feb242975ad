/* engine/auto_plan.c: `auto` resolved into --set values (engine/auto_plan.h). */
#include "engine/auto_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/error.h"
#include "device/device.h"
#include "device/gemm_rate.h"
#include "kernels/kernels.h"
#include "observe/trace_times.h"
#include "profile/cache.h"

#define AUTO_MEASURE_BUDGET_S 1.5

int auto_plan_needed(const pt_spec *spec, const auto_plan_options *o) {
  return o->from_trace || auto_wanted(spec) || spec->pipeline.data_parallel == SPEC_AUTO;
}

/* data_parallel: auto = the job's ranks / stages (one replica when planning alone). */
static int resolve_data_parallel(pt_spec *sp, const auto_plan_options *o, char *err,
                                 size_t errsz) {
  if (sp->pipeline.data_parallel != SPEC_AUTO) return 0;
  int world = o->launched ? comm_size(comm_world()) : (int)sp->pipeline.stages;
  int S = (int)sp->pipeline.stages;
  if (world < S || world % S != 0)
    return pt_errorf(err, errsz, "%s: pipeline.data_parallel: auto divides the job's %d ranks by "
                     "pipeline.stages (%d), which does not go evenly; run mpirun -np %d (or a "
                     "multiple of it)", sp->path, world, S, S);
  sp->pipeline.data_parallel = world / S;
  return 0;
}

/* Times with the BLAS threads each rank of the job will have (engine/run.c gives a rank its
 * share of the node's cores; planning alone, the job is taken to share this machine). */
static int measure_as_a_rank(const pt_model *m, const auto_plan_options *o, pt_layer_times *t,
                             char *err, size_t errsz) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long ranks = o->launched ? comm_local_size() : m->spec->pipeline.stages * m->spec->pipeline.data_parallel;
  int before = kernels_cpu_threads();
  if (!getenv("OPENBLAS_NUM_THREADS"))
    kernels_cpu_set_threads(ranks > 0 && cores / ranks > 1 ? (int)(cores / ranks) : 1);
  int rc = profile_times_get(t, m, AUTO_MEASURE_BUDGET_S, 1, err, errsz);
  kernels_cpu_set_threads(before);
  return rc;
}

/* This rank's times: the trace, FLOP estimates, or measured on the spec's device (cached). */
static int read_times(const pt_model *m, const auto_plan_options *o, pt_layer_times *t,
                      char *err, size_t errsz) {
  if (o->from_trace) return trace_read_times(o->from_trace, m, t, err, errsz);
  spec_device kind = device_resolve(m->spec->pipeline.device);
  if (o->times == AUTO_TIMES_MEASURE &&
      device_select(kind, o->launched ? comm_local_rank() : 0, err, errsz) == 0) {
    device_set_precision(device_current(), m->spec->train.precision); /* times as trained */
    return measure_as_a_rank(m, o, t, err, errsz);
  }
  double gflops = o->gflops > 0 ? o->gflops : gemm_measure_flops(512, 0.2) / 1e9;
  profile_times_from_flops(t, m, gflops);
  char why[160] = "";
  if (o->times == AUTO_TIMES_MEASURE) snprintf(why, sizeof why, " (could not measure: %.100s)", err);
  snprintf(t->source, sizeof t->source, "from FLOPs at %.1f GFLOP/s%s", gflops, why);
  return 0;
}

/* Rank 0's times (or its error) on every rank. */
static int share_times(const pt_model *m, const auto_plan_options *o, pt_layer_times *t,
                       char *err, size_t errsz) {
  int root = !o->launched || comm_rank(comm_world()) == 0, rc = 0;
  if (root) rc = read_times(m, o, t, err, errsz);
  if (!o->launched) return rc;
  comm_broadcast(comm_world(), &rc, sizeof rc, 0);
  comm_broadcast(comm_world(), err, errsz, 0);
  if (rc != 0) return -1;
  int n = m->n_layers;
  if (!root) profile_times_alloc(t, n);
  double *arrays[4] = {t->f, t->i, t->w, t->opt};
  for (int k = 0; k < 4; k++) comm_broadcast(comm_world(), arrays[k], sizeof(double) * (size_t)n, 0);
  comm_broadcast(comm_world(), &t->p2p_latency_s, sizeof(double), 0);
  comm_broadcast(comm_world(), &t->p2p_bytes_per_s, sizeof(double), 0);
  comm_broadcast(comm_world(), &t->copy_bytes_per_s, sizeof(double), 0);
  comm_broadcast(comm_world(), t->source, sizeof t->source, 0);
  return 0;
}

static int search(const pt_spec *sp, const auto_plan_options *o, char (*over)[AUTO_OVERRIDE_MAX],
                  int max, pt_auto_result *keep, char *err, size_t errsz) {
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, sp, &e) != 0) return pt_errorf(err, errsz, "%s", e.msg);
  pt_layer_times t = {0};
  pt_auto_result r = {0};
  int n = -1;
  if (share_times(&m, o, &t, err, errsz) == 0) {
    if (auto_search(&m, &t, o->from_trace != NULL, &r, &e) == 0)
      n = auto_overrides(&r, m.spec, over, max);
    else pt_errorf(err, errsz, "%s", e.msg);
  }
  if (keep) *keep = r;
  else auto_result_free(&r);
  profile_times_free(&t);
  model_free(&m);
  return n;
}

int auto_plan_resolve(const pt_spec *spec, const auto_plan_options *o,
                      char (*over)[AUTO_OVERRIDE_MAX], int max, pt_auto_result *keep, char *err,
                      size_t errsz) {
  pt_spec sp = *spec;
  int n = 0;
  if (keep) memset(keep, 0, sizeof *keep);
  if (resolve_data_parallel(&sp, o, err, errsz) != 0) return -1;
  if (spec->pipeline.data_parallel == SPEC_AUTO)
    snprintf(over[n++], AUTO_OVERRIDE_MAX, "pipeline.data_parallel=%lld",
             (long long)sp.pipeline.data_parallel);
  if (!o->from_trace && !auto_wanted(&sp)) return n;
  int k = search(&sp, o, over + n, max - n, keep, err, errsz);
  return k < 0 ? -1 : n + k;
}

int auto_plan_predict(const pt_spec *spec, const auto_plan_options *o, double *step_s,
                      double *bubble, char *source, size_t sourcesz, char *err, size_t errsz) {
  pt_model m;
  spec_errors e = {0};
  if (model_configure(&m, spec, &e) != 0) return pt_errorf(err, errsz, "%s", e.msg);
  pt_layer_times t = {0};
  int rc = share_times(&m, o, &t, err, errsz);
  if (rc == 0 && auto_predict(&m, &t, step_s, bubble, &e) != 0) rc = pt_errorf(err, errsz, "%s", e.msg);
  if (rc == 0) snprintf(source, sourcesz, "%s", t.source);
  profile_times_free(&t);
  model_free(&m);
  return rc;
}
