#include "runtime/gemm_rate.h"

#include <cblas.h>

#include "runtime/clock.h"
#include "runtime/error.h"

double gemm_measure_flops(int n, double seconds) {
  size_t elems = (size_t)n * n;
  float *a = pt_alloc_aligned(4 * elems), *b = pt_alloc_aligned(4 * elems),
        *c = pt_alloc_aligned(4 * elems);
  for (size_t i = 0; i < elems; i++) a[i] = b[i] = 1e-3f * (float)(i % 17);
  int reps = 0;
  double t0 = pt_now_s(), dt;
  do {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    reps++;
  } while ((dt = pt_now_s() - t0) < seconds);
  pt_free_aligned(a);
  pt_free_aligned(b);
  pt_free_aligned(c);
  return 2.0 * n * (double)n * n * reps / dt;
}
