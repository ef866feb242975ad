#include "observe/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int trace_parse_window(const char *text, int64_t *first, int64_t *last) {
  long long a, b;
  char tail;
  *first = 1, *last = INT64_MAX;
  if (!text || !*text) return 0;
  if (sscanf(text, "%lld:%lld%c", &a, &b, &tail) != 2 || a < 1 || b < a) return -1;
  *first = a, *last = b;
  return 0;
}

void trace_init(pt_trace *t, int64_t first, int64_t last) {
  memset(t, 0, sizeof *t);
  t->enabled = 1;
  t->first_step = first;
  t->last_step = last;
}

void trace_free(pt_trace *t) {
  free(t->spans);
  memset(t, 0, sizeof *t);
}

int trace_active(const pt_trace *t, int64_t step) {
  return t->enabled && step >= t->first_step && step <= t->last_step;
}

void trace_add(pt_trace *t, const char *name, const char *cat, int mb, int64_t step, double t0,
               double t1) {
  trace_add_chunk(t, name, cat, mb, -1, step, t0, t1);
}

void trace_add_chunk(pt_trace *t, const char *name, const char *cat, int mb, int chunk,
                     int64_t step, double t0, double t1) {
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    pt_span *s = realloc(t->spans, sizeof *s * (size_t)t->cap);
    if (!s) pt_fatal("out of memory recording the trace");
    t->spans = s;
  }
  t->spans[t->n++] = (pt_span){name, cat, mb, chunk, step, t0, t1, 0, -1};
}

void trace_add_device(pt_trace *t, const char *name, const char *cat, int mb, int chunk,
                      int64_t step, int64_t ticket) {
  trace_add_chunk(t, name, cat, mb, chunk, step, 0.0, 0.0);
  t->spans[t->n - 1].device = 1;
  t->spans[t->n - 1].ticket = ticket;
}

void trace_resolve(pt_trace *t, int (*times)(void *ctx, int64_t ticket, double *t0, double *t1),
                   void *ctx) {
  int kept = t->pending_from, first = -1;
  for (int i = t->pending_from; i < t->n; i++) {
    pt_span *s = &t->spans[i];
    int got = s->ticket < 0 ? 1 : times(ctx, s->ticket, &s->t0, &s->t1);
    if (got == 1) s->ticket = -1;
    if (got < 0) continue;
    if (got == 0 && first < 0) first = kept;
    t->spans[kept++] = *s;
  }
  t->n = kept;
  t->pending_from = first < 0 ? kept : first;
}
