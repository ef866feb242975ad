/* tests/gpu/emu/nccl/stub/cuda_runtime_api.h: NOT CUDA. The few stream functions the NCCL
 * emulation's own tests use, with CUDA's names, implemented by ../stream_fifo.c. In the emulated
 * GPU build the CUDA emulation's header of the same name takes its place. */
#ifndef PT_NCCL_EMU_STUB_CUDA_RUNTIME_API_H
#define PT_NCCL_EMU_STUB_CUDA_RUNTIME_API_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nccl_emu_fifo_stream *cudaStream_t;
typedef enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorNotReady = 600 } cudaError_t;

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream); /* waits for its work first */
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
/* One round of progress on every stream; cudaErrorNotReady while stream has work left. */
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize(void);

#ifdef __cplusplus
}
#endif

#endif
