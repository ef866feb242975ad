/* Linear layers on the GPU (kernels/cpu/ops_linear.c): float32 products (pedantic math: no
 * TF32, unless train.precision tf32 set g->lt_compute and the handle's math mode) and the bias
 * kernels; the bf16 variants convert the operands (a weight with a registered copy,
 * kernels/weight_copy.h, is read there) and multiply them with float32 accumulation. Every
 * product goes through its cuBLASLt plan (kernels/cuda/matmul_plan.h: descriptors and algorithm
 * made once per problem, the algorithm a function of the problem alone, so a pipelined run
 * keeps --sequential's bits); cuBLAS (cublasSgemm, cublasGemmEx) runs only a problem cuBLASLt
 * has no algorithm for. Where an epilogue saves a pass over memory it is used (lt_product):
 * bias (BIAS, no fill pass), residual plus bias (C = res, beta 1, BIAS), bias and GELU saving
 * the pre-activation (GELU_AUX_BIAS), and the GELU gradient (DGELU). Under bf16 a forward whose
 * output has its place at rest handed over alone (y16, kernels.h share_bf16_into) writes it
 * there as bf16 in the epilogue (D, and GELU's aux, bf16; the bias float32): the bits converting
 * the float32 result gives, with no pass of their own. Where cuBLASLt has no algorithm for an
 * epilogue's shape (an auxiliary leading dimension not divisible by 8, say) the unfused path
 * runs: the choice depends on the shapes only, so runs repeat bit for bit. Bias gradients stay
 * the deterministic column sums (cuda_op_colsum_acc, or cuda_op_colsum_acc_bf16 on dy's copy):
 * DGELU_BGRAD would write, not add, the bias gradient in backward_input, while the weight
 * gradients accumulate, in backward_weight.
 *
 * cuBLAS is column-major. A row-major matrix M[r, c] with leading dimension ld is, read
 * column-major, the matrix M^T [c, r] with the same ld; so each row-major product is computed
 * as its transpose, which cuBLAS writes column-major, i.e. as the row-major result:
 *   forward          y[N,No] = x W^T     <=>  y^T [No,N]  = W [No,Ni]   x^T [Ni,N]
 *   backward input  dx[N,Ni] = dy W      <=>  dx^T[Ni,N]  = W^T [Ni,No] dy^T[No,N]
 *   backward weight dW[No,Ni] += dy^T x  <=>  dW^T[Ni,No] += x^T[Ni,N]  dy  [N,No]
 * (the stored W read column-major is W^T, so "W" above is op T on it; the same for dy).
 */
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cost.h"
#include "kernels/cuda/matmul_plan.h"
#include "kernels/precision.h"

/* CPU: memcpy(y + n*No, b, No floats) for every row n. */
static __global__ void __launch_bounds__(PT_THREADS)
    fill_rows_kernel(float *y, const float *b, int64_t total, int No) {
  PT_GRID_LOOP(i, total) y[i] = b[i % No];
}

/* CPU: op_add(y + n*No, res + n*No, b, No) for every row n: y = res + b (b NULL: y = res). */
static __global__ void __launch_bounds__(PT_THREADS)
    add_rows_kernel(float *y, const float *res, const float *b, int64_t total, int No) {
  PT_GRID_LOOP(i, total) y[i] = b ? res[i] + b[i % No] : res[i];
}

/* n floats to bf16 (round to nearest even) / bf16 to float (exact); in place for round. */
static __global__ void __launch_bounds__(PT_THREADS)
    to_bf16_kernel(uint16_t *dst, const float *src, int64_t n) {
  PT_GRID_LOOP(i, n) dst[i] = pt_bf16_bits(src[i]);
}
static __global__ void __launch_bounds__(PT_THREADS)
    from_bf16_kernel(float *dst, const uint16_t *src, int64_t n) {
  PT_GRID_LOOP(i, n) dst[i] = pt_bf16_float(src[i]);
}
static __global__ void __launch_bounds__(PT_THREADS) round_bf16_kernel(float *x, int64_t n) {
  PT_GRID_LOOP(i, n) x[i] = pt_round_bf16(x[i]);
}
/* Rounds and packs the n floats of x around a gap: x[0..lo) and x[lo + gap..n + gap) into
 * dst[0..n) (gap 0: all of x[0..n)); mark non-NULL: their finite check (finite_mark_kernel's). */
static __global__ void __launch_bounds__(PT_THREADS)
    round_pack_bf16_kernel(uint16_t *dst, float *x, int64_t n, int64_t lo, int64_t gap,
                           int *mark, int value) {
  int bad = 0;
  PT_GRID_LOOP(i, n) {
    const int64_t j = i < lo ? i : i + gap;
    const uint16_t h = pt_bf16_bits(x[j]);
    const float r = pt_bf16_float(h);
    dst[i] = h;
    x[j] = r;
    bad |= pt_dev_nonfinite(r);
  }
  if (bad && mark) atomicMax(mark, value); /* finite_mark_kernel's order-free max */
}
/* round_pack_bf16_kernel's packing alone: x's floats only read (their bits kept elsewhere). */
static __global__ void __launch_bounds__(PT_THREADS)
    pack_bf16_around_kernel(uint16_t *dst, const float *x, int64_t n, int64_t lo, int64_t gap) {
  PT_GRID_LOOP(i, n) dst[i] = pt_bf16_bits(x[i < lo ? i : i + gap]);
}

/* n floats of a product's operand to bf16 at dst. */
static void convert_operand(gpu_ctx *g, uint16_t *dst, const float *src, int64_t n) {
  /* a row of its own, apart from the storage's and the attention's packs (cuda_pack_bf16) */
  gpu_cost_note("to_bf16_kernel:operand", 0.0, 0.0, 6.0 * n);
  PT_LAUNCH(to_bf16_kernel, pt_grid(n), PT_THREADS, 0, g->stream, dst, src, n);
  PT_LAUNCH_CHECK();
}

