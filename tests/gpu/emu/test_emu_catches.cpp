/* tests/gpu/emu/test_emu_catches.cpp CASE: the CUDA emulator catches the bugs it is there for.
 *
 * Each case is a small deliberately broken (or, as a control, correct) piece of CUDA code, run
 * in a child process under the thread and stream orders its table names; the child exits 0 when
 * its result is right, 3 when it is wrong, or is aborted by the emulator with a message. The
 * parent checks each outcome against the table, e.g. that a missing barrier gives a wrong
 * result under the "warp" order (and goes unnoticed in order), and that a shuffle with a wrong
 * mask is refused with a message naming it. Exit 0 when every outcome is the expected one.
 */
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "tests/gpu/emu/emu.h"

#define WRONG 3 /* the child's exit status for a wrong result */
#define N 256   /* threads of the test kernels' one block */

/* ---- the kernels ---------------------------------------------------------------------------- */

/* pt_block_sum's shape (kernels/cuda/common.cuh); first_barrier 0 drops the barrier that keeps
 * a second call from overwriting sh while slower warps still read the first call's sums. */
__device__ float block_sum(float v, float *sh, int first_barrier) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (first_barrier) __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float t = 0.0f;
  for (int i = 0; i < nw; i++) t += sh[i];
  return t;
}

__global__ void two_sums(float *out, const float *x, int first_barrier) {
  __shared__ float sh[32];
  float a = block_sum(x[threadIdx.x], sh, first_barrier);
  float b = block_sum(2.0f * x[threadIdx.x], sh, first_barrier);
  out[threadIdx.x] = a + b;
}

/* A barrier only the first warp reaches. */
__global__ void divergent_barrier(float *y) {
  if (threadIdx.x < 32) __syncthreads();
  y[threadIdx.x] = 1.0f;
}

/* A full-warp shuffle called by half the warp. */
__global__ void half_warp_shuffle(float *y) {
  float v = static_cast<float>(threadIdx.x);
  if ((threadIdx.x & 31) < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  y[threadIdx.x] = v;
}

/* An offset as wide as the warp. */
__global__ void shuffle_offset(float *y, int delta) {
  y[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<float>(threadIdx.x), delta);
}

__global__ void fill(float *y, float v) { y[threadIdx.x] = v; }

/* ---- the cases: 0 right, WRONG wrong, or the emulator aborts --------------------------------- */

#define CHECK_CUDA(call)                                                             \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

static float *dev_floats(int n) {
  float *d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, sizeof(float) * static_cast<size_t>(n)));
  return d;
}

static int sums(int first_barrier) {
  float x[N], out[N];
  float want = 0.0f;
  for (int i = 0; i < N; i++) x[i] = static_cast<float>(i % 7), want += 3.0f * x[i];
  float *dx = dev_floats(N), *dout = dev_floats(N);
  CHECK_CUDA(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice));
  PT_LAUNCH(two_sums, 1, N, 0, 0, dout, dx, first_barrier);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
  for (int i = 0; i < N; i++)
    if (out[i] != want) {
      std::fprintf(stderr, "thread %d: sum %g, expected %g\n", i, out[i], want);
      return WRONG;
    }
  return 0;
}
static int block_sum_ok() { return sums(1); }
static int missing_barrier() { return sums(0); }

static int run_divergent_barrier() {
  PT_LAUNCH(divergent_barrier, 1, N, 0, 0, dev_floats(N));
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}

static int run_half_warp_shuffle() {
  PT_LAUNCH(half_warp_shuffle, 1, 64, 0, 0, dev_floats(64));
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}

static int run_shuffle_offset() {
  PT_LAUNCH(shuffle_offset, 1, 32, 0, 0, dev_floats(32), 32);
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}

/* The copy back says cudaMemcpyHostToDevice: its destination is a host buffer. */
static int wrong_direction() {
  float host[N] = {0};
  float *d = dev_floats(N);
  CHECK_CUDA(cudaMemcpy(host, d, sizeof host, cudaMemcpyHostToDevice));
  return 0;
}

static int kernel_host_pointer() {
  static float host[N];
  PT_LAUNCH(fill, 1, N, 0, 0, host, 1.0f);
  return 0;
}

/* gpu_alloc's pattern: zeroed with cudaMemset (legacy default stream), filled on a non-blocking
 * stream, which does not wait for the legacy stream: the zeroing may land after the data. */
