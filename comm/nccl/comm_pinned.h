/* comm/nccl/comm_pinned.h: a group's pinned host staging buffers for the staged transport (MPI
 * on host copies of device buffers; internal to comm/nccl). Allocated on demand, grown, and
 * reused for the group's life instead of cudaMallocHost/cudaFreeHost per message (each of
 * which synchronises the device). A buffer handed back while a copy on a stream still reads or
 * writes it is reused only once that copy has completed (an event recorded at the give-back),
 * so the host never waits for the copy just to free the buffer. GPU builds only. */
#ifndef PT_COMM_PINNED_H
#define PT_COMM_PINNED_H

#include <stddef.h>

#include "kernels/cuda/gpu.h"

typedef struct pinned_slab pinned_slab;
typedef struct {
  pinned_slab *slab;
  int n, cap;
} pinned_pool;

/* A free buffer of at least bytes (1 when 0): returns its index, valid until pinned_give.
 * Prefers the smallest free buffer that fits and whose last copy has completed; grows a free
 * one that is too small; allocates a new one only when all are taken or still being copied. */
int pinned_take(pinned_pool *p, size_t bytes);
void *pinned_host(const pinned_pool *p, int slab);
/* Hands slab back. after: a stream whose work queued so far may still use it (NULL: none). */
void pinned_give(pinned_pool *p, int slab, cudaStream_t after);
/* Frees every buffer (the device synchronises in cudaFreeHost). */
void pinned_free(pinned_pool *p);
/* How many cudaMallocHost calls the pool has made (tests: reuse, not one per message). */
long pinned_allocations(void);

#endif
