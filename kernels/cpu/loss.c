#include "kernels/loss.h"

#include <math.h>

#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/ops.h"
#include "kernels/precision.h"
#include "core/error.h"

/* dy may be y: y[target] is read before the row is overwritten. */
static double cross_entropy_row(const float *y, int target, int F, float scale, float *dy) {
  const float yt = y[target];
  float mx = -INFINITY;
  for (int f = 0; f < F; f++) mx = y[f] > mx ? y[f] : mx;
  float sum = 0.0f;
  for (int f = 0; f < F; f++) {
    dy[f] = pt_expf(y[f] - mx);
    sum += dy[f];
  }
  float inv = scale / sum;
  for (int f = 0; f < F; f++) dy[f] *= inv;
  dy[target] -= scale;
  return (double)mx + log((double)sum) - (double)yt;
}

void loss_check_targets(pt_loss_kind kind, const void *targets, int N, int F) {
  for (int n = 0; kind == LOSS_CROSS_ENTROPY && n < N; n++) {
    int32_t target = ((const int32_t *)targets)[n];
    if ((target < 0 && target != LOSS_IGNORE) || target >= F)
      pt_fail_input("cross_entropy: target %d outside [0, %d): the data holds a class or "
                    "token id the last layer has no output for", target, F);
  }
}

/* Row y of F values as the loss reads it (r): rounded into dr where r says so (dr is the row's
 * gradient, which may be y itself: each value is read before it is written), and checked. */
static const float *read_row(const float *y, float *dr, int F, const pt_loss_read *r) {
  if (!r) return y;
  if (r->round_bf16) {
    for (int f = 0; f < F; f++) dr[f] = pt_round_bf16(y[f]);
    y = dr;
  }
  if (r->mark && r->value > *r->mark && !op_all_finite(y, F)) *r->mark = r->value;
  return y;
}

double loss_forward_backward_read(pt_loss_kind kind, const float *y, const void *targets, int N,
                                  int F, float scale, float *dy, const pt_loss_read *r) {
  loss_check_targets(kind, targets, N, F);
  double total = 0.0;
  for (int n = 0; n < N; n++) {
    float *dr = dy + (int64_t)n * F;
    const float *yr = read_row(y + (int64_t)n * F, dr, F, r);
    if (kind == LOSS_CROSS_ENTROPY && ((const int32_t *)targets)[n] == LOSS_IGNORE) {
      for (int f = 0; f < F; f++) dr[f] = 0.0f;
    } else if (kind == LOSS_CROSS_ENTROPY) {
      total += cross_entropy_row(yr, ((const int32_t *)targets)[n], F, scale, dr);
    } else {
      const float *t = (const float *)targets + (int64_t)n * F;
      double s = 0.0;
      for (int f = 0; f < F; f++) {
        float diff = yr[f] - t[f];
        s += (double)diff * diff;
        dr[f] = 2.0f * diff / (float)F * scale;
      }
      total += s / F;
    }
  }
  return total;
}

double loss_forward_backward(pt_loss_kind kind, const float *y, const void *targets, int N, int F,
                             float scale, float *dy) {
  return loss_forward_backward_read(kind, y, targets, N, F, scale, dy, NULL);
}
