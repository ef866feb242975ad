/* schedule/schedule_offload.h: where activation offload (engine/stage_offload.h) copies, read
 * from a rank's action list.
 *
 * A chunk whose stashed activations of one kind are offloaded keeps them, for every micro-batch,
 * in a pool of device frames instead of one buffer per slot. A micro-batch takes a frame at its
 * FORWARD; an offloaded one gives it back once the forward is copied out to host memory (and
 * holds a host buffer until its backward ends), then takes one again for the prefetch, issued
 * when the compute action (FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT) before its
 * BACKWARD or BACKWARD_INPUT starts. Every micro-batch gives its frame back when its weight
 * gradients are done (BACKWARD, or BACKWARD_WEIGHT when split). The engine follows exactly these
 * rules, so the counts here are what it allocates and what the plan reports.
 */
#ifndef PT_SCHEDULE_OFFLOAD_H
#define PT_SCHEDULE_OFFLOAD_H

#include "schedule/schedule.h"

typedef struct {
  int frames;              /* device frames the chunk needs (its slots when nothing goes out) */
  int hosts;               /* host buffers: the most offloaded micro-batches held at once */
  unsigned char *offloaded; /* [n_micro]: 1 where the micro-batch's activations go to host */
} pt_offload_sim;

/* For chunk `chunk` of s offloading `fraction` (0..1] of its micro-batches' stashed bytes:
 * ceil(fraction * n_micro) micro-batches go to host, spread evenly over the micro-batches ranked
 * by how long they are held (in actions of the rank's list from their FORWARD to their release,
 * longest first; schedule_offload.c says why not simply the longest), but never one whose
 * backward is the compute action right after its own forward (it would be prefetched before it
 * went out); the frames and host buffers the rules above need. fraction 0: none offloaded,
 * frames = the slots. out->offloaded is allocated (schedule_offload_free). */
void schedule_offload_sim(const pt_schedule *s, int chunk, double fraction, pt_offload_sim *out);
void schedule_offload_free(pt_offload_sim *o);
/* The index of the BACKWARD or BACKWARD_INPUT whose prefetch is issued when action i of the
 * list starts (the next compute action after i, where i is one), or -1. */
int schedule_prefetch_at(const pt_action *acts, int n, int i);

#endif
