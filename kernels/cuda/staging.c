#include "kernels/cuda/staging.h"

#include <string.h>

void gpu_staged_to_device(gpu_ctx *g, gpu_staging *s, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return;
  int i = s->next;
  s->next = (i + 1) % GPU_STAGING_SLOTS;
  if (s->slot[i].recorded) {
    cudaError_t e = cudaEventQuery(s->slot[i].copied);
    if (e == cudaErrorNotReady) e = cudaEventSynchronize(s->slot[i].copied); /* wrapped */
    CUDA_CHECK(e);
  }
  if (s->slot[i].bytes < bytes) {
    if (s->slot[i].host) CUDA_CHECK(cudaFreeHost(s->slot[i].host));
    CUDA_CHECK(cudaMallocHost(&s->slot[i].host, bytes));
    s->slot[i].bytes = bytes;
  }
  if (!s->slot[i].copied)
    CUDA_CHECK(cudaEventCreateWithFlags(&s->slot[i].copied, cudaEventDisableTiming));
  memcpy(s->slot[i].host, src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, s->slot[i].host, bytes, cudaMemcpyHostToDevice, g->stream));
  CUDA_CHECK(cudaEventRecord(s->slot[i].copied, g->stream));
  s->slot[i].recorded = 1;
}

void gpu_staging_free(gpu_staging *s) {
  for (int i = 0; i < GPU_STAGING_SLOTS; i++) {
    if (s->slot[i].host) CUDA_CHECK(cudaFreeHost(s->slot[i].host));
    if (s->slot[i].copied) CUDA_CHECK(cudaEventDestroy(s->slot[i].copied));
  }
  memset(s, 0, sizeof *s);
}
