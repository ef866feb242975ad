/* The rank's cuBLASLt plans (kernels/cuda/matmul_plan.h): an open-addressing table keyed by the
 * whole matmul_problem, grown to keep it at most half full. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/matmul_plan.h"

/* One problem's descriptors and algorithm. */
struct matmul_plan {
  matmul_problem key;
  int used, found; /* found 0: cuBLASLt has no algorithm (the caller's other path runs) */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, cd;
  cublasLtMatmulAlgo_t algo;
};

struct matmul_plans {
  matmul_plan *slot;
  size_t cap, n; /* cap a power of two */
};

/* The heuristic's NOT_SUPPORTED is an answer (no algorithm), not a failure. */
#define PLAN_ANSWERED(r) ((r) == CUBLAS_STATUS_SUCCESS || (r) == CUBLAS_STATUS_NOT_SUPPORTED)

/* p's address alignment in bytes, a power of two at most MATMUL_PLAN_ALIGN_MAX. */
static uint32_t alignment_of(const void *p) {
  uint32_t a = 1;
  while (a < MATMUL_PLAN_ALIGN_MAX && (uintptr_t)p % (2 * a) == 0) a *= 2;
  return a;
}

static uint64_t problem_hash(const matmul_problem *p) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < sizeof *p; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static void op_set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const void *v,
                   size_t size) {
  PT_CHECK_CUBLASLT(cublasLtMatmulDescSetAttribute(op, attr, v, size));
}

static void pref_set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                     const void *v, size_t size) {
  PT_CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, attr, v, size));
}

/* The descriptors of p: the bias and aux pointers are set at each run. */
static void plan_describe(matmul_plan *pl) {
  const matmul_problem *p = &pl->key;
  PT_CHECK_CUBLASLT(cublasLtMatmulDescCreate(&pl->op, (cublasComputeType_t)p->compute,
                                             CUDA_R_32F));
  op_set(pl->op, CUBLASLT_MATMUL_DESC_TRANSA, &p->ta, sizeof p->ta);
  op_set(pl->op, CUBLASLT_MATMUL_DESC_TRANSB, &p->tb, sizeof p->tb);
  const uint32_t epilogue = (uint32_t)p->epilogue;
  op_set(pl->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  if (p->aux_ld) op_set(pl->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &p->aux_ld, sizeof p->aux_ld);
  /* a float32 bias (the master's) beside a bf16 D, where it would default to D's type */
  const int32_t f32 = CUDA_R_32F;
  if (p->bias && p->out != CUDA_R_32F)
    op_set(pl->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32);
  const int na = p->ta == CUBLAS_OP_N, nb = p->tb == CUBLAS_OP_N;
  const cudaDataType_t in = (cudaDataType_t)p->in;
  PT_CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&pl->a, in, na ? p->m : p->k, na ? p->k : p->m,
                                               p->lda));
  PT_CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&pl->b, in, nb ? p->k : p->n, nb ? p->n : p->k,
                                               p->ldb));
  PT_CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&pl->cd, (cudaDataType_t)p->out, p->m, p->n,
                                               p->ldd));
}

/* Asks the heuristic for pl's first algorithm: found 1, or 0 when it has none. */
static void plan_choose(gpu_ctx *g, matmul_plan *pl) {
  cublasLtMatmulPreference_t pref = NULL;
  PT_CHECK_CUBLASLT(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = GPU_LT_WORKSPACE_BYTES;
  const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                              CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions, sizeof reductions);
  const cublasLtMatmulPreferenceAttributes_t attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++) pref_set(pref, attr[i], &pl->key.align[i], sizeof(uint32_t));
  cublasLtMatmulHeuristicResult_t found;
  int n_found = 0;
  cublasStatus_t st;
  PT_CHECK_CALL(cublasStatus_t,
                st = cublasLtMatmulAlgoGetHeuristic(g->lt, pl->op, pl->a, pl->b, pl->cd, pl->cd,
                                                    pref, 1, &found, &n_found),
                "cublasLtMatmulAlgoGetHeuristic", PLAN_ANSWERED, "cuBLASLt",
                gpu_cublas_error_text);
  PT_CHECK_CUBLASLT(cublasLtMatmulPreferenceDestroy(pref));
  pl->found = st == CUBLAS_STATUS_SUCCESS && n_found >= 1;
  if (pl->found) pl->algo = found.algo;
}

