/* The pipelined engine: pt_pipeline behind the engine interface (engine/engine.h), with the
 * figures of a run that need every rank: per-stage idle time and peak memory, the tie check,
 * the agreed preemption signal, the trace and the end-of-run stage report. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/signals.h"
#include "engine/engine.h"
#include "engine/pipeline.h"
#include "observe/trace_write.h"
#include "observe/watchdog.h"
#include "partition/memory.h"

typedef struct {
  pt_pipeline p;
  int world;
  /* [world * 3]: every rank's idle fraction, peak memory and GPU memory grown (rank 0) */
  double *all;
  double *bubble, *peak, *gpu; /* [P]: replica 0's, which rank 0 reports */
  const char *trace_path;
} pipelined;

/* Each stage's idle fraction, peak memory and GPU memory grown of the step, gathered on rank 0
 * (replica 0's stage s is rank s). */
static void gather_stage_figures(pipelined *x, pt_step_metrics *m) {
  pt_pipeline *p = &x->p;
  double idle = p->last_step_s > 0 ? 1.0 - p->step_compute_s / p->last_step_s : 0.0;
  double mine[3] = {idle < 0 ? 0 : idle, (double)pt_mem_peak(), (double)p->part.gpu_grown};
  pipeline_gather_root(p, mine, 3, x->all, "the end-of-step statistics");
  if (p->rank != 0) return; /* only rank 0 writes metrics */
  m->n_stages = p->P, m->bubble = x->bubble, m->peak_bytes = x->peak, m->bubble_mean = 0;
  for (int s = 0; s < p->P; s++) {
    x->bubble[s] = x->all[3 * s], x->peak[s] = x->all[3 * s + 1], x->gpu[s] = x->all[3 * s + 2];
    m->bubble_mean += x->bubble[s] / p->P;
  }
  if (device_memory_bytes(device_current()) > 0) m->gpu_bytes = x->gpu;
}

static int pipelined_step(pt_engine *e, pt_step_metrics *out) {
  pipelined *x = e->impl;
  int status = pipeline_step(&x->p, out); /* the same on every rank */
  if (status < 0) return status;
  int64_t every = x->p.part.spec->pipeline.tie_check_every;
  if ((every > 0 && out->step % every == 0) || out->step == out->steps) pipeline_check_ties(&x->p);
  gather_stage_figures(x, out);
  return status;
}

static double pipelined_eval(pt_engine *e) { return pipeline_eval(&((pipelined *)e->impl)->p); }

static int pipelined_save(pt_engine *e, const char *dir, const pt_spec_source *src, char *err,
                          size_t errsz) {
  return pipeline_save(&((pipelined *)e->impl)->p, dir, src, err, errsz);
}

static int pipelined_load(pt_engine *e, const char *path, char *err, size_t errsz) {
  return pipeline_load(&((pipelined *)e->impl)->p, path, err, errsz);
}

static void pipelined_gather(pt_engine *e, const char *path, const char *what) {
  pipeline_gather(&((pipelined *)e->impl)->p, path, what);
}

/* The largest pending signal over all ranks (they may see it at different times): gathered on
 * rank 0 peer by peer (so a dead rank is named), then broadcast. */
static int pipelined_agree_signal(pt_engine *e) {
  pipelined *x = e->impl;
  double mine = signals_pending(), *all = pt_calloc((size_t)x->world, sizeof(double));
  pipeline_gather_root(&x->p, &mine, 1, all, "the end-of-step signal check");
  uint64_t sig = 0;
  for (int r = 0; x->p.rank == 0 && r < x->world; r++)
    sig = all[r] > (double)sig ? (uint64_t)all[r] : sig;
  watchdog_arm("rank 0's end-of-step decision", 0, x->p.part.step);
  comm_broadcast(comm_world(), &sig, sizeof sig, 0);
  watchdog_disarm();
  free(all);
  return (int)sig;
}

static void pipelined_describe(const pt_engine *e, char *out, size_t n) {
  const pt_pipeline *p = &((const pipelined *)e->impl)->p;
  char chunks[64] = "";
  if (p->plan.virtual_stages > 1)
    snprintf(chunks, sizeof chunks, " in %d chunks", p->plan.n_chunks);
  snprintf(out, n, "%d layers%s on %d stages x %d replicas (%s, %s), %lld steps",
           p->part.model.n_layers, chunks, p->P, p->dp, p->plan.method, p->sched.name,
           (long long)p->part.spec->train.steps);
}

