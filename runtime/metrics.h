/* runtime/metrics.h: one record per optimizer step, written as a JSON line (--metrics FILE) and
 * as a human-readable line on stdout. */
#ifndef PT_METRICS_H
#define PT_METRICS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
  int64_t step;  /* 1-based */
  int64_t steps;
  double loss, lr, grad_norm, tokens_per_s, step_ms;
} pt_step_metrics;

/* Appends one JSON object and a newline to f; flushed so a crash loses at most one line. */
void metrics_write_json(FILE *f, const pt_step_metrics *s);
void metrics_print_line(FILE *f, const pt_step_metrics *s);

#endif