static int memset_race() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float x[N], back[N];
  for (int i = 0; i < N; i++) x[i] = 1.0f + static_cast<float>(i);
  float *d = dev_floats(N);
  CHECK_CUDA(cudaMemset(d, 0, sizeof x));
  CHECK_CUDA(cudaMemcpyAsync(d, x, sizeof x, cudaMemcpyHostToDevice, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  CHECK_CUDA(cudaDeviceSynchronize()); /* any later synchronisation that runs the memset */
  CHECK_CUDA(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  return std::memcmp(x, back, sizeof x) ? WRONG : 0;
}

/* Produced on stream a, read on stream b: correct only with the event between them. */
static int two_streams(bool with_event) {
  cudaStream_t a, b;
  cudaEvent_t e;
  CHECK_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  float back[N], *d = dev_floats(N);
  PT_LAUNCH(fill, 1, N, 0, a, d, 7.0f);
  if (with_event) {
    CHECK_CUDA(cudaEventRecord(e, a));
    CHECK_CUDA(cudaStreamWaitEvent(b, e, 0));
  }
  CHECK_CUDA(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, b));
  CHECK_CUDA(cudaStreamSynchronize(b));
  for (float v : back)
    if (v != 7.0f) return WRONG;
  return 0;
}
static int missing_event() { return two_streams(false); }
static int with_event() { return two_streams(true); }

/* cuBLAS's own argument checks, and a correct product (C = A B, 2x2). */
static int cublas_checks() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f, a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4], *A = dev_floats(4), *B = dev_floats(4), *C = dev_floats(4);
  CHECK_CUDA(cudaMemcpy(A, a, sizeof a, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(B, b, sizeof b, cudaMemcpyHostToDevice));
  const cublasOperation_t N_ = CUBLAS_OP_N, bad = CUBLAS_OP_CONJG;
  const cublasStatus_t want = CUBLAS_STATUS_INVALID_VALUE;
  int fails = 0;
  fails += cublasSgemm(h, N_, N_, -1, 2, 2, &one, A, 2, B, 2, &zero, C, 2) != want;
  fails += cublasSgemm(h, bad, N_, 2, 2, 2, &one, A, 2, B, 2, &zero, C, 2) != want;
  fails += cublasSgemm(h, N_, N_, 2, 2, 2, &one, A, 1, B, 2, &zero, C, 2) != want; /* lda < m */
  fails += cublasSgemm(h, N_, N_, 2, 2, 2, &one, A, 2, B, 1, &zero, C, 2) != want; /* ldb < k */
  fails += cublasSgemm(h, N_, N_, 2, 2, 2, &one, A, 2, B, 2, &zero, C, 1) != want; /* ldc < m */
  fails += cublasSgemm(h, N_, N_, 2, 2, 2, nullptr, A, 2, B, 2, &zero, C, 2) != want;
  fails += cublasSgemmStridedBatched(h, N_, N_, 2, 2, 2, &one, A, 2, 0, B, 2, 0, &zero, C, 2, 0,
                                     -1) != want;
  fails += cublasSgemm(h, N_, N_, 2, 2, 2, &one, A, 2, B, 2, &zero, C, 2) != CUBLAS_STATUS_SUCCESS;
  CHECK_CUDA(cudaMemcpy(c, C, sizeof c, cudaMemcpyDeviceToHost));
  const float expect[4] = {23, 34, 31, 46}; /* column-major [1 3; 2 4] [5 7; 6 8] */
  fails += std::memcmp(c, expect, sizeof c) != 0;
  cublasDestroy(h);
  return fails ? WRONG : 0;
}

/* cublasGemmEx: bf16 operands widened exactly (C = A B with A, B given as bf16 bit patterns,
 * one of them 1 + 2^-7, which only bf16 holds exactly among the short formats), the
 * combinations pipetrain does not use refused, and TF32: 1 + 2^-12 times 1 is 1 + 2^-12 in
 * float32 but 1 under the handle's TF32 math or COMPUTE_32F_FAST_TF32, while
 * COMPUTE_32F_PEDANTIC keeps float32 whatever the handle says. */
