/* The measured one-core float32 peak (cpu_peak.h). Each loop keeps its accumulators in
 * registers (16 zmm of 32, 12 ymm or 8 xmm of 16, leaving room for a and b): more than FMA
 * latency (4 cycles) times FMA ports (2) on current cores, so the loop is throughput-bound. */
#include "device/cpu_peak.h"

#include "core/clock.h"
#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PT_X86 1
#else
#define PT_X86 0
#endif

/* One width's run: VEC the vector type, N accumulators of L floats; LOAD, STORE, SET1 and MADD
 * (x * a + b) its intrinsics. Fully unrolled over the accumulators so each stays in a register. */
#define FMA_RUN(fn, attr, VEC, N, L, LOAD, STORE, SET1, MADD)                                  \
  attr static void fn(float *acc, float a, float b, int64_t iters) {                         \
    VEC va = SET1(a), vb = SET1(b), x[N];                                                     \
    for (int j = 0; j < N; j++) x[j] = LOAD(acc + L * j);                                     \
    for (int64_t i = 0; i < iters; i++) {                                                     \
      _Pragma("GCC unroll 16") for (int j = 0; j < N; j++) x[j] = MADD(x[j], va, vb);        \
    }                                                                                         \
    for (int j = 0; j < N; j++) STORE(acc + L * j, x[j]);                                     \
  }

/* The 128-bit loop in GCC's vector extension: SSE on x86 (a multiply and an add unless the
 * build's -march has FMA, which the wider loops would then win with anyway), NEON elsewhere. */
typedef float pt_v4 __attribute__((vector_size(16)));
static pt_v4 v4_load(const float *p) {
  pt_v4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
static void v4_store(float *p, pt_v4 v) { __builtin_memcpy(p, &v, sizeof v); }
static pt_v4 v4_set1(float a) { return (pt_v4){a, a, a, a}; }
static pt_v4 v4_madd(pt_v4 x, pt_v4 a, pt_v4 b) { return x * a + b; }
FMA_RUN(run_v4, , pt_v4, 8, 4, v4_load, v4_store, v4_set1, v4_madd)
static int v4_supported(void) { return 1; }
static const pt_fma_loop loop_v4 = {PT_X86 ? "sse" : "128-bit", 4, 8, v4_supported, run_v4};

#if PT_X86
#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2,fma")))
FMA_RUN(run_avx512, AVX512, __m512, 16, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps,
        _mm512_fmadd_ps)
FMA_RUN(run_avx2, AVX2, __m256, 12, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps,
        _mm256_fmadd_ps)
/* cpu_features counts a width only where the OS (XCR0) saves its registers too. */
static int avx512_supported(void) { return cpu_features_get()->avx512f; }
static int avx2_supported(void) { return cpu_features_get()->avx2 && cpu_features_get()->fma; }
static const pt_fma_loop loop_avx512 = {"avx512", 16, 16, avx512_supported, run_avx512};
static const pt_fma_loop loop_avx2 = {"avx2+fma", 8, 12, avx2_supported, run_avx2};
const pt_fma_loop *const cpu_fma_loops[] = {&loop_avx512, &loop_avx2, &loop_v4, NULL};
#else
const pt_fma_loop *const cpu_fma_loops[] = {&loop_v4, NULL};
#endif

const pt_fma_loop *cpu_fma_widest(void) {
  int i = 0;
  while (cpu_fma_loops[i + 1] && !cpu_fma_loops[i]->supported()) i++;
  return cpu_fma_loops[i];
}

int cpu_fma_floats(const pt_fma_loop *loop) { return loop->lanes * loop->accumulators; }

/* a = 0.5, b = 1: every value tends to 2 and stays normal, so no denormal slows the loop. */
static double one_repeat(const pt_fma_loop *loop, double seconds) {
  enum { CHUNK = 20000 }; /* rounds between clock reads: well under a millisecond */
  float acc[256];
  int n = cpu_fma_floats(loop);
  for (int i = 0; i < n; i++) acc[i] = (float)i;
  int64_t rounds = 0;
  double t0 = pt_now_s(), dt;
  do {
    loop->run(acc, 0.5f, 1.0f, CHUNK);
    rounds += CHUNK;
  } while ((dt = pt_now_s() - t0) < seconds);
  volatile float sink = acc[n - 1]; /* the results are used */
  (void)sink;
  return 2.0 * n * (double)rounds / dt;
}

pt_cpu_peak cpu_peak_measure(double seconds, int repeats) {
  pt_cpu_peak best = {0.0, cpu_fma_widest()};
  for (int r = 0; r < (repeats < 1 ? 1 : repeats); r++) {
    double f = one_repeat(best.loop, seconds);
    if (f > best.flops) best.flops = f;
  }
  return best;
}