/* A bf16 copy of n floats in *buf (capacity *cap elements, grown as needed). */
static const uint16_t *to_bf16(gpu_ctx *g, uint16_t **buf, size_t *cap, const float *src,
                               int64_t n) {
  if ((size_t)n > *cap) {
    if (*buf) {
      gpu_sync(g); /* products still queued may read the old copy */
      gpu_free(*buf);
    }
    *buf = (uint16_t *)gpu_alloc(g, sizeof(uint16_t) * (size_t)n);
    *cap = (size_t)n;
  }
  convert_operand(g, *buf, src, n);
  return *buf;
}

/* kernels.h share_bf16 and round_share_bf16: the copies kept in s->kept until the next
 * activation_copies, which grows kept when the last set asked for more than it holds (no copy
 * is in it then); an empty kept grows at once. */
static void kept_grow(gpu_ctx *g, cuda_bf16_scratch *s, size_t n) {
  if (s->kept) {
    gpu_sync(g); /* products still queued may read the old copies */
    gpu_free(s->kept);
  }
  s->kept = (uint16_t *)gpu_alloc(g, sizeof(uint16_t) * n);
  s->kept_cap = n;
}

/* Room for n more elements in kept (64-byte aligned), or NULL. */
static uint16_t *kept_take(gpu_ctx *g, cuda_bf16_scratch *s, int64_t n) {
  size_t at = (s->kept_used + 31) & ~(size_t)31, end = at + (size_t)n;
  if (end > s->kept_want) s->kept_want = end;
  if (end > s->kept_cap && s->kept_used == 0) kept_grow(g, s, end);
  if (end > s->kept_cap) return NULL;
  s->kept_used = end;
  return s->kept + at;
}

static_assert(PT_WEIGHT_COPY_RANGES <= 32, "cuda_bf16_scratch's masks have a bit a range");

static pt_weight_range *free_range(pt_weight_range *set) {
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++)
    if (!set[i].base) return &set[i];
  return NULL;
}

static pt_weight_range *acts_free_slot(cuda_bf16_scratch *s) { return free_range(s->acts.r); }

/* x's copy registered in slot, a free one of s->acts; values: x's floats are the copy's values
 * (s->values: a bias gradient may read the copy instead). */
static void acts_put(cuda_bf16_scratch *s, pt_weight_range *slot, const float *x,
                     const uint16_t *copy, int64_t n, int values) {
  weight_range_put(slot, x, copy, n);
  const unsigned bit = 1u << (slot - s->acts.r);
  s->values = values ? s->values | bit : s->values & ~bit;
}

extern "C" const uint16_t *cuda_bf16_values(const cuda_bf16_scratch *s, const float *x,
                                            int64_t n) {
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    const pt_weight_range *r = &s->acts.r[i];
    if ((s->values >> i & 1) && r->base && x >= r->base && x + n <= r->base + r->n)
      return r->copy + (x - r->base);
  }
  /* a place of values written or converted where acts had no free range for it */
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    const pt_weight_range *r = &s->shared[i];
    if ((s->into_done & s->shared_values) >> i & 1 && r->copy && x >= r->base &&
        x + n <= r->base + r->n)
      return r->copy + (x - r->base);
  }
  return NULL;
}

/* Shared range i has a place of its own (kernels.h share_bf16_into): the whole range converted
 * there once, by the first operand inside it, and registered as an activation copy where
 * there is room (else read from the place on every later call, which lands here again). */
static const uint16_t *shared_into(gpu_ctx *g, cuda_bf16_scratch *s, int i, const float *x) {
  const pt_weight_range *r = &s->shared[i];
  uint16_t *place = (uint16_t *)r->copy;
  if (!(s->into_done >> i & 1)) {
    convert_operand(g, place, r->base, r->n);
    s->into_done |= 1u << i;
    pt_weight_range *slot = acts_free_slot(s);
    if (slot) acts_put(s, slot, r->base, place, r->n, (int)(s->shared_values >> i & 1));
  }
  return place + (x - r->base);
}

/* An activation operand x[0..n) inside a shared range: converted once into kept (or the range's
 * own place) and registered as an activation copy, so the next product reading it does not
 * convert it again; NULL when outside every shared range or without room. */
static const uint16_t *shared_copy(gpu_ctx *g, cuda_bf16_scratch *s, const float *x, int64_t n) {
  int inside = 0, values = 1;
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    const pt_weight_range *r = &s->shared[i];
    int in = r->base && x >= r->base && x + n <= r->base + r->n;
    if (in && r->copy) return shared_into(g, s, i, x);
    inside |= in;
    if (in) values &= s->shared_values >> i & 1;
  }
  pt_weight_range *slot = inside ? acts_free_slot(s) : NULL;
  uint16_t *copy = slot ? kept_take(g, s, n) : NULL;
  if (!copy) return NULL;
  convert_operand(g, copy, x, n);
  acts_put(s, slot, x, copy, n, values);
  return copy;
}

/* Elements a column-major operand rows x cols with leading dimension ld spans. */
static int64_t extent(int rows, int cols, int ld) { return (int64_t)(cols - 1) * ld + rows; }

/* A product's A and B as the library reads them: the float32 tensors (s NULL), or bf16 copies
 * of them in s; a_weight: A is a layer's weight, read from its registered copy when s has one;
 * an activation operand (B, or A when not a weight) with a registered copy in s->acts reads it. */
struct operands {
  const void *a, *b;
  cudaDataType_t type;
};

