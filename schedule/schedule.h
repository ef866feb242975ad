/* schedule/schedule.h: a pipeline schedule is data, one action list per stage.
 *
 * The executor (engine/pipeline.c) interprets these lists and nothing else, so new schedules
 * (interleaved, zero-bubble) are new entries in the registry (schedule/registry.h), not new
 * engine code. Micro-batch mb of a step uses activation slot mb % n_slots[stage]. Semantics
 * of the actions on stage s:
 *   RECV_ACT mb    post the receive of mb's input from stage s-1 into the slot's input buffer
 *   LOAD mb        read mb's inputs (first stage) and/or targets (last stage) from the data
 *   FORWARD mb     run the stage's layers (waits for the RECV_ACT of mb)
 *   SEND_ACT mb    start sending mb's output to stage s+1 (completes in the background)
 *   RECV_GRAD mb   post the receive of d loss / d output of mb from stage s+1
 *   BACKWARD mb    loss (last stage) or wait for RECV_GRAD, then backward_input and
 *                  backward_weight of every layer
 *   SEND_GRAD mb   start sending d loss / d input of mb to stage s-1
 *   REDUCE_TIED    sum tied-weight gradients over the stages holding a copy
 *   REDUCE_DP      sum gradients over the data-parallel replicas of this stage
 *   OPTIMIZER      global norm, clipping and the optimizer step
 * Backward runs micro-batches in ascending order in every schedule, the order the sequential
 * path accumulates gradients in, so results agree bit for bit.
 */
#ifndef PT_SCHEDULE_H
#define PT_SCHEDULE_H

#include <stdio.h>

#include "schedule/registry.h"

typedef enum {
  ACT_RECV_ACT,
  ACT_LOAD,
  ACT_FORWARD,
  ACT_SEND_ACT,
  ACT_RECV_GRAD,
  ACT_BACKWARD,
  ACT_SEND_GRAD,
  ACT_REDUCE_TIED,
  ACT_REDUCE_DP,
  ACT_OPTIMIZER,
} pt_action_kind;

typedef struct {
  pt_action_kind kind;
  int mb; /* micro-batch, -1 for step-wide actions */
} pt_action;

typedef struct {
  int n_stages, n_micro;
  const pt_schedule_type *type; /* the registry entry it was built from */
  pt_action **acts; /* [stage][i] */
  int *n_acts;      /* [stage] */
  int *n_slots;     /* [stage]: activation slots (micro-batches in flight) the stage needs */
} pt_schedule;

/* Builds the registered schedule `name` (schedule/registry.h); returns 0, or -1 for a name
 * the registry does not have. n_slots[stage] is the entry's in-flight count. */
int schedule_build(pt_schedule *s, const char *name, int n_stages, int n_micro);
void schedule_free(pt_schedule *s);
/* Simulates all stages together: every send matched by one receive, every micro-batch forward
 * then backward once per stage, slot reuse only after the slot's backward and send, no
 * deadlock. Returns 0, or -1 with a one-line reason in err. */
int schedule_validate(const pt_schedule *s, char *err, size_t errsz);
/* The stricter condition for NCCL: each stage's transfers run in issue order on one stream and
 * a send finishes only with its receive (rendezvous). Returns 0, or -1 with the stuck state. */
int schedule_check_rendezvous(const pt_schedule *s, char *err, size_t errsz);
/* One line per stage: "stage 0 (2 slots): rA0 L0 F0 sA0 ..." */
void schedule_print(FILE *f, const pt_schedule *s);
const char *schedule_action_code(pt_action_kind k);

#endif
