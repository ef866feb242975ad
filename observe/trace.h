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
 * On a device that runs its work after the host queues it (a GPU), the host's spans above are
 * when each action was queued; the compute actions (F, B, I, W, optimizer) are recorded again as
 * the device ran them, on track "tid" 2 of the rank, named "gpu" by a "thread_name" metadata
 * event (trace_add_device: their times come from the device later, trace_resolve). Readers of
 * the trace take a rank's compute from that track where it has one (observe/trace_doc.h).
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
  int device;       /* 1: as the device ran it (track 2) */
  int64_t ticket;   /* a device span whose times are not in yet: the device's ticket; else -1 */
} pt_span;

typedef struct {
  int enabled;
  int64_t first_step, last_step;
  pt_span *spans;
  int n, cap;
  int pending_from; /* spans before it have their times (trace_resolve starts there) */
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
/* A span as the device ran it, its times to come from the device under `ticket`
 * (device.h device_span_begin with keep). */
void trace_add_device(pt_trace *t, const char *name, const char *cat, int mb, int chunk,
                      int64_t step, int64_t ticket);
/* The device spans' times where times(ctx, ticket, &t0, &t1) gives them (1); a span it says
 * it has no times for (-1) is dropped; the rest (0) wait for a later call. */
void trace_resolve(pt_trace *t, int (*times)(void *ctx, int64_t ticket, double *t0, double *t1),
                   void *ctx);

#endif
