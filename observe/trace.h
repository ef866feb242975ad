/* observe/trace.h: a timeline of what each rank did, as Chrome trace events (Perfetto,
 * chrome://tracing).
 *
 * Each rank records spans (name, category, start, duration, micro-batch, step) for the steps in
 * a window [first_step, last_step] (1-based, inclusive) into a growing buffer; at the end rank 0
 * gathers them and writes one JSON file: {"traceEvents": [...], "displayTimeUnit": "ms",
 * "metadata": {...}} (the run's schedule and layout: trace_write.h, trace_layout.h). Every
 * span is a complete event {"ph": "X", "name", "cat", "ts", "dur", "pid": rank, "tid": 0 (1 for
 * the copies below), "args": {"mb", "step"}} (and "chunk" for a rank running several chunks)
 * in microseconds on rank 0's clock (each rank's offset to rank 0 is measured at start-up
 * with ping-pongs), plus "process_name" metadata events naming each track "rank R (stage S,
 * replica D)". Spans on a track nest properly: waits are recorded inside the action that
 * waited.
 *
 * Span names and categories:
 *   F<mb>/forward, B<mb>/backward (backward_input and backward_weight of every layer, fused),
 *   I<mb>/backward_input and W<mb>/backward_weight (the two halves in split schedules),
 *   recv act<mb>, recv grad<mb>/receive (posting), send act<mb>, send grad<mb>/send (posting),
 *   wait/wait (blocked on a receive or on a send's completion, inside F/B/I/optimizer),
 *   load<mb>/load, tied grads/allreduce, data-parallel grads/allreduce, optimizer/optimizer,
 *   flush/send (held sends issued: the schedule's FLUSH),
 *   offload, prefetch/copy (pipeline.offload's copies of args.mb out and back,
 *   engine/stage_offload.h; on track "tid" 1 of the rank, apart from the actions).
 */
#ifndef PT_TRACE_H
#define PT_TRACE_H

#include <stdint.h>

typedef struct {
  const char *name; /* static string */
  const char *cat;
  int mb;           /* -1 when not a micro-batch action */
  int chunk;        /* the chunk it ran on where a rank runs several, else -1 */
  int64_t step;
  double t0, t1;    /* seconds, this rank's monotonic clock */
} pt_span;

typedef struct {
  int enabled;
  int64_t first_step, last_step;
  pt_span *spans;
  int n, cap;
  double offset_s; /* add to local times to get rank 0's clock */
} pt_trace;

/* "A:B" (1-based inclusive) or "" for all steps; returns 0 or -1 for bad text. */
int trace_parse_window(const char *text, int64_t *first, int64_t *last);
void trace_init(pt_trace *t, int64_t first, int64_t last);
void trace_free(pt_trace *t);
int trace_active(const pt_trace *t, int64_t step); /* step is 1-based */
void trace_add(pt_trace *t, const char *name, const char *cat, int mb, int64_t step, double t0,
               double t1);
/* The same, tagged with a chunk (-1: none). */
void trace_add_chunk(pt_trace *t, const char *name, const char *cat, int mb, int chunk,
                     int64_t step, double t0, double t1);

#endif
