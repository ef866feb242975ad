/* kernels/cuda/spans.h: how long the GPU spent on spans of a stream's work, read without
 * waiting for it. GPU builds only (PT_HAVE_GPU).
 *
 * The host queues a step's work ahead of the GPU, so the host's clock around a call measures
 * the queueing, not the work: a pipeline stage on a GPU looked idle 99.9 % of every step. A span
 * is a pair of timing events recorded on the stream around the work; gpu_spans_take reads the
 * spans that have run by then (cudaEventQuery: no wait) and keeps the rest for the next call,
 * so a step's figure holds its spans the GPU has finished (the optimizer queued last usually
 * runs into the next step's). Events are created as needed and reused; the set lives as long
 * as the process's GPU.
 */
#ifndef PT_GPU_SPANS_H
#define PT_GPU_SPANS_H

#include "kernels/cuda/gpu.h"

typedef struct {
  cudaEvent_t *ev; /* [cap]: pairs (begin, end) of the spans not read yet first, n of them */
  int n, cap;
  int open;        /* a begin recorded without its end */
} gpu_spans;

/* Marks the start (end) of a span of the work queued on g's stream from now on (until now).
 * Spans do not nest: a begin while one is open, or an end without one, is a bug (fatal). */
void gpu_spans_begin(gpu_ctx *g, gpu_spans *s);
void gpu_spans_end(gpu_ctx *g, gpu_spans *s);
/* Seconds of GPU time in the spans that have run (oldest first, up to the first that has not),
 * which it forgets; the rest wait for the next call. A zeroed gpu_spans holds none. */
double gpu_spans_take(gpu_spans *s);

#endif
