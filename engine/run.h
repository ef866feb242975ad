/* engine/run.h: a whole training run, start-up to end-of-run report: the one training loop.
 *
 * run_train drives either engine (engine/engine.h) through the same steps: it checks that the
 * outputs are writable, binds the process (--bind), builds the engine and loads --load, then
 * loops over the steps writing metrics (--metrics, --tensorboard; rank 0) and progress lines,
 * periodic checkpoints (train.checkpoint.every, pruned to .keep), and on SIGTERM/SIGINT finishes
 * the step, saves and returns (exit 0, "preempted after step N"); at the end --save, --gather,
 * the trace, the per-stage report and --dump-params. Failures end the process: exit 2 for bad
 * input (a spec, data or checkpoint that does not fit), 1 for the rest, every rank alike. Every
 * rank of the job calls run_train with the same spec and options; the sequential run has one. */
#ifndef PT_RUN_H
#define PT_RUN_H

#include "checkpoint/checkpoint.h"
#include "spec/spec.h"

typedef struct {
  int sequential; /* the sequential engine (one process), else the pipelined one (mpirun) */
  int quiet;      /* no start-up, progress or report lines on stdout */
  int bind;       /* PT_BIND_AUTO | PT_BIND_NONE (device/placement.h) */
  int verbose;    /* the start-up lines of every rank, not collapsed (engine/start_lines.h) */
  const char *metrics_path;            /* one JSON line per step (rank 0), or NULL */
  const char *tensorboard_dir;         /* TensorBoard events (rank 0; observe/tensorboard.h) */
  const char *load_path;               /* a checkpoint to continue from, or NULL */
  const char *save_dir, *gather_path;  /* written at the end, or NULL */
  const char *gather_hf_dir;           /* a transformers directory written at the end, or NULL */
  const char *dump_prefix;             /* each rank's parameters to PREFIX.<rank>.bin, or NULL */
  const char *trace_path, *trace_steps; /* pipelined only; trace_steps "A:B" or NULL */
  pt_spec_source src;                  /* what checkpoints record of the spec */
} pt_run_options;

void run_train(const pt_spec *spec, const pt_run_options *o);
/* Ends this process the way a failed run ends, every rank alike: prints msg unless it is empty
 * ("pipetrain: msg" for PT_EXIT_INPUT, "pipetrain: error: msg" else), shuts the communicator
 * down under mpirun, exits with code. Each rank passes the message it alone should print.
 * Collective under mpirun (every caller agreed to stop first): no rank exits before the one
 * with the message has written it, since mpirun ends the others as soon as one exits non-zero
 * (a rank that has not come within 30 s is given up on: the others exit unfinalized). */
void run_exit(int code, const char *msg) __attribute__((noreturn));
/* A bad input that may be this rank's alone: returns when no rank of the job (launched: under
 * mpirun; else this process alone) failed, else every rank exits 2 through run_exit, the lowest
 * failing rank printing its msg. Collective under mpirun. */
void run_exit_first_failed(int launched, int failed, const char *msg);

#endif
