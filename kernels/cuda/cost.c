/* The per-kernel ledger of kernels/cuda/cost.h. */
#include "kernels/cuda/cost.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "kernels/cuda/gpu.h"

static gpu_cost_row rows[GPU_COST_MAX_ROWS];
static int n_rows;
static int paused;

/* gpu_cost_time_begin's events: ev[k] recorded before timed launch k, of row row[k], at host
 * time host[k]; ev[cap] is the closing one. */
static struct {
  cudaStream_t stream;
  cudaEvent_t *ev;
  int *row;
  double *host;
  int n, cap, on;
} timing;

static void time_launch(int row) {
  if (timing.n == timing.cap)
    pt_fatal("gpu_cost_time_begin: more than the %d launches it was given room for timed",
             timing.cap);
  timing.host[timing.n] = pt_now_s();
  CUDA_CHECK(cudaEventRecord(timing.ev[timing.n], timing.stream));
  timing.row[timing.n++] = row;
}

void gpu_cost_note(const char *kernel, double tensor_flops, double other_flops, double bytes) {
  if (paused) return;
  int i = 0;
  while (i < n_rows && strcmp(rows[i].kernel, kernel) != 0) i++;
  if (i == n_rows) {
    if (n_rows == GPU_COST_MAX_ROWS) pt_fatal("gpu_cost_note: more than %d kernels", GPU_COST_MAX_ROWS);
    rows[n_rows++] = (gpu_cost_row){.kernel = kernel};
  }
  if (timing.on) time_launch(i);
  rows[i].launches++;
  rows[i].tensor_flops += tensor_flops;
  rows[i].other_flops += other_flops;
  rows[i].bytes += bytes;
}

int gpu_cost_count(void) { return n_rows; }

const gpu_cost_row *gpu_cost_row_at(int i) { return i >= 0 && i < n_rows ? &rows[i] : NULL; }

void gpu_cost_reset(void) { n_rows = 0; }

void gpu_cost_pause(void) { paused++; }

void gpu_cost_resume(void) {
  if (paused == 0) pt_fatal("gpu_cost_resume: the ledger is not paused");
  paused--;
}

void gpu_cost_time_begin(void *stream, int max_launches) {
  if (timing.on) pt_fatal("gpu_cost_time_begin: the ledger is being timed already");
  if (max_launches < 1) max_launches = 1;
  timing.ev = malloc(sizeof *timing.ev * ((size_t)max_launches + 1));
  timing.row = malloc(sizeof *timing.row * (size_t)max_launches);
  timing.host = malloc(sizeof *timing.host * ((size_t)max_launches + 1));
  if (!timing.ev || !timing.row || !timing.host)
    pt_fatal("out of memory timing %d launches", max_launches);
  for (int k = 0; k <= max_launches; k++) CUDA_CHECK(cudaEventCreate(&timing.ev[k]));
  timing.stream = (cudaStream_t)stream;
  timing.cap = max_launches;
  timing.n = 0;
  timing.on = 1;
}

double gpu_cost_time_end(void) {
  if (!timing.on) pt_fatal("gpu_cost_time_end: the ledger is not being timed");
  timing.on = 0;
  double total = 0.0;
  if (timing.n > 0) {
    timing.host[timing.n] = pt_now_s();
    CUDA_CHECK(cudaEventRecord(timing.ev[timing.n], timing.stream));
    CUDA_CHECK(cudaEventSynchronize(timing.ev[timing.n]));
    for (int k = 0; k < timing.n; k++) {
      float ms = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, timing.ev[k], timing.ev[k + 1]));
      const double gpu_s = 1e-3 * (double)ms, host_s = timing.host[k + 1] - timing.host[k];
      rows[timing.row[k]].seconds += gpu_s;
      if (gpu_s <= GPU_COST_HOST_BOUND * host_s + GPU_COST_HOST_SLACK_S)
        rows[timing.row[k]].host_bound_seconds += gpu_s;
    }
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, timing.ev[0], timing.ev[timing.n]));
    total = 1e-3 * (double)ms;
  }
  for (int k = 0; k <= timing.cap; k++) CUDA_CHECK(cudaEventDestroy(timing.ev[k]));
  free(timing.ev);
  free(timing.row);
  free(timing.host);
  timing.ev = NULL, timing.row = NULL, timing.host = NULL;
  return total;
}
