/* kernels/cuda/cost.h: the work each GPU kernel launch must do, noted by the code that launches
 * it, summed per kernel name: the ledger the roofline reads (bench/gpu_roofline.c).
 *
 * A launch site calls gpu_cost_note once per launch (or per cuBLAS/cuDNN call) with what that
 * launch cannot avoid: tensor_flops (multiply-adds on tensor cores, counted as 2 FLOPs each),
 * other_flops (arithmetic on the ordinary cores) and bytes (its compulsory traffic to device
 * memory: every input element read once, every output element written once; not what a cache
 * would miss). The ledger is host memory of the process, filled on the real GPU and under the
 * emulator alike; it costs a lookup per launch. Rows keep the kernel pointer they were given
 * (a string literal). Called from the rank's one host thread; not thread safe.
 */
#ifndef PT_GPU_COST_H
#define PT_GPU_COST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *kernel; /* the name given to gpu_cost_note */
  uint64_t launches;
  double tensor_flops, other_flops, bytes;
  double seconds; /* the launches' time on the GPU while timed (gpu_cost_time_begin), else 0 */
  /* of seconds, the launches during which the GPU waited for the host (gpu_cost_time_end) */
  double host_bound_seconds;
} gpu_cost_row;

#define GPU_COST_MAX_ROWS 256

void gpu_cost_note(const char *kernel, double tensor_flops, double other_flops, double bytes);
/* Rows in order of first note; gpu_cost_row_at(i) for i < gpu_cost_count(), else NULL. */
int gpu_cost_count(void);
const gpu_cost_row *gpu_cost_row_at(int i);
void gpu_cost_reset(void);
/* While paused (calls nest), gpu_cost_note notes nothing: a library call emulated by other
 * launches (the emulator's cuDNN substitute, attention_cudnn_emu.cpp) pauses the ledger for its
 * inner launches, so the ledger holds what a real GPU runs: the library call's own row, noted by
 * its caller. */
void gpu_cost_pause(void);
void gpu_cost_resume(void);

/* Timing each row on the GPU (bench/gpu_roofline --time): between gpu_cost_time_begin and
 * gpu_cost_time_end every note also records a CUDA event on `stream` (a cudaStream_t) just
 * before the launch it notes is queued, and end gives each launch the time from its event to the
 * next one's: its run on the GPU, plus any idle gap until the next launch starts (where the host
 * queues slower than the GPU runs, the gap is the host's cost, so it counts against the launch
 * before it). The noted launches are taken to go on that one stream (one process, one stream:
 * the sequential roofline run; work another stream runs, such as the offload copies, gets the
 * moment it was queued, about nothing); a note must come before its launch is queued, and paused
 * notes record nothing, so a library call emulated by inner launches is timed whole. At most
 * max_launches notes are timed (events created up front, so creating them costs the timed step
 * nothing); more end the process, naming the limit.
 * gpu_cost_time_end waits for the stream, adds each launch's seconds to its row, and to the
 * row's host_bound_seconds where the GPU waited for the host: the launch's GPU time no more than
 * GPU_COST_HOST_BOUND times the host's from its note to the next, plus GPU_COST_HOST_SLACK_S
 * (a GPU ahead of the host reaches each event about when the host records it, so the two
 * intervals agree; one behind runs its queue while the host's intervals are short). It frees the
 * events and returns the seconds from the first event to the last (0 when nothing was noted). */
#define GPU_COST_HOST_BOUND 1.1
#define GPU_COST_HOST_SLACK_S 2e-6
void gpu_cost_time_begin(void *stream, int max_launches);
double gpu_cost_time_end(void);

#ifdef __cplusplus
}
#endif

#endif
