/* kernels/cpu/blas_kernel.h: OpenBLAS runs the kernel this CPU is best at, or says why not.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's, pip wheels') picks its x86 kernel from the CPU model when
 * the library loads; on a model it does not know (e.g. Sapphire Rapids under 0.3.21) it falls
 * back to the generic Prescott kernel: sgemm and training several times slower, silently. The
 * library reads OPENBLAS_CORETYPE only while it loads, so the cure is to restart the program
 * once with that variable set: blas_kernel_ensure(), first thing in main.
 *
 * Policy:
 *   - the kernel OpenBLAS chose is compared by ISA level (blas_kernel_isa) with the best kernel
 *     this CPU runs (blas_kernel_best); a lower one, also from a user's OPENBLAS_CORETYPE (a
 *     stale cluster module is the usual cause), is corrected. Names not in the table (non-x86
 *     kernels, "Unknown") are left alone, as is a level at or above the best.
 *   - PIPETRAIN_BLAS_CORETYPE=<name> is the user's explicit choice: that kernel is used (the
 *     program restarts once with OPENBLAS_CORETYPE=<name> if the library chose another) and
 *     never corrected.
 *   - the restart is one execv of the program's own path (read from /proc/self/exe; the link
 *     itself where that path is gone) with the same argv and the guard variable
 *     PIPETRAIN_BLAS_RESTARTED=<kernel before>, so it happens at most once; the process id and
 *     name stay the same (mpirun, timeout, debuggers, and pkill or schedulers signalling
 *     pipe_train by name keep following it). A library that is not a DYNAMIC_ARCH build
 *     (openblas_get_config) cannot switch: no restart, a warning. When the kernel is still
 *     another one after the restart (the library lacks it), or the restart itself fails, the
 *     program warns and carries on with the kernel it has.
 *   - the correction is one line on stderr, from rank 0 only (the launcher's rank variable,
 *     OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID, read before MPI_Init), said by
 *     blas_kernel_say_restart once the run has checked its input (engine/run.c, with the
 *     start-up lines, not under --quiet): a run stopped by bad input says its one line of
 *     error alone, and the start-up line names the kernel either way. The ranks a corrected pipe_train starts itself
 *     inherit its kernel and never restart; PIPETRAIN_BLAS_CORRECTED=<kernel before>, which
 *     the correction sets, has them say it as if they had. Warnings (no switch possible) are
 *     said at once.
 */
#ifndef PT_BLAS_KERNEL_H
#define PT_BLAS_KERNEL_H

#include <stddef.h>

#include "core/cpu_features.h"

/* ISA levels, each running everything below it. */
typedef enum {
  BLAS_ISA_SSE,         /* every x86-64 */
  BLAS_ISA_AVX,         /* AVX with the OS's YMM state */
  BLAS_ISA_AVX2,        /* AVX2 + FMA */
  BLAS_ISA_AVX512,      /* AVX-512 F/BW/VL/DQ */
  BLAS_ISA_AVX512_BF16, /* ... + AVX512_BF16 */
  BLAS_ISA_AMX          /* ... + AMX tiles and AMX-BF16 */
} blas_isa;

/* Call first in main, before MPI_Init and before any thread is started: it may replace the
 * process (execv) with itself under OPENBLAS_CORETYPE=<best>. argv: main's, NULL-terminated. */
void blas_kernel_ensure(char **argv);

/* The kernel OpenBLAS runs ("Cooperlake"), and the one it had chosen before blas_kernel_ensure
 * restarted the program ("Prescott"; NULL when it did not). */
const char *blas_kernel_name(void);
const char *blas_kernel_corrected_from(void);
/* "OpenBLAS Cooperlake kernel", with " (corrected from Prescott)" after a restart by
 * blas_kernel_ensure or " (PIPETRAIN_BLAS_CORETYPE)" when the user chose it, into buf. */
void blas_kernel_describe(char *buf, size_t size);
/* The line saying blas_kernel_ensure's correction, on stderr from rank 0, once (later calls,
 * and a run without one, say nothing). */
void blas_kernel_say_restart(void);

/* The level an OpenBLAS core name (case ignored) needs; -1 for a name not in the table. */
int blas_kernel_isa(const char *core);
/* The highest level f runs. */
blas_isa blas_kernel_cpu_isa(const cpu_features *f);
/* A level's word for messages: "sse", "avx", "avx2", "avx512", "avx512_bf16", "amx". */
const char *blas_kernel_isa_word(blas_isa isa);
/* Whether f is an AMD (or Hygon) CPU, whose AVX2 kernel is Zen rather than Haswell. */
int blas_kernel_cpu_amd(const cpu_features *f);
/* The kernel to use on a CPU of level isa: the preferred one of the highest level at or below
 * isa that has(name) accepts (has NULL: all but those the library must be asked about); at the
 * AVX2 level on an AMD CPU (amd 1) Zen, as OpenBLAS itself picks there (Haswell's kernels with
 * Zen's blocking), where has accepts it. */
const char *blas_kernel_best(blas_isa isa, int amd, int (*has)(const char *core));
/* The kernel to switch to when OpenBLAS chose `chosen` on a CPU of level isa (amd as above);
 * NULL to keep it. */
const char *blas_kernel_wanted(const char *chosen, blas_isa isa, int amd,
                               int (*has)(const char *core));

#endif
