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
  t->spans[t->n++] = (pt_span){name, cat, mb, chunk, step, t0, t1};
}