static void plan_destroy(matmul_plan *pl) {
  if (pl->cd) PT_CHECK_CUBLASLT(cublasLtMatrixLayoutDestroy(pl->cd));
  if (pl->b) PT_CHECK_CUBLASLT(cublasLtMatrixLayoutDestroy(pl->b));
  if (pl->a) PT_CHECK_CUBLASLT(cublasLtMatrixLayoutDestroy(pl->a));
  if (pl->op) PT_CHECK_CUBLASLT(cublasLtMatmulDescDestroy(pl->op));
}

/* The slot holding key, or the empty one where it goes. */
static matmul_plan *plans_slot(struct matmul_plans *t, const matmul_problem *key) {
  size_t i = problem_hash(key) & (t->cap - 1);
  while (t->slot[i].used && memcmp(&t->slot[i].key, key, sizeof *key) != 0)
    i = (i + 1) & (t->cap - 1);
  return &t->slot[i];
}

static void plans_grow(struct matmul_plans *t) {
  const size_t cap = t->cap ? 2 * t->cap : 64;
  struct matmul_plans bigger = {pt_calloc(cap, sizeof(matmul_plan)), cap, t->n};
  for (size_t i = 0; i < t->cap; i++)
    if (t->slot[i].used) *plans_slot(&bigger, &t->slot[i].key) = t->slot[i];
  free(t->slot);
  *t = bigger;
}

/* x's bias and aux pointers on pl's descriptor: cuBLASLt reads a descriptor when a matmul is
 * queued, so each call sets its own. */
static void plan_point(const matmul_plan *pl, const matmul_operands *x) {
  if (x->bias) op_set(pl->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &x->bias, sizeof x->bias);
  if (x->aux) op_set(pl->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x->aux, sizeof x->aux);
}

const matmul_plan *matmul_plan_find(gpu_ctx *g, const matmul_problem *problem,
                                    const matmul_operands *x) {
  matmul_problem p = *problem;
  const void *ptr[4] = {x->A, x->B, x->beta != 0.0f ? x->C : x->D, x->D};
  for (int i = 0; i < 4; i++) p.align[i] = alignment_of(ptr[i]);
  if (!g->plans) g->plans = pt_calloc(1, sizeof *g->plans);
  struct matmul_plans *t = g->plans;
  if (2 * (t->n + 1) > t->cap) plans_grow(t);
  matmul_plan *pl = plans_slot(t, &p);
  if (!pl->used) {
    pl->used = 1, pl->key = p;
    t->n++;
    plan_describe(pl);
    plan_point(pl, x);
    plan_choose(g, pl);
  }
  return pl->found ? pl : NULL;
}

void matmul_plan_run(gpu_ctx *g, const matmul_plan *plan, const matmul_operands *x) {
  plan_point(plan, x);
  const float one = 1.0f;
  PT_CHECK_CUBLASLT(cublasLtMatmul(g->lt, plan->op, &one, x->A, plan->a, x->B, plan->b, &x->beta,
                                   x->beta != 0.0f ? x->C : x->D, plan->cd, x->D, plan->cd,
                                   &plan->algo, g->lt_workspace, GPU_LT_WORKSPACE_BYTES,
                                   g->stream));
}

void matmul_plans_free(gpu_ctx *g) {
  struct matmul_plans *t = g->plans;
  if (!t) return;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slot[i].used) plan_destroy(&t->slot[i]);
  free(t->slot);
  free(t);
  g->plans = NULL;
}
