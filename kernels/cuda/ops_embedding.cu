/* Token and position embeddings on the GPU (layers/embedding.c, layers/pos_embedding.c).
 * The backward passes add in token (resp. batch) order, exactly as the CPU loops do, so their
 * results are the CPU's bits, every run: no atomics (the token backward sorts the tokens by id
 * first, so its work is O(N log^2 N + N D), not O(N^2)). */
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

/* Backward in two steps, O(N log^2 N + N D), no atomics:
 *  1. sort the keys id << 32 | n (n the token) ascending: the tokens grouped by id, each group
 *     in token order. The keys are distinct, so any correct sort gives the same array: a
 *     bitonic network over P = the power of two >= N keys (the P - N pads are all ones, last).
 *  2. segment sums: the block at a group's first position owns the row ids[n] and adds the
 *     group's dy rows into it in the group's (token) order, one column per thread: the CPU's
 *     additions in the CPU's order (for n: dtable[ids[n]] += dy[n]), so the CPU's bits.
 * The network's steps with a compare distance below EMB_SORT_CHUNK run inside one block in
 * shared memory (one launch for all of them); the longer ones are one launch each. */
#define EMB_SORT_CHUNK 2048 /* keys a block sorts in shared memory: 16 KiB */
#define EMB_PAD_KEY 0xffffffffffffffffull

/* Compare-exchange of a[lo] and a[lo + j]: into ascending order where the network's stage k
 * has (global index of lo) & k == 0, descending elsewhere. */
__device__ __forceinline__ void emb_cmp_swap(uint64_t *a, int64_t lo, int64_t j, int ascending) {
  const uint64_t x = a[lo], y = a[lo + j];
  if (ascending == (x > y)) {
    a[lo] = y;
    a[lo + j] = x;
  }
}

/* Pair t of a step with distance j: its lower index. */
__device__ __forceinline__ int64_t emb_pair_lo(int64_t t, int64_t j) {
  return 2 * j * (t / j) + (t % j);
}

/* The steps of distance j < C (C keys per block, a power of two) in shared memory: with
 * k_only 0, every stage k = 2..C from the keys built from ids (block b's chunk
 * [b C, b C + C)); with k_only > C, the stage k_only's remaining steps j = C/2..1 of the keys
 * in `keys`. Indices are global, so the directions are the whole network's. */
static __global__ void __launch_bounds__(PT_THREADS)
    emb_sort_local_kernel(uint64_t *keys, const int32_t *ids, int N, int C, int64_t k_only) {
  __shared__ uint64_t sh[EMB_SORT_CHUNK];
  const int64_t base = (int64_t)blockIdx.x * C;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    const int64_t n = base + i;
    if (k_only) sh[i] = keys[n];
    else sh[i] = n < N ? ((uint64_t)(uint32_t)ids[n] << 32) | (uint64_t)n : EMB_PAD_KEY;
  }
  __syncthreads();
  for (int64_t k = k_only ? k_only : 2; k_only ? k == k_only : k <= C; k <<= 1)
    for (int64_t j = (k_only ? C : k) / 2; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < C / 2; t += blockDim.x) {
        const int64_t lo = emb_pair_lo(t, j);
        emb_cmp_swap(sh, lo, j, ((base + lo) & k) == 0); /* k may exceed C: the global index */
      }
      __syncthreads();
    }
  for (int i = threadIdx.x; i < C; i += blockDim.x) keys[base + i] = sh[i];
}

/* One step (k, j) of the network with j >= the chunk: P / 2 pairs over the grid. */
static __global__ void __launch_bounds__(PT_THREADS)
    emb_sort_step_kernel(uint64_t *keys, int64_t P, int64_t k, int64_t j) {
  PT_GRID_LOOP(t, P / 2) {
    const int64_t lo = emb_pair_lo(t, j);
    emb_cmp_swap(keys, lo, j, (lo & k) == 0);
  }
}

/* Block x takes the sorted positions s = x, x + gridDim.x, ... that start a group (an id other
 * than the previous position's); thread t of block (x, y) adds column c = y PT_THREADS + t of
 * the group's dy rows, in token order, into its row. Ids outside [0, V) are skipped. */
static __global__ void __launch_bounds__(PT_THREADS)
    emb_segment_sum_kernel(float *dtable, const uint64_t *keys, const float *dy, int N, int D,
                           int V) {
  const int64_t c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
  for (int64_t s = blockIdx.x; s < N; s += gridDim.x) {
    const uint32_t id = (uint32_t)(keys[s] >> 32);
    if (s > 0 && (uint32_t)(keys[s - 1] >> 32) == id) continue;
    if (id >= (uint32_t)V || c >= D) continue;
    float *row = dtable + (int64_t)id * D;
    float a = row[c];
    for (int64_t e = s; e < N && (uint32_t)(keys[e] >> 32) == id; e++)
      a += dy[(int64_t)(uint32_t)keys[e] * D + c];
    row[c] = a;
  }
}

/* CPU: op_add(y + b*T*D, x + b*T*D, pos, T*D) for every b: y = x + pos[t]. Item i, pos item
 * i mod T*D. */
static __global__ void __launch_bounds__(PT_THREADS)
    pos_forward_kernel(float *y, const float *x, const float *pos, int64_t total, int64_t TD) {
  PT_GRID_LOOP(i, total) y[i] = x[i] + pos[i % TD];
}

/* Packed documents (CPU: y[n] = x[n] + pos[positions[n]] row by row). */
static __global__ void __launch_bounds__(PT_THREADS)
    pos_forward_docs_kernel(float *y, const float *x, const float *pos, const int32_t *positions,
                            int64_t total, int D) {
  PT_GRID_LOOP(i, total) y[i] = x[i] + pos[(int64_t)positions[i / D] * D + i % D];
}

