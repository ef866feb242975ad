/* schedule/check.h: what the schedule checks (schedule_check.c, schedule_rendezvous.c,
 * schedule_file.c) share. Private to schedule/. */
#ifndef PT_SCHEDULE_CHECK_H
#define PT_SCHEDULE_CHECK_H

#include "schedule/schedule.h"

/* Writes "rank R, action A: WHAT" (index < 0: "rank R: WHAT") to err, sets *where (when not
 * NULL) and returns -1. */
int schedule_fail_at(const pt_schedule *s, pt_sched_where *where, int r, int index, char *err,
                     size_t errsz, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Every action is known, in range and on its chunk's rank, every chunk has slots, and every
 * rank ends its step with TIE DP OPT, once each, nothing after. The simulations rely on it.
 * Returns 0, or -1 as schedule_fail_at. */
int schedule_check_structure(const pt_schedule *s, pt_sched_where *where, char *err,
                             size_t errsz);

/* One action of rank r (its index-th) tried by a simulation: 1 done, 0 must wait, -1 error. */
typedef int (*schedule_step_fn)(void *ctx, int r, int index, const pt_action *a);
/* Runs every rank's list round-robin, each rank as far as step lets it, until no rank moves;
 * pc[rank] (zeroed by the caller) ends at each rank's first action not done. Returns 0 when
 * every list ran to its end, 1 when some rank waits forever (a deadlock), -1 at an error. */
int schedule_sweep(const pt_schedule *s, int *pc, schedule_step_fn step, void *ctx);

/* schedule_check_rendezvous for schedules with several chunks per rank: every link on its own
 * stream (schedule_links.c). */
int schedule_check_links(const pt_schedule *s, pt_sched_where *where, char *err, size_t errsz);

#endif
