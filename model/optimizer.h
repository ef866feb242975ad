/* model/optimizer.h: AdamW (PyTorch semantics) or SGD over a model's contiguous buffers,
 * global-norm gradient clipping and the learning-rate schedule.
 *
 * AdamW: p -= lr*wd*p (decoupled, only tensors with decay set: rank >= 2); m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g^2; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps). State m, v are
 * float buffers laid out like the parameters (moved whole by checkpoints).
 *
 * Sharded (pipeline.shard_optimizer, ZeRO-1): the state covers one contiguous range of the
 * model's buffer, [lo, lo + n_floats), optimizer_shard_end's range of this replica; the step
 * updates the parameters (and their bf16 copy) of that range only, the caller gathers the rest
 * from the other replicas. The update of each float is the same as unsharded, so the bits are. */
#ifndef PT_OPTIMIZER_H
#define PT_OPTIMIZER_H

#include <stdint.h>

#include "spec/spec.h"
#include "model/model.h"

typedef struct {
  spec_train cfg;
  pt_device *dev;
  float *m, *v;            /* device buffers, n_floats each (v unused by SGD) */
  float *host_m, *host_v;  /* their host copies for checkpoints (the same on the cpu) */
  int64_t n_floats;        /* of the state: the shard's range (the model's n_floats unsharded) */
  int64_t lo, model_floats; /* the range's first float; the model's n_floats */
  int shard, shards;       /* this range's index and the count (0 of 1: not sharded) */
  int64_t t;     /* steps taken */
  /* The model's tensors as the pieces of one multi-tensor update (kernels.h, pt_opt_chunk),
   * device memory, built by the first optimizer_step from that model's tensors. */
  pt_opt_chunk *chunks;
  int64_t n_chunks;
} pt_optimizer;

/* State on the current device (device.h). */
void optimizer_init(pt_optimizer *o, const spec_train *cfg, int64_t n_floats);
/* State for range `shard` of `shards` of a model of n_floats (optimizer_shard_end). */
void optimizer_init_shard(pt_optimizer *o, const spec_train *cfg, int64_t n_floats, int shard,
                          int shards);
/* The sharding rule: n floats cut into `shards` contiguous ranges, range r being
 * [optimizer_shard_end(n, shards, r - 1), optimizer_shard_end(n, shards, r)): n r / shards
 * rounded up to 16 floats (64 bytes), the last ending at n; -1 gives 0. Sizes alone decide it,
 * so every replica, a checkpoint's writer and reader, and the plan agree. */
int64_t optimizer_shard_end(int64_t n, int shards, int r);
/* The largest range's floats (what the plan counts per replica). */
int64_t optimizer_shard_max(int64_t n, int shards);
/* Host-only state of the whole model (no device buffers: host_m, host_v of o's model_floats,
 * lo 0), o's configuration and step count: what a checkpoint of a sharded o writes and reads.
 * optimizer_shard_put copies o's range in (from host_m, host_v), optimizer_shard_take copies it
 * out with the step count (then optimizer_to_device). */
void optimizer_init_whole(pt_optimizer *whole, const pt_optimizer *o);
void optimizer_shard_put(pt_optimizer *whole, const pt_optimizer *o);
void optimizer_shard_take(pt_optimizer *o, const pt_optimizer *whole);
void optimizer_free(pt_optimizer *o);
/* host_m/host_v <- m/v, and back (see model_to_host). */
void optimizer_to_host(pt_optimizer *o);
void optimizer_to_device(pt_optimizer *o);
/* One update of every tensor of m (always the same model for one o): one kernel call over all
 * of them (device_optimizer_chunks), each tensor with its own decay flag, tied copies held
 * here included; the gaps between tensors are not touched. The model's bf16 weight copy (when
 * it has one) is written in the same pass. clip: grad_clip_factor's; the update reads each
 * gradient times it (pt_update.clip), the gradients themselves are left as they are. */
void optimizer_step(pt_optimizer *o, pt_model *m, double lr, float clip);
/* The update optimizer_step applies at step t (1-based) with learning rate lr (clip 1), and its
 * per-tensor part (decay: the tensor's pt_tensor.decay): for callers that run the kernel
 * themselves (profile/ times it). */
device_update optimizer_update(const spec_train *cfg, int64_t t, double lr);
void optimizer_update_tensor(device_update *u, const spec_train *cfg, int decay);

/* Learning rate of step s (0-based): linear warm-up over warmup_steps, then constant or cosine
 * decay to min_lr at the last step. */
double lr_at(const spec_train *cfg, int64_t step);

/* Sum of squares of each tensor's gradient, in double, into out[m->n_tensors]; tied copies
 * whose owner is in another slice get 0 (the owner counts the weight once). */
void grad_tensor_sumsq(const pt_model *m, double *out);
/* The same sums written on the device into out_dev[m->n_tensors] (device doubles, e.g. the
 * step statistics' slots, device/stats.h) without waiting, all tensors in one pass
 * (device_sumsq_spans_into; 0 for tied copies). */
void grad_tensor_sumsq_into(const pt_model *m, double *out_dev);
/* Sum of squares of the model's gradients: the per-tensor sums added in tensor order (the order
 * a pipeline adds the stages' per-tensor sums in, so both paths get the same bits). */
double grad_sumsq(const pt_model *m);
/* The factor torch's clip_grad_norm_ scales the gradients by: max_norm / (norm + 1e-6) when
 * that is < 1 (computed in double, then rounded to float), else 1 (and 1 when max_norm <= 0).
 * optimizer_step applies it as it reads the gradients: no pass of its own, and the gradients
 * in memory stay unscaled. */
float grad_clip_factor(double norm, double max_norm);

/* The one-line error for a step whose gradients are not finite (train.on_nonfinite: abort).
 * bad_layer: global index of the first layer whose output went non-finite, or -1; stage: the
 * stage holding it. */
void nonfinite_message(const pt_model *m, int64_t step, int bad_layer, int stage, char *out,
                       size_t outsz);

#endif
