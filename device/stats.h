/* device/stats.h: a step's statistics kept on the device, read by the host once.
 *
 * A training step produces a few numbers the host needs at its end: the micro-batches' loss
 * sums, the per-tensor sums of squares of the gradients (the norm) and whether a layer output
 * went non-finite. Read one at a time, each is a wait for the device (a GPU's whole stream). So
 * the kernels write them into slots of one device buffer (kernels.h loss_acc,
 * sumsq_spans_into, finite_check) and the host reads the buffer once, where it needs the values.
 *
 * The buffer: n_doubles doubles then n_marks int32 marks (finite_check's: 0 = no check failed).
 * device_stats_reset zeroes all of it without waiting; device_stats_read waits once, and does
 * nothing when the host copy is already current (no slot handed out for writing since). On the
 * cpu the buffer is host memory and reading costs nothing. Owned by its creator; one per
 * process part (engine/part.h). */
#ifndef PT_DEVICE_STATS_H
#define PT_DEVICE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"

typedef struct {
  pt_device *d;
  void *dev;          /* device: n_doubles doubles, then n_marks int32 */
  void *host;         /* the host copy (dev itself where the device is the host) */
  int n_doubles, n_marks;
  size_t bytes;
  int current;        /* host matches dev: read since the last slot was handed out */
} device_stats;

void device_stats_init(device_stats *s, pt_device *d, int n_doubles, int n_marks);
void device_stats_free(device_stats *s);
/* Every slot to 0 (queued; no wait). */
void device_stats_reset(device_stats *s);
/* Device pointers of slot i, for a kernel to write (the host copy is then stale). */
double *device_stats_double(device_stats *s, int i);
int32_t *device_stats_mark(device_stats *s, int i);
/* The host copy made current: one wait for the device, unless it already is. */
void device_stats_read(device_stats *s);
/* Slot i's value as last read (device_stats_read first). */
double device_stats_double_value(const device_stats *s, int i);
int32_t device_stats_mark_value(const device_stats *s, int i);

/* The step statistics' kernels of d's table (kernels.h), on slots of s. device_loss_acc's mark
 * (NULL: none) is a finite_check of y as the loss reads it, folded into its pass; dy16 (NULL:
 * none) takes the gradient as bf16 instead of dy (kernels.h loss_acc). */
void device_loss_acc(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                     size_t target_bytes, int N, int F, float scale, float *dy, uint16_t *dy16,
                     double *sum, int32_t *mark, int32_t value);
/* out[j] = the sum of squares of x[spans[j].offset, + spans[j].n) for j < n_spans, in one pass
 * (kernels.h sumsq_spans_into; spans: host memory, the same list every step). */
void device_sumsq_spans_into(pt_device *d, double *out, const float *x, const pt_sum_span *spans,
                             int n_spans);
void device_finite_check(pt_device *d, int32_t *mark, int32_t value, const float *x, int64_t n);

#endif
