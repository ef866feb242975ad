/* observe/trace_layout.h: the layout a trace was recorded under, kept in the trace's "metadata"
 * so that its measured times can be mapped back onto layers (observe/trace_times.h), and
 * refused when they come from another model or another batch shape.
 *
 * Keys, next to "schedule", "stages" and "micro_batches" (observe/trace_write.h):
 *   "n_layers", "bounds" (n_chunks + 1 ints: chunk c owns layers [bounds[c], bounds[c+1])),
 *   "chunk_stage" (n_chunks ints: the stage running each chunk), "virtual_stages",
 *   "micro_batch_size", "seq_len" (0: the model reads no tokens),
 *   "activation_checkpoint_interval" (0: off) and "model_hash" (16 hex digits,
 *   trace_model_hash).
 * The model hash covers the model only (each layer's type name, in_dim, out_dim and parameter
 * shapes), not the training settings: a trace of the same model under another schedule, stage
 * count or optimizer still describes its layers.
 */
#ifndef PT_TRACE_LAYOUT_H
#define PT_TRACE_LAYOUT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "partition/plan.h"

typedef struct {
  int n_layers, n_stages, virtual_stages, n_chunks, micro_batches;
  int *bounds;      /* [n_chunks + 1] */
  int *chunk_stage; /* [n_chunks] */
  int64_t micro_batch_size, seq_len, checkpoint_interval;
  uint64_t model_hash;
} pt_trace_layout;

/* FNV-1a (64 bits) over each layer's type name, in_dim, out_dim and parameter shapes. */
uint64_t trace_model_hash(const pt_model *m);

/* Adds the layout keys of a run planned as plan for model m to a trace's metadata object. */
void trace_layout_to_json(cJSON *meta, const pt_plan *plan, const pt_model *m);

/* The layout in a trace's metadata (meta may be NULL). Returns 0, or -1 with "PATH: ..." in
 * err: no layout keys (a trace of an older pipetrain), or keys that contradict each other.
 * Free with trace_layout_free. */
int trace_layout_read(const cJSON *meta, const char *path, pt_trace_layout *out, char *err,
                      size_t errsz);
/* Whether times recorded under l hold for model m (m->spec's micro_batch_size and seq_len):
 * 0, or -1 with "PATH: ..." in err naming what differs. */
int trace_layout_check(const pt_trace_layout *l, const pt_model *m, const char *path, char *err,
                       size_t errsz);
void trace_layout_free(pt_trace_layout *l);

#endif
