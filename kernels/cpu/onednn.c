/* bf16 products through oneDNN's matmul primitive (kernels/cpu/onednn.h). */
#include "kernels/cpu/onednn.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"

#define PT_DNNL_OK(r) ((r) == dnnl_success)
#define PT_CHECK_DNNL(call) \
  PT_CHECK_CALL(dnnl_status_t, call, #call, PT_DNNL_OK, "oneDNN", dnnl_status2str)

const char *onednn_bf16_isa(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  /* the ISA values are bit sets: AMX includes avx512_core_bf16 (oneDNN's dnnl_cpu_isa_t) */
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) return NULL;
  const char *name = dnnl_cpu_isa2str(isa);
  return strncmp(name, "cpu_isa_", 8) ? name : name + 8;
}

enum { ARG_A, ARG_B, ARG_BIAS, ARG_C, ARG_SCRATCH, N_ARGS };

typedef struct {
  onednn_shape s;
  dnnl_primitive_t p;
  dnnl_memory_t mem[N_ARGS];
  size_t work_bytes; /* its scratchpad */
} cached;

/* Shapes per thread: a model's products come in a handful of shapes (its layers' widths, full
 * and last partial blocks of rows); past the table's size the oldest entry is replaced. */
#define CACHE_SIZE 64
static _Thread_local cached g_cache[CACHE_SIZE];
static _Thread_local int g_used, g_next;
static _Thread_local dnnl_engine_t g_engine;
static _Thread_local dnnl_stream_t g_stream;
/* The primitives' working memory (their copies of A and B in the layout the kernels read):
 * ours, not oneDNN's, so the memory tracker counts it; one buffer per thread, grown to the
 * largest primitive's need and kept. */
static _Thread_local void *g_work;
static _Thread_local size_t g_work_cap;

static void desc_2d(dnnl_memory_desc_t *d, int rows, int cols, dnnl_data_type_t t,
                    int transposed) {
  dnnl_dims_t dims = {rows, cols}, strides = {cols, 1};
  if (transposed) strides[0] = 1, strides[1] = rows; /* element (r, c) at c * rows + r */
  PT_CHECK_DNNL(dnnl_memory_desc_init_by_strides(d, 2, dims, t, strides));
}

static void make(cached *c, const onednn_shape *s) {
  dnnl_memory_desc_t d[N_ARGS];
  desc_2d(&d[ARG_A], s->M, s->K, dnnl_bf16, s->a_rows_are_k);
  desc_2d(&d[ARG_B], s->K, s->N, dnnl_bf16, s->b_rows_are_n);
  desc_2d(&d[ARG_BIAS], 1, s->N, dnnl_f32, 0);
  desc_2d(&d[ARG_C], s->M, s->N, dnnl_f32, 0);
  dnnl_matmul_desc_t md;
  PT_CHECK_DNNL(dnnl_matmul_desc_init(&md, &d[ARG_A], &d[ARG_B], s->bias ? &d[ARG_BIAS] : NULL,
                                      &d[ARG_C]));
  dnnl_primitive_attr_t attr;
  dnnl_post_ops_t po;
  PT_CHECK_DNNL(dnnl_primitive_attr_create(&attr));
  PT_CHECK_DNNL(dnnl_post_ops_create(&po));
  if (s->acc) PT_CHECK_DNNL(dnnl_post_ops_append_sum(po, 1.0f));
  PT_CHECK_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
  PT_CHECK_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  dnnl_primitive_desc_t pd;
  PT_CHECK_DNNL(dnnl_primitive_desc_create(&pd, &md, attr, g_engine, NULL));
  const dnnl_memory_desc_t *pad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  memset(&d[ARG_SCRATCH], 0, sizeof d[ARG_SCRATCH]); /* oneDNN's empty descriptor: no scratchpad */
  if (pad) d[ARG_SCRATCH] = *pad;
  c->work_bytes = dnnl_memory_desc_get_size(&d[ARG_SCRATCH]);
  PT_CHECK_DNNL(dnnl_primitive_create(&c->p, pd));
  PT_CHECK_DNNL(dnnl_primitive_desc_destroy(pd));
  PT_CHECK_DNNL(dnnl_post_ops_destroy(po));
  PT_CHECK_DNNL(dnnl_primitive_attr_destroy(attr));
  for (int i = 0; i < N_ARGS; i++)
    PT_CHECK_DNNL(dnnl_memory_create(&c->mem[i], &d[i], g_engine, DNNL_MEMORY_NONE));
  c->s = *s;
}

static cached *lookup(const onednn_shape *s) {
  for (int i = 0; i < g_used; i++)
    if (!memcmp(&g_cache[i].s, s, sizeof *s)) return &g_cache[i];
  if (!g_engine) {
    PT_CHECK_DNNL(dnnl_engine_create(&g_engine, dnnl_cpu, 0));
    PT_CHECK_DNNL(dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags));
  }
  cached *c = &g_cache[g_used < CACHE_SIZE ? g_used++ : g_next++ % CACHE_SIZE];
  if (c->p) {
    PT_CHECK_DNNL(dnnl_primitive_destroy(c->p));
    for (int i = 0; i < N_ARGS; i++) PT_CHECK_DNNL(dnnl_memory_destroy(c->mem[i]));
  }
  make(c, s);
  return c;
}

void onednn_matmul(const onednn_shape *s, float *C, const uint16_t *A, const uint16_t *B,
                   const float *bias) {
  onednn_shape key = *s; /* ints only: memcmp compares no padding */
  key.bias = bias != NULL;
  cached *c = lookup(&key);
  /* oneDNN's OpenMP team follows the count OpenBLAS has (an ICV per calling thread) */
  int threads = kernels_cpu_threads();
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  void *work = pt_grow_aligned(&g_work, &g_work_cap, c->work_bytes);
  void *data[N_ARGS] = {(void *)A, (void *)B, (void *)bias, C, work};
  dnnl_exec_arg_t args[N_ARGS];
  int n = 0;
  static const int which[N_ARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST,
                                    DNNL_ARG_SCRATCHPAD};
  for (int i = 0; i < N_ARGS; i++) {
    if (i == ARG_BIAS && !bias) continue;
    PT_CHECK_DNNL(dnnl_memory_set_data_handle(c->mem[i], data[i]));
    args[n].arg = which[i], args[n].memory = c->mem[i], n++;
  }
  PT_CHECK_DNNL(dnnl_primitive_execute(c->p, g_stream, n, args));
  PT_CHECK_DNNL(dnnl_stream_wait(g_stream));
}