static int cublas_gemm_ex() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  const uint16_t a16[4] = {0x3f81, 0x4000, 0x4040, 0x4080}; /* 1 + 2^-7, 2, 3, 4 */
  const uint16_t b16[4] = {0x40a0, 0x40c0, 0x40e0, 0x4100}; /* 5, 6, 7, 8 */
  uint16_t *A16, *B16;
  CHECK_CUDA(cudaMalloc(&A16, sizeof a16));
  CHECK_CUDA(cudaMalloc(&B16, sizeof b16));
  CHECK_CUDA(cudaMemcpy(A16, a16, sizeof a16, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(B16, b16, sizeof b16, cudaMemcpyHostToDevice));
  float c[4], *C = dev_floats(4), *X = dev_floats(1), *Y = dev_floats(1), *Z = dev_floats(1);
  const cublasOperation_t N_ = CUBLAS_OP_N;
  int fails = 0;
  fails += cublasGemmEx(h, N_, N_, 2, 2, 2, &one, A16, CUDA_R_16BF, 2, B16, CUDA_R_16BF, 2, &zero,
                        C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) !=
           CUBLAS_STATUS_SUCCESS;
  CHECK_CUDA(cudaMemcpy(c, C, sizeof c, cudaMemcpyDeviceToHost));
  const float a0 = 1.0f + 1.0f / 128; /* column-major [a0 3; 2 4] [5 7; 6 8] */
  const float expect[4] = {a0 * 5 + 18, 34, a0 * 7 + 24, 46};
  fails += std::memcmp(c, expect, sizeof c) != 0;
  const cublasStatus_t no = CUBLAS_STATUS_NOT_SUPPORTED;
  fails += cublasGemmEx(h, N_, N_, 2, 2, 2, &one, A16, CUDA_R_16BF, 2, C, CUDA_R_32F, 2, &zero,
                        C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != no;
  fails += cublasGemmEx(h, N_, N_, 2, 2, 2, &one, A16, CUDA_R_16BF, 2, B16, CUDA_R_16BF, 2, &zero,
                        C, CUDA_R_16BF, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != no;
  fails += cublasGemmEx(h, N_, N_, 2, 2, 2, &one, A16, CUDA_R_16BF, 2, B16, CUDA_R_16BF, 2, &zero,
                        C, CUDA_R_32F, 2, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT) != no;
  const float x = 1.0f + 1.0f / 4096;
  float got[4];
  CHECK_CUDA(cudaMemcpy(X, &x, sizeof x, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(Y, &one, sizeof one, cudaMemcpyHostToDevice));
  fails += cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS;
  cublasSgemm(h, N_, N_, 1, 1, 1, &one, X, 1, Y, 1, &zero, Z, 1);
  CHECK_CUDA(cudaMemcpy(&got[0], Z, sizeof x, cudaMemcpyDeviceToHost));
  cublasGemmEx(h, N_, N_, 1, 1, 1, &one, X, CUDA_R_32F, 1, Y, CUDA_R_32F, 1, &zero, Z,
               CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  CHECK_CUDA(cudaMemcpy(&got[1], Z, sizeof x, cudaMemcpyDeviceToHost));
  fails += cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH) != CUBLAS_STATUS_SUCCESS;
  cublasSgemm(h, N_, N_, 1, 1, 1, &one, X, 1, Y, 1, &zero, Z, 1);
  CHECK_CUDA(cudaMemcpy(&got[2], Z, sizeof x, cudaMemcpyDeviceToHost));
  cublasGemmEx(h, N_, N_, 1, 1, 1, &one, X, CUDA_R_32F, 1, Y, CUDA_R_32F, 1, &zero, Z,
               CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
  CHECK_CUDA(cudaMemcpy(&got[3], Z, sizeof x, cudaMemcpyDeviceToHost));
  fails += got[0] != x || got[1] != 1.0f || got[2] != 1.0f || got[3] != x;
  cublasDestroy(h);
  return fails ? WRONG : 0;
}

/* One cuBLASLt problem D[m,n] = epilogue(A[m,k] B[k,n] (+ beta C) + bias), column-major float32
 * (or `type` operands), its descriptors made as kernels/cuda/ops_linear.cu makes them. */
struct lt_case {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  lt_case(int m, int n, int k, cublasLtEpilogue_t e, const float *bias, float *aux,
          int64_t aux_ld, cudaDataType_t type = CUDA_R_32F,
          cublasComputeType_t compute = CUBLAS_COMPUTE_32F_PEDANTIC) {
    const uint32_t epilogue = e;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                       sizeof epilogue) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                       sizeof bias) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                       sizeof aux) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                       sizeof aux_ld) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&a, type, m, k, m) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&b, type, k, n, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, m, n, m) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
      std::exit(1);
  }
  cublasStatus_t heuristic(cublasLtMatmulHeuristicResult_t *r, int *got) {
    return cublasLtMatmulAlgoGetHeuristic(h, op, a, b, d, d, pref, 1, r, got);
  }
  cublasStatus_t matmul(const float *A, const float *B, float beta, const float *C, float *D,
                        const cublasLtMatmulAlgo_t *algo) {
    const float one = 1.0f;
    return cublasLtMatmul(h, op, &one, A, a, B, b, &beta, C, d, D, d, algo, nullptr, 0, 0);
  }
};

