/* core/error.h: the one way pipetrain reports failure.
 *
 * Two kinds of failure, two exit codes:
 *   - bad input (spec, data, command line): pt_fail_input(), exit code 2, one line that names
 *     the file and place and says what to do;
 *   - anything else (libc, BLAS, MPI, NCCL, CUDA): pt_fatal(), exit code 1; a failed library
 *     call through PT_CHECK_<LIBRARY> below.
 * Both print "pipetrain[rank R]: ..." so a message in a multi-rank log names its rank, and both
 * end the whole job (the pipeline engine installs an abort hook that takes the other ranks down).
 */
#ifndef PT_ERROR_H
#define PT_ERROR_H

#include <stddef.h>
#include <stdint.h>

#define PT_EXIT_INPUT 2
#define PT_EXIT_FATAL 1

/* Rank this process reports in messages; -1 (the default) prints no rank. */
void pt_error_set_rank(int rank);

/* Called before exit so a multi-rank run can abort its peers (e.g. MPI_Abort). */
typedef void (*pt_abort_hook)(int exit_code);
void pt_error_set_abort_hook(pt_abort_hook hook);

void pt_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void pt_fail_input(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* For functions that fail with -1 and a one-line reason: writes the reason into err (nothing
 * when err is NULL or errsz is 0) and returns -1, so `return pt_errorf(err, errsz, ...);`. */
int pt_errorf(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Copies the message src into dst (dstsz bytes) with every word (run of non-blank characters)
 * longer than 160 bytes cut to its first 100 and last 50 bytes around "...", so a reason that
 * quotes a 100 KB argument still fits a one-line buffer whole. Returns dst. */
char *pt_shorten_words(char *dst, size_t dstsz, const char *src);
/* pt_errorf with the words of the formatted message shortened as pt_shorten_words does. */
int pt_errorf_short(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A problem the run survives (e.g. a periodic checkpoint the disk had no room for): one line
 * "pipetrain[rank R]: warning: ..." on stderr; the run goes on. */
void pt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Something the user may want to know that every rank meets alike (e.g. a fallback to a slower
 * kernel): "pipetrain[rank 0]: notice: ..." from rank 0 only (or the single process). */
void pt_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Checking a library call, one shape for every library: PT_CHECK_<LIBRARY>(call) evaluates call
 * once and, when the result is not the library's success, ends the job (pt_fatal: exit code 1,
 * the abort hook) with "pipetrain[rank R]: error: FILE:LINE: CALL failed: LIBRARY: TEXT", TEXT
 * being the library's own words for the result. Each library's macro is one line over
 * PT_CHECK_CALL, defined beside that library's code together with its result-to-text function
 * (which is where the library's headers are):
 *   PT_CHECK_LIBC   here: a negative result (-1 and errno), TEXT from strerror
 *   PT_CHECK_MPI    comm/comm_mpi.c        PT_CHECK_NCCL   comm/nccl/comm_nccl.c
 *   PT_CHECK_CUDA, PT_CHECK_CUBLAS         kernels/cuda/gpu.h
 * PT_CHECK_CALL(type, call, call_text, ok, library, text): ok and text are function-like names
 * applied to the result; call_text is the call as written (#call in the library's macro: a
 * stringification here would show the call with its macros expanded). */
void pt_fail_lib(const char *file, int line, const char *call, const char *library,
                 const char *code_text) __attribute__((noreturn));
#define PT_CHECK_CALL(type, call, call_text, ok, library, text)                               \
  do {                                                                                        \
    type pt_result_ = (call);                                                                 \
    if (!ok(pt_result_)) pt_fail_lib(__FILE__, __LINE__, call_text, library, text(pt_result_)); \
  } while (0)
const char *pt_libc_error_text(long result); /* strerror(errno) */
#define PT_LIBC_OK(r) ((r) >= 0)
#define PT_CHECK_LIBC(call) PT_CHECK_CALL(long, call, #call, PT_LIBC_OK, "libc", pt_libc_error_text)

/* Allocation that never returns NULL (fatal error naming the size instead). Memory is zeroed. */
void *pt_calloc(size_t count, size_t size);
/* 64-byte aligned, zeroed; free with pt_free_aligned() (NULL is fine). Counted by the memory
 * tracker: the bulk buffers (parameters, gradients, optimizer state, activations) use these. */
void *pt_alloc_aligned(size_t bytes);
void pt_free_aligned(void *p);
/* A scratch buffer kept between calls (*buf, *cap bytes; both 0 at first): grown with
 * pt_alloc_aligned to hold `bytes` when it is smaller, its old contents dropped. Returns *buf. */
void *pt_grow_aligned(void **buf, size_t *cap, size_t bytes);
size_t pt_mem_current(void); /* bytes held in pt_alloc_aligned blocks now */
/* Counts memory held elsewhere (a GPU's) in the same totals: +bytes when taken, -bytes freed. */
void pt_mem_account(int64_t delta);
size_t pt_mem_peak(void);    /* the most held at once since the last reset */
void pt_mem_reset_peak(void);
char *pt_strdup(const char *s);

#endif
