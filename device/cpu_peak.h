/* device/cpu_peak.h: the measured float32 peak of one CPU core, a yardstick that owes nothing
 * to OpenBLAS (whose sgemm rate falls with it when it picks a slow kernel).
 *
 * A loop of independent multiply-adds, acc = acc * a + b, over enough vector accumulators to
 * cover the FMA latency times the FMA ports, at the widest vector width the CPU and the OS run
 * (AVX-512, else AVX2 + FMA, else 128-bit vectors). Each width is compiled with its own target
 * attribute and picked at run time (cpu_features_get), so the result is right on any x86
 * machine whatever -march the build used; other architectures get the 128-bit loop. */
#ifndef PT_CPU_PEAK_H
#define PT_CPU_PEAK_H

#include <stdint.h>

/* One width's loop. run: `iters` rounds of acc[i] = acc[i] * a + b on every float of
 * acc[0 .. floats) (floats = lanes * accumulators, any alignment), in place: the final values
 * are the scalar recurrence's, each float on its own (the test checks them). */
typedef struct {
  const char *name; /* "avx512", "avx2+fma", "sse" (on x86), "128-bit" (elsewhere) */
  int lanes;        /* floats per vector */
  int accumulators; /* independent vectors in flight */
  int (*supported)(void);
  void (*run)(float *acc, float a, float b, int64_t iters);
} pt_fma_loop;

/* The loops from widest to narrowest, NULL-terminated; the last is supported everywhere. */
extern const pt_fma_loop *const cpu_fma_loops[];
/* The widest loop this CPU and OS run. */
const pt_fma_loop *cpu_fma_widest(void);
/* Floats of acc a loop's run reads and writes (lanes * accumulators, at most 256). */
int cpu_fma_floats(const pt_fma_loop *loop);

typedef struct {
  double flops;             /* float32 FLOP/s of one core (a multiply-add counts 2) */
  const pt_fma_loop *loop;  /* the loop that reached it */
} pt_cpu_peak;

/* Runs cpu_fma_widest() on the calling thread for about `seconds` per repeat and keeps the best
 * of `repeats` (at least 1): the peak of the core this thread runs on. */
pt_cpu_peak cpu_peak_measure(double seconds, int repeats);

#endif
