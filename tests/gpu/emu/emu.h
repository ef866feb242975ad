/* tests/gpu/emu/emu.h: the CUDA emulator's own interface (docs/gpu.md, "The emulated GPU"), for
 * tests and for other emulations that queue work on its streams (the NCCL fake). C11 and C++17.
 *
 * Counters: what the process asked of the device since start (or the last reset). With
 * PT_EMU_COUNTERS=1 the totals are printed on stderr at exit, one line; PT_EMU_COUNTERS=FILE
 * appends the same line to FILE (one per process, so every rank of an mpirun writes one), then
 * a "pt_emu sync site: rank=R pid=P n=N at=FILE:LINE" line per place the process waited for the
 * device from (the caller of the CUDA function), so a report can say whose waits they are.
 *
 * Streams: an operation queued with pt_emu_enqueue runs when a synchronisation point drains its
 * stream, in stream order after everything queued there before it (and after what the legacy
 * default stream implies), interleaved with other streams as PT_EMU_STREAMS says.
 */
#ifndef PT_EMU_H
#define PT_EMU_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t syncs;        /* host waits: stream/event/device synchronize, blocking copies, and the
                            implicit device-wide wait of cudaFree/cudaFreeHost */
  uint64_t queries;      /* cudaEventQuery / cudaStreamQuery polls */
  uint64_t launches;     /* kernel launches */
  uint64_t blas_calls;   /* cuBLAS products (each one or more kernels on a real GPU) */
  uint64_t heuristics;   /* cublasLtMatmulAlgoGetHeuristic calls (host time on a real GPU) */
  uint64_t h2d_bytes;    /* copied host to device */
  uint64_t d2h_bytes;    /* device to host */
  uint64_t d2d_bytes;    /* device to device */
  uint64_t memset_bytes; /* set by cudaMemset/cudaMemsetAsync */
  uint64_t external_ops; /* operations queued through pt_emu_enqueue */
} pt_emu_counters;

void pt_emu_counters_read(pt_emu_counters *out);
void pt_emu_counters_reset(void);
/* The one-line form PT_EMU_COUNTERS prints: "pt_emu counters: launches=... syncs=...". */
void pt_emu_counters_format(const pt_emu_counters *c, char *buf, size_t bufsz);

/* ---- queueing work on a stream (for the NCCL fake) ------------------------------------------
 *
 * fn(arg) is called by a drain when the operation reaches the head of stream s (0 or
 * cudaStreamLegacy: the legacy default stream) and what it depends on has completed. It returns
 * PT_EMU_OP_DONE when finished, or PT_EMU_OP_AGAIN when it waits on something outside this
 * process (a peer's receive): it stays at the head of its stream, holding back what is queued
 * behind it there, and is called again later; meanwhile the drain runs other streams' work, and
 * sleeps briefly (20 us) between rounds in which nothing progressed. after(arg), when not NULL,
 * is called once fn has returned DONE (free arg there).
 *
 * fn runs on the host thread that called the synchronising function (cudaStreamSynchronize,
 * cudaEventQuery, ...), never inside a kernel. It must not call CUDA functions that wait for
 * the device (a synchronize, a blocking copy, cudaFree): the emulator reports that as an error.
 * It may block (e.g. in MPI_Wait) but then the whole emulated device of this process waits
 * with it; returning AGAIN lets other streams go on. what: a short label for error messages.
 *
 * Progress: the device runs only inside the CUDA/cuBLAS functions of its process (a GPU runs
 * on its own). Code that waits on a peer outside them (a host MPI_Recv while a queued send is
 * needed by that peer) must first call pt_emu_progress(), or poll with cudaEventQuery. */
typedef enum { PT_EMU_OP_DONE = 0, PT_EMU_OP_AGAIN = 1 } pt_emu_op_status;
typedef pt_emu_op_status (*pt_emu_op_fn)(void *arg);
void pt_emu_enqueue(cudaStream_t s, const char *what, pt_emu_op_fn fn, void (*after)(void *),
                    void *arg);
/* Runs what is ready on every stream, once, without waiting for anything (never blocks). */
void pt_emu_progress(void);

/* Ends the process with "pt_emu: FILE:LINE: WHAT: ptr [ptr, ptr + bytes) is not device memory"
 * (or runs past its allocation) unless the whole range lies in one live cudaMalloc block. For
 * emulations of libraries that take device pointers (NCCL). bytes 0 checks only ptr. */
void pt_emu_check_device_range(const char *file, int line, const char *what, const void *ptr,
                               size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
