/* partition/auto_private.h: shared by partition/auto_*.c only (partition/auto.h is the public
 * contract). */
#ifndef PT_PARTITION_AUTO_PRIVATE_H
#define PT_PARTITION_AUTO_PRIVATE_H

#include "partition/auto.h"
#include "schedule/schedule.h"

#define AUTO_MAX_V 4     /* chunks per stage tried for interleaved and looped BFS */
#define AUTO_MAX_CKPT 16 /* checkpoint intervals tried */
#define AUTO_MAX_ROUNDS 256 /* boundary moves per start: a bound on the local search */

typedef struct {
  const pt_model *m;
  const pt_layer_times *t;
  int P;
  pt_auto_result *r;
} auto_ctx;

/* Entry t with v chunks per stage (or the spec's schedule file) for the spec's stages and
 * micro-batches: 0, or -1 with why. */
int auto_build_schedule(const auto_ctx *a, const pt_schedule_type *t, int v, pt_schedule *s,
                        char *why, size_t whysz);
/* Finds c's boundaries on the built schedule s (searched, or the spec's partition method) and
 * fills its step, bubble and memory. Sets e only for bad input (caps, devices). */
void auto_run_candidate(auto_ctx *a, pt_auto_result *r, pt_auto_candidate *c,
                        const pt_schedule *s, spec_errors *e);
/* Every candidate into r, sorted; 0, or -1 with e set (bad input). */
int auto_search_all(const pt_model *m, const pt_layer_times *t, int force_partition,
                    pt_auto_result *r, spec_errors *e);
/* Sets e to the one-line error when r has no candidate that fits. */
void auto_explain_nothing_fits(const pt_model *m, const pt_layer_times *t, int force_partition,
                               const pt_auto_result *r, spec_errors *e);

#endif