/* cuBLASLt's checks: the statuses it returns for misuse, NOT_SUPPORTED where it has no algorithm
 * (an auxiliary leading dimension not divisible by 8), an algorithm of another problem. */
static int cublaslt_checks() {
  const cublasStatus_t ok = CUBLAS_STATUS_SUCCESS, bad = CUBLAS_STATUS_INVALID_VALUE,
                       no = CUBLAS_STATUS_NOT_SUPPORTED;
  float *A = dev_floats(24), *B = dev_floats(6), *D = dev_floats(16), *bias = dev_floats(8);
  float *aux = dev_floats(16);
  cublasLtMatmulHeuristicResult_t r;
  int got = -1, fails = 0;
  { /* correct, then the same problem's algorithm given to another */
    lt_case c(8, 2, 2, CUBLASLT_EPILOGUE_DGELU, nullptr, aux, 8), other(8, 2, 3, CUBLASLT_EPILOGUE_DGELU, nullptr, aux, 8);
    fails += c.heuristic(&r, &got) != ok || got != 1;
    fails += c.matmul(A, B, 0.0f, D, D, &r.algo) != ok;
    fails += other.matmul(A, B, 0.0f, D, D, &r.algo) != bad;
    const int64_t wide = CUBLAS_OP_T; /* TRANSA is an int32 */
    fails += cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide) != bad;
    cublasLtMatrixLayout_t b3; /* 3 x 2 where op(A) is 8 x 2 */
    fails += cublasLtMatrixLayoutCreate(&b3, CUDA_R_32F, 3, 2, 3) != ok;
    fails += cublasLtMatmulAlgoGetHeuristic(c.h, c.op, c.a, b3, c.d, c.d, c.pref, 1, &r, &got) != bad;
    fails += cublasLtMatmulDescDestroy(c.op) != ok || c.heuristic(&r, &got) != bad;
  }
  { lt_case c(8, 2, 2, CUBLASLT_EPILOGUE_BIAS, nullptr, nullptr, 0); fails += c.heuristic(&r, &got) != bad; }
  { lt_case c(8, 2, 2, CUBLASLT_EPILOGUE_DGELU, nullptr, aux, 4); fails += c.heuristic(&r, &got) != bad; }
  { lt_case c(4, 2, 2, CUBLASLT_EPILOGUE_DGELU, nullptr, aux, 4); fails += c.heuristic(&r, &got) != no || got != 0; }
  { lt_case c(8, 2, 2, CUBLASLT_EPILOGUE_GELU_BIAS, bias, nullptr, 0); fails += c.heuristic(&r, &got) != no; }
  { lt_case c(8, 2, 2, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0, CUDA_R_16BF); fails += c.heuristic(&r, &got) != no; }
  return fails ? WRONG : 0;
}

/* The heuristic assumes each matrix's pointer 256-byte aligned (MIN_ALIGNMENT_*_BYTES' default):
 * a matmul given a less aligned one is refused, NOT_SUPPORTED, as kernels/cuda/ops_linear.cu
 * would have met on a GPU with bf16 copies 128 bytes apart; told the alignment, it runs. */
static int cublaslt_alignment() {
  const cublasStatus_t ok = CUBLAS_STATUS_SUCCESS, no = CUBLAS_STATUS_NOT_SUPPORTED;
  float *A = dev_floats(64 * 4 + 16), *B = dev_floats(4 * 2), *D = dev_floats(64 * 2);
  float *A32 = A + 8; /* 32 bytes past a cudaMalloc'd (256-byte aligned) base */
  cublasLtMatmulHeuristicResult_t r;
  int got = -1, fails = 0;
  /* m 64: A's leading dimension is 256 bytes, so only its pointer can lower the alignment */
  lt_case c(64, 2, 4, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0);
  fails += c.heuristic(&r, &got) != ok || got != 1;
  fails += c.matmul(A, B, 0.0f, D, D, &r.algo) != ok;
  fails += c.matmul(A32, B, 0.0f, D, D, &r.algo) != no;
  fails += c.matmul(A32, B, 0.0f, D, D, nullptr) != no; /* no algorithm: the defaults */
  const uint32_t align = 32;
  fails += cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &align, sizeof align) != ok;
  fails += c.heuristic(&r, &got) != ok || got != 1;
  fails += c.matmul(A32, B, 0.0f, D, D, &r.algo) != ok;
  fails += c.matmul(A32 + 1, B, 0.0f, D, D, &r.algo) != no; /* 4 bytes further: 4-aligned */
  return fails ? WRONG : 0;
}

