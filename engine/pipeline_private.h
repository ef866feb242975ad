/* engine/pipeline_private.h: what the files of the pipelined engine share among themselves
 * (pipeline.c: set-up; pipeline_step.c: the actions; pipeline_ties.c: tied weights;
 * pipeline_ckpt.c: checkpoints and gathers). Not for use outside engine/pipeline*.c. */
#ifndef PT_PIPELINE_PRIVATE_H
#define PT_PIPELINE_PRIVATE_H

#include "engine/pipeline.h"

/* All ranks agree whether any failed; the first failing rank keeps its message in err, the
 * others' is emptied. 0 when none failed, else -1 everywhere. Collective. */
int pipeline_agree_failure(pt_pipeline *p, int failed, char *err);

/* The tie groups of this rank (one per tie key and replica whose copies are on more than one
 * stage), with each key's copies in layer order. Collective (comm_split). */
void pipeline_make_ties(pt_pipeline *p);
/* The tie groups pipeline_make_ties makes, in the order REDUCE_TIED sums them, as stage sets
 * (schedule.h's pt_sched_reductions): tie[g * P + stage] = 1 for the stages of group g
 * (tie: at least n_layers * P zeroed bytes). Returns the number of groups. Local. */
int pipeline_tie_table(const pt_pipeline *p, unsigned char *tie);
/* Every copy of a tied weight starts from its first owner's values. Collective per group. */
void pipeline_broadcast_ties(pt_pipeline *p);
/* REDUCE_TIED: every tied weight's gradient summed over its copies in layer order, on every
 * stage holding one; copies on one stage alone are folded locally. Collective per group. */
void pipeline_reduce_ties(pt_pipeline *p);
void pipeline_free_ties(pt_pipeline *p);

/* The sharded optimizer (engine/pipeline_shard.c), collective over the stage's data-parallel
 * group, each wait under the watchdog:
 *   init       once part_alloc_ranges made the optimizer (sharded when given the replicas):
 *              sets sharded, grads_on_last and shard_ends; a notice when there is one replica
 *   reduce     REDUCE_DP's sum (the chain's reduce-scatter, or comm.dp_reduce allreduce)
 *   norm_sums  the last replica's n per-tensor sums of squares to all, when only it holds
 *              every summed gradient
 *   gather     after an update: the other replicas' ranges of the parameters, and their bf16
 *              copy rewritten
 *   collect    the whole optimizer state (host copies) assembled in whole on replica 0, the
 *              others sending theirs; optimizer_free(whole) afterwards on every replica */
void pipeline_shard_init(pt_pipeline *p);
void pipeline_shard_free(pt_pipeline *p);
void pipeline_shard_reduce(pt_pipeline *p);
void pipeline_shard_norm_sums(pt_pipeline *p, double *sums, int n);
void pipeline_shard_gather(pt_pipeline *p);
void pipeline_shard_collect(pt_pipeline *p, pt_optimizer *whole);

/* pipeline.offload (engine/pipeline_offload.c): chunk k's executor, with its frames and host
 * buffers where its stage offloads; before action i of the rank's list, the prefetch for the
 * backward that follows it (schedule_prefetch_at); the copies made since the last call as
 * spans of the trace's copy track (when the step is traced; dropped otherwise). Local. */
void pipeline_offload_init(pt_pipeline *p, pt_chunk *k);
void pipeline_offload_prefetch(pt_pipeline *p, const pt_action *acts, int n, int i);
void pipeline_offload_trace(pt_pipeline *p);

/* Chunk of global index c on this rank (NULL when another rank runs it). */
static inline pt_chunk *pipeline_chunk(pt_pipeline *p, int c) {
  int i = c >= 0 && c < p->plan.n_chunks ? p->chunk_at[c] : -1;
  return i >= 0 ? &p->chunks[i] : NULL;
}

#endif
