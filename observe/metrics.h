/* observe/metrics.h: one record per optimizer step, written as a JSON line (--metrics FILE) and
 * as a human-readable line on stdout. */
#ifndef PT_METRICS_H
#define PT_METRICS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
  int64_t step;  /* 1-based */
  int64_t steps;
  double loss, lr, grad_norm, tokens_per_s, step_ms;
  /* Filled by the launcher when known (n_stages 0: left out of the JSON): */
  int n_stages;
  const double *bubble;     /* [n_stages] fraction of the step each stage was not computing */
  double bubble_mean;
  const double *peak_bytes; /* [n_stages] peak tracked memory of each stage's rank */
  /* [n_stages] or NULL (not on GPUs): the most memory its rank's GPU had in use above what it
   * had when the rank opened it, as the driver counts (engine/part.h gpu_grown) */
  const double *gpu_bytes;
  double mfu;               /* model FLOP/s over (ranks x measured sgemm FLOP/s per rank); <0: unknown */
  int64_t skipped_steps;    /* steps skipped so far for non-finite gradients (on_nonfinite: skip) */
  int64_t seq_len;          /* tokens per sequence of this step under train.seq_len_schedule;
                             * 0 without one (then left out of the JSON) */
  int has_eval;             /* data.eval ran after this step: eval_loss is its loss */
  double eval_loss;
} pt_step_metrics;

/* Appends one JSON object and a newline to f; flushed so a crash loses at most one line:
 * step, loss, lr, grad_norm, tokens_per_s, step_ms, and when known bubble (per stage),
 * bubble_mean, peak_memory_bytes (per stage), gpu_memory_bytes (per stage, on GPUs), mfu,
 * seq_len (with train.seq_len_schedule), and eval_loss on the steps that evaluate. 0, or -1
 * with errno set when the line could not be written (a full disk). */
int metrics_write_json(FILE *f, const pt_step_metrics *s);
void metrics_print_line(FILE *f, const pt_step_metrics *s);
/* On a terminal: one live line (step/total, a bar, loss, tokens/s, ETA) rewritten in place;
 * elsewhere (CI, a file): a plain line every `every` steps, the first and the last. */
void metrics_print_progress(FILE *f, const pt_step_metrics *s, int64_t every, double eta_s);

#endif
