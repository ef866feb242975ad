/* core/cpu_features.h: what this CPU's instruction set and its operating system let a process
 * run, for the choices that depend on it (the OpenBLAS kernel, kernels/cpu/blas_kernel.h).
 *
 * Contract:
 *   - cpu_features_get() reads cpuid and xgetbv once (pthread_once), on its first call from any
 *     thread, and returns the same read-only struct to every caller; it is never freed.
 *   - A vector flag is 1 only when the CPU has the instructions AND the OS saves their register
 *     state (XCR0): avx/avx2/fma need YMM state, avx512* need opmask+ZMM state, amx_* need the
 *     tile state. On Linux a process must still ask for AMX tiles (arch_prctl
 *     ARCH_REQ_XCOMP_PERM) before using them; amx_tile says only that it can.
 *   - On a CPU that is not x86-64 every flag is 0 and vendor/model are "" (nothing here claims an
 *     ISA it cannot check).
 */
#ifndef PT_CPU_FEATURES_H
#define PT_CPU_FEATURES_H

#include <stddef.h>

typedef struct {
  int sse4_2, avx, avx2, fma;
  int avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16;
  int amx_tile, amx_bf16;
  char vendor[16]; /* cpuid's vendor string, e.g. "GenuineIntel", "AuthenticAMD" */
  char model[64];  /* the brand string, e.g. "Intel(R) Xeon(R) Platinum 8480+", spaces trimmed */
} cpu_features;

const cpu_features *cpu_features_get(void);

/* f has all of AVX-512 F, BW, VL and DQ (the Skylake-X set the AVX-512 GEMM kernels use). */
int cpu_features_avx512(const cpu_features *f);

/* The notable vector features of f in a few words, e.g. "avx2 fma avx512 avx512_bf16 amx"
 * ("amx": tile and bf16), "sse4.2" or "none", into buf. */
void cpu_features_describe(const cpu_features *f, char *buf, size_t size);

#endif
