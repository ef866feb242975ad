/* profile/bench.h: the timed pieces profile_measure() (measure.c) puts together; internal to
 * profile/.
 *
 * Every time is the median over repetitions, in seconds, read with the device's queue drained
 * on both sides (device_sync), so a GPU's asynchronous launches are counted whole. Repetitions:
 * BENCH_MIN_REPS at least, more while the piece is within its share_s of the budget, at most
 * BENCH_MAX_REPS, after one warm-up run (first touch of the buffers, BLAS thread start). Each
 * piece allocates its own buffers on d and frees them before returning.
 */
#ifndef PT_PROFILE_BENCH_H
#define PT_PROFILE_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "layers/layer.h"
#include "spec/spec.h"

#define BENCH_MIN_REPS 3
#define BENCH_MAX_REPS 20
/* A measured step is never reported as free: w == 0 means "no parameters" to the planner. */
#define BENCH_MIN_S 1e-9

/* Whether to run repetition number reps (0-based) of a piece that started at t0_s. */
int bench_more(int reps, double t0_s, double share_s);
/* The median of x[0..n) (n >= 1; reorders x), at least BENCH_MIN_S. */
double bench_median(double *x, int n);
/* The median seconds of run(ctx) on d (device_sync around each call): one warm-up call, then
 * repetitions as above. */
double bench_time(pt_device *d, void (*run)(void *ctx), void *ctx, double share_s);
/* n floats on d, small deterministic pseudo-random values in [-0.5, 0.5) from seed: not zeros,
 * which some kernels (and the CPU's denormal handling) would make unrepresentatively cheap. */
float *bench_alloc_random(pt_device *d, size_t n, uint64_t seed);

typedef struct {
  double f, i, w;
} bench_fiw;

/* Forward, backward_input and backward_weight of a layer shaped like L (read only: a copy gets
 * parameters of its own) at B x T. with_din: backward_input writes an input gradient (false for
 * token input and the model's first layer, as in the engine). Without parameters, i counts
 * backward_weight too and w is 0. */
bench_fiw bench_layer(pt_device *d, const pt_layer *L, int B, int T, int with_din, double share_s);
/* device_loss of `kind` on N rows of F outputs, with its gradient. */
double bench_loss(pt_device *d, pt_loss_kind kind, int N, int F, double share_s);
/* One optimizer update (cfg's) of L's parameters, one kernel call per tensor as optimizer_step
 * makes them. */
double bench_optimizer(pt_device *d, const spec_train *cfg, const pt_layer *L, double share_s);
/* Host memcpy rate of a buffer of `bytes` (bytes per second). */
double bench_memcpy_rate(size_t bytes, double share_s);
/* d's offload copy rate (device_copy_async, d must offload): `bytes` to pinned host memory and
 * back, bytes per second of one way. */
double bench_copy_rate(pt_device *d, size_t bytes, double share_s);

#endif
