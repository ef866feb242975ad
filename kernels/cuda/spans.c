/* Timing events around spans of a stream's work (kernels/cuda/spans.h). */
#include "kernels/cuda/spans.h"

#include <stdlib.h>

#include "core/error.h"

static void grow(gpu_spans *s) {
  int cap = s->cap ? 2 * s->cap : 64;
  gpu_span_event *ev = realloc(s->ev, sizeof *ev * (size_t)cap);
  int64_t *ticket = ev ? realloc(s->ticket, sizeof *ticket * (size_t)(cap / 2)) : NULL;
  if (!ev || !ticket) pt_fatal("out of memory timing GPU spans");
  for (int i = s->cap; i < cap; i++) CUDA_CHECK(cudaEventCreate(&ev[i].ev));
  s->ev = ev, s->ticket = ticket, s->cap = cap;
}

static void record_event(gpu_ctx *g, gpu_spans *s, gpu_span_event *e) {
  CUDA_CHECK(cudaEventRecord(e->ev, g->stream));
  e->seq = ++s->seq;
}

static void record(gpu_ctx *g, gpu_spans *s) {
  if (s->n == s->cap) grow(s);
  record_event(g, s, &s->ev[s->n++]);
}

int64_t gpu_spans_begin(gpu_ctx *g, gpu_spans *s, int keep) {
  if (s->open) pt_fatal("gpu_spans_begin: a span is open already");
  record(g, s);
  s->open = 1;
  s->ticket[(s->n - 1) / 2] = keep ? s->next_ticket++ : -1;
  return s->ticket[(s->n - 1) / 2];
}

void gpu_spans_end(gpu_ctx *g, gpu_spans *s) {
  if (!s->open) pt_fatal("gpu_spans_end: no span is open");
  record(g, s);
  s->open = 0;
}

/* A finished kept pair's events handed to the kept list, fresh ones in their place. */
static void keep_pair(gpu_spans *s, int pair) {
  if (s->n_kept == s->cap_kept) {
    s->cap_kept = s->cap_kept ? 2 * s->cap_kept : 64;
    s->kept = realloc(s->kept, sizeof *s->kept * (size_t)s->cap_kept);
    if (!s->kept) pt_fatal("out of memory keeping GPU spans for the trace");
  }
  s->kept[s->n_kept++] = (gpu_kept_span){s->ticket[pair], s->ev[2 * pair], s->ev[2 * pair + 1]};
  CUDA_CHECK(cudaEventCreate(&s->ev[2 * pair].ev));
  CUDA_CHECK(cudaEventCreate(&s->ev[2 * pair + 1].ev));
}

/* The spans that have run, oldest first: their time to done_ms, the kept ones to the kept list;
 * the unread spans (and an open begin) to the front, the read events behind them for reuse. */
static void sweep(gpu_spans *s) {
  int closed = s->n - s->open, done = 0;
  for (; done + 1 < closed; done += 2) {
    cudaError_t e = cudaEventQuery(s->ev[done + 1].ev); /* its begin ran before it */
    if (e == cudaErrorNotReady) break;
    CUDA_CHECK(e);
    float span = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&span, s->ev[done].ev, s->ev[done + 1].ev));
    s->done_ms += span;
    if (s->ticket[done / 2] >= 0) keep_pair(s, done / 2);
  }
  for (int i = done; i < s->n; i++) {
    gpu_span_event t = s->ev[i - done];
    s->ev[i - done] = s->ev[i], s->ev[i] = t;
  }
  for (int p = done / 2; p < (s->n + 1) / 2; p++) s->ticket[p - done / 2] = s->ticket[p];
  s->n -= done;
}

double gpu_spans_take(gpu_spans *s) {
  sweep(s);
  double ms = s->done_ms;
  s->done_ms = 0.0;
  return ms * 1e-3;
}

/* Only once a span has been kept: a run without a trace records no event more a read. */
void gpu_spans_anchor_record(gpu_ctx *g, gpu_spans *s) {
  if (!s->next_ticket) return;
  if (!s->anchor.ev) CUDA_CHECK(cudaEventCreate(&s->anchor.ev));
  record_event(g, s, &s->anchor);
  s->anchor_s = -1.0;
}

void gpu_spans_anchor_set(gpu_spans *s, double host_s) {
  if (s->anchor.ev) s->anchor_s = host_s;
}

/* e on the host's clock: its distance to the anchor, on the side the host recorded it. */
static double place(const gpu_spans *s, const gpu_span_event *e) {
  float ms = 0.0f;
  if (e->seq < s->anchor.seq) {
    CUDA_CHECK(cudaEventElapsedTime(&ms, e->ev, s->anchor.ev));
    return s->anchor_s - ms * 1e-3;
  }
  CUDA_CHECK(cudaEventElapsedTime(&ms, s->anchor.ev, e->ev));
  return s->anchor_s + ms * 1e-3;
}

int gpu_spans_times(gpu_spans *s, int64_t ticket, double *t0, double *t1) {
  sweep(s);
  for (int i = 0; i < s->n_kept; i++) {
    gpu_kept_span *k = &s->kept[i];
    if (k->ticket != ticket) continue;
    if (!s->anchor.ev || s->anchor_s < 0.0) return 0; /* no anchor yet */
    *t0 = place(s, &k->b), *t1 = place(s, &k->e);
    CUDA_CHECK(cudaEventDestroy(k->b.ev));
    CUDA_CHECK(cudaEventDestroy(k->e.ev));
    *k = s->kept[--s->n_kept];
    return 1;
  }
  for (int p = 0; p < s->n / 2 + s->open; p++)
    if (s->ticket[p] == ticket) return 0; /* not run yet */
  return -1;
}
