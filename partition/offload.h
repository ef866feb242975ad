/* partition/offload.h: pipeline.offload, the share of each stage's stashed activations kept in
 * host memory (engine/stage_offload.h runs it, schedule/schedule_offload.h says what it takes).
 *
 * Two kinds of stashed tensor: outputs (the kept layer outputs a micro-batch holds until its
 * backward, which are also the next layers' inputs; not the stage's last output, which the
 * transfers and the loss use) and saved (the layers' saved areas). Per kind a fraction in [0, 1]
 * of the stage's micro-batches, the ones held longest. The spec value, for every stage or as a
 * list with one per stage:
 *   none (the default) or 0        nothing offloaded
 *   a fraction in (0, 1]           both kinds
 *   {outputs: F, saved: F}         each kind its own (a missing kind: none)
 *   auto                           the planner's choice (partition/auto.h: the smallest share
 *                                  of the levels it tries that fits the stage's cap); where no
 *                                  planner runs (a device that cannot offload), none
 * Refused where pipeline.device resolves to a kind without the trait (device.h, offloads: the
 * cpu, whose device memory is the host's).
 */
#ifndef PT_PARTITION_OFFLOAD_H
#define PT_PARTITION_OFFLOAD_H

#include "spec/spec.h"

enum { OFFLOAD_OUTPUTS, OFFLOAD_SAVED, OFFLOAD_KINDS };

typedef struct {
  double fraction[OFFLOAD_KINDS];
  int searched; /* the stage said auto (its fractions are 0 until the planner chooses) */
} pt_offload_choice;

/* Fills out[n_stages] from s->pipeline.offload (zeros where absent). Returns 0 (*is_auto set
 * where some stage said auto), or -1 with e set: a bad value, a list of the wrong length, or
 * offload on a device that cannot (one line naming the fix). */
int offload_parse(const pt_spec *s, int n_stages, pt_offload_choice *out, int *is_auto,
                  spec_errors *e);
/* Whether any stage offloads anything. */
int offload_any(const pt_offload_choice *c, int n_stages);

#endif
