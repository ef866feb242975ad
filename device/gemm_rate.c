#include "device/gemm_rate.h"

#include <cblas.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/error.h"

double gemm_measure_flops(int n, double seconds) {
  size_t elems = (size_t)n * n;
  /* plain calloc: these scratch matrices are not training memory and must not show in the
   * tracked peak that memory estimates are checked against */
  float *a = pt_calloc(elems, 4), *b = pt_calloc(elems, 4), *c = pt_calloc(elems, 4);
  for (size_t i = 0; i < elems; i++) a[i] = b[i] = 1e-3f * (float)(i % 17);
  int reps = 0;
  double t0 = pt_now_s(), dt;
  do {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    reps++;
  } while ((dt = pt_now_s() - t0) < seconds);
  free(a);
  free(b);
  free(c);
  return 2.0 * n * (double)n * n * reps / dt;
}
