/* schedule/file_fix.h: what schedule_file.c does to a file's parsed lists before building
 * (schedule_file_fix.c). Private to schedule/. Each list's src is the file line of its action,
 * so every message can name it. */
#ifndef PT_SCHEDULE_FILE_FIX_H
#define PT_SCHEDULE_FILE_FIX_H

#include <stddef.h>

#include "schedule/emit.h"

typedef struct {
  const char *path;
  schedule_list *ranks; /* [n_ranks] */
  int n_ranks;
  char *err;
  size_t errsz;
} file_lists;

/* Micro-batches below n_micro, chunks in range (n_chunks > 0: below it; else as many on
 * every rank): 0, or -1 with "FILE:LINE: rank R, action A: what is wrong; the fix". */
int file_check_ranges(const file_lists *x, int n_micro, int n_chunks);
/* Each compute action and each transfer of a micro-batch once per chunk, reported at the
 * second one (before the builder adds loads and transfers around it): 0, or -1 as above. */
int file_check_duplicates(const file_lists *x, int n_micro);
/* A file with transfers but no L anywhere is torch's lowering (torch has no load action and
 * posts each receive as soon as the peer sends, before pipetrain's slot is free): its transfers
 * are dropped, so the builder places its own. Returns 1 when it dropped any. */
int file_drop_torch_transfers(file_lists *x);
/* Full backwards (B) of a chunk out of ascending micro-batch order (torch's ScheduleLoopedBFS
 * runs them descending) run as I where written, each W in ascending order as soon as its turn
 * comes: the weight gradients add up as in the sequential run. Returns the most W pending
 * this adds on one chunk (0: nothing changed). */
int file_order_weights(file_lists *x, int n_chunks, int n_micro);

#endif
