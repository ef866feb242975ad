/* tests/gpu/emu/nccl/nccl_emu_stream.h: what the NCCL emulation needs from the CUDA
 * emulation's streams. pt_ncclemu calls these; it does not implement them. The CUDA emulation
 * provides them in its library; stream_fifo.c is a stand-in for the emulation's own tests.
 *
 * Why a poll and not a blocking call: a GPU runs NCCL's kernels on their own, so an operation
 * waiting for its peer holds back only its own stream, while the host thread and the other
 * streams (another communicator's, the compute stream) go on. A drain that blocked inside an
 * operation would stop all of them and turn correct programs into false deadlocks. */
#ifndef PT_NCCL_EMU_STREAM_H
#define PT_NCCL_EMU_STREAM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { NCCL_EMU_DONE = 0, NCCL_EMU_AGAIN = 1 } nccl_emu_status;
typedef nccl_emu_status (*nccl_emu_poll_fn)(void *arg);

/* Queues an operation on stream s (0: the legacy default stream). When it reaches the head of s
 * (everything queued on s before it has completed), a drain calls poll(arg), on the host thread,
 * repeatedly until it returns NCCL_EMU_DONE; while it returns NCCL_EMU_AGAIN it stays at the head
 * of s, holding back what is queued behind it there, and the drain goes on with other streams.
 * after(arg), when not NULL, is called once after the DONE (it frees arg). poll never blocks,
 * never calls CUDA, and never calls nccl_emu_stream_progress; what: a label for messages. */
void nccl_emu_stream_enqueue(cudaStream_t s, const char *what, nccl_emu_poll_fn poll,
                             void (*after)(void *arg), void *arg);

/* Runs what is ready on every stream, once, without waiting. The NCCL emulation calls it while
 * its host-side calls wait for peers (ncclCommInitRank, ncclCommSplit, ncclCommDestroy), as a
 * GPU would go on working meanwhile. */
void nccl_emu_stream_progress(void);

/* Ends the process with a message naming what unless [ptr, ptr + bytes) lies in one live device
 * allocation (NCCL takes device buffers only). A stand-in may check nothing. */
void nccl_emu_check_device(const char *what, const void *ptr, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
