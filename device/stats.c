#include "device/stats.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void device_stats_init(device_stats *s, pt_device *d, int n_doubles, int n_marks) {
  memset(s, 0, sizeof *s);
  s->d = d;
  s->n_doubles = n_doubles;
  s->n_marks = n_marks;
  s->bytes = sizeof(double) * (size_t)n_doubles + sizeof(int32_t) * (size_t)n_marks;
  s->dev = device_alloc(d, s->bytes ? s->bytes : 1); /* zeroed */
  s->host = device_shares_host_memory(d) ? s->dev : pt_calloc(s->bytes + 8, 1);
  s->current = device_shares_host_memory(d);
}

void device_stats_free(device_stats *s) {
  if (s->host && s->host != s->dev) free(s->host);
  if (s->d && s->dev) device_free(s->d, s->dev);
  memset(s, 0, sizeof *s);
}

void device_stats_reset(device_stats *s) {
  if (s->bytes) device_zero(s->d, s->dev, s->bytes);
  s->current = device_shares_host_memory(s->d);
}

double *device_stats_double(device_stats *s, int i) {
  if (i < 0 || i >= s->n_doubles) pt_fatal("step statistics: slot %d of %d", i, s->n_doubles);
  s->current = device_shares_host_memory(s->d);
  return (double *)s->dev + i;
}

int32_t *device_stats_mark(device_stats *s, int i) {
  if (i < 0 || i >= s->n_marks) pt_fatal("step statistics: mark %d of %d", i, s->n_marks);
  s->current = device_shares_host_memory(s->d);
  return (int32_t *)((double *)s->dev + s->n_doubles) + i;
}

void device_stats_read(device_stats *s) {
  if (s->current) return;
  device_download(s->d, s->host, s->dev, s->bytes);
  s->current = 1;
}

double device_stats_double_value(const device_stats *s, int i) {
  return ((const double *)s->host)[i];
}

int32_t device_stats_mark_value(const device_stats *s, int i) {
  return ((const int32_t *)((const double *)s->host + s->n_doubles))[i];
}

void device_loss_acc(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                     size_t target_bytes, int N, int F, float scale, float *dy, uint16_t *dy16,
                     double *sum, int32_t *mark, int32_t value) {
  d->k->loss_acc(d->k, kind, y, targets, target_bytes, N, F, scale, dy, dy16, sum, mark, value);
}

void device_sumsq_spans_into(pt_device *d, double *out, const float *x, const pt_sum_span *spans,
                             int n_spans) {
  d->k->sumsq_spans_into(d->k, out, x, spans, n_spans);
}

void device_finite_check(pt_device *d, int32_t *mark, int32_t value, const float *x, int64_t n) {
  d->k->finite_check(d->k, mark, value, x, n);
}
