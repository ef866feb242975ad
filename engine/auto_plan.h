/* engine/auto_plan.h: `auto` in a loaded spec resolved before anything is planned.
 *
 * pipeline.data_parallel: auto becomes the job's ranks / pipeline.stages (1 when planning
 * without mpirun). pipeline.schedule, pipeline.partition and train.activation_checkpoint_interval
 * set to auto are chosen together by the planner (partition/auto.h) from per-layer times: an
 * earlier run's trace (--from-trace), FLOP estimates (--layer-times flops), or measured on this
 * rank's device at start-up and cached (profile/). The result is a list of --set values that pin
 * the choice; the caller re-reads the spec with them, so checkpoints and traces record what ran
 * and a resumed run never searches again.
 *
 * Collective under mpirun (every rank calls it with the same spec): rank 0 gets the times and
 * broadcasts them, so every rank searches the same numbers and picks the same plan.
 */
#ifndef PT_ENGINE_AUTO_PLAN_H
#define PT_ENGINE_AUTO_PLAN_H

#include "partition/auto.h"
#include "spec/spec.h"

typedef enum { AUTO_TIMES_MEASURE, AUTO_TIMES_FLOPS } auto_times_source;

typedef struct {
  const char *from_trace;  /* an earlier run's trace, or NULL */
  auto_times_source times; /* without a trace: measure (cached) or FLOP estimates */
  double gflops;           /* FLOP estimates at this rate (--layer-times flops:R); 0: measured */
  int launched;            /* under mpirun */
} auto_plan_options;

/* Whether spec has anything to resolve (with from_trace the split is always re-balanced). */
int auto_plan_needed(const pt_spec *spec, const auto_plan_options *o);
/* Writes the --set values into over (at most max); returns their count, or -1 with a one-line
 * err (bad input: every rank returns it alike). keep (may be NULL) receives the search, for
 * --plan to print; free it with auto_result_free. */
int auto_plan_resolve(const pt_spec *spec, const auto_plan_options *o,
                      char (*over)[AUTO_OVERRIDE_MAX], int max, pt_auto_result *keep, char *err,
                      size_t errsz);

/* The simulated step (seconds) and bubble of the plan spec names, from the times o says, and
 * where they came from (into source): --plan's prediction. 0, or -1 with err. */
int auto_plan_predict(const pt_spec *spec, const auto_plan_options *o, double *step_s,
                      double *bubble, char *source, size_t sourcesz, char *err, size_t errsz);

#endif
