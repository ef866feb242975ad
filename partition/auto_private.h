/* partition/auto_private.h: shared by partition/auto_*.c only (partition/auto.h is the public
 * contract). */
#ifndef PT_PARTITION_AUTO_PRIVATE_H
#define PT_PARTITION_AUTO_PRIVATE_H

#include "partition/auto.h"
#include "partition/plan.h"
#include "schedule/schedule.h"
#include "schedule/schedule_offload.h"
#include "schedule/schedule_sim.h"

#define AUTO_MAX_V 4     /* chunks per stage tried for interleaved and looped BFS */
#define AUTO_MAX_CKPT 16 /* checkpoint intervals tried */
#define AUTO_MAX_ROUNDS 256 /* boundary moves per start: a bound on the local search */
#define AUTO_OFFLOAD_LEVELS 4 /* shares a searched stage may offload (auto_copies.c) */

/* pipeline.offload for one candidate (auto_copies.c): the spec's shares, the searched stages'
 * choice, the offload walks of its schedule and the copies the simulation runs. */
typedef struct {
  const pt_schedule *s;
  pt_offload_choice *fixed; /* [P] the spec's; searched where it says auto (and is searched) */
  double *choice;           /* [P] a searched stage's share of both kinds (0: none) */
  int search, any;          /* some stage searched; anything offloaded at all */
  pt_offload_sim *sims;     /* walks per (chunk, share), made when first asked */
  int *sim_chunk;
  double *sim_f;
  int n_sims, cap_sims;
  const unsigned char **masks; /* [C * OFFLOAD_KINDS] for copies */
  double *out_s, *in_s;
  pt_sched_copies copies;
} auto_offload;

/* The offload copy rate the simulation uses: $PIPETRAIN_COPY_BYTES_PER_S when set (tests and
 * what-ifs), else the measured t->copy_bytes_per_s. */
double auto_copy_rate(const pt_layer_times *t);
/* searching: the planner may choose the shares of the stages that say auto (else they offload
 * nothing), where the spec's device offloads. */
void auto_offload_init(auto_offload *o, const pt_model *m, const pt_schedule *s, int searching);
void auto_offload_free(auto_offload *o);
/* Each searched stage over its cap takes the smallest share that fits it (else the one leaving
 * the fewest bytes); bytes[st] (p's totals, the spec's fixed shares in) becomes what it keeps. */
void auto_offload_choose(auto_offload *o, const pt_model *m, const pt_plan *p, int64_t *bytes);
/* The copies of p's split under the fixed shares and the choice, at `rate` bytes per second;
 * NULL when nothing is offloaded. */
const pt_sched_copies *auto_offload_copies(auto_offload *o, const pt_model *m, const pt_plan *p,
                                           double rate);

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