static operands product_operands(gpu_ctx *g, cuda_bf16_scratch *s, cublasOperation_t ta,
                                 cublasOperation_t tb, int m, int n, int k, const float *A,
                                 int lda, const float *B, int ldb, int a_weight) {
  if (!s) return operands{A, B, CUDA_R_32F};
  int64_t na = ta == CUBLAS_OP_N ? extent(m, k, lda) : extent(k, m, lda);
  int64_t nb = tb == CUBLAS_OP_N ? extent(k, n, ldb) : extent(n, k, ldb);
  const uint16_t *a16 = weight_copies_find(a_weight ? &s->copies : &s->acts, A, na);
  const uint16_t *b16 = weight_copies_find(&s->acts, B, nb);
  if (!a16 && !a_weight) a16 = shared_copy(g, s, A, na);
  if (!b16) b16 = shared_copy(g, s, B, nb);
  if (!a16) a16 = to_bf16(g, &s->a, &s->cap_a, A, na);
  if (!b16) b16 = to_bf16(g, &s->b, &s->cap_b, B, nb);
  return operands{a16, b16, CUDA_R_16BF};
}

/* The ledger's row of a product: by precision and role (fwd, bwd_input, bwd_weight). The names
 * are those of the cuBLAS calls these products were before they went through cuBLASLt plans
 * (and still are where cuBLASLt has none): the roofline tables in docs/performance.md and the
 * kit's emulator ledger are keyed by them. */
typedef struct {
  const char *fp32, *tf32, *bf16;
} product_names;
static const product_names k_fwd = {"cublasSgemm:fwd", "cublasSgemm_tf32:fwd",
                                    "cublasGemmEx_bf16:fwd"};
static const product_names k_bwd_input = {"cublasSgemm:bwd_input", "cublasSgemm_tf32:bwd_input",
                                          "cublasGemmEx_bf16:bwd_input"};
static const product_names k_bwd_weight = {"cublasSgemm:bwd_weight",
                                           "cublasSgemm_tf32:bwd_weight",
                                           "cublasGemmEx_bf16:bwd_weight"};
/* Any role's product that cuBLASLt had no algorithm for, run by cuBLAS: a row of its own, so
 * that a GPU's ledger shows it beside the emulator's, which has none (scripts/ledger_compare.py):
 * cuBLAS picks its kernel by the pointers' alignment, which a layout moves (matmul_plan.h). */
static const product_names k_fallback = {"cublasSgemm:no_lt_algorithm",
                                         "cublasSgemm_tf32:no_lt_algorithm",
                                         "cublasGemmEx_bf16:no_lt_algorithm"};

/* A product's cost: 2 m n k FLOPs, on tensor cores for bf16 and TF32 (the handle's math mode,
 * kernels_gpu_set_precision), on the ordinary cores for pedantic float32; A and B read once at
 * their width (2 bytes bf16, else 4), C written (and read first when beta != 0). */
static void product_note(gpu_ctx *g, const product_names *names, int bf16, int m, int n, int k,
                         float beta) {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (!bf16) CUBLAS_CHECK(cublasGetMathMode(g->blas, &math));
  const int tf32 = !bf16 && math == CUBLAS_TF32_TENSOR_OP_MATH;
  const double flops = 2.0 * m * n * k, in = bf16 ? 2.0 : 4.0;
  const double bytes = in * ((double)m * k + (double)k * n) + 4.0 * m * n * (beta != 0.0f ? 2 : 1);
  const char *name = bf16 ? names->bf16 : tf32 ? names->tf32 : names->fp32;
  gpu_cost_note(name, bf16 || tf32 ? flops : 0.0, bf16 || tf32 ? 0.0 : flops, bytes);
}

/* --- cuBLASLt: products with an epilogue ----------------------------------------------------- */

/* A product through cuBLASLt, laid out as product()'s (column-major, alpha 1):
 *   D[m,n] = epilogue(op(A) op(B) + beta C + bias[m]),  C and D with leading dimension ldd
 * epilogue BIAS (or DEFAULT, no bias); GELU_AUX_BIAS (aux[m,n], leading dimension m, gets the
 * value before the GELU); DGELU (D = (op(A) op(B)) * gelu'(aux), aux read; D may be aux).
 * D16 (beta 0): D written there as bf16 instead, and GELU's aux to aux16 (bf16, cuBLASLt's aux
 * type being D's); the bias stays float32. */
struct lt_args {
  cublasLtEpilogue_t epilogue;
  cublasOperation_t ta, tb;
  int m, n, k;
  const float *A;
  int lda;
  const float *B;
  int ldb;
  float beta;
  const float *C; /* read when beta != 0 */
  float *D;
  int ldd;
  const float *bias; /* BIAS, GELU_AUX_BIAS */
  float *aux;        /* GELU_AUX_BIAS (written), DGELU (read) */
  uint16_t *D16 = NULL, *aux16 = NULL;
};

/* The ledger's row for one matmul (kernels/cuda/cost.h): the product on tensor cores (bf16,
 * TF32) or not (pedantic float32), the epilogue's few FLOPs per element of D elsewhere; bytes
 * of A and B at their width, C when read, D, the bias and aux. */
static void lt_note(const char *name, const lt_args &a, bool tensor, size_t width) {
  double mn = (double)a.m * a.n, product = 2.0 * mn * a.k;
  double per = (a.beta != 0.0f) + (a.bias != NULL) +
               (a.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? 10.0 : 0.0) +
               (a.epilogue == CUBLASLT_EPILOGUE_DGELU ? 16.0 : 0.0);
  const double out = a.D16 ? 2.0 : 4.0; /* D's and aux's width */
  double bytes = (double)width * ((double)a.m * a.k + (double)a.k * a.n) +
                 out * mn * (1.0 + (a.beta != 0.0f) + (a.aux || a.aux16)) + 4.0 * (a.bias ? a.m : 0);
  gpu_cost_note(name, tensor ? product : 0.0, (tensor ? 0.0 : product) + per * mn, bytes);
}

