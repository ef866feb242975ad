/* schedule/registry.h: every pipeline schedule, one table entry each.
 *
 * An entry is what the rest of the code knows of a schedule: its name (the pipeline.schedule
 * value), a generator for one stage's action list, and the stage's in-flight count, which is
 * both the activation slots the engine allocates (pt_schedule.n_slots) and what the memory
 * estimate multiplies by (partition/memory.h). --plan and docs/schedules.md print the docs.
 * A new schedule is one file defining its entry (like gpipe.c), its line in registry.c's
 * table, its row in docs/schedules.md (tests/test_schedule.c compares the two) and its tests.
 */
#ifndef PT_SCHEDULE_REGISTRY_H
#define PT_SCHEDULE_REGISTRY_H

#include "spec/spec.h"

typedef struct schedule_gen schedule_gen; /* one stage's list being written: schedule/emit.h */

typedef struct {
  const char *name;          /* as pipeline.schedule spells it */
  const char *doc;           /* one line: what it does */
  const char *in_flight_doc; /* the in-flight count in words, as --plan says it: "P - stage" */
  /* Micro-batches between their forward and backward at once on `stage` of n_stages with
   * n_micro per step; the generator must stay within it (schedule_validate checks). */
  int (*in_flight)(int stage, int n_stages, int n_micro);
  /* Appends one step's forwards and backwards of stage g->s; the builder adds the step-end
   * reductions and posts receives early (schedule.c). */
  void (*generate)(schedule_gen *g);
} pt_schedule_type;

/* Every registered schedule, NULL-terminated, in the order messages list them. */
extern const pt_schedule_type *const schedule_types[];

/* NULL for an unknown name. */
const pt_schedule_type *schedule_find(const char *name);
/* The entry p->schedule names, or NULL with a spec error at the value:
 * "pipeline.schedule: expected one of 1f1b, gpipe, got 'x'". The spec cannot check the name
 * itself (spec/ sits below schedule/); the planner and pipe_train call this once loaded. */
const pt_schedule_type *schedule_from_spec(const spec_pipeline *p, spec_errors *e);

#endif
