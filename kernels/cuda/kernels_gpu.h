/* kernels/cuda/kernels_gpu.h: the GPU's kernel table (kernels/kernels.h) over the CUDA kernels
 * of ops_cuda.h. GPU builds only (PT_HAVE_GPU).
 *
 * Every tensor is device memory and every kernel is queued on the gpu_ctx's stream. The
 * entries that return a value to the host (loss, sumsq, all_finite) reduce into a device
 * double or flag kept here and wait for it; loss uploads the host targets into a staging
 * buffer kept here, after checking class ids on the host (where the error can name them).
 * The step statistics' entries (loss_acc, sumsq_into, finite_check) never wait: loss_acc sends
 * the host targets through a ring of pinned buffers kept here (staging.h).
 */
#ifndef PT_KERNELS_GPU_H
#define PT_KERNELS_GPU_H

#include <stddef.h>

#include "kernels/cuda/gpu.h"
#include "kernels/cuda/staging.h"
#include "kernels/kernels.h"

typedef struct {
  pt_kernels table;     /* table.ctx points back at this struct */
  gpu_ctx *g;
  double *sum;          /* device: one double, a loss or a sum of squares */
  double *reduce;       /* device: CUDA_REDUCE_SCRATCH_DOUBLES, the reductions' partial sums */
  int *flag;            /* device: one int, for finiteness */
  void *targets;        /* device copy of a micro-batch's loss targets */
  size_t targets_bytes;
  gpu_staging staging;  /* loss_acc's targets on their way to the device (staging.h) */
} kernels_gpu;

/* Fills kg's table for g's device and allocates its device buffers. g must outlive kg. */
void kernels_gpu_open(kernels_gpu *kg, gpu_ctx *g);
/* Frees kg's device buffers (a device lives as long as its process, so only tests call it). */
void kernels_gpu_close(kernels_gpu *kg);

#endif
