/* Packed documents as cuDNN's ragged sequences (attention_cudnn.h's ragged table), and back.
 *
 * A document starts at each token t of a row with doc_start[t] == t (kernels.h: every row's
 * first token starts one), so the documents in token order tile the B*T tokens and a document
 * ends where the next begins. One block counts the starts of a chunk of tokens per thread,
 * scans the counts in shared memory and writes each start at its index: no atomics, the same
 * table every run. */
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/common.cuh"

#define RAGGED_THREADS 1024

/* Token t (of rows of T) starts a document. */
static __device__ int starts_document(const int32_t *doc_start, int64_t t, int T) {
  return doc_start[t] == (int32_t)(t % T);
}

/* Exclusive prefix sums of count[0..RAGGED_THREADS) in place (Hillis-Steele over two rows of
 * tmp); returns the total. Every thread of the block calls it. */
static __device__ int ragged_scan(int *count, int (*tmp)[RAGGED_THREADS]) {
  const int i = threadIdx.x;
  tmp[0][i] = count[i];
  __syncthreads();
  int src = 0;
  for (int step = 1; step < RAGGED_THREADS; step *= 2) {
    tmp[1 - src][i] = tmp[src][i] + (i >= step ? tmp[src][i - step] : 0);
    __syncthreads();
    src = 1 - src;
  }
  const int total = tmp[src][RAGGED_THREADS - 1];
  count[i] = tmp[src][i] - count[i];
  __syncthreads();
  return total;
}

static __global__ void __launch_bounds__(RAGGED_THREADS)
    attention_ragged_kernel(int32_t *table, int64_t stride, const int32_t *doc_start, int T,
                            int64_t N, int seqs, int row_qkv, int row_o, int H) {
  __shared__ int count[RAGGED_THREADS];
  __shared__ int tmp[2][RAGGED_THREADS];
  int32_t *len = table, *off_qkv = table + stride, *off_o = table + 2 * stride;
  int32_t *off_lse = table + 3 * stride;
  const int64_t chunk = (N + RAGGED_THREADS - 1) / RAGGED_THREADS;
  const int64_t t0 = threadIdx.x * chunk, t1 = t0 + chunk < N ? t0 + chunk : N;
  int c = 0;
  for (int64_t t = t0; t < t1; t++) c += starts_document(doc_start, t, T);
  count[threadIdx.x] = c;
  const int docs = ragged_scan(count, tmp);
  int j = count[threadIdx.x];
  for (int64_t t = t0; t < t1; t++)
    if (starts_document(doc_start, t, T)) {
      if (j < seqs) {
        off_qkv[j] = (int32_t)(t * row_qkv), off_o[j] = (int32_t)(t * row_o);
        off_lse[j] = (int32_t)(t * H);
      }
      j++;
    }
  for (int k = (docs < seqs ? docs : seqs) + threadIdx.x; k <= seqs; k += RAGGED_THREADS)
    off_qkv[k] = (int32_t)(N * row_qkv), off_o[k] = (int32_t)(N * row_o),
    off_lse[k] = (int32_t)(N * H);
  __syncthreads();
  /* more documents than slots (the caller's count was wrong): no sequence is valid */
  for (int k = threadIdx.x; k < seqs; k += RAGGED_THREADS)
    len[k] = docs > seqs ? -1 : (off_lse[k + 1] - off_lse[k]) / H;
}

/* The shape's tokens and row widths (elements of a token in qkv and in o). */
static int64_t tokens_of(const attention_cudnn_shape *s) { return (int64_t)s->B * s->T; }
static int row_qkv_of(const attention_cudnn_shape *s) { return (s->H + 2 * s->KVH) * s->hd; }

extern "C" void cuda_op_attention_ragged(gpu_ctx *g, int32_t *table, const int32_t *doc_start,
                                         const attention_cudnn_shape *s) {
  const int64_t N = tokens_of(s);
  if (N <= 0 || s->seqs <= 0) return;
  const pt_cost cost = pt_cost_of(0.0, 0.0, 4.0 * ((double)N + 4.0 * s->seqs));
  PT_LAUNCH_COSTED(attention_ragged_kernel, cost, 1, RAGGED_THREADS, 0, g->stream, table,
                   attention_cudnn_ragged_stride(s->seqs), doc_start, s->T, N, s->seqs,
                   row_qkv_of(s), s->H * s->hd, s->H);
  PT_LAUNCH_CHECK();
}

/* The table's sequence holding token t: the last j with off_qkv[j] <= t * row_qkv (offsets rise
 * with j; slots past the last document sit at the end, beyond every token). */
static __device__ int ragged_find(const int32_t *off_qkv, int seqs, int64_t at) {
  int lo = 0, hi = seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (off_qkv[mid] <= at) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static __global__ void __launch_bounds__(PT_THREADS)
    attention_ragged_docs_kernel(int32_t *doc_start, const int32_t *table, int64_t stride,
                                 int T, int64_t N, int seqs, int row_qkv, int row_o, int H) {
  const int32_t *len = table, *off_qkv = table + stride, *off_o = table + 2 * stride;
  const int32_t *off_lse = table + 3 * stride;
  PT_GRID_LOOP(t, N) {
    const int64_t row0 = t / T * T;
    const int j = ragged_find(off_qkv, seqs, t * row_qkv);
    const int64_t first = off_qkv[j] / row_qkv;
    const int ok = off_qkv[j] % row_qkv == 0 && first <= t && t < first + len[j] &&
                   first >= row0 && off_o[j] == first * row_o && off_lse[j] == first * H &&
                   off_qkv[seqs] == N * row_qkv;
    doc_start[t] = (int32_t)(ok ? first - row0 : t - row0);
  }
}

extern "C" void cuda_op_attention_ragged_docs(gpu_ctx *g, int32_t *doc_start,
                                              const int32_t *table,
                                              const attention_cudnn_shape *s) {
  const int64_t N = tokens_of(s);
  if (N <= 0 || s->seqs <= 0) return;
  PT_LAUNCH_COSTED(attention_ragged_docs_kernel, pt_cost_of(0.0, 0.0, 8.0 * (double)N),
                   pt_grid(N), PT_THREADS, 0, g->stream, doc_start, table,
                   attention_cudnn_ragged_stride(s->seqs), s->T, N, s->seqs, row_qkv_of(s),
                   s->H * s->hd, s->H);
  PT_LAUNCH_CHECK();
}
