/* tests/fuzz/fuzz_files.h: the scratch files the fuzz targets that read from disk share
 * (fuzz_checkpoint.c, fuzz_schedule.c, fuzz_hf.c). The readers under test take paths, so each
 * input is written into a file first.
 *
 * Harness failures (a file that cannot be written) are bugs of the harness or the machine,
 * never a finding: fuzz_die names the target and aborts, so libFuzzer and the replay test both
 * report a stack. */
#ifndef PT_FUZZ_FILES_H
#define PT_FUZZ_FILES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint8_t *data;
  size_t size;
} fuzz_blob;

/* Prints "TARGET: what: detail" and aborts. */
_Noreturn void fuzz_die(const char *target, const char *what, const char *detail);
/* PT_FUZZ_VERBOSE=1 (read once): print each call's outcome, to see where an input stops. */
int fuzz_verbose(void);
/* The contract every reader here keeps: 0, or -1 with a message; with fuzz_verbose the outcome. */
void fuzz_expect_msg(const char *target, int rc, const char *err, const char *call);

/* A fresh directory $TMPDIR/pt_fuzz_<name>.XXXXXX (TMPDIR or /tmp) into out; removed by
 * fuzz_remove_dir. */
void fuzz_make_dir(const char *target, const char *name, char *out, size_t outsz);
/* out = dir/name, or fuzz_die when it does not fit. */
void fuzz_path(const char *target, char *out, size_t outsz, const char *dir, const char *name);
/* A new file with exactly data[0, size) (unlinked first: ext4 flushes a truncated-and-rewritten
 * file on close, a cost paid on every input). */
void fuzz_write_file(const char *target, const char *path, const void *data, size_t size);
/* The whole file, malloc'd (the caller frees data). */
fuzz_blob fuzz_read_file(const char *target, const char *path);
/* Removes the plain files in dir, then dir (the targets create nothing deeper). */
void fuzz_remove_dir(const char *dir);

#endif
