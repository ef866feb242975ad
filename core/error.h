/* core/error.h: the one way pipetrain reports failure.
 *
 * Two kinds of failure, two exit codes:
 *   - bad input (spec, data, command line): pt_fail_input(), exit code 2, one line that names
 *     the file and place and says what to do;
 *   - anything else (libc, BLAS, later MPI/NCCL/CUDA): pt_fatal(), exit code 1.
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
/* A problem the run survives (e.g. a periodic checkpoint the disk had no room for): one line
 * "pipetrain[rank R]: warning: ..." on stderr; the run goes on. */
void pt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Checks a libc-style call: nonzero/NULL/negative results per macro, errno reported. */
void pt_fail_call(const char *file, int line, const char *call) __attribute__((noreturn));
#define PT_CHECK(cond_ok, call_text) \
  do { if (!(cond_ok)) pt_fail_call(__FILE__, __LINE__, call_text); } while (0)
#define PT_CHECK_ZERO(call) do { if ((call) != 0) pt_fail_call(__FILE__, __LINE__, #call); } while (0)

/* Allocation that never returns NULL (fatal error naming the size instead). Memory is zeroed. */
void *pt_calloc(size_t count, size_t size);
/* 64-byte aligned, zeroed; free with pt_free_aligned() (NULL is fine). Counted by the memory
 * tracker: the bulk buffers (parameters, gradients, optimizer state, activations) use these. */
void *pt_alloc_aligned(size_t bytes);
void pt_free_aligned(void *p);
size_t pt_mem_current(void); /* bytes held in pt_alloc_aligned blocks now */
/* Counts memory held elsewhere (a GPU's) in the same totals: +bytes when taken, -bytes freed. */
void pt_mem_account(int64_t delta);
size_t pt_mem_peak(void);    /* the most held at once since the last reset */
void pt_mem_reset_peak(void);
char *pt_strdup(const char *s);

#endif