/* a's problem (kernels/cuda/matmul_plan.h) with operands of type `in`; matmul_plan_find sets
 * its alignments. */
static matmul_problem lt_problem(const lt_args &a, cudaDataType_t in, cublasComputeType_t compute) {
  matmul_problem p;
  memset(&p, 0, sizeof p);
  p.epilogue = a.epilogue, p.ta = a.ta, p.tb = a.tb;
  p.m = a.m, p.n = a.n, p.k = a.k, p.lda = a.lda, p.ldb = a.ldb, p.ldd = a.ldd;
  p.in = in, p.out = a.D16 ? CUDA_R_16BF : CUDA_R_32F, p.compute = compute;
  p.bias = a.bias != NULL;
  p.aux_ld = (a.aux || a.aux16) ? a.m : 0;
  return p;
}

/* Finds a's plan with operands o (at o.type), filling x; NULL: cuBLASLt has no algorithm. */
static const matmul_plan *lt_plan(gpu_ctx *g, const lt_args &a, const operands &o,
                                  cublasComputeType_t compute, matmul_operands &x) {
  void *D = a.D16 ? (void *)a.D16 : (void *)a.D;
  const void *C = a.beta != 0.0f ? (const void *)a.C : D;
  x = matmul_operands{o.a, o.b, a.beta, C, D, a.bias, a.D16 ? (void *)a.aux16 : (void *)a.aux};
  const matmul_problem p = lt_problem(a, o.type, compute);
  return matmul_plan_find(g, &p, &x);
}

/* Queues the product and returns 1, or returns 0 with no product queued when cuBLASLt has no
 * algorithm for it (its bf16 operands converted already: the unfused path that runs then finds
 * the shared ones kept and converts the others again). Float32 operands compute as
 * g->lt_compute says (pedantic float32, or TF32); s: bf16 copies of A and B, float32
 * accumulation. The operands are resolved first: the plan is chosen by their alignment. */
static int lt_product(gpu_ctx *g, cuda_bf16_scratch *s, const char *name, const lt_args &a) {
  const cublasComputeType_t compute = s ? CUBLAS_COMPUTE_32F : g->lt_compute;
  /* A is a layer's weight in every cuBLASLt product (forward, DGELU's input gradient) */
  operands o = product_operands(g, s, a.ta, a.tb, a.m, a.n, a.k, a.A, a.lda, a.B, a.ldb, 1);
  matmul_operands x;
  const matmul_plan *plan = lt_plan(g, a, o, compute, x);
  if (!plan) return 0;
  lt_note(name, a, s || compute == CUBLAS_COMPUTE_32F_FAST_TF32, s ? 2 : 4);
  matmul_plan_run(g, plan, &x);
  return 1;
}

/* C[m,n] = op(A)[m,k] op(B)[k,n] + beta C, column-major, alpha 1: float32 (s NULL) or with A and
 * B converted to bf16 into s and float32 accumulation. k > 0. a_weight: A is a layer's weight,
 * read from its bf16 copy when s has one. Through its cuBLASLt plan (kernels/cuda/matmul_plan.h:
 * the algorithm a function of the problem alone, so bitwise the same in every layout); cuBLAS
 * (cublasSgemm, cublasGemmEx) only for a problem cuBLASLt has no algorithm for. */
