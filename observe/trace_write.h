/* observe/trace_write.h: the collective half of the trace (needs comm). */
#ifndef PT_TRACE_WRITE_H
#define PT_TRACE_WRITE_H

#include "comm/comm.h"
#include "observe/trace.h"

/* This rank's clock offset to rank 0's, in seconds (collective over world). */
double trace_measure_offset(pt_comm *world);
/* Gathers every rank's spans; rank 0 writes path, with "metadata": {schedule, stages,
 * micro_batches}. Collective over world. */
void trace_write(const pt_trace *t, pt_comm *world, int stages, const char *schedule,
                 int micro_batches, const char *path);

#endif
