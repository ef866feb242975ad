/* observe/trace_write.h: the collective half of the trace (needs comm). */
#ifndef PT_TRACE_WRITE_H
#define PT_TRACE_WRITE_H

#include "comm/comm.h"
#include "observe/trace.h"
#include "partition/plan.h"

/* This rank's clock offset to rank 0's, in seconds (collective over world). */
double trace_measure_offset(pt_comm *world);
/* Gathers every rank's spans; rank 0 writes path, with "metadata": {schedule, stages,
 * micro_batches} and the layout the run was planned as (plan, for model m: trace_layout.h).
 * Collective over world. */
void trace_write(const pt_trace *t, pt_comm *world, const pt_plan *plan, const pt_model *m,
                 const char *schedule, const char *path);

#endif
