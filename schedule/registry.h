/* schedule/registry.h: every pipeline schedule, one table entry each.
 *
 * An entry is what the rest of the code knows of a schedule: its name (the pipeline.schedule
 * value), how many chunks it puts on a rank and where (schedule/schedule.h), whether it splits
 * the backward into I and W, the fewest micro-batches it runs, a generator for every rank's
 * compute order, and the in-flight count the memory estimate multiplies by (partition/memory.h).
 * --plan and docs/schedules.md print the docs. A new schedule is one file defining its entry
 * (like gpipe.c), its line in registry.c's table, its row in docs/schedules.md
 * (tests/schedule/test_schedule.c compares the two) and its tests.
 */
#ifndef PT_SCHEDULE_REGISTRY_H
#define PT_SCHEDULE_REGISTRY_H

#include "spec/spec.h"

typedef struct schedule_gen schedule_gen; /* every rank's compute order being written: emit.h */

/* Where chunk c runs with P ranks (schedule/schedule.h): loop on c mod P, v down then up. */
typedef enum { PT_PLACE_LOOP, PT_PLACE_V } pt_placement;

#define SCHEDULE_ANY_V 0 /* virtual_stages: pipeline.virtual_stages chooses, 1 by default */

typedef struct {
  const char *name;          /* as pipeline.schedule spells it */
  const char *doc;           /* one line: what it does */
  const char *in_flight_doc; /* the in-flight count in words, as --plan says it: "P - stage" */
  /* The idle share of a step with unit costs (F = I = W = 1, B = 2) as a formula of P ranks, v
   * chunks per rank, M micro-batches, and where it holds ("M >= P"); tests/schedule/test_schedule.c
   * checks the simulation against it. */
  const char *bubble_doc;
  int virtual_stages;        /* chunks per rank: a fixed count, or SCHEDULE_ANY_V */
  pt_placement placement;
  int splits_backward;       /* runs BACKWARD_INPUT and BACKWARD_WEIGHT (as well as, or
                              * instead of, BACKWARD) */
  /* Fewest micro-batches per step it is defined for with P ranks; NULL: 1. min_micro_doc
   * says it in words ("2P"). */
  int (*min_micro)(int n_ranks);
  const char *min_micro_doc;
  /* Micro-batches in flight (forward done, weight gradient not yet) at once on `stage` of
   * n_stages with n_micro per step and the entry's own chunks per rank (1, or its fixed
   * count): the rank's activation slots summed over its chunks, what the memory estimate
   * multiplies a stage's per-micro-batch bytes by. Equals what the built schedule holds
   * (tests/schedule/test_schedule.c checks). */
  int (*in_flight)(int stage, int n_stages, int n_micro);
  /* Appends every rank's forwards and backwards in order; the builder adds the transfers,
   * loads and step-end reductions and posts receives early (emit.h: schedule_lower). */
  void (*generate)(schedule_gen *g);
} pt_schedule_type;

/* Every registered schedule, NULL-terminated, in the order messages list them. */
extern const pt_schedule_type *const schedule_types[];
/* What schedule_from_spec returns for pipeline.schedule_file: no generator; its in-flight
 * count is the conservative one (every micro-batch), as the file is read only when built. */
extern const pt_schedule_type schedule_file_type;

/* NULL for an unknown name. */
const pt_schedule_type *schedule_find(const char *name);
/* The entry p->schedule names, or NULL with a spec error at the value:
 * "pipeline.schedule: expected one of 1f1b, gpipe, got 'x'", or at pipeline.virtual_stages
 * when the entry fixes another count. The spec cannot check the name itself (spec/ sits below
 * schedule/); the planner and pipe_train call this once loaded. With pipeline.schedule_file:
 * &schedule_file_type. */
const pt_schedule_type *schedule_from_spec(const spec_pipeline *p, spec_errors *e);
/* Chunks per rank for entry t under p (pipeline.virtual_stages, or the entry's count). */
int schedule_virtual_stages(const pt_schedule_type *t, const spec_pipeline *p);
/* Chunk `chunk`'s activation slots (micro-batches in flight) in entry t's schedule for n_ranks
 * ranks, v chunks each, n_micro micro-batches, and in *w_pending (when not NULL) the most
 * micro-batches between their I and W; what the memory estimate needs per chunk. -1 for a
 * layout the entry does not take. */
int schedule_chunk_in_flight(const pt_schedule_type *t, int chunk, int n_ranks, int v,
                             int n_micro, int *w_pending);
/* The in-flight count of an entry measured on its built schedule with its own chunks per rank:
 * the slots of the chunks of `stage`, summed (the in_flight of entries without a closed form). */
int schedule_measure_in_flight(const pt_schedule_type *t, int stage, int n_stages, int n_micro);

#endif
