/* Timing events around spans of a stream's work (kernels/cuda/spans.h). */
#include "kernels/cuda/spans.h"

#include <stdlib.h>

#include "core/error.h"

static void record(gpu_ctx *g, gpu_spans *s) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    cudaEvent_t *ev = realloc(s->ev, sizeof *ev * (size_t)cap);
    if (!ev) pt_fatal("out of memory timing GPU spans");
    for (int i = s->cap; i < cap; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    s->ev = ev, s->cap = cap;
  }
  CUDA_CHECK(cudaEventRecord(s->ev[s->n++], g->stream));
}

void gpu_spans_begin(gpu_ctx *g, gpu_spans *s) {
  if (s->open) pt_fatal("gpu_spans_begin: a span is open already");
  record(g, s);
  s->open = 1;
}

void gpu_spans_end(gpu_ctx *g, gpu_spans *s) {
  if (!s->open) pt_fatal("gpu_spans_end: no span is open");
  record(g, s);
  s->open = 0;
}

double gpu_spans_take(gpu_spans *s) {
  int closed = s->n - s->open, done = 0;
  double ms = 0.0;
  for (; done + 1 < closed; done += 2) {
    cudaError_t e = cudaEventQuery(s->ev[done + 1]); /* its begin ran before it */
    if (e == cudaErrorNotReady) break;
    CUDA_CHECK(e);
    float span = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&span, s->ev[done], s->ev[done + 1]));
    ms += span;
  }
  /* the unread spans (and an open begin) to the front, the read events behind them for reuse */
  for (int i = done; i < s->n; i++) {
    cudaEvent_t t = s->ev[i - done];
    s->ev[i - done] = s->ev[i], s->ev[i] = t;
  }
  s->n -= done;
  return ms * 1e-3;
}
