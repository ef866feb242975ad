/* kernels/weight_copy.h: the bf16 weight copies a bf16 table's products read instead of
 * converting their weight operand (kernels.h's weight_copy entry; the GPU's table keeps one
 * registry per table, kernels/cpu/kernels_cpu_bf16.c one per process).
 *
 * A registered range is a float32 buffer [base, base + n) and n bf16 values `copy` that its
 * owner keeps equal to pt_bf16_bits of every float there (model/model.c: written with the floats
 * by model_to_device and by the optimizer's pass, checked by model_to_host), so a product reads
 * exactly the bits converting per call would give. A product's W operand of n floats reads the
 * copy when it lies whole inside one range, at the same offset; anything else (activations,
 * buffers of tests, a range no longer registered) is converted as before. Header only, so the
 * CUDA files use it too. Registration is done by the thread that allocates the model, before
 * products run; lookups only read.
 */
#ifndef PT_KERNELS_WEIGHT_COPY_H
#define PT_KERNELS_WEIGHT_COPY_H

#include <stdint.h>

#include "core/error.h"

/* Ranges a set holds: the models one table serves at once (a process holds one per device,
 * tests a few), or the activation copies of one layer's step (the GPU's cuda_bf16_scratch: a
 * Llama block's runs of parts at rest and its stash parts, each converted on its own, and its
 * dout: about a dozen). Bit i of an unsigned mask stands for range i. */
#define PT_WEIGHT_COPY_RANGES 16

typedef struct {
  const float *base;
  const uint16_t *copy;
  int64_t n;
} pt_weight_range;

typedef struct {
  pt_weight_range r[PT_WEIGHT_COPY_RANGES];
} pt_weight_copies;

static inline void weight_range_put(pt_weight_range *r, const float *base, const uint16_t *copy,
                                    int64_t n) {
  r->base = base; /* field by field: the CUDA files compile this as C++ */
  r->copy = copy;
  r->n = n;
}

/* Registers base's range (copy NULL: forgets it). A full registry ends the job. */
static inline void weight_copies_set(pt_weight_copies *w, const float *base, const uint16_t *copy,
                                     int64_t n) {
  pt_weight_range *free_slot = NULL;
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    if (w->r[i].base == base) weight_range_put(&w->r[i], NULL, NULL, 0);
    if (!w->r[i].base && !free_slot) free_slot = &w->r[i];
  }
  if (!copy) return;
  if (!free_slot) pt_fatal("weight_copies_set: more than %d weight copies", PT_WEIGHT_COPY_RANGES);
  weight_range_put(free_slot, base, copy, n);
}

/* The copy of W[0..n), or NULL when W is not inside one registered range. */
static inline const uint16_t *weight_copies_find(const pt_weight_copies *w, const float *W,
                                                 int64_t n) {
  uintptr_t at = (uintptr_t)W;
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    const pt_weight_range *r = &w->r[i];
    uintptr_t lo = (uintptr_t)r->base, hi = lo + sizeof(float) * (uintptr_t)r->n;
    if (r->base && at >= lo && at + sizeof(float) * (uintptr_t)n <= hi)
      return r->copy + (W - r->base);
  }
  return NULL;
}

#endif
