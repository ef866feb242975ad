/* The per-kernel ledger of kernels/cuda/cost.h. */
#include "kernels/cuda/cost.h"

#include <string.h>

#include "core/error.h"

static gpu_cost_row rows[GPU_COST_MAX_ROWS];
static int n_rows;
static int paused;

void gpu_cost_note(const char *kernel, double tensor_flops, double other_flops, double bytes) {
  if (paused) return;
  int i = 0;
  while (i < n_rows && strcmp(rows[i].kernel, kernel) != 0) i++;
  if (i == n_rows) {
    if (n_rows == GPU_COST_MAX_ROWS) pt_fatal("gpu_cost_note: more than %d kernels", GPU_COST_MAX_ROWS);
    rows[n_rows++] = (gpu_cost_row){.kernel = kernel};
  }
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
