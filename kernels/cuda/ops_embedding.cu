/* Token and position embeddings on the GPU (layers/embedding.c, layers/pos_embedding.c).
 * The backward passes add in token (resp. batch) order, exactly as the CPU loops do, so their
 * results are the CPU's bits, every run: no atomics. */
#include "kernels/cuda/common.cuh"

/* CPU: memcpy(y + n*D, table + ids[n]*D, D floats). Item i = n*D + c. An id outside [0, V) was
 * refused on the host; here it gives a row of NaN rather than a read out of bounds. */
static __global__ void __launch_bounds__(PT_THREADS)
    embedding_forward_kernel(float *y, const int32_t *ids, const float *table, int64_t total,
                             int D, int V) {
  PT_GRID_LOOP(i, total) {
    int64_t n = i / D, c = i - n * D;
    int id = ids[n];
    y[i] = (id >= 0 && id < V) ? table[(int64_t)id * D + c] : pt_dev_nan();
  }
}

/* CPU: for n in 0..N-1: dtable[ids[n]*D + c] += dy[n*D + c] for all c.
 * For one row of dtable that is: start from its value and add dy[m] of every m with
 * ids[m] == that id, in increasing m. Block n takes token n only if it is the first occurrence
 * of its id (no m < n holds the same id); it then owns the row ids[n]: it walks m = n..N-1 in
 * chunks of PT_THREADS, lists the matching m in order (ballot + prefix over the warps), and
 * thread j adds the listed dy rows into columns c = j, j + PT_THREADS, ... in list order. One
 * block per row, the CPU's order of additions: the same bits as the CPU, no atomics. */
static __global__ void __launch_bounds__(PT_THREADS)
    embedding_backward_kernel(float *dtable, const int32_t *ids, const float *dy, int N, int D,
                              int V) {
  __shared__ int list[PT_THREADS];
  __shared__ int warp_hits[PT_THREADS / 32];
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) { /* the same n in every thread */
    const int id = ids[n];
    if (id < 0 || id >= V) continue;
    int seen = 0;
    for (int64_t m0 = 0; m0 < n; m0 += PT_THREADS) {
      const int64_t m = m0 + tid;
      if (__syncthreads_or(m < n && ids[m] == id)) {
        seen = 1;
        break;
      }
    }
    if (seen) continue; /* an earlier token's block owns this row */
    float *row = dtable + (int64_t)id * D;
    for (int64_t m0 = n; m0 < N; m0 += PT_THREADS) {
      const int64_t m = m0 + tid;
      const int hit = m < N && ids[m] == id;
      const unsigned mask = __ballot_sync(0xffffffffu, hit);
      if (lane == 0) warp_hits[w] = __popc(mask);
      __syncthreads();
      int before = 0, total = 0;
      for (int i = 0; i < PT_THREADS / 32; i++) {
        if (i < w) before += warp_hits[i];
        total += warp_hits[i];
      }
      if (hit) list[before + __popc(mask & ((1u << lane) - 1u))] = (int)m;
      __syncthreads();
      if (total > 0) /* the same in every thread */
        for (int c = tid; c < D; c += PT_THREADS) {
          float a = row[c];
          for (int j = 0; j < total; j++) a += dy[(int64_t)list[j] * D + c];
          row[c] = a;
        }
      __syncthreads(); /* list and warp_hits are rewritten by the next chunk */
    }
  }
}

/* CPU: op_add(y + b*T*D, x + b*T*D, pos, T*D) for every b: y = x + pos[t]. Item i, pos item
 * i mod T*D. */
static __global__ void __launch_bounds__(PT_THREADS)
    pos_forward_kernel(float *y, const float *x, const float *pos, int64_t total, int64_t TD) {
  PT_GRID_LOOP(i, total) y[i] = x[i] + pos[i % TD];
}

/* CPU: op_add_inplace(dpos, dy + b*T*D, T*D) for b = 0..B-1: thread i adds dy[b*T*D + i] in b
 * order. */
static __global__ void __launch_bounds__(PT_THREADS)
    pos_backward_weight_kernel(float *dpos, const float *dy, int B, int64_t TD) {
  PT_GRID_LOOP(i, TD) {
    float s = dpos[i];
    for (int b = 0; b < B; b++) s += dy[(int64_t)b * TD + i];
    dpos[i] = s;
  }
}

extern "C" void cuda_op_embedding_forward(gpu_ctx *g, float *y, const int32_t *ids,
                                          const float *table, int N, int D, int V) {
  if (N <= 0 || D <= 0) return;
  int64_t total = (int64_t)N * D;
  PT_LAUNCH(embedding_forward_kernel, pt_grid(total), PT_THREADS, 0, g->stream, y, ids, table,
            total, D, V);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_embedding_backward(gpu_ctx *g, float *dtable, const int32_t *ids,
                                           const float *dy, int N, int D, int V) {
  if (N <= 0 || D <= 0) return;
  unsigned blocks = (unsigned)(N < PT_MAX_BLOCKS ? N : PT_MAX_BLOCKS);
  PT_LAUNCH(embedding_backward_kernel, blocks, PT_THREADS, 0, g->stream, dtable, ids, dy, N, D, V);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_pos_forward(gpu_ctx *g, float *y, const float *x, const float *pos, int B,
                                    int T, int D) {
  int64_t TD = (int64_t)T * D, total = (int64_t)B * TD;
  if (total <= 0) return;
  PT_LAUNCH(pos_forward_kernel, pt_grid(total), PT_THREADS, 0, g->stream, y, x, pos, total, TD);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_pos_backward_weight(gpu_ctx *g, float *dpos, const float *dy, int B,
                                            int T, int D) {
  int64_t TD = (int64_t)T * D;
  if (B <= 0 || TD <= 0) return;
  PT_LAUNCH(pos_backward_weight_kernel, pt_grid(TD), PT_THREADS, 0, g->stream, dpos, dy, B, TD);
  PT_LAUNCH_CHECK();
}
