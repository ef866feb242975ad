/* partition/solve.h: optimal contiguous partitions (the algorithm, free of layers and specs).
 *
 * Splits layers 0..n-1 into P non-empty contiguous stages; stage s holds [bounds[s],
 * bounds[s+1]) with bounds[0] = 0 and bounds[P] = n. Objective, lexicographic:
 *   1. minimise the largest stage sum of `weight` (the method's measure: 1 per layer for
 *      uniform, parameter count, matching-type count, or estimated time for balanced);
 *   2. among those, minimise the largest stage sum of `time` (skipped when time == weight);
 *   3. among those, the earliest boundaries (lexicographically smallest bounds vector).
 * Constraint: stage_memory(ctx, P, s, a, b) <= cap[s] for every stage with cap[s] > 0.
 * Memory must be monotone: a sub-range of a range never needs more at the same stage.
 * The result is exact (dynamic programme over all contiguous partitions), O(P * n^2) memory
 * evaluations at most.
 */
#ifndef PT_PARTITION_SOLVE_H
#define PT_PARTITION_SOLVE_H

#include <stdint.h>

typedef double (*part_memory_fn)(void *ctx, int n_stages, int stage, int first, int last);

typedef struct {
  int n_layers, n_stages;
  const double *weight; /* [n_layers], >= 0 */
  const double *time;   /* [n_layers], >= 0; may equal weight */
  part_memory_fn stage_memory; /* NULL: no memory constraint */
  void *ctx;
  const double *cap;    /* [n_stages] bytes; <= 0 or cap == NULL means no cap */
  int cap_uniform;      /* every stage has the same cap (cap[0]): lets the solver try other P */
} part_problem;

typedef struct {
  /* when no plan fits: */
  int stage;           /* the first stage that cannot hold even one layer it could hold alone in
                          a valid plan (stage 0: layer 0; the last stage: the last layer; stage s
                          between: any of layers s .. n-P+s), or -1; never set when P == 1 */
  int layer;           /* the least-memory such layer */
  double need, cap;    /* its bytes and the stage's cap */
  int fit_prefix;      /* the most leading layers that fit in n_stages stages (0 if none) */
  int fit_stages;      /* the smallest stage count that fits the whole model (cap_uniform
                          only; 0 if none up to n_layers) */
} part_failure;

/* Returns 0 with bounds[0..P] filled, -1 if P < 1 or P > n_layers, -2 if no plan fits the caps
 * (why filled when not NULL). On success *max_weight / *max_time (if not NULL) receive the
 * objective values. */
int part_solve(const part_problem *p, int *bounds, double *max_weight, double *max_time,
               part_failure *why);

#endif