static void product(gpu_ctx *g, cuda_bf16_scratch *s, const product_names *names,
                    cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc, int a_weight) {
  const float one = 1.0f;
  operands o = product_operands(g, s, ta, tb, m, n, k, A, lda, B, ldb, a_weight);
  const lt_args a = {CUBLASLT_EPILOGUE_DEFAULT, ta, tb, m, n, k, A, lda, B, ldb, beta, C, C, ldc,
                     NULL, NULL};
  matmul_operands x;
  const matmul_plan *plan = lt_plan(g, a, o, s ? CUBLAS_COMPUTE_32F : g->lt_compute, x);
  product_note(g, plan ? names : &k_fallback, s != NULL, m, n, k, beta);
  if (plan) {
    matmul_plan_run(g, plan, &x);
    return;
  }
  if (!s) {
    CUBLAS_CHECK(cublasSgemm(g->blas, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
    return;
  }
  CUBLAS_CHECK(cublasGemmEx(g->blas, ta, tb, m, n, k, &one, o.a, o.type, lda, o.b, o.type, ldb,
                            &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The forward products through cuBLASLt: y^T [No, N] = epilogue(W x^T + beta C + b), laid out as
 * linear_gemm's; h: GELU_AUX_BIAS's pre-activation; y16 (and h16 with h): written there as
 * bf16 instead (lt_args' D16). 0: no algorithm, nothing queued. */
static int lt_forward(gpu_ctx *g, cuda_bf16_scratch *s, const char *name,
                      cublasLtEpilogue_t epilogue, float *y, uint16_t *y16, const float *res,
                      float *h, uint16_t *h16, const float *x, const float *W, const float *b,
                      int N, int Ni, int No) {
  lt_args a = {epilogue, CUBLAS_OP_T, CUBLAS_OP_N, No, N, Ni, W, Ni, x, Ni,
               res ? 1.0f : 0.0f, res, y, No, b, h, y16, h16};
  return Ni > 0 && lt_product(g, s, name, a);
}

/* y's bf16 bits written to y16 where the forward wrote y's floats instead (no algorithm for a
 * bf16 D): the place handed over gets what converting gives. */
static void pack_into(gpu_ctx *g, uint16_t *y16, const float *y, int64_t n) {
  if (y16) cuda_pack_bf16(g, y16, y, n);
}

/* y (column-major y^T [No, N], ldc No) = W x^T + beta y: m = No, n = N, k = Ni.
 *   A = W stored [No rows of Ni] = column-major [Ni, No], lda Ni, op T -> [No, Ni]: A(o,i) = W[o][i]
 *   B = x stored [N rows of Ni]  = column-major [Ni, N],  lda Ni, op N:            B(i,n) = x[n][i]
 *   C(o, n) = sum_i W[o][i] x[n][i] = y[n][o], at y + o + n*No. */
static void linear_gemm(gpu_ctx *g, cuda_bf16_scratch *s, float *y, const float *x,
                        const float *W, int N, int Ni, int No, float beta) {
  product(g, s, &k_fwd, CUBLAS_OP_T, CUBLAS_OP_N, No, N, Ni, W, Ni, x, Ni, beta, y, No, 1);
}

static void forward(gpu_ctx *g, cuda_bf16_scratch *s, float *y, uint16_t *y16, const float *x,
                    const float *W, const float *b, int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  if (y16 && lt_forward(g, s, b ? "cublasLt_bias:bf16" : "cublasLt:bf16",
                        b ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, y, y16, NULL, NULL,
                        NULL, x, W, b, N, Ni, No))
    return;
  if (b && lt_forward(g, s, "cublasLt_bias", CUBLASLT_EPILOGUE_BIAS, y, NULL, NULL, NULL, NULL, x,
                      W, b, N, Ni, No)) {
    pack_into(g, y16, y, (int64_t)N * No);
    return;
  }
  /* as the CPU: y pre-filled with the bias, then the product added (beta = 1) */
  float beta = 0.0f;
  if (b) {
    int64_t total = (int64_t)N * No;
    PT_LAUNCH_COSTED(fill_rows_kernel, pt_cost_of(0.0, 0.0, 4.0 * (total + No)), pt_grid(total),
                     PT_THREADS, 0, g->stream, y, b, total, No);
    PT_LAUNCH_CHECK();
    beta = 1.0f;
  }
  linear_gemm(g, s, y, x, W, N, Ni, No, beta);
  pack_into(g, y16, y, (int64_t)N * No);
}

static void forward_residual(gpu_ctx *g, cuda_bf16_scratch *s, float *y, const float *res,
                             const float *x, const float *W, const float *b, int N, int Ni,
                             int No) {
  if (N <= 0 || No <= 0) return;
  if (b && lt_forward(g, s, "cublasLt_bias_residual", CUBLASLT_EPILOGUE_BIAS, y, NULL, res, NULL,
                      NULL, x, W, b, N, Ni, No))
    return;
  int64_t total = (int64_t)N * No;
  const pt_cost cost = pt_cost_of(0.0, b ? (double)total : 0.0, 4.0 * (2.0 * total + (b ? No : 0)));
  PT_LAUNCH_COSTED(add_rows_kernel, cost, pt_grid(total), PT_THREADS, 0, g->stream, y, res, b,
                   total, No);
  PT_LAUNCH_CHECK();
  linear_gemm(g, s, y, x, W, N, Ni, No, 1.0f);
}

/* dx^T [Ni, N] (=|+=) W^T dy^T: m = Ni, n = N, k = No.
 *   A = W stored [No rows of Ni] = column-major [Ni, No], lda Ni, op N: A(i,o) = W[o][i]
 *   B = dy stored [N rows of No] = column-major [No, N], ldb No, op N:  B(o,n) = dy[n][o]
 *   C(i, n) = sum_o W[o][i] dy[n][o] = dx[n][i], at dx + i + n*Ni. */
static void backward_input(gpu_ctx *g, cuda_bf16_scratch *s, float *dx, const float *dy,
                           const float *W, int N, int Ni, int No, int acc) {
  if (N <= 0 || Ni <= 0) return;
  product(g, s, &k_bwd_input, CUBLAS_OP_N, CUBLAS_OP_N, Ni, N, No, W, Ni, dy, No,
          acc ? 1.0f : 0.0f, dx, Ni, 1);
}

/* backward_input (acc 0) with dx written as bf16 to dx16 only, through cuBLASLt's bf16 D (the
 * same layout); where it has no algorithm, the floats and their bits packed there after. */
static void backward_input_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dx, uint16_t *dx16,
                                const float *dy, const float *W, int N, int Ni, int No) {
  if (N <= 0 || Ni <= 0) return;
  lt_args a = {CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_OP_N, CUBLAS_OP_N, Ni, N, No, W, Ni, dy, No,
               0.0f, NULL, dx, Ni, NULL, NULL, dx16, NULL};
  if (No > 0 && lt_product(g, s, "cublasLt_bwd_input:bf16", a)) return;
  backward_input(g, s, dx, dy, W, N, Ni, No, 0);
  pack_into(g, dx16, dx, (int64_t)N * Ni);
}

/* h = x W^T + b and y = gelu(h) in one matmul (GELU_AUX_BIAS), else the two calls. y16 and h16
 * (both or neither: cuBLASLt's aux has D's type): y and h written there as bf16 only; where the
 * floats were written instead, their bits are packed there after. */
static void forward_gelu(gpu_ctx *g, cuda_bf16_scratch *s, float *y, uint16_t *y16, float *h,
                         uint16_t *h16, const float *x, const float *W, const float *b, int N,
                         int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  if (b && y16 && h16 &&
      lt_forward(g, s, "cublasLt_gelu_aux_bias:bf16", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, y, y16,
                 NULL, h, h16, x, W, b, N, Ni, No))
    return;
  if (!(b && lt_forward(g, s, "cublasLt_gelu_aux_bias", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, y, NULL,
                        NULL, h, NULL, x, W, b, N, Ni, No))) {
    forward(g, s, h, NULL, x, W, b, N, Ni, No);
    cuda_op_gelu_forward(g, y, h, (int64_t)N * No);
  }
  pack_into(g, y16, y, (int64_t)N * No);
  pack_into(g, h16, h, (int64_t)N * No);
}

/* dh = (dy W) * gelu'(h), laid out as backward_input's, in one matmul (DGELU, D = dh, aux = h:
 * dh may be h), else the product into scratch and the gelu backward kernel. h16 (h's floats
 * left at rest, its bf16 copy) and dh16 (dh's place handed over alone): one matmul with a bf16
 * D and aux (dh16 may be h16); with h16 alone, or no algorithm for that, h is widened from h16
 * first and dh's bits packed to dh16 after. */
static void backward_input_gelu(gpu_ctx *g, cuda_bf16_scratch *s, float *dh, uint16_t *dh16,
                                const float *dy, const float *W, float *h, const uint16_t *h16,
                                float *scratch, int N, int Ni, int No) {
  if (N <= 0 || Ni <= 0) return;
  lt_args a = {CUBLASLT_EPILOGUE_DGELU, CUBLAS_OP_N, CUBLAS_OP_N, Ni, N, No, W, Ni, dy, No,
               0.0f, NULL, dh, Ni, NULL, h, dh16, (uint16_t *)h16};
  const int64_t n = (int64_t)N * Ni;
  if (No > 0 && h16 && dh16 && lt_product(g, s, "cublasLt_dgelu:bf16", a)) return;
  if (h16) cuda_unpack_bf16(g, h, h16, n);
  a.D16 = a.aux16 = NULL;
  if (!(No > 0 && lt_product(g, s, "cublasLt_dgelu", a))) {
    backward_input(g, s, scratch, dy, W, N, Ni, No, 0);
    cuda_op_gelu_backward(g, dh, scratch, h, n);
  }
  pack_into(g, dh16, dh, n);
}

/* dW^T [Ni, No] += x^T dy: m = Ni, n = No, k = N.
 *   A = x stored [N rows of Ni]  = column-major [Ni, N], lda Ni, op N:        A(i,n) = x[n][i]
 *   B = dy stored [N rows of No] = column-major [No, N], ldb No, op T -> [N, No]: B(n,o) = dy[n][o]
 *   C(i, o) = sum_n x[n][i] dy[n][o] = dW[o][i], at dW + i + o*Ni.
 * The bias gradient sums dy's floats in both modes; under bf16 it reads them from dy's copy
 * where that copy holds their values (s->values: the same floats, 2 bytes an element), such as
 * the conversion the product has just kept when dy lies in a shared range of bf16 values. */
static void backward_weight(gpu_ctx *g, cuda_bf16_scratch *s, float *dW, float *db,
                            const float *dy, const float *x, int N, int Ni, int No) {
  if (N <= 0 || No <= 0) return;
  if (Ni > 0)
    product(g, s, &k_bwd_weight, CUBLAS_OP_N, CUBLAS_OP_T, Ni, No, N, x, Ni, dy, No, 1.0f, dW, Ni,
            0);
  const uint16_t *dy16 = s && db ? cuda_bf16_values(s, dy, (int64_t)N * No) : NULL;
  if (dy16) cuda_op_colsum_acc_bf16(g, db, dy16, N, No);
  else if (db) cuda_op_colsum_acc(g, db, dy, N, No);
}

extern "C" void cuda_op_linear_forward(gpu_ctx *g, float *y, const float *x, const float *W,
                                       const float *b, int N, int Ni, int No) {
  forward(g, NULL, y, NULL, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_forward_residual(gpu_ctx *g, float *y, const float *res,
                                                const float *x, const float *W, const float *b,
                                                int N, int Ni, int No) {
  forward_residual(g, NULL, y, res, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_backward_input(gpu_ctx *g, float *dx, const float *dy,
                                              const float *W, int N, int Ni, int No, int acc) {
  backward_input(g, NULL, dx, dy, W, N, Ni, No, acc);
}

extern "C" void cuda_op_linear_backward_weight(gpu_ctx *g, float *dW, float *db, const float *dy,
                                               const float *x, int N, int Ni, int No) {
  backward_weight(g, NULL, dW, db, dy, x, N, Ni, No);
}

extern "C" void cuda_op_linear_forward_gelu(gpu_ctx *g, cuda_bf16_scratch *s, float *y,
                                            uint16_t *y16, float *h, uint16_t *h16,
                                            const float *x, const float *W, const float *b,
                                            int N, int Ni, int No) {
  forward_gelu(g, s, y, y16, h, h16, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_backward_input_gelu(gpu_ctx *g, cuda_bf16_scratch *s, float *dh,
                                                   uint16_t *dh16, const float *dy,
                                                   const float *W, float *h,
                                                   const uint16_t *h16, float *scratch, int N,
                                                   int Ni, int No) {
  backward_input_gelu(g, s, dh, dh16, dy, W, h, h16, scratch, N, Ni, No);
}

/* --- bf16 ------------------------------------------------------------------------------- */

extern "C" void cuda_op_linear_forward_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *y,
                                            uint16_t *y16, const float *x, const float *W,
                                            const float *b, int N, int Ni, int No) {
  forward(g, s, y, y16, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_forward_residual_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *y,
                                                     const float *res, const float *x,
                                                     const float *W, const float *b, int N,
                                                     int Ni, int No) {
  forward_residual(g, s, y, res, x, W, b, N, Ni, No);
}

extern "C" void cuda_op_linear_backward_input_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dx,
                                                   uint16_t *dx16, const float *dy,
                                                   const float *W, int N, int Ni, int No,
                                                   int acc) {
  if (dx16 && !acc) backward_input_bf16(g, s, dx, dx16, dy, W, N, Ni, No);
  else backward_input(g, s, dx, dy, W, N, Ni, No, acc);
}

extern "C" void cuda_op_linear_backward_weight_bf16(gpu_ctx *g, cuda_bf16_scratch *s, float *dW,
                                                    float *db, const float *dy, const float *x,
                                                    int N, int Ni, int No) {
  backward_weight(g, s, dW, db, dy, x, N, Ni, No);
}

extern "C" void cuda_bf16_scratch_free(cuda_bf16_scratch *s) {
  if (s->a) gpu_free(s->a);
  if (s->b) gpu_free(s->b);
  if (s->kept) gpu_free(s->kept);
  *s = cuda_bf16_scratch{};
}

extern "C" void cuda_bf16_acts_reset(gpu_ctx *g, cuda_bf16_scratch *s, const pt_weight_range *r,
                                     int n) {
  s->acts = pt_weight_copies{};
  for (int i = 0; i < n && i < PT_WEIGHT_COPY_RANGES; i++) s->acts.r[i] = r[i];
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    weight_range_put(&s->shared[i], NULL, NULL, 0);
    weight_range_put(&s->exact[i], NULL, NULL, 0);
  }
  s->into_done = s->shared_values = 0;
  s->pending = 0;
  s->values = (1u << (n < PT_WEIGHT_COPY_RANGES ? n : PT_WEIGHT_COPY_RANGES)) - 1u;
  if (s->kept_want > s->kept_cap) kept_grow(g, s, s->kept_want);
  s->kept_used = 0;
}

extern "C" void cuda_bf16_share(cuda_bf16_scratch *s, const float *x, int64_t n,
                                uint16_t *place, int alone, int values) {
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++)
    if (!s->shared[i].base) {
      weight_range_put(&s->shared[i], x, place, n);
      s->into_done &= ~(1u << i);
      s->shared_values = (s->shared_values & ~(1u << i)) | (values ? 1u << i : 0u);
      s->into_alone = (s->into_alone & ~(1u << i)) | (alone && place ? 1u << i : 0u);
      return;
    }
}

extern "C" void cuda_bf16_share_into(gpu_ctx *g, cuda_bf16_scratch *s, const float *x, int64_t n,
                                     uint16_t *place, int alone) {
  if (place) {
    cuda_bf16_share(s, x, n, place, alone, 0);
    return;
  }
  /* room kept, taken now (an empty kept grows at once); without it, not shared at all, so the
   * caller's fallback (packing x after) is today's path bit for bit */
  uint16_t *room = acts_free_slot(s) ? kept_take(g, s, n) : NULL;
  if (room) cuda_bf16_share(s, x, n, room, alone, 1);
}

extern "C" int cuda_bf16_shared_into_done(const cuda_bf16_scratch *s, const float *x) {
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++)
    if (s->shared[i].base == x && s->shared[i].copy) return (int)(s->into_done >> i & 1);
  return 0;
}

/* The range lying whole in x[0..n) that starts first, or NULL, of those round_share leaves out:
 * the exact ones and the places with room kept written or converted already (shared_values:
 * their floats stand for those bits, cuda_bf16_share_into). */
static const pt_weight_range *exact_within(const cuda_bf16_scratch *s, const float *x, int64_t n) {
  const pt_weight_range *first = NULL;
  for (int i = 0; i < 2 * PT_WEIGHT_COPY_RANGES; i++) {
    const int j = i % PT_WEIGHT_COPY_RANGES;
    const pt_weight_range *r = i < PT_WEIGHT_COPY_RANGES ? &s->exact[j] : &s->shared[j];
    if (i >= PT_WEIGHT_COPY_RANGES && !((s->into_done & s->shared_values) >> j & 1)) continue;
    if (r->base && r->base >= x && r->base + r->n <= x + n && (!first || r->base < first->base))
      first = r;
  }
  return first;
}

static int acts_free_slots(const cuda_bf16_scratch *s) {
  int n = 0;
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) n += !s->acts.r[i].base;
  return n;
}

/* round_pack_bf16_kernel over the n floats around a gap; unset: their bits packed alone
 * (pack_bf16_around_kernel), the floats left unset. */
static void round_pack_launch(gpu_ctx *g, uint16_t *dst, float *x, int64_t n, int64_t lo,
                              int64_t gap, int unset, int *mark, int value) {
  if (n <= 0) return;
  if (unset) {
    PT_LAUNCH_COSTED(pack_bf16_around_kernel, pt_cost_of(0.0, 0.0, 6.0 * n), pt_grid(n),
                     PT_THREADS, 0, g->stream, dst, x, n, lo, gap);
  } else { /* the check (mark): finite_mark_kernel's FLOP a float, its read of x free */
    PT_LAUNCH_COSTED(round_pack_bf16_kernel, pt_cost_of(0.0, mark ? (double)n : 0.0, 10.0 * n),
                     pt_grid(n), PT_THREADS, 0, g->stream, dst, x, n, lo, gap, mark, value);
  }
  PT_LAUNCH_CHECK();
  if (!unset) return;
  cuda_unset_f32(g, x, lo);
  cuda_unset_f32(g, x + lo + gap, n - lo);
}

/* round_share_bf16 of x[0..lo) and of the tail floats after a gap of gap floats left as they
 * are, in one pass; each side its own range of copies. */
static void round_share_around(gpu_ctx *g, cuda_bf16_scratch *s, float *x, int64_t lo,
                               int64_t gap, int64_t tail, int unset) {
  const int ranges = (lo > 0) + (tail > 0);
  uint16_t *copy = ranges && acts_free_slots(s) >= ranges ? kept_take(g, s, lo + tail) : NULL;
  if (!copy) {
    cuda_round_bf16(g, x, lo);
    cuda_round_bf16(g, x + lo + gap, tail);
    return;
  }
  round_pack_launch(g, copy, x, lo + tail, lo, gap, unset, NULL, 0);
  if (lo > 0) acts_put(s, acts_free_slot(s), x, copy, lo, 1);
  if (tail > 0) acts_put(s, acts_free_slot(s), x + lo + gap, copy + lo, tail, 1);
}

extern "C" void cuda_bf16_round_share(gpu_ctx *g, cuda_bf16_scratch *s, float *x, int64_t n,
                                      int unset) {
  /* floats that are bf16 values already, their bits kept (exact): only the floats around them */
  const pt_weight_range *e = n > 0 ? exact_within(s, x, n) : NULL;
  if (!e) {
    round_share_around(g, s, x, n > 0 ? n : 0, 0, 0, unset);
    return;
  }
  const int64_t lo = e->base - x, hi = lo + e->n;
  if (exact_within(s, x + hi, n - hi)) { /* more than one: before the first, then the rest */
    round_share_around(g, s, x, lo, 0, 0, unset);
    cuda_bf16_round_share(g, s, x + hi, n - hi, unset);
    return;
  }
  round_share_around(g, s, x, lo, e->n, n - hi, unset);
}

extern "C" const uint16_t *cuda_bf16_shared_operand(gpu_ctx *g, cuda_bf16_scratch *s,
                                                     const float *x, int64_t n) {
  return shared_copy(g, s, x, n);
}

/* 1 when a place given now could be kept (keep_copy, keep_result) beside those still pending. */
static int room_to_keep(const cuda_bf16_scratch *s) {
  int exact = 0;
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) exact += !s->exact[i].base;
  return acts_free_slots(s) > s->pending && exact > s->pending;
}

extern "C" uint16_t *cuda_bf16_take_place(cuda_bf16_scratch *s, const float *x, int64_t n,
                                          int alone) {
  if (!room_to_keep(s)) return NULL;
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++) {
    const pt_weight_range *r = &s->shared[i];
    if (r->base == x && r->copy && n <= r->n && !(s->into_done >> i & 1) &&
        (!alone || (s->into_alone >> i & 1))) {
      s->into_done |= 1u << i;
      s->pending++;
      return (uint16_t *)r->copy;
    }
  }
  return NULL;
}

extern "C" uint16_t *cuda_bf16_keep_room(gpu_ctx *g, cuda_bf16_scratch *s, int64_t n) {
  uint16_t *room = n > 0 && room_to_keep(s) ? kept_take(g, s, n) : NULL;
  s->pending += room != NULL;
  return room;
}

/* cuda_bf16_keep_copy; values: x's floats are copy widened (acts_put). */
static void keep_copy(cuda_bf16_scratch *s, const float *x, const uint16_t *copy, int64_t n,
                      int values) {
  pt_weight_range *slot = acts_free_slot(s);
  if (!slot) pt_fatal("cuda_bf16_keep_copy: no free range (take_place or keep_room gave room)");
  acts_put(s, slot, x, copy, n, values);
  if (s->pending > 0) s->pending--;
}

extern "C" void cuda_bf16_keep_copy(cuda_bf16_scratch *s, const float *x, const uint16_t *copy,
                                    int64_t n) {
  int values = 0; /* a place with room kept stands for x's values (cuda_bf16_share_into) */
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++)
    if (s->shared[i].base == x && s->shared[i].copy == copy) values = s->shared_values >> i & 1;
  keep_copy(s, x, copy, n, values);
}

extern "C" int cuda_bf16_keep_values(cuda_bf16_scratch *s, const float *x, const uint16_t *copy,
                                     int64_t n) {
  if (acts_free_slots(s) <= s->pending) return 0;
  acts_put(s, acts_free_slot(s), x, copy, n, 1);
  return 1;
}

extern "C" void cuda_bf16_keep_result(cuda_bf16_scratch *s, const float *x, const uint16_t *copy,
                                      int64_t n) {
  pt_weight_range *e = free_range(s->exact);
  if (!e) pt_fatal("cuda_bf16_keep_result: no free exact range (keep_room gave room)");
  keep_copy(s, x, copy, n, 1);
  weight_range_put(e, x, copy, n);
}

/* Forgets every range of set overlapping x[0..n). */
static void ranges_forget(pt_weight_range *set, const float *x, int64_t n) {
  for (int i = 0; i < PT_WEIGHT_COPY_RANGES; i++)
    if (set[i].base && x < set[i].base + set[i].n && set[i].base < x + n)
      weight_range_put(&set[i], NULL, NULL, 0);
}

extern "C" void cuda_bf16_forget(cuda_bf16_scratch *s, const float *x, int64_t n) {
  ranges_forget(s->acts.r, x, n);
  ranges_forget(s->exact, x, n);
}

extern "C" void cuda_round_bf16(gpu_ctx *g, float *x, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(round_bf16_kernel, pt_cost_elementwise(n, 1, 1, 0), pt_grid(n), PT_THREADS, 0,
                   g->stream, x, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_pack_bf16(gpu_ctx *g, uint16_t *dst, const float *src, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(to_bf16_kernel, pt_cost_of(0.0, 0.0, 6.0 * n), pt_grid(n), PT_THREADS, 0,
                   g->stream, dst, src, n);
  PT_LAUNCH_CHECK();
}

extern "C" void cuda_round_pack_bf16(gpu_ctx *g, uint16_t *dst, float *x, int64_t n, int *mark,
                                     int value) {
  round_pack_launch(g, dst, x, n, n, 0, 0, mark, value);
}

extern "C" void cuda_unpack_bf16(gpu_ctx *g, float *dst, const uint16_t *src, int64_t n) {
  if (n <= 0) return;
  PT_LAUNCH_COSTED(from_bf16_kernel, pt_cost_of(0.0, 0.0, 6.0 * n), pt_grid(n), PT_THREADS, 0,
                   g->stream, dst, src, n);
  PT_LAUNCH_CHECK();
}
