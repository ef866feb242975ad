/* tests/gpu/test_attention_bf16.c: the GPU table's attention under train.precision bf16
 * (kernels/cuda/attention_bf16.h) against the CPU's float32 attention (kernels/cpu/ops.h).
 *
 * Whichever library implements kernels/cuda/attention_cudnn.h in this build runs the plain
 * causal shapes: cuDNN on a real GPU (scripts/gpu_check.sh runs this test there), the
 * emulator's substitute here (the in-house float32 kernels on bf16-rounded q, k, v). Checked:
 *   - forward o and backward dqkv (from the GPU's own o and lse, as training runs it) within
 *     TOL_BF16 of the CPU's float32, causal, grouped-query (H != KVH), T cut by every tile;
 *   - two runs give the same bits (the deterministic backward);
 *   - the saved state is lse[B,H,T] and no scratch, as in fp32;
 *   - the library ran each plain shape (unless the build has none), one plan per shape, and the
 *     ledger (kernels/cuda/cost.h) has its calls at 4*B*H*T*T*hd/2 tensor FLOPs forward, 2.5
 *     times that backward;
 *   - packed documents with their count (kernels.h pt_attention_opts.documents) run on the
 *     library as ragged sequences, one plan per power of two of documents, within the same
 *     tolerance and deterministic; the ragged table (cuda_op_attention_ragged) equals one built
 *     here from doc_start, and a table of too few slots has every length -1;
 *   - packed documents without a count and a head dim the library refuses (12) fall back to the
 *     in-house kernels, bit for bit what those give in fp32, each said once on stderr;
 *   - fp32 never calls the library.
 * Without a GPU: "SKIP: no GPU (<reason>)", exit 77.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/cost.h"
#include "kernels/cuda/kernels_gpu.h"

/* Norm-wise relative error max|gpu - cpu| / max|cpu| allowed against float32. bf16 keeps 8
 * significant bits: each of q, k, v (and dout, o in backward; cuDNN also rounds P and dS for
 * its second products) is off by up to 2^-9 = 2e-3 relative, and the errors of a row's terms
 * add partly at random. Measured under the emulator's substitute: about 4e-3 in o and 6e-3 in
 * dqkv at these shapes; 3e-2 leaves room for cuDNN's extra roundings. */
#define TOL_BF16 3e-2

static gpu_ctx G;
static kernels_gpu KG;
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static float *random_floats(int64_t n, float lo, float hi) {
  float *p = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    p[i] = lo + (hi - lo) * (float)((rng * 0x2545F4914F6CDD1Dull >> 40) * (1.0 / 16777216.0));
  }
  return p;
}

static void *to_device(const void *h, size_t bytes) {
  void *d = gpu_alloc(&G, bytes);
  gpu_to_device(&G, d, h, bytes);
  return d;
}

static float *to_host(const float *d, int64_t n) {
  float *h = malloc(sizeof(float) * (size_t)n);
  gpu_to_host(&G, h, d, sizeof(float) * (size_t)n);
  return h;
}

static double norm_err(const float *x, const float *ref, int64_t n) {
  double diff = 0.0, big = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)x[i] - ref[i]);
    if (!(e <= diff)) diff = e; /* NaN sticks */
    if (fabs(ref[i]) > big) big = fabs(ref[i]);
  }
  return diff / (big > 0 ? big : 1.0);
}