/* The algorithm follows the alignments the heuristic is told, as a real heuristic's choice may,
 * and another algorithm sums in another order: the same product with the same pointers (all
 * 256-byte aligned) told 16 bytes and told the default 256 gives other bits (split_parts in
 * src/cublaslt.cpp), and told 16 twice the same bits. What kernels/cuda/matmul_plan.h's cap
 * guards against: a pipelined run's weights are at other addresses than --sequential's. */
static int cublaslt_algorithm_moves() {
  const int m = 64, n = 2, k = 96;
  std::vector<float> a(m * k), b(k * n), d16(m * n), d16b(m * n), d256(m * n);
  for (int i = 0; i < m * k; i++) a[i] = std::sin(0.37f * (float)i) * 1e3f;
  for (int i = 0; i < k * n; i++) b[i] = std::cos(0.11f * (float)i) + 1e-3f * (float)i;
  float *A = dev_floats(m * k), *B = dev_floats(k * n), *D = dev_floats(m * n);
  CHECK_CUDA(cudaMemcpy(A, a.data(), sizeof(float) * a.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(B, b.data(), sizeof(float) * b.size(), cudaMemcpyHostToDevice));
  lt_case c(m, n, k, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0);
  cublasLtMatmulHeuristicResult_t wide, narrow;
  int got = -1, fails = 0;
  fails += c.heuristic(&wide, &got) != CUBLAS_STATUS_SUCCESS || got != 1;
  const uint32_t align = 16;
  const cublasLtMatmulPreferenceAttributes_t attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++)
    fails += cublasLtMatmulPreferenceSetAttribute(c.pref, attr[i], &align, sizeof align) !=
             CUBLAS_STATUS_SUCCESS;
  fails += c.heuristic(&narrow, &got) != CUBLAS_STATUS_SUCCESS || got != 1;
  std::vector<float> *out[3] = {&d16, &d16b, &d256};
  const cublasLtMatmulAlgo_t *algo[3] = {&narrow.algo, &narrow.algo, &wide.algo};
  for (int r = 0; r < 3; r++) {
    fails += c.matmul(A, B, 0.0f, D, D, algo[r]) != CUBLAS_STATUS_SUCCESS;
    CHECK_CUDA(cudaMemcpy(out[r]->data(), D, sizeof(float) * (size_t)(m * n),
                          cudaMemcpyDeviceToHost));
  }
  fails += std::memcmp(d16.data(), d16b.data(), sizeof(float) * d16.size()) != 0;
  fails += std::memcmp(d16.data(), d256.data(), sizeof(float) * d16.size()) == 0;
  return fails ? WRONG : 0;
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

/* The epilogues' results: D = A B + res + bias exactly (values exact in float); GELU_AUX_BIAS's
 * aux (the pre-activation, exact) and D = gelu(aux); DGELU's D = A B * gelu'(aux) in place over
 * aux, against double formulas (the derivative by a central difference). m 8, n 2, k 1. */
static int cublaslt_epilogues() {
  float a[8], bb[2] = {1.0f, 2.0f}, bias[8], res[16], out[16], aux[16];
  for (int i = 0; i < 8; i++) a[i] = 0.5f * (float)i - 2.0f, bias[i] = 0.25f * (float)i;
  for (int i = 0; i < 16; i++) res[i] = 0.125f * (float)(i % 5);
  float *A = dev_floats(8), *B = dev_floats(2), *Bias = dev_floats(8), *R = dev_floats(16);
  float *D = dev_floats(16), *Aux = dev_floats(16);
  CHECK_CUDA(cudaMemcpy(A, a, sizeof a, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(B, bb, sizeof bb, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(Bias, bias, sizeof bias, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(R, res, sizeof res, cudaMemcpyHostToDevice));
  int fails = 0;
  lt_case plus(8, 2, 1, CUBLASLT_EPILOGUE_BIAS, Bias, nullptr, 0);
  fails += plus.matmul(A, B, 1.0f, R, D, nullptr) != CUBLAS_STATUS_SUCCESS;
  CHECK_CUDA(cudaMemcpy(out, D, sizeof out, cudaMemcpyDeviceToHost));
  for (int j = 0; j < 2; j++)
    for (int i = 0; i < 8; i++) fails += out[j * 8 + i] != a[i] * bb[j] + res[j * 8 + i] + bias[i];
  lt_case fwd(8, 2, 1, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, Bias, Aux, 8);
  fails += fwd.matmul(A, B, 0.0f, D, D, nullptr) != CUBLAS_STATUS_SUCCESS;
  CHECK_CUDA(cudaMemcpy(out, D, sizeof out, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(aux, Aux, sizeof aux, cudaMemcpyDeviceToHost));
  for (int j = 0; j < 2; j++)
    for (int i = 0; i < 8; i++) {
      float h = a[i] * bb[j] + bias[i];
      fails += aux[j * 8 + i] != h;
      fails += std::fabs(out[j * 8 + i] - gelu_ref(h)) > 1e-6 * (1.0 + std::fabs(h));
    }
  lt_case bwd(8, 2, 1, CUBLASLT_EPILOGUE_DGELU, nullptr, Aux, 8);
  fails += bwd.matmul(A, B, 0.0f, Aux, Aux, nullptr) != CUBLAS_STATUS_SUCCESS; /* D = aux */
  CHECK_CUDA(cudaMemcpy(out, Aux, sizeof out, cudaMemcpyDeviceToHost));
  for (int j = 0; j < 2; j++)
    for (int i = 0; i < 8; i++) {
      double h = aux[j * 8 + i], e = 1e-4;
      double want = a[i] * bb[j] * (gelu_ref(h + e) - gelu_ref(h - e)) / (2 * e);
      fails += std::fabs(out[j * 8 + i] - want) > 1e-5 * (1.0 + std::fabs(want));
    }
  return fails ? WRONG : 0;
}

/* bf16 bits of x, rounded to nearest even (finite x). */
static uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* A bf16 D (kernels/cuda/ops_linear.cu lt_args D16): GELU_AUX_BIAS on bf16 operands with a
 * float32 bias (BIAS_DATA_TYPE) writes D and aux as the bf16 bits of the float32 D's and aux's
 * values (which the bias makes inexact in bf16); an aux of another type than D's, and a C of
 * another type than D's, have no algorithm. */
static int cublaslt_bf16_out() {
  const cublasStatus_t ok = CUBLAS_STATUS_SUCCESS, no = CUBLAS_STATUS_NOT_SUPPORTED;
  uint16_t a16[8], b16[2] = {bf16_bits(1.0f), bf16_bits(-3.0f)}, d16[16], aux16[16];
  float bias[8], out[16], aux[16];
  for (int i = 0; i < 8; i++) a16[i] = bf16_bits(0.5f * (float)i - 2.0f), bias[i] = 0.1f * (float)i + 0.01f;
  uint16_t *A, *B, *D16, *Aux16;
  CHECK_CUDA(cudaMalloc(&A, sizeof a16));
  CHECK_CUDA(cudaMalloc(&B, sizeof b16));
  CHECK_CUDA(cudaMalloc(&D16, sizeof d16));
  CHECK_CUDA(cudaMalloc(&Aux16, sizeof aux16));
  float *Bias = dev_floats(8), *D = dev_floats(16), *Aux = dev_floats(16);
  CHECK_CUDA(cudaMemcpy(A, a16, sizeof a16, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(B, b16, sizeof b16, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(Bias, bias, sizeof bias, cudaMemcpyHostToDevice));
  int fails = 0;
  lt_case f32(8, 2, 1, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, Bias, Aux, 8, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
  fails += f32.matmul(reinterpret_cast<const float *>(A), reinterpret_cast<const float *>(B), 0.0f,
                      D, D, nullptr) != ok;
  CHECK_CUDA(cudaMemcpy(out, D, sizeof out, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(aux, Aux, sizeof aux, cudaMemcpyDeviceToHost));
  lt_case c(8, 2, 1, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, Bias, nullptr, 8, CUDA_R_16BF, CUBLAS_COMPUTE_32F);
  const void *aux_p = Aux16;
  const int32_t f32_type = CUDA_R_32F;
  cublasLtMatrixLayout_t d_bf16;
  fails += cublasLtMatrixLayoutCreate(&d_bf16, CUDA_R_16BF, 8, 2, 8) != ok;
  fails += cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_p, sizeof aux_p) != ok;
  fails += cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32_type, sizeof f32_type) != ok;
  cublasLtMatmulHeuristicResult_t r;
  int got = 0;
  fails += cublasLtMatmulAlgoGetHeuristic(c.h, c.op, c.a, c.b, d_bf16, d_bf16, c.pref, 1, &r, &got) != ok || got != 1;
  fails += cublasLtMatmulAlgoGetHeuristic(c.h, c.op, c.a, c.b, c.d, d_bf16, c.pref, 1, &r, &got) != no;
  const float one = 1.0f, zero = 0.0f;
  fails += cublasLtMatmul(c.h, c.op, &one, A, c.a, B, c.b, &zero, D16, d_bf16, D16, d_bf16, nullptr,
                          nullptr, 0, 0) != ok;
  CHECK_CUDA(cudaMemcpy(d16, D16, sizeof d16, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(aux16, Aux16, sizeof aux16, cudaMemcpyDeviceToHost));
  int inexact = 0;
  for (int i = 0; i < 16; i++) {
    fails += d16[i] != bf16_bits(out[i]) || aux16[i] != bf16_bits(aux[i]);
    uint32_t u = static_cast<uint32_t>(aux16[i]) << 16;
    float back;
    std::memcpy(&back, &u, sizeof back);
    inexact += back != aux[i];
  }
  fails += inexact == 0; /* the rounding was exercised */
  fails += cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &f32_type, sizeof f32_type) != ok;
  fails += cublasLtMatmulAlgoGetHeuristic(c.h, c.op, c.a, c.b, d_bf16, d_bf16, c.pref, 1, &r, &got) != no;
  return fails ? WRONG : 0;
}

/* GELU_AUX_BIAS's aux for 8 x 2 with leading dimension 8 in a block of 8 floats. */
static int cublaslt_aux_extent() {
  float *A = dev_floats(8), *B = dev_floats(2), *D = dev_floats(16), *bias = dev_floats(8);
  lt_case c(8, 2, 1, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, dev_floats(8), 8);
  c.matmul(A, B, 0.0f, D, D, nullptr);
  return 0;
}

/* A bf16 2x2 operand with leading dimension 4: its extent counts 2-byte elements. */
static int gemm_ex_extent() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  uint16_t *A, *B;
  CHECK_CUDA(cudaMalloc(&A, 4 * sizeof(uint16_t)));
  CHECK_CUDA(cudaMalloc(&B, 4 * sizeof(uint16_t)));
  float *C = dev_floats(4);
  cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, CUDA_R_16BF, 4, B, CUDA_R_16BF, 2,
               &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return 0;
}

/* A 2x2 operand passed with leading dimension 4: valid arguments, but past its allocation. */
static int cublas_extent() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  float *A = dev_floats(4), *B = dev_floats(4), *C = dev_floats(4);
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, 4, B, 2, &zero, C, 2);
  return 0;
}

/* pt_emu_enqueue (for the NCCL fake): an operation that answers AGAIN twice holds back what is
 * queued behind it on its stream; a stream carrying one progresses at any API call. */
struct transfer {
  int calls, finished;
};
static pt_emu_op_status transfer_step(void *p) {
  return ++static_cast<transfer *>(p)->calls < 3 ? PT_EMU_OP_AGAIN : PT_EMU_OP_DONE;
}
static void transfer_after(void *p) { static_cast<transfer *>(p)->finished = 1; }

static int external_op() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  transfer t = {0, 0};
  float back[N], *d = dev_floats(N);
  PT_LAUNCH(fill, 1, N, 0, s, d, 1.0f);
  pt_emu_enqueue(s, "a test transfer", transfer_step, transfer_after, &t);
  PT_LAUNCH(fill, 1, N, 0, s, d, 2.0f); /* tried once at this call: the fill before it ran */
  if (t.calls != 1) return std::fprintf(stderr, "%d tries, expected 1\n", t.calls), WRONG;
  CHECK_CUDA(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  if (t.calls != 3 || !t.finished) return WRONG;
  for (float v : back)
    if (v != 2.0f) return WRONG;
  return 0;
}

/* ---- the table and the harness ------------------------------------------------------------ */

#define ABORTS -1
struct outcome {
  const char *order, *streams; /* PT_EMU_ORDER, PT_EMU_STREAMS */
  int status;                  /* 0, WRONG or ABORTS */
  const char *text;            /* ABORTS: what the emulator's message must contain */
};
struct test_case {
  const char *name;
  int (*run)();
  std::vector<outcome> outcomes;
};

static const std::vector<test_case> &cases() {
  static const std::vector<test_case> all = {
      {"block_sum", block_sum_ok,
       {{"inorder", "order", 0, ""}, {"warp", "order", 0, ""}, {"random", "order", 0, ""}}},
      /* invisible in order; the warp order runs one warp into the second call first */
      {"missing_barrier", missing_barrier,
       {{"inorder", "order", 0, ""}, {"warp", "order", WRONG, ""}}},
      {"divergent_barrier", run_divergent_barrier,
       {{"inorder", "order", ABORTS, "must reach every barrier"},
        {"reverse", "order", ABORTS, "must reach every barrier"}}},
      {"shuffle_mask", run_half_warp_shuffle,
       {{"inorder", "order", ABORTS, "__shfl_xor_sync"},
        {"random", "order", ABORTS, "__shfl_xor_sync"}}},
      {"shuffle_offset", run_shuffle_offset,
       {{"inorder", "order", ABORTS, "offset 32 out of range [0, 32)"}}},
      {"copy_direction", wrong_direction,
       {{"inorder", "order", ABORTS, "test_emu_catches.cpp:"}}},
      {"kernel_host_pointer", kernel_host_pointer,
       {{"inorder", "order", ABORTS, "argument 1"}}},
      /* invisible in issue order; lazy streams run the legacy memset only when it is needed */
      {"legacy_memset_race", memset_race, {{"inorder", "order", 0, ""}, {"inorder", "lazy", WRONG, ""}}},
      {"missing_event", missing_event, {{"inorder", "order", 0, ""}, {"inorder", "lazy", WRONG, ""}}},
      {"with_event", with_event,
       {{"inorder", "lazy", 0, ""}, {"inorder", "random", 0, ""}, {"inorder", "order", 0, ""}}},
      {"cublas_checks", cublas_checks, {{"inorder", "order", 0, ""}}},
      {"cublas_gemm_ex", cublas_gemm_ex, {{"inorder", "order", 0, ""}}},
      {"gemm_ex_extent", gemm_ex_extent, {{"inorder", "order", ABORTS, "runs 4 bytes past the end"}}},
      {"external_op", external_op,
       {{"inorder", "order", 0, ""}, {"inorder", "lazy", 0, ""}, {"inorder", "random", 0, ""}}},
      {"cublas_extent", cublas_extent, {{"inorder", "order", ABORTS, "runs 8 bytes past the end"}}},
      {"cublaslt_checks", cublaslt_checks, {{"inorder", "order", 0, ""}}},
      {"cublaslt_alignment", cublaslt_alignment, {{"inorder", "order", 0, ""}}},
      {"cublaslt_algorithm_moves", cublaslt_algorithm_moves, {{"inorder", "order", 0, ""}}},
      {"cublaslt_epilogues", cublaslt_epilogues, {{"inorder", "order", 0, ""}}},
      {"cublaslt_bf16_out", cublaslt_bf16_out, {{"inorder", "order", 0, ""}}},
      {"cublaslt_aux_extent", cublaslt_aux_extent,
       {{"inorder", "order", ABORTS, "cuBLASLt epilogue aux"}}},
  };
  return all;
}

/* Runs c in a child under o's orders; its stderr into err. Returns 0, WRONG, ABORTS or other. */
static int run_child(const test_case &c, const outcome &o, std::string &err) {
  int fds[2];
  if (pipe(fds) != 0) return std::perror("pipe"), 1;
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return std::perror("fork"), 1;
  if (pid == 0) {
    if (dup2(fds[1], 2) < 0 || close(fds[0]) != 0 || setenv("PT_EMU_ORDER", o.order, 1) != 0 ||
        setenv("PT_EMU_STREAMS", o.streams, 1) != 0 || unsetenv("PT_EMU_SEED") != 0)
      _exit(1);
    _exit(c.run());
  }
  if (close(fds[1]) != 0) return std::perror("close"), 1;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(got));
  if (got < 0 || close(fds[0]) != 0) return std::perror("read"), 1;
  int st;
  if (waitpid(pid, &st, 0) != pid) return std::perror("waitpid"), 1;
  if (WIFSIGNALED(st)) return WTERMSIG(st) == SIGABRT ? ABORTS : 1;
  return WEXITSTATUS(st);
}

static const char *status_name(int s) {
  return s == 0 ? "right result" : s == WRONG ? "wrong result" : s == ABORTS ? "aborted" : "failed";
}

int main(int argc, char **argv) {
  for (const test_case &c : cases()) {
    if (argc != 2 || std::strcmp(argv[1], c.name)) continue;
    int bad = 0;
    for (const outcome &o : c.outcomes) {
      std::string err;
      int got = run_child(c, o, err);
      bool ok = got == o.status && (o.status != ABORTS || err.find(o.text) != std::string::npos);
      std::printf("%s: PT_EMU_ORDER=%s PT_EMU_STREAMS=%s: %s (expected %s)%s\n%s", c.name,
                  o.order, o.streams, status_name(got), status_name(o.status),
                  ok ? "" : "  <-- NOT AS EXPECTED", err.c_str());
      bad += !ok;
    }
    return bad ? 1 : 0;
  }
  std::fprintf(stderr, "usage: test_emu_catches CASE; cases:");
  for (const test_case &c : cases()) std::fprintf(stderr, " %s", c.name);
  std::fputc('\n', stderr);
  return 2;
}
