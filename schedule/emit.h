/* schedule/emit.h: what schedule generators (gpipe.c, 1f1b.c) write a stage's action list
 * with. Private to schedule/: the rest of the code sees finished lists (schedule.h). */
#ifndef PT_SCHEDULE_EMIT_H
#define PT_SCHEDULE_EMIT_H

#include "schedule/registry.h"
#include "schedule/schedule.h"

struct schedule_gen {
  int s, P, M;    /* this stage, the stages, the micro-batches of a step */
  pt_action *acts; /* the list so far */
  int n, cap;
};

void schedule_emit(schedule_gen *g, pt_action_kind kind, int mb);
/* mb's forward with the transfers and data loads stage g->s needs around it. */
void schedule_emit_forward(schedule_gen *g, int mb);
/* mb's backward likewise. */
void schedule_emit_backward(schedule_gen *g, int mb);

#endif