static int same_bits(const float *a, const float *b, int64_t n) {
  return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

/* The ledger's row `name` (kernels/cuda/cost.h): launches and tensor FLOPs (0 launches: none). */
static void expect_cost(const char *shape, const char *name, uint64_t launches, double flops) {
  const gpu_cost_row *r = NULL;
  for (int i = 0; i < gpu_cost_count(); i++)
    if (strcmp(gpu_cost_row_at(i)->kernel, name) == 0) r = gpu_cost_row_at(i);
  const uint64_t n = r ? r->launches : 0;
  CHECK(n == launches && (!r || fabs(r->tensor_flops - flops) <= 1e-9 * flops),
        "[%s] ledger %s: %llu launches, %.6g tensor FLOPs; expected %llu, %.6g", shape, name,
        (unsigned long long)n, r ? r->tensor_flops : 0.0, (unsigned long long)launches,
        launches ? flops : 0.0);
}

typedef struct {
  float *o, *lse, *dqkv; /* host copies */
} attention_run;

/* Forward and backward through table k on device inputs; the outputs start as garbage. */
static attention_run run_table(const pt_kernels *k, const float *d_qkv, const float *d_dout,
                               int B, int T, int d, int H, int KVH, const int32_t *d_doc,
                               const pt_attention_opts *opts) {
  const int64_t no = (int64_t)B * T * d, nl = (int64_t)B * H * T;
  const int64_t nqkv = (int64_t)B * T * (d + 2 * KVH * (d / H));
  float *d_o = gpu_alloc(&G, sizeof(float) * (size_t)no), *d_l = gpu_alloc(&G, sizeof(float) * nl);
  float *d_g = gpu_alloc(&G, sizeof(float) * (size_t)nqkv);
  k->scale(k, d_o, NAN, no), k->scale(k, d_g, NAN, nqkv);
  k->attention_forward(k, d_o, d_l, d_qkv, B, T, d, H, KVH, d_doc, opts, NULL);
  k->attention_backward(k, d_g, d_dout, d_qkv, d_o, d_l, B, T, d, H, KVH, d_doc, opts, NULL);
  attention_run r = {to_host(d_o, no), to_host(d_l, nl), to_host(d_g, nqkv)};
  gpu_free(d_o), gpu_free(d_l), gpu_free(d_g);
  return r;
}

static void run_free(attention_run *r) { free(r->o), free(r->lse), free(r->dqkv); }

/* Packed documents of 1 .. 12 tokens per row. */
static int32_t *documents(int B, int T) {
  int32_t *doc = malloc(sizeof(int32_t) * (size_t)B * T);
  float *len = random_floats((int64_t)B * T, 1, 12);
  for (int b = 0; b < B; b++)
    for (int t = 0, start = 0; t < T; t++) {
      if (t - start >= (int)len[b * T + start]) start = t;
      doc[b * T + t] = start;
    }
  free(len);
  return doc;
}

/* Tokens t of doc[n] that start a document (doc[t] == t within its row of T). */
static int count_documents(const int32_t *doc, int64_t n, int T) {
  int c = 0;
  for (int64_t i = 0; i < n; i++) c += doc[i] == (int32_t)(i % T);
  return c;
}

enum { NO_DOCS, DOCS_COUNTED, DOCS_UNCOUNTED };

/* One shape (opts: kernels.h's window, soft-cap, scale). docs: packed documents, with their
 * count in opts or not. library: 1 when the library must run it, 0 when the in-house kernels
 * must. */
static void attention_case_opts(int B, int T, int d, int H, int KVH, int docs, int library,
                                const pt_attention_opts *opts_in) {
  char shape[160];
  pt_attention_opts opts_docs = *opts_in;
  const pt_attention_opts *opts = &opts_docs;
  snprintf(shape, sizeof shape, "B=%d T=%d d=%d H=%d KVH=%d hd=%d%s window=%d softcap=%g "
           "scale=%g", B, T, d, H, KVH, d / H,
           docs == DOCS_COUNTED ? " documents" : docs ? " documents (no count)" : "", opts->window,
           (double)opts->softcap, (double)opts->scale);
  const pt_kernels *k = &KG.table;
  const int64_t no = (int64_t)B * T * d, nl = (int64_t)B * H * T;
  const int64_t nqkv = (int64_t)B * T * (d + 2 * KVH * (d / H));
  CHECK(k->attention_saved_floats(k, B, T, d, H, KVH) == nl &&
            kernels_gpu_sizing.attention_saved_floats(NULL, B, T, d, H, KVH) == nl &&
            k->attention_scratch_floats(k, B, T, d, H, KVH) == 0,
        "[%s] saved/scratch floats: %lld/%lld, expected B*H*T = %lld and 0", shape,
        (long long)k->attention_saved_floats(k, B, T, d, H, KVH),
        (long long)k->attention_scratch_floats(k, B, T, d, H, KVH), (long long)nl);
  float *qkv = random_floats(nqkv, -2, 2), *dout = random_floats(no, -1, 1);
  int32_t *doc = docs ? documents(B, T) : NULL;
  if (docs == DOCS_COUNTED) opts_docs.documents = count_documents(doc, (int64_t)B * T, T);
  float *o_cpu = malloc(sizeof(float) * (size_t)no), *dqkv_cpu = malloc(sizeof(float) * nqkv);
  float *p_cpu = malloc(sizeof(float) * (size_t)B * H * T * T);
  float *scr = malloc(sizeof(float) * (size_t)(op_attention_scratch_floats(T, d, H, KVH) + 1));
  op_attention_forward(o_cpu, p_cpu, qkv, B, T, d, H, KVH, doc, opts, scr);
  op_attention_backward(dqkv_cpu, dout, qkv, p_cpu, B, T, d, H, KVH, doc, opts, scr);

  float *d_qkv = to_device(qkv, sizeof(float) * nqkv), *d_dout = to_device(dout, sizeof(float) * no);
  int32_t *d_doc = doc ? to_device(doc, sizeof(int32_t) * (size_t)B * T) : NULL;
  const int64_t lib0 = KG.attention.library_calls, fall0 = KG.attention.fallback_calls;
  gpu_cost_reset();
  attention_run a = run_table(k, d_qkv, d_dout, B, T, d, H, KVH, d_doc, opts);
  attention_run b = run_table(k, d_qkv, d_dout, B, T, d, H, KVH, d_doc, opts);
  const int64_t lib = KG.attention.library_calls - lib0, fall = KG.attention.fallback_calls - fall0;
  CHECK(lib == (library ? 4 : 0) && fall == (library ? 0 : 4),
        "[%s] %lld library and %lld in-house calls, expected the %s to run all 4", shape,
        (long long)lib, (long long)fall, library ? "library" : "in-house kernels");
  /* per forward call, times the share of the causal pairs a window keeps */
  const double fwd = 4.0 * B * H * T * (double)T * (d / H) / 2 *
                     (pt_attention_pairs(T, opts) / pt_attention_pairs(T, NULL));
  expect_cost(shape, "cudnn_attention_forward", library ? 2 : 0, 2 * fwd);
  expect_cost(shape, "cudnn_attention_backward", library ? 2 : 0, 2 * 2.5 * fwd);
  const double eo = norm_err(a.o, o_cpu, no), eg = norm_err(a.dqkv, dqkv_cpu, nqkv);
  printf("  [%s] %s: o %.2e, dqkv %.2e against float32 (tolerance %.0e)\n", shape,
         lib ? "library" : "in-house", eo, eg, TOL_BF16);
  CHECK(eo <= TOL_BF16, "[%s] forward o: %.3g against float32 > %.0e", shape, eo, TOL_BF16);
  CHECK(eg <= TOL_BF16, "[%s] backward dqkv: %.3g against float32 > %.0e", shape, eg, TOL_BF16);
  CHECK(same_bits(a.o, b.o, no) && same_bits(a.lse, b.lse, nl) && same_bits(a.dqkv, b.dqkv, nqkv),
        "[%s] two runs differ (o, lse or dqkv)", shape);
  if (!library) { /* the fallback is exactly the float32 kernels */
    kernels_gpu_set_precision(&KG, PT_PRECISION_FP32);
    attention_run f = run_table(k, d_qkv, d_dout, B, T, d, H, KVH, d_doc, opts);
    kernels_gpu_set_precision(&KG, PT_PRECISION_BF16);
    CHECK(same_bits(a.o, f.o, no) && same_bits(a.lse, f.lse, nl) &&
              same_bits(a.dqkv, f.dqkv, nqkv),
          "[%s] the fallback differs from the float32 kernels", shape);
    run_free(&f);
  }
  run_free(&a), run_free(&b);
  gpu_free(d_qkv), gpu_free(d_dout);
  if (d_doc) gpu_free(d_doc);
  free(qkv), free(dout), free(doc), free(o_cpu), free(dqkv_cpu), free(p_cpu), free(scr);
}

static void attention_case(int B, int T, int d, int H, int KVH, int docs, int library) {
  attention_case_opts(B, T, d, H, KVH, docs, library, &(pt_attention_opts){0});
}

/* The ragged table of doc[B*T] built on the device for seqs slots against one built here:
 * documents in token order, lengths, offsets in qkv (rows of rq = (H + 2 KVH) hd), o (ro =
 * H hd) and lse (H a token), slots past the last and the end at B*T tokens. With too few
 * slots, every length is -1. */
static void ragged_case(int B, int T, const int32_t *doc, int seqs, int H, int KVH, int hd) {
  const attention_cudnn_shape shape = {.B = B, .T = T, .H = H, .KVH = KVH, .hd = hd,
                                       .seqs = seqs};
  const int rq = (H + 2 * KVH) * hd, ro = H * hd;
  const int64_t N = (int64_t)B * T, stride = attention_cudnn_ragged_stride(seqs);
  const int docs = count_documents(doc, N, T);
  int32_t *want = malloc(sizeof(int32_t) * 4 * (size_t)stride), *got = malloc(4 * 4 * stride);
  int32_t *d_doc = to_device(doc, sizeof(int32_t) * (size_t)N);
  int32_t *d_table = gpu_alloc(&G, sizeof(int32_t) * 4 * (size_t)stride);
  cuda_op_attention_ragged(&G, d_table, d_doc, &shape);
  gpu_to_host(&G, got, d_table, sizeof(int32_t) * 4 * (size_t)stride);
  int j = 0;
  for (int64_t t = 0; t <= N; t++) {
    if (t < N && doc[t] != (int32_t)(t % T)) continue;
    if (j > 0 && j <= seqs) /* the document before ends here */
      want[j - 1] = docs > seqs ? -1 : (int32_t)(t - want[stride + j - 1] / rq);
    if (t == N) break;
    if (j < seqs)
      want[stride + j] = (int32_t)(t * rq), want[2 * stride + j] = (int32_t)(t * ro),
      want[3 * stride + j] = (int32_t)(t * H);
    j++;
  }
  for (int k = docs < seqs ? docs : seqs; k <= seqs; k++) {
    if (k < seqs) want[k] = docs > seqs ? -1 : 0;
    want[stride + k] = (int32_t)(N * rq), want[2 * stride + k] = (int32_t)(N * ro);
    want[3 * stride + k] = (int32_t)(N * H);
  }
  int bad = 0;
  for (int a = 0; a < 4; a++)
    for (int k = 0; k < (a ? seqs + 1 : seqs); k++)
      if (!bad && got[a * stride + k] != want[a * stride + k]) {
        CHECK(0, "ragged table B=%d T=%d seqs=%d (%d documents): array %d slot %d is %d, "
              "expected %d", B, T, seqs, docs, a, k, got[a * stride + k], want[a * stride + k]);
        bad = 1;
      }
  printf("  ragged table B=%d T=%d, %d documents in %d slots: %s\n", B, T, docs, seqs,
         bad ? "wrong" : "as built here");
  gpu_free(d_doc), gpu_free(d_table), free(want), free(got);
}

static void ragged_cases(void) {
  int32_t *doc = documents(3, 50);
  const int docs = count_documents(doc, 150, 50);
  ragged_case(3, 50, doc, docs, 12, 12, 64); /* exactly the count (GPT-2 small's rows) */
  ragged_case(3, 50, doc, 64, 2, 1, 4);       /* slots to spare */
  ragged_case(3, 50, doc, docs - 1, 2, 1, 4); /* too few: every length -1 */
  free(doc);
  int32_t *own = malloc(sizeof(int32_t) * 2 * 700); /* every token its own document */
  for (int t = 0; t < 2 * 700; t++) own[t] = t % 700;
  ragged_case(2, 700, own, 2048, 1, 1, 8);
  free(own);
}

/* fp32 keeps the in-house kernels: no library call. */
static void fp32_case(void) {
  kernels_gpu_set_precision(&KG, PT_PRECISION_FP32);
  const int64_t lib0 = KG.attention.library_calls;
  const int B = 1, T = 20, d = 64, H = 2;
  float *qkv = random_floats((int64_t)B * T * 3 * d, -1, 1), *dout = random_floats(B * T * d, -1, 1);
  float *d_qkv = to_device(qkv, sizeof(float) * B * T * 3 * d);
  float *d_dout = to_device(dout, sizeof(float) * B * T * d);
  attention_run r = run_table(&KG.table, d_qkv, d_dout, B, T, d, H, H, NULL, NULL);
  CHECK(KG.attention.library_calls == lib0, "fp32 called the bf16 library");
  run_free(&r);
  gpu_free(d_qkv), gpu_free(d_dout), free(qkv), free(dout);
  kernels_gpu_set_precision(&KG, PT_PRECISION_BF16);
}

/* Lines of file f containing word. */
static int count_lines(FILE *f, const char *word) {
  char line[2048];
  int n = 0;
  rewind(f);
  while (fgets(line, sizeof line, f)) {
    fputs(line, stderr);
    n += strstr(line, word) != NULL;
  }
  return n;
}

int main(void) {
  char why[256];
  if (gpu_count(why, sizeof why) == 0) {
    printf("SKIP: no GPU (%s)\n", why);
    return 77;
  }
  if (gpu_open(&G, 0, why, sizeof why) != 0) {
    fprintf(stderr, "test_attention_bf16: %s\n", why);
    return 1;
  }
  const char *backend = attention_cudnn_backend();
  const int library = strncmp(backend, "none", 4) != 0;
  printf("test_attention_bf16: %s, attention library: %s\n", G.name, backend);
  kernels_gpu_open(&KG, &G);
  kernels_gpu_set_precision(&KG, PT_PRECISION_BF16);

  /* The notices go to a file for counting (and are echoed after). */
  FILE *log = tmpfile();
  int err_fd = dup(2);
  if (!log || err_fd < 0) return fprintf(stderr, "test_attention_bf16: no temp file\n"), 1;
  fflush(stderr);
  dup2(fileno(log), 2);
  attention_case(2, 37, 128, 4, 2, 0, library); /* hd 32, 2 query heads per kv head */
  attention_case(1, 100, 256, 4, 4, 0, library); /* hd 64, multi-head */
  attention_case(2, 45, 256, 4, 1, 0, library);  /* hd 64, multi-query */
  attention_case(1, 70, 768, 6, 3, 0, library);  /* hd 128 */
  attention_case(2, 37, 128, 4, 2, 0, library);  /* a shape seen before: its plan reused */
  ragged_cases();
  /* packed documents: the library's ragged sequences (about 22 documents: 32 slots; 6: 8) */
  attention_case(2, 70, 256, 4, 2, DOCS_COUNTED, library); /* hd 64 */
  attention_case(1, 33, 128, 4, 2, DOCS_COUNTED, library);
  attention_case_opts(2, 70, 128, 4, 2, DOCS_COUNTED, library, &(pt_attention_opts){.window = 9});
  attention_case(2, 70, 128, 8, 2, DOCS_UNCOUNTED, 0); /* no count: in-house */
  attention_case(1, 33, 128, 4, 2, DOCS_UNCOUNTED, 0); /* ... said once */
  attention_case(2, 29, 36, 3, 3, 0, 0);         /* hd 12: refused */
  /* a window (cuDNN's diagonal band) and another scale: the library's, each its own plan;
   * soft-capping: in-house, said once */
  attention_case_opts(2, 70, 128, 4, 2, 0, library, &(pt_attention_opts){.window = 9});
  attention_case_opts(2, 37, 128, 4, 2, 0, library, &(pt_attention_opts){.scale = 0.1f});
  attention_case_opts(2, 37, 128, 4, 2, 0, 0, &(pt_attention_opts){.softcap = 2.0f});
  attention_case_opts(1, 33, 128, 4, 2, 0, 0,
                      &(pt_attention_opts){.window = 5, .softcap = 1.0f, .scale = 0.2f});
  fp32_case();
  fflush(stderr);
  dup2(err_fd, 2);
  const int notices = count_lines(log, "notice:");
  fclose(log);
  /* refusals: the documents once, hd 12 once, soft-capping once, and every shape when the build
   * has no library */
  CHECK(notices == (library ? 3 : 9), "%d notices on stderr, expected %d", notices,
        library ? 3 : 9);
  CHECK(KG.attention.n_shapes == 10, "%d shapes planned, expected 10 (one per library shape)",
        KG.attention.n_shapes);

  kernels_gpu_close(&KG);
  gpu_close(&G);
  return test_summary("test_attention_bf16");
}
