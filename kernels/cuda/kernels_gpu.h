/* kernels/cuda/kernels_gpu.h: the GPU's kernel table (kernels/kernels.h) over the CUDA kernels
 * of ops_cuda.h. GPU builds only (PT_HAVE_GPU).
 *
 * Every tensor is device memory and every kernel is queued on the gpu_ctx's stream. The
 * entries that return a value to the host (loss, sumsq, all_finite) reduce into a device
 * double or flag kept here and wait for it; loss uploads the host targets into a staging
 * buffer kept here, after checking class ids on the host (where the error can name them).
 * The step statistics' entries (loss_acc, sumsq_into, sumsq_spans_into, finite_check) never
 * wait: loss_acc sends the host targets through a ring of pinned buffers kept here (staging.h);
 * sumsq_spans_into keeps its layout here (ops_cuda.h cuda_sumsq_plan).
 */
#ifndef PT_KERNELS_GPU_H
#define PT_KERNELS_GPU_H

#include <stddef.h>

#include "kernels/cuda/attention_bf16.h"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/ops_cuda.h"
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
  uint64_t *sort_keys;  /* device: embedding backward's sort (grown on demand) */
  int64_t sort_keys_n;
  cuda_bf16_scratch bf16; /* train.precision bf16: the products' operands as bf16 */
  cuda_attention_bf16 attention; /* train.precision bf16: attention's plans and bf16 buffers */
  gpu_staging staging;  /* loss_acc's targets on their way to the device (staging.h) */
  cuda_sumsq_plan sumsq_plan; /* sumsq_spans_into's layout for the last list it was given */
  float *round_at;      /* round_when_written's x and n (NULL: none), and whether a norm did */
  int64_t round_n;
  int round_done;
  /* The bits of the input gradients the norms round as they write them (kernels.h din_copy):
   * two buffers, the last written at din_side; din_kept: they are din_at's as written, no
   * tensor given to round_when_written since */
  uint16_t *din_bits[2];
  int64_t din_cap[2]; /* elements */
  const float *din_at; /* the tensor whose bits din_bits[din_side] holds, n elements */
  int64_t din_n;
  int din_side, din_kept;
} kernels_gpu;

/* The GPU table's sizes without an open GPU (the planner's memory estimate): only its size
 * entries, attention_saved_floats and attention_scratch_floats, may be called (ctx is NULL). */
extern const pt_kernels kernels_gpu_sizing;

/* Fills kg's table for g's device and allocates its device buffers. g must outlive kg. */
void kernels_gpu_open(kernels_gpu *kg, gpu_ctx *g);
/* The table computes in precision p from now on (kernels/kernels.h's pt_precision): fp32 sets
 * the cuBLAS handle's pedantic math, tf32 its TF32 tensor-op math (every float32 product of the
 * handle, attention's batched ones included), bf16 default math (no TF32 for the float32
 * products) with the linear entries multiplying bf16 copies of their operands, attention on
 * bf16 operands through attention_bf16.h (cuDNN where it takes the shape), and the round/pack
 * and weight_copy entries set (the registered weight copies live in the table's bf16 scratch
 * and stay registered across precision changes); the cuBLASLt products' compute type
 * (gpu_ctx's lt_compute) follows. */
void kernels_gpu_set_precision(kernels_gpu *kg, pt_precision p);
/* Frees kg's device buffers (a device lives as long as its process, so only tests call it). */
void kernels_gpu_close(kernels_gpu *kg);

#endif
