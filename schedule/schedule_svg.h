/* schedule/schedule_svg.h: the pipeline picture of one step as an SVG file, the one renderer
 * for simulated schedules (pipe_train --print-schedule --svg) and measured traces (pipe_trace,
 * observe/trace_read.h), so that the two look alike and compare at a glance.
 *
 * The picture is drawn from timed spans (pt_sched_box): one row per stage, a box per FORWARD
 * (class "F") and BACKWARD (class "B") at its start and length with its micro-batch number
 * inside (where it fits; the tooltip always has it), the time a box spent waiting for a
 * neighbour (class "wait", inside its box) drawn pale, a legend, a title and a time axis.
 * Reductions and the optimizer are not drawn.
 *
 * Simulated spans come from the action lists with unit costs: a FORWARD takes 1, a BACKWARD 2
 * (the usual backward = 2 x forward), communication and loads take no time. A FORWARD/BACKWARD
 * starts when the previous action of its stage is done and, on an inner stage, when the
 * neighbour's matching send (SEND_ACT of mb on s-1, SEND_GRAD of mb on s+1) has happened. Under
 * these costs GPipe and 1F1B both idle (P-1)/(M+P-1) of the step, the figure docs/schedules.md
 * quotes.
 */
#ifndef PT_SCHEDULE_SVG_H
#define PT_SCHEDULE_SVG_H

#include <stddef.h>

#include "schedule/schedule.h"

#define SCHED_FORWARD_COST 1.0
#define SCHED_BACKWARD_COST 2.0

typedef enum { SCHED_BOX_F, SCHED_BOX_B, SCHED_BOX_WAIT } pt_sched_box_kind;

/* One span: a forward or backward of micro-batch mb on a stage, or a wait inside one (mb is
 * then the micro-batch of the box it lies in). t0 < t1 in the picture's time unit. */
typedef struct {
  int stage, mb;
  pt_sched_box_kind kind;
  double t0, t1;
} pt_sched_box;

/* What to draw: the spans and the words around them. */
typedef struct {
  const char *title;  /* the heading (escaped when written) */
  const char *legend; /* the grey note after the swatches: what blank, pale, numbers mean */
  const char *axis;   /* the time axis' label, e.g. "time (ms)" */
  int n_stages;
  const pt_sched_box *boxes;
  int n;
  double t0, t1;             /* the time window drawn: t0 at the left edge */
  double min_px, max_px;     /* bounds on the pixels per time unit (the window aims at 900) */
} pt_sched_picture;

/* Fills boxes (room for 2 * n_stages * n_micro; each stage's boxes in its run order) and *span
 * with the time the last box ends. Returns the number of boxes, or -1 with a one-line reason in
 * err when the lists cannot run to the end (a wait on a send that never comes, a micro-batch
 * out of range, more boxes than room). */
int schedule_simulate(const pt_schedule *s, pt_sched_box *boxes, double *span, char *err,
                      size_t errsz);
/* Idle fraction of the window [t0, t1] over n_stages rows: 1 - (forward and backward time less
 * the waits inside them) / (n_stages * (t1 - t0)); 0 for an empty window. */
double sched_bubble(const pt_sched_box *boxes, int n, int n_stages, double t0, double t1);
/* Writes the picture to path. Returns 0, or -1 with a one-line reason in err. */
int sched_write_svg(const pt_sched_picture *pic, const char *path, char *err, size_t errsz);
/* Simulates s and writes its picture to path ("NAME: P = .., M = .. micro-batches, simulated
 * bubble ..%"). Returns 0, or -1 with a one-line reason in err (the simulation failed, or the
 * file could not be written). */
int schedule_write_svg(const pt_schedule *s, const char *path, char *err, size_t errsz);

#endif
