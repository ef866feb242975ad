/* The CPU kernels' thread count (kernels.h): OpenBLAS's pool is the one setting; the oneDNN
 * products (kernels/cpu/onednn.c) read it before each call, so an OPENBLAS_NUM_THREADS from the
 * environment holds for both. */
#include <cblas.h>

#include "kernels/kernels.h"

void kernels_cpu_set_threads(int n) { openblas_set_num_threads(n); }

int kernels_cpu_threads(void) { return openblas_get_num_threads(); }
