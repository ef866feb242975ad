/* partition/plan.h: the stage plan (which layers each stage owns, where each rank runs, how much
 * memory and time each stage needs) and the stage map queries the engine asks.
 *
 * Ranks: rank = replica * stages + stage, so each data-parallel replica's pipeline occupies
 * consecutive ranks. Stage s owns layers [bounds[s], bounds[s+1]), never empty. Neighbours
 * come from stage order, never from device ids: pipeline.devices only says which local device
 * a rank uses, in any order and stride.
 */
#ifndef PT_PARTITION_PLAN_H
#define PT_PARTITION_PLAN_H

#include <stdio.h>

#include "partition/memory.h"
#include "model/model.h"
#include "schedule/registry.h"

#define PLAN_MAX_WARNINGS 8

typedef struct {
  int n_stages, data_parallel, micro_batches;
  int n_layers;
  char method[300];     /* "parameters", "balanced", "explicit boundaries", ... */
  const pt_schedule_type *schedule; /* pipeline.schedule: in-flight counts per stage */
  int *bounds;          /* [n_stages + 1] */
  int *devices;         /* [n_stages * data_parallel], by rank; -1: the node-local rank */
  double *cap;          /* [n_stages] bytes; 0: none */
  pt_stage_memory *mem; /* [n_stages] */
  double *flops;        /* [n_stages] per step: forward + backward (+ recompute) */
  double *weight;       /* [n_stages] the method's measure (layers, parameters, ...) */
  char warnings[PLAN_MAX_WARNINGS][320];
  int n_warnings;
} pt_plan;

/* Plans a configured model with spec->pipeline. Returns 0, or -1 with e set (an unknown
 * schedule, bad explicit lists, a bad type:REGEX, caps no plan can meet: the message says
 * which stage and what fits). */
int plan_build(pt_plan *p, const pt_model *m, spec_errors *e);
void plan_free(pt_plan *p);

/* Per-layer measures, as the planner uses them. */
double plan_layer_flops(const pt_model *m, int layer);

/* --- Stage map ---------------------------------------------------------------------------- */
int plan_stage_of_layer(const pt_plan *p, int layer);
int plan_first_layer(const pt_plan *p, int stage);
int plan_end_layer(const pt_plan *p, int stage); /* exclusive */
int plan_rank(const pt_plan *p, int replica, int stage);
int plan_stage_of_rank(const pt_plan *p, int rank);
int plan_replica_of_rank(const pt_plan *p, int rank);
int plan_prev_rank(const pt_plan *p, int rank); /* -1 on the first stage */
int plan_next_rank(const pt_plan *p, int rank); /* -1 on the last stage */
int plan_device(const pt_plan *p, int rank, int local_rank);
/* Stages holding a layer with tie key `key`, ascending; returns their count (<= max). */
int plan_tie_stages(const pt_plan *p, const pt_model *m, const char *key, int *stages, int max);

/* --- Output ------------------------------------------------------------------------------- */
/* gflops: the measured GEMM rate used to turn FLOPs into estimated milliseconds (0: omit). */
void plan_print(FILE *f, const pt_plan *p, const pt_model *m, double gflops);
void plan_print_json(FILE *f, const pt_plan *p, const pt_model *m, double gflops);

#endif
