/* engine/stage_offload.h: a stage's stashed activations in host memory (pipeline.offload,
 * partition/offload.h), for engine/stage.c and the pipelined engine.
 *
 * Per kind of tensor the stage pools (OFFLOAD_OUTPUTS: the kept layer outputs but the stage's
 * last, which transfers and the loss read; OFFLOAD_SAVED: the saved areas, without
 * checkpointing), a slot's tensors of that kind live in one device frame of a small pool instead
 * of buffers of its own: the slot's pointers (out/saved, or out16/saved16 when packed) point into
 * the frame it holds and are NULL while it holds none. A micro-batch takes a frame at its
 * forward; an offloaded one is copied out to a pinned host buffer on the device's copy stream
 * right after (device_copy_async) and gives the frame back, and is copied in again (prefetched)
 * into a free frame before its backward, which waits for that copy only (device_wait_event).
 * Every micro-batch gives its frame back when its backward (or, split, its backward_weight)
 * ends. The frame and host buffer counts and which micro-batches go out come from the schedule
 * (schedule/schedule_offload.h), whose rules the engine's calls follow; needing more frames
 * than that is fatal. Copies are exact (bytes), so results are bitwise those without offload.
 * A frame is one device allocation (its tensors at 64-byte offsets) and moves in one copy.
 */
#ifndef PT_STAGE_OFFLOAD_H
#define PT_STAGE_OFFLOAD_H

#include "engine/stage.h"
#include "partition/offload.h"

/* What the engine decided for one chunk: per kind, 0 frames for a kind not pooled. */
typedef struct stage_offload_plan {
  int frames[OFFLOAD_KINDS], hosts[OFFLOAD_KINDS];
  const unsigned char *offloaded[OFFLOAD_KINDS]; /* [n_micro], copied */
  int n_micro;
} stage_offload_plan;

/* A copy made since the last stage_offload_take_spans: for the trace's copy track. */
typedef struct {
  int prefetch; /* 1: host to device, 0: device to host */
  int mb;
  double t0, t1; /* host clock around the call (on a GPU: the issue; the copy runs after) */
} stage_offload_span;

/* --- engine/stage.c's hooks ----------------------------------------------------------------- */
/* stage_init: the state, before any slot buffer is allocated; then whether slot buffer (kind,
 * li) is pooled (not allocated per slot); then the frames and host buffers. */
void stage_offload_init(pt_stage *st, const stage_offload_plan *plan);
int stage_offload_pooled(const pt_stage *st, int kind, int li);
void stage_offload_alloc(pt_stage *st);
/* stage_free, before the slot buffers are released. */
void stage_offload_free(pt_stage *st);
/* Forward of slot: a frame for each pooled kind; after it, the copy-out where its micro-batch
 * goes to host. */
void stage_offload_before_forward(pt_stage *st, int slot);
void stage_offload_after_forward(pt_stage *st, int slot);
/* Before anything of the slot's backward (the loss's recomputation too): its tensors in frames
 * (prefetched now where the engine did not), the compute stream waiting for their copies. */
void stage_offload_before_backward(pt_stage *st, int slot);
/* The slot's weight gradients are done, or an eval forward ends: frames and host buffer back.
 * A slot holding nothing is left alone. */
void stage_offload_release(pt_stage *st, int slot);

/* --- The pipelined engine's calls ----------------------------------------------------------- */
/* The micro-batch the slot's next forward runs (what decides whether it goes to host). */
void stage_offload_micro_batch(pt_stage *st, int slot, int mb);
/* Issues the copy-in of the slot's offloaded tensors into free frames (nothing where it holds
 * them already or nothing of it is on the host). */
void stage_offload_prefetch(pt_stage *st, int slot);
/* The copies made since the last call, *n of them; the array stays valid until the next call. */
const stage_offload_span *stage_offload_take_spans(pt_stage *st, int *n);

#endif
