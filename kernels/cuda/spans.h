/* kernels/cuda/spans.h: how long the GPU spent on spans of a stream's work, read without
 * waiting for it, and when it ran the spans kept for a trace. GPU builds only (PT_HAVE_GPU).
 *
 * The host queues a step's work ahead of the GPU, so the host's clock around a call measures
 * the queueing, not the work: a pipeline stage on a GPU looked idle 99.9 % of every step. A span
 * is a pair of timing events recorded on the stream around the work; gpu_spans_take reads the
 * spans that have run by then (cudaEventQuery: no wait) and keeps the rest for the next call,
 * so a step's figure holds its spans the GPU has finished (the optimizer queued last usually
 * runs into the next step's). Events are created as needed and reused; the set lives as long
 * as the process's GPU.
 *
 * A span begun with keep (a traced action) also keeps its events until gpu_spans_times reads
 * its start and end on the host's clock. The GPU's clock is tied to the host's at each anchor:
 * an event recorded just before a read the host blocks on (gpu_spans_anchor_record), whose
 * return (gpu_spans_anchor_set) is at most a copy's latency after the event ran; a kept event
 * is placed by its elapsed time from the last anchor, on whichever side of it the host
 * recorded it.
 */
#ifndef PT_GPU_SPANS_H
#define PT_GPU_SPANS_H

#include <stdint.h>

#include "kernels/cuda/gpu.h"

typedef struct {
  cudaEvent_t ev;
  uint64_t seq; /* the order the host recorded it in, among the set's events and anchors */
} gpu_span_event;

typedef struct {
  int64_t ticket;
  gpu_span_event b, e;
} gpu_kept_span;

typedef struct {
  gpu_span_event *ev; /* [cap]: pairs (begin, end) of the spans not read yet first, n of them */
  int64_t *ticket;    /* [cap / 2]: each pair's ticket, -1 when not kept */
  int n, cap;
  int open;           /* a begin recorded without its end */
  double done_ms;     /* spans read by gpu_spans_times' sweep, for the next gpu_spans_take */
  gpu_kept_span *kept; /* kept spans that have run, until gpu_spans_times reads them */
  int n_kept, cap_kept;
  int64_t next_ticket;
  uint64_t seq;
  gpu_span_event anchor; /* ev NULL: none recorded yet (none before a span is kept) */
  double anchor_s;       /* the host's clock when the anchor's read returned; < 0: not yet */
} gpu_spans;

/* Marks the start (end) of a span of the work queued on g's stream from now on (until now).
 * Spans do not nest: a begin while one is open, or an end without one, is a bug (fatal). keep:
 * the span is kept for gpu_spans_times under the ticket returned (>= 0); else -1. */
int64_t gpu_spans_begin(gpu_ctx *g, gpu_spans *s, int keep);
void gpu_spans_end(gpu_ctx *g, gpu_spans *s);
/* Seconds of GPU time in the spans that have run (oldest first, up to the first that has not),
 * which it forgets; the rest wait for the next call. A zeroed gpu_spans holds none. */
double gpu_spans_take(gpu_spans *s);
/* An anchor: record just before a blocking read on g's stream, set with the host's clock
 * (pt_now_s) right after it returns. Nothing until a span has been kept (keep). */
void gpu_spans_anchor_record(gpu_ctx *g, gpu_spans *s);
void gpu_spans_anchor_set(gpu_spans *s, double host_s);
/* 1 with the kept span's start and end on the host's clock (seconds, pt_now_s) once the GPU
 * has run it and an anchor is set, forgetting it; 0 while not yet (after gpu_sync and a set
 * anchor, every kept span reads 1); -1 for a ticket not kept or read already. */
int gpu_spans_times(gpu_spans *s, int64_t ticket, double *t0, double *t1);

#endif
