/* observe/trace_read.h: one step of a recorded trace as the pipeline picture's spans, so that a
 * real run is drawn by the same renderer as a simulated schedule (schedule/schedule_svg.h).
 *
 * Reads the Chrome trace JSON that trace_write() writes (pipe_train --trace; format in
 * observe/trace.h) and keeps replica 0's tracks, told apart by their "rank R (stage S, replica
 * D)" process names (without such names, pid = stage: one replica). Of one step it keeps the
 * forward (F<mb>) and backward (B<mb>, or I<mb> and W<mb> when split) spans, and the "wait"
 * spans nested inside them (time
 * blocked on a neighbour: drawn pale, counted as idle), in milliseconds. Waits elsewhere (in the
 * optimizer), receives, sends, reductions and the optimizer are left out, as in the simulated
 * picture. The measured bubble is the idle share of the window from the step's first forward
 * to its last backward, over all stages.
 */
#ifndef PT_TRACE_READ_H
#define PT_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "schedule/schedule_svg.h"

typedef struct {
  pt_sched_box *boxes; /* t0, t1 in ms on rank 0's clock */
  int n;
  int n_stages, n_micro;
  int64_t step;          /* 1-based, as in the trace */
  double t0, t1;         /* the window: first forward's start, last backward's end */
  char schedule[64];     /* the trace's metadata "schedule", "" when it has none */
  int stages_from_pids;  /* 1: no track names, pid taken as the stage */
} pt_trace_step;

/* Reads step `step` of the trace at path (0: the first step with forward/backward spans).
 * Returns 0, or -1 with a one-line reason in err (unreadable or not a trace, no such step, no
 * forward/backward spans on replica 0). Free with trace_step_free. */
int trace_read_step(const char *path, int64_t step, pt_trace_step *out, char *err, size_t errsz);
void trace_step_free(pt_trace_step *t);
/* Draws t to path: "[LABEL, ]step N: P = .. stages, M = .. micro-batches, measured bubble ..%",
 * label defaulting to the trace's schedule. title (when not NULL) receives the title. Returns 0
 * or -1 with err. */
int trace_step_write_svg(const pt_trace_step *t, const char *label, const char *path,
                         char *title, size_t titlesz, char *err, size_t errsz);

#endif
