/* partition/auto.h: the planner behind `auto`: pipeline.schedule, pipeline.partition,
 * train.activation_checkpoint_interval, pipeline.offload and (with data parallelism)
 * pipeline.shard_optimizer chosen together from measured layer times.
 *
 * The search: every schedule (with the chunks per rank it takes: 1, 2, 3 or 4 for interleaved
 * and looped BFS) x every checkpoint interval x the stage boundaries, for what the spec leaves
 * to `auto` (a named value stays fixed). A candidate (schedule, chunks, interval) is built once;
 * its boundaries are every split when there are few (auto_exhaustive_splits), else they start
 * from the split that balances the slowest chunk's time and from the memory-aware balanced
 * split of partition/plan.c and move by one or two layers (a boundary, or a chunk sliding)
 * while the simulated step gets shorter (or, over a cap, the excess smaller). The simulation runs the
 * candidate's own action lists (schedule/schedule_sim.h) with each chunk's summed layer times
 * (profile/layer_times.h), a transfer time per stage boundary, and then the optimizer: the step
 * is the latest rank's last action plus its optimizer time (plus the data-parallel gradient
 * reduction). Memory is the exact estimate (partition/memory.h) of the whole layout against
 * every stage's cap. The winner is the fastest layout that fits; ties (within 1e-9) go to less
 * memory. Beyond the exhaustive limit the moves find a local optimum, not a proven global one.
 * pipeline.offload: auto (partition/auto_copies.c): for every split, each stage that says auto
 * and is over its cap offloads the smallest of 1/4, 1/2, 3/4 and all of both kinds that fits;
 * the simulation runs the copies (schedule_simulate_copies) at the copy rate measured at start
 * (profile/layer_times.h, $PIPETRAIN_COPY_BYTES_PER_S overrides), beside the compute on a GPU,
 * on the rank itself on the emulated device. pipeline.shard_optimizer: auto with D > 1: tried
 * off and on for every candidate.
 *
 * Deterministic: the same model, spec and times give the same choice on every rank.
 */
#ifndef PT_PARTITION_AUTO_H
#define PT_PARTITION_AUTO_H

#include <stdint.h>
#include <stdio.h>

#include "model/model.h"
#include "profile/layer_times.h"
#include "schedule/registry.h"

#define AUTO_OVERRIDE_MAX 1024

/* Up to this many splits of a candidate every one is tried (the exact optimum); beyond, local
 * moves from two starts. 2000 by default; tests lower it to check the local search. */
extern int auto_exhaustive_splits;

typedef struct {
  const pt_schedule_type *schedule;
  int v, ckpt;           /* chunks per stage, checkpoint interval (0: off) */
  int shard;             /* pipeline.shard_optimizer (searched with data parallelism) */
  int *bounds;           /* [n_stages * v + 1]; NULL when ruled out before any split */
  double step_s;         /* simulated step: pipeline, then optimizer */
  double bubble;         /* idle share of the pipeline part, over all stages */
  int64_t *stage_bytes;  /* [n_stages] memory estimate: on the device, offload's share out */
  double *offload;       /* [n_stages] share of both kinds offloaded where searched, else 0 */
  double copy_s;         /* offload copies' time on the ranks' compute, summed (hidden: 0) */
  int fits;              /* every stage within its cap */
  int64_t over;          /* bytes over the caps, summed over the stages */
  int64_t peak;          /* the largest stage's bytes */
  int order;             /* search order: the last tie-break, for the same answer everywhere */
  int worst_stage;       /* the stage furthest over its cap (-1: none) */
  char why[320];         /* not run: why ("" when it ran) */
} pt_auto_candidate;

typedef struct {
  int n_stages, micro_batches;
  double *cap;                /* [n_stages] bytes, 0: none */
  pt_auto_candidate *c;       /* sorted: fitting (fastest first), over a cap, not run */
  int n, n_fit, cap_c;
  int schedule_auto, partition_auto, ckpt_auto; /* what was searched */
  int offload_auto;           /* some stage's pipeline.offload: auto, on a device that offloads */
  int shard_auto;             /* pipeline.shard_optimizer: auto with data parallelism */
  int drop_stage_layers;      /* the split searched replaces the spec's pipeline.stage_layers */
  int evaluations;            /* layouts simulated */
  char times_source[320];
} pt_auto_result;

/* Whether the spec leaves anything to this planner (schedule, partition or the interval). */
int auto_wanted(const pt_spec *s);
/* Searches what m's spec leaves to `auto` (also the partition when force_partition is set:
 * --from-trace re-balances a fixed schedule). Returns 0 with r->c[0] the choice, or -1 with e
 * set: nothing fits (the stage, its bytes against its cap, and the smallest change that fits:
 * a checkpoint interval, another schedule, a smaller micro-batch or more stages) or bad input.
 * r is filled either way; free with auto_result_free. */
int auto_search(const pt_model *m, const pt_layer_times *t, int force_partition,
                pt_auto_result *r, spec_errors *e);
void auto_result_free(pt_auto_result *r);
/* The simulated step and bubble of the plan m's spec names (no `auto` left in it), with times t:
 * what --plan predicts and bench/schedules.py sets beside the measured step. 0, or -1 with e. */
int auto_predict(const pt_model *m, const pt_layer_times *t, double *step_s, double *bubble,
                 spec_errors *e);
/* The --set values that pin the choice ("pipeline.schedule=zbv", ...), for the spec to be
 * re-read with and for the user to copy: n written (at most max). */
int auto_overrides(const pt_auto_result *r, const pt_spec *s, char (*out)[AUTO_OVERRIDE_MAX],
                   int max);
/* The choice and the next top - 1 candidates, then one line per kind of candidate ruled out. */
void auto_print(FILE *f, const pt_auto_result *r, int top);
/* The same as a cJSON object (the caller owns it). */
struct cJSON *auto_json(const pt_auto_result *r);

#endif
