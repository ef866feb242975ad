/* schedule/schedule_svg.h: the pipeline picture of one step of a schedule, as an SVG file.
 *
 * Time comes from a simulation of the action lists with unit costs: a FORWARD takes 1, a
 * BACKWARD 2 (the usual backward = 2 x forward), communication and loads take no time. A
 * FORWARD/BACKWARD starts when the previous action of its stage is done and, on an inner
 * stage, when the neighbour's matching send (SEND_ACT of mb on s-1, SEND_GRAD of mb on s+1)
 * has happened. Reductions and the optimizer are not drawn. Under these costs GPipe and 1F1B
 * both idle (P-1)/(M+P-1) of the step, the figure docs/schedules.md quotes.
 *
 * The picture (scripts/trace_to_svg.py draws measured traces the same way): one row per stage,
 * a box per FORWARD (class "F") and BACKWARD (class "B") with its micro-batch number inside,
 * a legend, and a title with the schedule name, P, M and the simulated bubble fraction.
 */
#ifndef PT_SCHEDULE_SVG_H
#define PT_SCHEDULE_SVG_H

#include <stddef.h>

#include "schedule/schedule.h"

#define SCHED_FORWARD_COST 1.0
#define SCHED_BACKWARD_COST 2.0

typedef struct {
  int stage, mb, backward;
  double t0, t1;
} pt_sched_box;

/* Fills boxes (room for 2 * n_stages * n_micro; each stage's boxes in its run order) and *span
 * with the time the last box ends. Returns the number of boxes, or -1 with a one-line reason in
 * err when the lists cannot run to the end (a wait on a send that never comes, a micro-batch
 * out of range, more boxes than room). */
int schedule_simulate(const pt_schedule *s, pt_sched_box *boxes, double *span, char *err,
                      size_t errsz);
/* Idle fraction of the simulated step: 1 - busy / (P * span). */
double schedule_sim_bubble(const pt_schedule *s, const pt_sched_box *boxes, int n, double span);
/* Simulates s and writes the picture to path. Returns 0, or -1 with a one-line reason in err
 * (the simulation failed, or the file could not be written). */
int schedule_write_svg(const pt_schedule *s, const char *path, char *err, size_t errsz);

#endif
