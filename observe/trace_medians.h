/* observe/trace_medians.h: what a recorded trace says each chunk's actions take: per chunk and
 * kind (F, B, I, W) the median busy time of one micro-batch, and per stage the median
 * optimizer time of one step, over replica 0's spans of every recorded step but the first (the
 * warm-up, when more than one is recorded).
 *
 * Busy time: a span's duration less the "wait" spans nested in it (time blocked on a
 * neighbour, not spent computing). A span's chunk is its args.chunk, or its rank's stage when
 * the rank runs one chunk. Times in seconds; -1 where the trace has no such span.
 */
#ifndef PT_TRACE_MEDIANS_H
#define PT_TRACE_MEDIANS_H

#include <stddef.h>

#include "observe/trace_doc.h"
#include "observe/trace_layout.h"

enum { TRACE_F, TRACE_B, TRACE_I, TRACE_W, TRACE_KINDS };

typedef struct {
  double *chunk; /* [n_chunks * TRACE_KINDS]: chunk c's kind k at [c * TRACE_KINDS + k] */
  double *opt;   /* [n_stages] */
  int n_steps;   /* the steps the medians are taken over */
} pt_trace_medians;

/* The medians of trace d (read from path) recorded under layout l. Returns 0, or -1 with
 * "PATH: ..." in err: no forward/backward spans on replica 0, or a span on a chunk or stage the
 * layout does not have. Free with trace_medians_free. */
int trace_medians_read(const pt_trace_doc *d, const pt_trace_layout *l, const char *path,
                       pt_trace_medians *out, char *err, size_t errsz);
void trace_medians_free(pt_trace_medians *t);

#endif
