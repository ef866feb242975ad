/* schedule/schedule_svg.h: the pipeline picture of one step as an SVG file, the one renderer
 * for simulated schedules (pipe_train --print-schedule --svg) and measured traces (pipe_trace,
 * observe/trace_read.h), so that the two look alike and compare at a glance.
 *
 * The picture is drawn from timed spans (pt_sched_box, schedule_sim.h): one row per rank, a
 * box per FORWARD (class "F"), BACKWARD ("B"), BACKWARD_INPUT ("I") and BACKWARD_WEIGHT ("W")
 * at its start and length with its micro-batch inside (where it fits; the tooltip always has
 * it, and the chunk), the time a box spent waiting for a neighbour (class "wait", inside its
 * box) drawn pale, a legend, a title and a time axis. With several chunks per rank, a rank's
 * later chunks are drawn lighter. Reductions and the optimizer are not drawn.
 */
#ifndef PT_SCHEDULE_SVG_H
#define PT_SCHEDULE_SVG_H

#include <stddef.h>

#include "schedule/schedule_sim.h"

/* What to draw: the spans and the words around them. */
typedef struct {
  const char *title;  /* the heading (escaped when written) */
  const char *legend; /* the grey note after the swatches: what blank, pale, numbers mean */
  const char *axis;   /* the time axis' label, e.g. "time (ms)" */
  int n_stages;
  int chunks_per_rank;       /* > 1: boxes carry their chunk, later ones drawn lighter */
  const pt_sched_box *boxes;
  int n;
  double t0, t1;             /* the time window drawn: t0 at the left edge */
  double min_px, max_px;     /* bounds on the pixels per time unit (the window aims at 900) */
} pt_sched_picture;

/* Writes the picture to path. Returns 0, or -1 with a one-line reason in err. */
int sched_write_svg(const pt_sched_picture *pic, const char *path, char *err, size_t errsz);
/* Simulates s and writes its picture to path ("NAME: P = .., M = .. micro-batches, simulated
 * bubble ..%"). Returns 0, or -1 with a one-line reason in err (the simulation failed, or the
 * file could not be written). */
int schedule_write_svg(const pt_schedule *s, const char *path, char *err, size_t errsz);

#endif
