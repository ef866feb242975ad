/* partition/plan.h: the stage plan (which layers each stage owns, where each rank runs, how much
 * memory and time each stage needs) and the stage map queries the engine asks.
 *
 * Ranks: rank = replica * stages + stage, so each data-parallel replica's pipeline occupies
 * consecutive ranks. The layers are cut into n_chunks = stages x virtual_stages contiguous
 * chunks (virtual stages; one per stage unless the schedule runs several per rank): chunk c owns
 * layers [bounds[c], bounds[c+1]), never empty, and runs on stage chunk_stage[c], which the
 * schedule's placement decides (schedule/schedule.h). With one chunk per stage, chunk c is stage
 * c. A stage's memory is its chunks' together (memory_estimate_rank); memory caps are per
 * stage. Neighbours come from chunk order, never from device ids: pipeline.devices only says
 * which local device a rank uses, in any order and stride.
 */
#ifndef PT_PARTITION_PLAN_H
#define PT_PARTITION_PLAN_H

#include <stdio.h>

#include "partition/memory.h"
#include "partition/offload.h"
#include "model/model.h"
#include "schedule/registry.h"
#include "schedule/schedule.h"

#define PLAN_MAX_WARNINGS 8

typedef struct {
  int n_stages, data_parallel, micro_batches;
  int n_layers;
  int virtual_stages;   /* chunks per stage */
  int n_chunks;         /* n_stages * virtual_stages */
  char method[300];     /* "parameters", "balanced", "explicit boundaries", ... */
  const pt_schedule_type *schedule; /* pipeline.schedule: in-flight counts per stage */
  int *bounds;          /* [n_chunks + 1] */
  int *chunk_stage;     /* [n_chunks] the stage running each chunk */
  int *chunk_in_flight; /* [n_chunks] its micro-batches in flight (the schedule's slots) */
  int *chunk_w_pending; /* [n_chunks] its micro-batches between I and W (split schedules) */
  int *devices;         /* [n_stages * data_parallel], by rank; -1: the node-local rank */
  double *cap;          /* [n_stages] bytes; 0: none */
  pt_offload_choice *offload; /* [n_stages] pipeline.offload (partition/offload.h) */
  pt_stage_memory *mem; /* [n_stages] a stage's chunks together */
  double *flops;        /* [n_stages] per step: forward + backward (+ recompute) */
  double *weight;       /* [n_stages] parameters (the method's measure with one chunk a stage) */
  pt_stage_memory *chunk_mem; /* [n_chunks] each chunk as a stage of its own */
  double *chunk_flops, *chunk_weight; /* [n_chunks] */
  char warnings[PLAN_MAX_WARNINGS][320];
  int n_warnings;
} pt_plan;

/* Plans a configured model with spec->pipeline. Returns 0, or -1 with e set (an unknown
 * schedule or one that cannot be built for this layout, bad explicit lists, a bad type:REGEX,
 * caps no plan can meet: the message says which stage and what fits). With several chunks per
 * stage the explicit lists (pipeline.boundaries, stage_layers) give one entry per chunk, and a
 * stage's cap is shared evenly by its chunks while solving (each chunk fits 1/v of it), which
 * guarantees the stage fits but may miss a plan where one chunk needs more than its share. */
int plan_build(pt_plan *p, const pt_model *m, spec_errors *e);
void plan_free(pt_plan *p);
/* A plan of a given layout, as the planner's search tries them (partition/auto.h): the stages,
 * chunk placement and slots of the built schedule s, the chunk boundaries bounds[n_chunks + 1],
 * the caps and devices of the spec, every measure filled, method "auto". The caps are not
 * enforced (plan_over_cap says by how much a layout misses them). 0, or -1 with e set (bad
 * caps or devices). */
int plan_build_layout(pt_plan *p, const pt_model *m, const pt_schedule *s, const int *bounds,
                      spec_errors *e);
/* The stage furthest over its cap, or -1 when every stage fits; *over: the bytes over, summed
 * over the stages. */
int plan_over_cap(const pt_plan *p, int64_t *over);

/* Adds each stage's comm part (memory.h) to its memory where the spec's device buffers go over
 * NCCL (memory_uses_nccl); nothing elsewhere. plan_build and plan_build_layout call it. */
void plan_add_comm(pt_plan *p, const pt_model *m);

/* Per-layer measures, as the planner uses them. */
double plan_layer_flops(const pt_model *m, int layer);

/* --- Stage map ---------------------------------------------------------------------------- */
int plan_chunk_of_layer(const pt_plan *p, int layer);
int plan_stage_of_layer(const pt_plan *p, int layer); /* the stage running the layer's chunk */
int plan_first_layer(const pt_plan *p, int chunk);
int plan_end_layer(const pt_plan *p, int chunk); /* exclusive */
/* The chunks stage `stage` runs, ascending (at most virtual_stages); returns their count. */
int plan_stage_chunks(const pt_plan *p, int stage, int *chunks);
/* Their layer ranges, ascending (for model_alloc_ranges); returns their count. */
int plan_stage_ranges(const pt_plan *p, int stage, pt_range *ranges);
int plan_rank(const pt_plan *p, int replica, int stage);
int plan_stage_of_rank(const pt_plan *p, int rank);
int plan_replica_of_rank(const pt_plan *p, int rank);
int plan_prev_rank(const pt_plan *p, int rank); /* -1 on the first stage */
int plan_next_rank(const pt_plan *p, int rank); /* -1 on the last stage */
int plan_device(const pt_plan *p, int rank, int local_rank);
/* Stages holding a layer with tie key `key`, ascending, each once; returns their count
 * (<= max). */
int plan_tie_stages(const pt_plan *p, const pt_model *m, const char *key, int *stages, int max);

/* --- Output ------------------------------------------------------------------------------- */
/* gflops: the measured GEMM rate used to turn FLOPs into estimated milliseconds (0: omit), shown
 * with the OpenBLAS kernel that measured it (blas_kernel_describe). */
void plan_print(FILE *f, const pt_plan *p, const pt_model *m, double gflops);
void plan_print_json(FILE *f, const pt_plan *p, const pt_model *m, double gflops);
/* The same as a cJSON object (the caller owns it), for a launcher that adds to it. */
struct cJSON *plan_json(const pt_plan *p, const pt_model *m, double gflops);

#endif