/* Rank 0 prints, per stage (replica 0), the peak micro-batches in flight, peak bytes held (on a
 * GPU also what its driver saw taken: gpu_grown) and the idle fraction (time not spent
 * computing, over the steps' wall time). */
static void report_stages(pipelined *x) {
  pt_pipeline *p = &x->p;
  int *counts = pt_calloc((size_t)x->world, sizeof(int));
  int gpu = device_memory_bytes(device_current()) > 0;
  for (int i = 0; i < x->world; i++) counts[i] = 4;
  double idle = p->total_s > 0 ? 1.0 - p->compute_s / p->total_s : 0.0;
  double mine[4] = {p->peak_in_flight, (double)pt_mem_peak(), idle, (double)p->part.gpu_grown};
  double *all = pt_calloc(4 * (size_t)x->world, sizeof(double));
  comm_allgatherv_f64(comm_world(), mine, 4, all, counts);
  for (int s = 0; p->rank == 0 && s < p->P; s++) {
    char est[32], got[32], comm[64] = "", driver[96] = "";
    memory_format_size(p->plan.mem[s].total, est, sizeof est);
    memory_format_size((int64_t)all[4 * s + 1], got, sizeof got);
    if (p->plan.mem[s].comm > 0) { /* NCCL's part: counted on both sides (partition/memory.h) */
      char c[32];
      memory_format_size(p->plan.mem[s].comm, c, sizeof c);
      snprintf(comm, sizeof comm, ", of which comm %s", c);
    }
    if (gpu) {
      char g[32];
      memory_format_size((int64_t)all[4 * s + 3], g, sizeof g);
      snprintf(driver, sizeof driver, ", its GPU %s more in use than at the start", g);
    }
    printf("stage %d: peak %d micro-batches in flight, peak memory %s (planned %s%s)%s, idle "
           "%.1f%%\n", s, (int)all[4 * s], got, est, comm, driver, 100.0 * all[4 * s + 2]);
  }
  free(counts);
  free(all);
}

static void pipelined_finish(pt_engine *e, int quiet) {
  pipelined *x = e->impl;
  const pt_spec *s = x->p.part.spec;
  watchdog_arm("the end-of-run exchange", -1, x->p.part.step);
  if (x->trace_path) {
    device_sync(x->p.part.model.dev); /* every kept span has run */
    pipeline_trace_resolve(&x->p);
    trace_write(&x->p.trace, comm_world(), &x->p.plan, &x->p.part.model, s->pipeline.schedule,
                x->trace_path);
  }
  watchdog_disarm();
  if (!quiet) report_stages(x);
}

static void pipelined_free(pt_engine *e) {
  pipelined *x = e->impl;
  pipeline_free(&x->p);
  free(x->all), free(x->bubble), free(x->peak), free(x->gpu);
  free(x);
  e->impl = NULL, e->part = NULL;
}

static const pt_engine_ops pipelined_ops = {
    .step = pipelined_step, .eval = pipelined_eval, .save = pipelined_save,
    .load = pipelined_load, .gather = pipelined_gather, .agree_signal = pipelined_agree_signal,
    .describe = pipelined_describe, .finish = pipelined_finish, .free = pipelined_free};

int engine_open_pipelined(pt_engine *e, const pt_spec *spec, const char *trace_path,
                          const char *trace_steps, char *err, size_t errsz) {
  pipelined *x = pt_calloc(1, sizeof *x);
  if (pipeline_init(&x->p, spec, err, errsz) != 0) {
    free(x); /* the job ends: what pipeline_init built goes with it */
    return -1;
  }
  pt_pipeline *p = &x->p;
  x->world = p->P * p->dp;
  x->all = pt_calloc(3 * (size_t)x->world, sizeof(double));
  x->gpu = pt_calloc((size_t)p->P, sizeof(double));
  x->bubble = pt_calloc((size_t)p->P, sizeof(double));
  x->peak = pt_calloc((size_t)p->P, sizeof(double));
  x->trace_path = trace_path;
  if (trace_path) {
    int64_t first, last;
    trace_parse_window(trace_steps, &first, &last);
    trace_init(&p->trace, first, last);
    p->trace.offset_s = trace_measure_offset(comm_world());
  }
  *e = (pt_engine){.ops = &pipelined_ops, .part = &p->part, .rank = p->rank,
                   .ranks = x->world, .impl = x};
  return 0;
}
