/* observe/trace_times.h: per-layer times (profile/layer_times.h) from a recorded trace
 * (pipe_train --trace), for the planner to re-balance a job with what its run really took.
 *
 * The trace's median busy times per chunk (observe/trace_medians.h: every recorded step but the
 * first, replica 0, waits taken off) are spread over the chunk's layers, which the trace's
 * layout metadata names (observe/trace_layout.h), in proportion to the layers' FLOP estimates
 * (layer_cost, layers/layer.h):
 *   f     by the forward FLOPs;
 *   i, w  a layer with parameters half its backward FLOPs each, one without all in i (w = 0).
 *         A fused backward (B spans) is spread over the i and w shares together; a split one's
 *         I and W spans each over their own (a chunk without parameters adds its W to i).
 * A layer's estimate never counts for less than one operation per output element: a gather
 * (an embedding's forward) has 0 FLOPs yet takes time, so every f and i is positive.
 * Under activation checkpointing (the trace's interval > 0) a backward span re-runs the
 * chunk's forward: the chunk's F is taken off it first, keeping at least 1% of it.
 * opt: each stage's median optimizer time per step, spread over its layers by parameter count
 * (0 on a stage without parameters). Transfers: PROFILE_P2P_LATENCY_S, PROFILE_P2P_BYTES_PER_S.
 * source: "trace PATH (N steps, M micro-batches)".
 * Ownership: out's arrays are allocated here (calloc, as profile_times_alloc does); free them
 * with profile_times_free. On failure out holds nothing.
 */
#ifndef PT_TRACE_TIMES_H
#define PT_TRACE_TIMES_H

#include <stddef.h>

#include "model/model.h"
#include "observe/trace_layout.h" /* trace_model_hash */
#include "profile/layer_times.h"

/* Times for model m (configured; m->spec gives micro_batch_size and seq_len) from the trace at
 * path. Returns 0, or -1 with one line in err naming the file and what to do: unreadable, not
 * a trace, no layout metadata (an older pipetrain), another model (n_layers or model_hash),
 * another micro_batch_size or seq_len, a chunk without forward or backward spans. */
int trace_read_times(const char *path, const pt_model *m, pt_layer_times *out, char *err,
                     size_t errsz);

#endif