/* Packed documents (CPU: dpos[positions[n]] += dy[n] for n = b*T + t in order): thread (p, c)
 * adds the dy[n, c] with positions[n] == p in n order; a position p is only at t >= p. */
static __global__ void __launch_bounds__(PT_THREADS)
    pos_backward_docs_kernel(float *dpos, const float *dy, const int32_t *positions, int B, int T,
                             int D) {
  PT_GRID_LOOP(i, (int64_t)T * D) {
    const int p = (int)(i / D), c = (int)(i % D);
    float s = dpos[i];
    for (int b = 0; b < B; b++)
      for (int t = p; t < T; t++) {
        const int64_t n = (int64_t)b * T + t;
        if (positions[n] == p) s += dy[n * D + c];
      }
    dpos[i] = s;
  }
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
  /* ids read, the N rows gathered and written */
  PT_LAUNCH_COSTED(embedding_forward_kernel, pt_cost_of(0.0, 0.0, 4.0 * N + 8.0 * total),
                   pt_grid(total), PT_THREADS, 0, g->stream, y, ids, table, total, D, V);
  PT_LAUNCH_CHECK();
}

/* The sort's length: the power of two >= N (at least 2). */
static int64_t emb_sort_len(int N) {
  int64_t P = 2;
  while (P < N) P <<= 1;
  return P;
}

extern "C" int64_t cuda_op_embedding_scratch_keys(int N) { return N > 0 ? emb_sort_len(N) : 0; }

extern "C" void cuda_op_embedding_backward(gpu_ctx *g, float *dtable, const int32_t *ids,
                                           const float *dy, int N, int D, int V,
                                           uint64_t *scratch) {
  if (N <= 0 || D <= 0) return;
  const int64_t P = emb_sort_len(N), C = P < EMB_SORT_CHUNK ? P : EMB_SORT_CHUNK;
  const unsigned chunks = (unsigned)(P / C);
  /* the sort: integer compares, no FLOPs; each pass reads and writes the P 8-byte keys (the
   * first reads the ids instead) */
  PT_LAUNCH_COSTED(emb_sort_local_kernel, pt_cost_of(0.0, 0.0, 4.0 * N + 8.0 * P), chunks,
                   PT_THREADS, 0, g->stream, scratch, ids, N, (int)C, (int64_t)0);
  PT_LAUNCH_CHECK();
  for (int64_t k = 2 * C; k <= P; k <<= 1) {
    for (int64_t j = k / 2; j >= C; j >>= 1) {
      PT_LAUNCH_COSTED(emb_sort_step_kernel, pt_cost_of(0.0, 0.0, 16.0 * P), pt_grid(P / 2),
                       PT_THREADS, 0, g->stream, scratch, P, k, j);
      PT_LAUNCH_CHECK();
    }
    PT_LAUNCH_COSTED(emb_sort_local_kernel, pt_cost_of(0.0, 0.0, 16.0 * P), chunks, PT_THREADS, 0,
                     g->stream, scratch, ids, N, (int)C, k);
    PT_LAUNCH_CHECK();
  }
  dim3 grid((unsigned)(N < PT_MAX_BLOCKS ? N : PT_MAX_BLOCKS),
            (unsigned)(((int64_t)D + PT_THREADS - 1) / PT_THREADS));
  /* keys and dy read; the rows of the distinct ids (at most min(N, V): the bound is counted)
   * read and written */
  const double ND = (double)N * D, rows = N < V ? N : V;
  PT_LAUNCH_COSTED(emb_segment_sum_kernel, pt_cost_of(0.0, ND, 8.0 * N + 4.0 * ND + 8.0 * rows * D),
                   grid, PT_THREADS, 0, g->stream, dtable, scratch, dy, N, D, V);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_pos_forward(gpu_ctx *g, float *y, const float *x, const float *pos, int B,
                                    int T, int D, const int32_t *positions) {
  int64_t TD = (int64_t)T * D, total = (int64_t)B * TD;
  if (total <= 0) return;
  if (positions) {
    /* x read, a gathered pos row per token, y written, the positions */
    PT_LAUNCH_COSTED(pos_forward_docs_kernel,
                     pt_cost_of(0.0, (double)total, 4.0 * (3.0 * total + (double)B * T)),
                     pt_grid(total), PT_THREADS, 0, g->stream, y, x, pos, positions, total, D);
    PT_LAUNCH_CHECK();
    return;
  }
  PT_LAUNCH_COSTED(pos_forward_kernel, pt_cost_of(0.0, (double)total, 4.0 * (2.0 * total + TD)),
                   pt_grid(total), PT_THREADS, 0, g->stream, y, x, pos, total, TD);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_op_pos_backward_weight(gpu_ctx *g, float *dpos, const float *dy, int B,
                                            int T, int D, const int32_t *positions) {
  int64_t TD = (int64_t)T * D;
  if (B <= 0 || TD <= 0) return;
  if (positions) {
    const double BTD = (double)B * TD;
    PT_LAUNCH_COSTED(pos_backward_docs_kernel,
                     pt_cost_of(0.0, BTD, 4.0 * (BTD + 2.0 * TD + (double)B * T)), pt_grid(TD),
                     PT_THREADS, 0, g->stream, dpos, dy, positions, B, T, D);
    PT_LAUNCH_CHECK();
    return;
  }
  const double BTD = (double)B * TD;
  PT_LAUNCH_COSTED(pos_backward_weight_kernel, pt_cost_of(0.0, BTD, 4.0 * (BTD + 2.0 * TD)),
                   pt_grid(TD), PT_THREADS, 0, g->stream, dpos, dy, B, TD);
  PT_LAUNCH_CHECK();
}
