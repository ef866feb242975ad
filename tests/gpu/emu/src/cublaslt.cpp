/* cuBLASLt on OpenBLAS (include/cublasLt.h): descriptors as plain objects, each call's problem
 * checked the way cuBLASLt checks it (the statuses it returns), the matrices' extents checked
 * against their device blocks, and the matmul queued on the stream it names: the product with
 * cublas.cpp's gemm (float32 accumulation, bf16 widened exactly, TF32 rounded), then beta C, the
 * bias and the epilogue element by element in float32, D (and GELU's aux, of D's type) stored
 * at their type: a bf16 one rounded to nearest even, as the library converts its float32
 * result. The epilogue's GELU is the tanh approximation
 * computed with the C library's tanhf: like the library's own, not bitwise pipetrain's
 * (kernels/cuda/ops_activation.cu), so the comparisons with the CPU table keep tolerances. */
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "blas.h"
#include "cublasLt.h"
#include "internal.h"
#include "memory.h"
#include "streams.h"

struct pt_emu_cublaslt {
  int unused;
};
struct pt_emu_lt_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr, *aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1, aux_type = -1; /* -1: D's type (cuBLASLt's defaults) */
};
struct pt_emu_lt_layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct pt_emu_lt_pref {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256}; /* MIN_ALIGNMENT_{A,B,C,D}_BYTES */
};

