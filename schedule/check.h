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
 * rank ends its step with TIE DP OPT, once each, nothing after (FLUSH anywhere before OPT).
 * The simulations rely on it.
 * Returns 0, or -1 as schedule_fail_at. */
int schedule_check_structure(const pt_schedule *s, pt_sched_where *where, char *err,
                             size_t errsz);

/* One action of rank r (its index-th) tried by a simulation: 1 done, 0 must wait, -1 error. */
typedef int (*schedule_step_fn)(void *ctx, int r, int index, const pt_action *a);
/* Runs every rank's list round-robin, each rank as far as step lets it, until no rank moves;
 * pc[rank] (zeroed by the caller) ends at each rank's first action not done. Returns 0 when
 * every list ran to its end, 1 when some rank waits forever (a deadlock), -1 at an error. */
int schedule_sweep(const pt_schedule *s, int *pc, schedule_step_fn step, void *ctx);

/* The step end's reductions as the NCCL checks see them (schedule_reduce.c): each a rendezvous
 * of its own group, on its own communicator. */
typedef struct {
  const pt_schedule *s;
  pt_sched_reductions red; /* the layout's; without one, any layout's (schedule.h) */
  unsigned char *own;      /* red.tie when it is ours */
  int *tie_at;             /* [rank]: the index of its REDUCE_TIED (-1: none) */
  signed char *met;        /* [group]: a query's memo */
} sched_reduce;

/* red NULL: one tie group over every rank and data parallelism. */
void sched_reduce_init(sched_reduce *x, const pt_schedule *s, const pt_sched_reductions *red);
void sched_reduce_free(sched_reduce *x);
/* Whether rank r's REDUCE_TIED or REDUCE_DP (k) exchanges anything with other ranks. */
int sched_reduce_exchanges(const sched_reduce *x, int r, pt_action_kind k);
/* Rank r, at its REDUCE_TIED with every rank at pc, may leave it: each of its tie groups has
 * met (all ranks of the group in or past their REDUCE_TIED, each done with its earlier
 * groups, as the engine sums the groups in one order). A function of pc alone. */
int sched_reduce_tie_met(sched_reduce *x, const int *pc, int r);
/* The ranks of the first tie group r waits in ("0, 3") into buf: 1, or 0 when it waits for none. */
int sched_reduce_waits_for(sched_reduce *x, const int *pc, int r, char *buf, size_t size);

/* schedule_check_rendezvous for schedules with several chunks per rank: every link on its own
 * stream (schedule_links.c), the reductions as red has them. */
int schedule_check_links(const pt_schedule *s, sched_reduce *red, pt_sched_where *where,
                         char *err, size_t errsz);

#endif
