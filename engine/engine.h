/* engine/engine.h: the training engine behind one interface, for the one training loop
 * (engine/run.c).
 *
 * Two implementations compute bitwise-equal steps (docs/training.md):
 *   - sequential (engine_open_sequential): the whole model in this one process, the
 *     data-parallel replicas emulated one after the other (engine/train.h); nothing collective;
 *   - pipelined (engine_open_pipelined): this rank's stage of a pipelined, data-parallel run
 *     (engine/pipeline.h); every rank of the job calls every op, in the same order.
 * The engine owns its implementation's state; `part` points into it (this process's model,
 * optimizer and step counters) and stays valid until ops->free. The spec must outlive the
 * engine. Figures that only rank 0 reports (loss, per-stage arrays) are valid on rank 0 only. */
#ifndef PT_ENGINE_H
#define PT_ENGINE_H

#include <stddef.h>

#include "checkpoint/checkpoint.h"
#include "engine/part.h"
#include "observe/metrics.h"

typedef struct pt_engine pt_engine;

typedef struct {
  /* One optimizer step; out gets the step's figures and this engine's per-stage ones
   * (n_stages, bubble, peak_bytes: valid until the next step), not mfu. Returns 0, 1 when the
   * step was skipped for non-finite gradients, -1 when the run must stop (part->error on every
   * rank). The same on every rank. */
  int (*step)(pt_engine *e, pt_step_metrics *out);
  /* data.eval's forward-only pass over the held-out batches (engine/eval.h): the eval loss on
   * rank 0. Changes nothing the training reads. Collective. */
  double (*eval)(pt_engine *e);
  /* A checkpoint into dir; 0, or -1 on every rank with err naming this rank's own failure
   * (empty where its part went well). A failed save changes nothing. */
  int (*save)(pt_engine *e, const char *dir, const pt_spec_source *src, char *err,
              size_t errsz);
  /* Continues from a checkpoint of any layout; 0, or -1 on every rank with err set on the one
   * rank that says why (empty elsewhere). */
  int (*load)(pt_engine *e, const char *path, char *err, size_t errsz);
  /* The whole model into one safetensors file at path; a failure ends the job with a line
   * starting with `what` (the option the user gave: "--gather", or --gather-hf's). */
  void (*gather)(pt_engine *e, const char *path, const char *what);
  /* The pending preemption signal (SIGTERM, SIGINT) of any rank, or 0: the same everywhere. */
  int (*agree_signal)(pt_engine *e);
  /* The run's shape for the start-up line ("10 layers on 2 stages x ..."; rank 0). */
  void (*describe)(const pt_engine *e, char *out, size_t n);
  /* End of the run: the trace (if one was asked for) and, unless quiet, rank 0's per-stage
   * report on stdout. */
  void (*finish)(pt_engine *e, int quiet);
  void (*free)(pt_engine *e);
} pt_engine_ops;

struct pt_engine {
  const pt_engine_ops *ops;
  pt_part *part;   /* this process's layers, optimizer, step counters */
  int rank, ranks; /* this process in the job, and how many train together (1: sequential) */
  void *impl;
};

/* Builds the sequential engine for spec: 0, or -1 with err (bad input). */
int engine_open_sequential(pt_engine *e, const pt_spec *spec, char *err, size_t errsz);
/* Builds this rank's pipelined engine; trace_path (or NULL) records a Chrome trace of the steps
 * in trace_steps ("A:B", NULL: all), written by ops->finish. Collective: 0 everywhere, or -1
 * everywhere with the one-line message in err on exactly one rank (empty on the others). */
int engine_open_pipelined(pt_engine *e, const pt_spec *spec, const char *trace_path,
                          const char *trace_steps, char *err, size_t errsz);

#endif