namespace pt_emu {
namespace {
std::unordered_set<const void *> g_lt_live; /* handles and descriptors not yet destroyed */

const uint64_t ALGO_MAGIC = 0x70745f656d755f6cull; /* "pt_emu_l": an algorithm from here */

/* One matmul, from a descriptor, four layouts and (for the run) the pointers. */
struct lt_problem {
  const pt_emu_lt_desc *op;
  const pt_emu_lt_layout *a, *b, *c, *d;
  int m, n, k;
};

bool live(const void *p) { return p && g_lt_live.count(p); }

template <class T> cublasStatus_t create(const char *what, const char *file, int line, T **out) {
  api_enter(what, file, line);
  if (!out) return CUBLAS_STATUS_INVALID_VALUE;
  *out = new T{};
  g_lt_live.insert(*out);
  return CUBLAS_STATUS_SUCCESS;
}

template <class T> cublasStatus_t destroy(const char *what, const char *file, int line, T *p) {
  api_enter(what, file, line);
  if (!g_lt_live.erase(p)) return CUBLAS_STATUS_INVALID_VALUE;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

bool is_bias(uint32_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool is_aux(uint32_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU; }

cudaDataType_t bias_type(const pt_emu_lt_desc *o, const pt_emu_lt_layout *d) {
  return o->bias_type < 0 ? d->type : static_cast<cudaDataType_t>(o->bias_type);
}
cudaDataType_t aux_type(const pt_emu_lt_desc *o, const pt_emu_lt_layout *d) {
  return o->aux_type < 0 ? d->type : static_cast<cudaDataType_t>(o->aux_type);
}

/* The types the emulator runs: float32 or bf16 operands (both the same), float32 scale; C and D
 * of one type, float32, or bf16 for bf16 operands; float32 compute (pedantic, or TF32 inputs for
 * float32 operands). A bias of D's type or float32 (cuBLASLt takes a float32 bias beside a
 * 16-bit D); GELU's aux of D's type only (cublasLt.h: other aux types are fp8 kernels'). */
bool types_supported(const lt_problem &p) {
  const cublasComputeType_t c = p.op->compute;
  const bool f32 = p.a->type == CUDA_R_32F && p.b->type == CUDA_R_32F;
  const bool bf16 = p.a->type == CUDA_R_16BF && p.b->type == CUDA_R_16BF;
  const cudaDataType_t d = p.d->type;
  if (p.op->scale != CUDA_R_32F || p.c->type != d) return false;
  if (d != CUDA_R_32F && !(bf16 && d == CUDA_R_16BF)) return false;
  const cudaDataType_t bt = bias_type(p.op, p.d);
  if (bt != d && bt != CUDA_R_32F) return false;
  if (aux_type(p.op, p.d) != d) return false;
  if (bf16) return c == CUBLAS_COMPUTE_32F;
  return f32 && (c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_PEDANTIC ||
                 c == CUBLAS_COMPUTE_32F_FAST_TF32);
}

bool ld_ok(const pt_emu_lt_layout *l) {
  return l->ld >= (l->rows > 1 ? static_cast<int64_t>(l->rows) : 1);
}

/* cuBLASLt's checks of a problem: shapes that agree, the epilogue's pointers; NOT_SUPPORTED
 * for what it has no algorithm for. Fills m, n, k. */
cublasStatus_t check_problem(lt_problem &p) {
  const pt_emu_lt_desc *o = p.op;
  if (o->ta != CUBLAS_OP_N && o->ta != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
  if (o->tb != CUBLAS_OP_N && o->tb != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
  const bool na = o->ta == CUBLAS_OP_N, nb = o->tb == CUBLAS_OP_N;
  const uint64_t m = p.d->rows, n = p.d->cols, k = na ? p.a->cols : p.a->rows;
  if ((na ? p.a->rows : p.a->cols) != m || (nb ? p.b->rows : p.b->cols) != k ||
      (nb ? p.b->cols : p.b->rows) != n || p.c->rows != m || p.c->cols != n)
    return CUBLAS_STATUS_INVALID_VALUE; /* op(A) m x k, op(B) k x n, C and D m x n */
  if (!ld_ok(p.a) || !ld_ok(p.b) || !ld_ok(p.c) || !ld_ok(p.d)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  if (!types_supported(p)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t e = o->epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && !is_bias(e) && !is_aux(e)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (is_bias(e) && !o->bias) return CUBLAS_STATUS_INVALID_VALUE;
  if (is_aux(e) && (!o->aux || o->aux_ld < static_cast<int64_t>(m)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (is_aux(e) && o->aux_ld % 8 != 0) return CUBLAS_STATUS_NOT_SUPPORTED; /* cublasLt.h: "must be divisible by 8" */
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_objects(const void *handle, lt_problem &p) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!live(p.op) || !live(p.a) || !live(p.b) || !live(p.c) || !live(p.d))
    return CUBLAS_STATUS_INVALID_VALUE;
  return check_problem(p);
}

/* What an algorithm is for: the heuristic stamps it, the matmul compares. */
uint64_t problem_key(const lt_problem &p) {
  const uint64_t parts[] = {static_cast<uint64_t>(p.m), static_cast<uint64_t>(p.n),
                            static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.op->ta),
                            static_cast<uint64_t>(p.op->tb), p.op->epilogue,
                            static_cast<uint64_t>(p.op->compute), static_cast<uint64_t>(p.a->type),
                            static_cast<uint64_t>(p.d->type),
                            static_cast<uint64_t>(bias_type(p.op, p.d))};
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : parts) h = (h ^ v) * 1099511628211ull;
  return h;
}

float gelu(float x) {
  const float t = std::tanh(0.7978845608f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}
float gelu_grad(float x) {
  const float t = std::tanh(0.7978845608f * (x + 0.044715f * x * x * x));
  const float dt = 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dt;
}

size_t elem_size(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

/* The largest power of two dividing v, at most 256 (0: 256). */
uint64_t pow2_of(uint64_t v) {
  uint64_t a = 1;
  while (a < 256 && v % (2 * a) == 0) a *= 2;
  return a;
}

/* The alignment each of A, B, C, D's pointers must have for the algorithm the heuristic picks
 * under preference alignments `pref`: the preference's, lowered where the matrix's leading
 * dimension in bytes is less aligned (the heuristic sees the ld, and picks an algorithm that
 * takes it). Packed 16 bits a matrix, A lowest. */
uint64_t assumed_alignment(const uint32_t pref[4], const lt_problem &p) {
  const pt_emu_lt_layout *l[4] = {p.a, p.b, p.c, p.d};
  uint64_t packed = 0;
  for (int i = 0; i < 4; i++) {
    const uint64_t ld_bytes = static_cast<uint64_t>(l[i]->ld) * elem_size(l[i]->type);
    const uint64_t a = pow2_of(pref[i]), ld = pow2_of(ld_bytes);
    packed |= (a < ld ? a : ld) << (16 * i);
  }
  return packed;
}

/* The parts the emulator's algorithm splits k into: one, and one more for each doubling beyond
 * 16 bytes and each halving below it of each alignment the heuristic was told (A and B's vector
 * loads, C and D's stores), so that any change of those picks another algorithm
 * (run_split_k). A real heuristic's choice may move with them, and an activation's or weight's
 * address moves with the layout: pipetrain tells at most 16 (kernels/cuda/matmul_plan.h), the
 * same in every layout, so that a product's bits depend on the problem alone. */
int split_parts(uint64_t packed) {
  int parts = 1;
  for (int i = 0; i < 4; i++) {
    const uint64_t a = (packed >> (16 * i)) & 0xffff;
    for (uint64_t v = a; v > 16; v /= 2) parts++;
    for (uint64_t v = a; v && v < 16; v *= 2) parts++;
  }
  return parts;
}

bool aligned(uint64_t packed, const void *a, const void *b, const void *c, const void *d) {
  const void *ptr[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++) {
    const uint64_t need = (packed >> (16 * i)) & 0xffff;
    if (ptr[i] && need > 1 && reinterpret_cast<uintptr_t>(ptr[i]) % need != 0) return false;
  }
  return true;
}

/* Element i of a float32 or bf16 array (bf16 widened exactly), and its store (bf16 rounded to
 * nearest even; a NaN made quiet). */
float load(const void *p, cudaDataType_t t, int64_t i) {
  if (t != CUDA_R_16BF) return static_cast<const float *>(p)[i];
  uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t *>(p)[i]) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
void store(void *p, cudaDataType_t t, int64_t i, float v) {
  if (t != CUDA_R_16BF) {
    static_cast<float *>(p)[i] = v;
    return;
  }
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const uint32_t r = std::isnan(v) ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
  static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(r >> 16);
}

/* A queued matmul: everything read when it runs. */
struct lt_run {
  gemm g; /* alpha op(A) op(B) into a host buffer of its own */
  float beta;
  const void *C, *bias;
  void *D, *aux;
  int64_t ldc, ldd, aux_ld;
  uint32_t epilogue;
  cudaDataType_t d_type, bias_type; /* C's and aux's type is D's */
  int parts;                        /* the algorithm sums k in this many parts (run_split_k) */
};

/* Where op(A)'s or op(B)'s k-th slice starts, in bytes from the matrix: a column of an
 * untransposed A (m x k) or row of a transposed one; a row of an untransposed B (k x n). */
const void *k_offset(const void *p, bool k_is_column, int k, int ld, bool bf16) {
  const size_t elems = k_is_column ? static_cast<size_t>(k) * static_cast<size_t>(ld) : k;
  return static_cast<const char *>(p) + elems * (bf16 ? 2 : 4);
}

/* The product as an algorithm with another tiling sums it (split-K): each of `parts` slices of
 * k in float32, then added in order. Its bits differ from one pass's, as two real cuBLASLt
 * algorithms' do, so a choice of algorithm that moves with anything but the problem shows. */
void run_split_k(const gemm &g0, int parts, float *t) {
  const size_t mn = static_cast<size_t>(g0.m) * static_cast<size_t>(g0.n);
  std::vector<float> part(mn);
  for (int p = 0; p < parts; p++) {
    const int k0 = static_cast<int>(static_cast<int64_t>(g0.k) * p / parts);
    const int k1 = static_cast<int>(static_cast<int64_t>(g0.k) * (p + 1) / parts);
    gemm g = g0;
    g.k = k1 - k0, g.C = p == 0 ? t : part.data();
    g.A = k_offset(g0.A, g0.ta == CUBLAS_OP_N, k0, g0.lda, g0.bf16);
    g.B = k_offset(g0.B, g0.tb != CUBLAS_OP_N, k0, g0.ldb, g0.bf16);
    run(g);
    if (p > 0)
      for (size_t i = 0; i < mn; i++) t[i] += part[i];
  }
}

void run_lt(const lt_run &r) {
  const int m = r.g.m, n = r.g.n;
  std::vector<float> t(static_cast<size_t>(m) * static_cast<size_t>(n));
  gemm g = r.g;
  g.C = t.data();
  if (r.parts > 1 && g.k >= r.parts)
    run_split_k(g, r.parts, t.data());
  else
    run(g);
  const cudaDataType_t dt = r.d_type;
  for (int c = 0; c < n; c++)
    for (int i = 0; i < m; i++) {
      float v = t[static_cast<size_t>(c) * m + i];
      if (r.beta != 0.0f) v += r.beta * load(r.C, dt, c * r.ldc + i);
      if (r.bias) v += load(r.bias, r.bias_type, i);
      if (r.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        store(r.aux, dt, c * r.aux_ld + i, v);
        v = gelu(v);
      } else if (r.epilogue == CUBLASLT_EPILOGUE_DGELU) {
        v *= gelu_grad(load(r.aux, dt, c * r.aux_ld + i)); /* before D is written: D may be aux */
      }
      store(r.D, dt, c * r.ldd + i, v);
    }
}

void check_layout(const char *what, const void *p, const pt_emu_lt_layout *l, const char *file,
                  int line) {
  check_matrix(what, p, static_cast<int>(l->rows), static_cast<int>(l->cols),
               static_cast<int>(l->ld), 0, 1, file, line, elem_size(l->type));
}
} // namespace
} // namespace pt_emu

using namespace pt_emu;

extern "C" {

cublasStatus_t pt_emu_cublasLtCreate(const char *file, int line, cublasLtHandle_t *handle) {
  return create("cublasLtCreate", file, line, handle);
}

cublasStatus_t pt_emu_cublasLtDestroy(const char *file, int line, cublasLtHandle_t handle) {
  if (!live(handle)) return api_enter("cublasLtDestroy", file, line), CUBLAS_STATUS_NOT_INITIALIZED;
  return destroy("cublasLtDestroy", file, line, handle);
}

cublasStatus_t pt_emu_cublasLtMatmulDescCreate(const char *file, int line,
                                               cublasLtMatmulDesc_t *desc,
                                               cublasComputeType_t compute, cudaDataType_t scale) {
  cublasStatus_t st = create("cublasLtMatmulDescCreate", file, line, desc);
  if (st == CUBLAS_STATUS_SUCCESS) (*desc)->compute = compute, (*desc)->scale = scale;
  return st;
}

cublasStatus_t pt_emu_cublasLtMatmulDescDestroy(const char *file, int line,
                                                cublasLtMatmulDesc_t desc) {
  return destroy("cublasLtMatmulDescDestroy", file, line, desc);
}

/* The attribute's value from buf, which must hold exactly its type (cuBLASLt's rule). */
cublasStatus_t pt_emu_cublasLtMatmulDescSetAttribute(const char *file, int line,
                                                     cublasLtMatmulDesc_t desc,
                                                     cublasLtMatmulDescAttributes_t attr,
                                                     const void *buf, size_t size) {
  api_enter("cublasLtMatmulDescSetAttribute", file, line);
  if (!live(desc) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  void *field = nullptr;
  size_t want = 0;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: field = &desc->compute, want = sizeof(int32_t); break;
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE: field = &desc->scale, want = sizeof(int32_t); break;
  case CUBLASLT_MATMUL_DESC_TRANSA: field = &desc->ta, want = sizeof(int32_t); break;
  case CUBLASLT_MATMUL_DESC_TRANSB: field = &desc->tb, want = sizeof(int32_t); break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE: field = &desc->epilogue, want = sizeof(uint32_t); break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER: field = &desc->bias, want = sizeof(void *); break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: field = &desc->aux, want = sizeof(void *); break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: field = &desc->aux_ld, want = sizeof(int64_t); break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: field = &desc->aux_type, want = sizeof(int32_t); break;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: field = &desc->bias_type, want = sizeof(int32_t); break;
  }
  if (!field || size != want) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasLtMatrixLayoutCreate(const char *file, int line,
                                                 cublasLtMatrixLayout_t *layout,
                                                 cudaDataType_t type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  cublasStatus_t st = create("cublasLtMatrixLayoutCreate", file, line, layout);
  if (st == CUBLAS_STATUS_SUCCESS) **layout = pt_emu_lt_layout{type, rows, cols, ld};
  return st;
}

cublasStatus_t pt_emu_cublasLtMatrixLayoutDestroy(const char *file, int line,
                                                  cublasLtMatrixLayout_t layout) {
  return destroy("cublasLtMatrixLayoutDestroy", file, line, layout);
}

cublasStatus_t pt_emu_cublasLtMatmulPreferenceCreate(const char *file, int line,
                                                     cublasLtMatmulPreference_t *pref) {
  return create("cublasLtMatmulPreferenceCreate", file, line, pref);
}

cublasStatus_t pt_emu_cublasLtMatmulPreferenceDestroy(const char *file, int line,
                                                      cublasLtMatmulPreference_t pref) {
  return destroy("cublasLtMatmulPreferenceDestroy", file, line, pref);
}

cublasStatus_t pt_emu_cublasLtMatmulPreferenceSetAttribute(
    const char *file, int line, cublasLtMatmulPreference_t pref,
    cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t size) {
  api_enter("cublasLtMatmulPreferenceSetAttribute", file, line);
  if (!live(pref) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == sizeof(uint64_t)) {
    std::memcpy(&pref->max_workspace, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK && size == sizeof(uint32_t))
    return CUBLAS_STATUS_SUCCESS;
  const int which = static_cast<int>(attr) - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
  if (which >= 0 && which < 4 && size == sizeof(uint32_t)) {
    std::memcpy(&pref->align[which], buf, size);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t pt_emu_cublasLtMatmulAlgoGetHeuristic(
    const char *file, int line, cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
    cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
    cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned) {
  api_enter("cublasLtMatmulAlgoGetHeuristic", file, line);
  if (!live(pref) || requested < 1 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  lt_problem p{op, A, B, C, D, 0, 0, 0};
  cublasStatus_t st = check_objects(handle, p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  g_counters.heuristics++;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = ALGO_MAGIC;
  results[0].algo.data[1] = problem_key(p);
  results[0].algo.data[2] = assumed_alignment(pref->align, p);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t pt_emu_cublasLtMatmul(const char *file, int line, cublasLtHandle_t handle,
                                     cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t Adesc, const void *B,
                                     cublasLtMatrixLayout_t Bdesc, const void *beta,
                                     const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                     cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                                     void *workspace, size_t workspaceSize, cudaStream_t stream) {
  const char *what = "cublasLtMatmul";
  api_enter(what, file, line);
  lt_problem p{op, Adesc, Bdesc, Cdesc, Ddesc, 0, 0, 0};
  cublasStatus_t st = check_objects(handle, p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo && (algo->data[0] != ALGO_MAGIC || algo->data[1] != problem_key(p)))
    return CUBLAS_STATUS_INVALID_VALUE; /* an algorithm the heuristic gave another problem */
  static const uint32_t k_default_align[4] = {256, 256, 256, 256};
  if (!aligned(algo ? algo->data[2] : assumed_alignment(k_default_align, p), A, B, C, D))
    return CUBLAS_STATUS_NOT_SUPPORTED; /* a pointer less aligned than the algorithm assumes */
  if (workspaceSize > 0) require_device("cuBLASLt workspace", workspace, workspaceSize, file, line);
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  lt_run r{};
  r.g = gemm{static_cast<cublasOperation_t>(op->ta), static_cast<cublasOperation_t>(op->tb),
             p.m, p.n, p.k, static_cast<int>(Adesc->ld), static_cast<int>(Bdesc->ld), p.m, 1,
             *static_cast<const float *>(alpha), 0.0f, A, B, nullptr, 0, 0, 0};
  r.g.bf16 = Adesc->type == CUDA_R_16BF;
  r.g.tf32 = op->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  r.beta = *static_cast<const float *>(beta); /* host pointer mode: read when called */
  r.C = C, r.D = D;
  r.ldc = Cdesc->ld, r.ldd = Ddesc->ld, r.epilogue = op->epilogue;
  r.d_type = Ddesc->type, r.bias_type = bias_type(op, Ddesc);
  r.parts = algo ? split_parts(algo->data[2]) : 1;
  if (p.k > 0 && r.g.alpha != 0.0f) {
    check_layout("cuBLASLt matrix A", A, Adesc, file, line);
    check_layout("cuBLASLt matrix B", B, Bdesc, file, line);
  }
  if (r.beta != 0.0f) check_layout("cuBLASLt matrix C", C, Cdesc, file, line);
  check_layout("cuBLASLt matrix D", D, Ddesc, file, line);
  if (is_bias(op->epilogue)) {
    r.bias = op->bias;
    require_device("cuBLASLt bias", r.bias, elem_size(r.bias_type) * static_cast<size_t>(p.m),
                   file, line);
  }
  if (is_aux(op->epilogue)) {
    r.aux = const_cast<void *>(op->aux), r.aux_ld = op->aux_ld;
    check_matrix("cuBLASLt epilogue aux", r.aux, p.m, p.n, static_cast<int>(r.aux_ld), 0, 1, file,
                 line, elem_size(r.d_type));
  }
  g_counters.blas_calls++;
  if (cfg().count_only) return CUBLAS_STATUS_SUCCESS;
  enqueue_fn(resolve_stream(stream, what, file, line), what, file, line, [r] { run_lt(r); });
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
