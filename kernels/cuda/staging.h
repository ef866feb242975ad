/* kernels/cuda/staging.h: host-to-device copies that neither wait nor keep the caller's buffer.
 * GPU builds only (PT_HAVE_GPU).
 *
 * A copy from pageable host memory may make CUDA wait for the stream while it stages the bytes;
 * one from pinned memory reads the memory only when the stream gets there. So a small copy the
 * caller's buffer must not wait for (a micro-batch's inputs or targets) goes through a ring of
 * pinned buffers kept here: memcpy into the next one, copy from it on the stream, an event after.
 * A buffer is reused once its event has passed, which a step's one wait for the stream ensures;
 * only a ring that wraps within a step (more than GPU_STAGING_SLOTS copies between two waits)
 * waits for the oldest copy. Buffers grow to the largest copy made through them.
 */
#ifndef PT_GPU_STAGING_H
#define PT_GPU_STAGING_H

#include <stddef.h>

#include "kernels/cuda/gpu.h"

#define GPU_STAGING_SLOTS 32

typedef struct {
  struct {
    void *host;          /* pinned, bytes of it */
    size_t bytes;
    cudaEvent_t copied;  /* recorded after the copy that reads host */
    int recorded;
  } slot[GPU_STAGING_SLOTS];
  int next;
} gpu_staging;

/* dst (device) <- src (host, bytes of it) on g's stream; src may be reused when this returns.
 * A zeroed gpu_staging is an empty ring. */
void gpu_staged_to_device(gpu_ctx *g, gpu_staging *s, void *dst, const void *src, size_t bytes);
/* Frees the ring's pinned buffers and events (waits for the device, as cudaFreeHost does). */
void gpu_staging_free(gpu_staging *s);

#endif
