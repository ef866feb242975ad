/* profile/measure.h: layer times measured on the device this process runs on.
 *
 * profile_measure() times every distinct layer shape of a configured model (model_configure
 * done; nothing of the model is allocated or touched) on device_current(), at the run's micro-
 * batch (micro_batch_size x profile_tokens_per_sample). Layers with the same type, dims, token
 * input, settings' values (pt_layer.set), parameter shapes and the same need for an input gradient
 * (none for token input and the model's first layer) share one measurement. Each shape runs
 * on buffers of its own, allocated on the device and freed before the next (device memory
 * counted by pt_mem_*: the largest shape's buffers show in pt_mem_peak).
 *   f, i, w   one warm-up, then the median of 3..20 repetitions of each step alone, as many as
 *             fit in the shape's share of budget_s; the last layer's f adds the loss and its
 *             gradient (device_loss) at [B, T, out_dim]
 *   opt       optimizer_step's kernel calls for the layer's tensors, once per distinct list of
 *             parameter sizes
 *   p2p       on the host kinds: memcpy of one activation (B x T x the widest output) at half
 *             the copy rate (a shared-memory message is copied in and out), latency
 *             PROFILE_P2P_LATENCY_S; on a GPU the defaults (layer_times.h)
 *   copy      offload's copy rate: one such activation to pinned host memory and back on the
 *             device's copy stream (device_copy_async), the mean of the two ways, on the kinds
 *             that offload; the host memcpy rate elsewhere
 * budget_s <= 0 means PROFILE_BUDGET_S; a measurement takes about that long plus one warm-up
 * per shape, more when the smallest repetition counts do not fit.
 */
#ifndef PT_PROFILE_MEASURE_H
#define PT_PROFILE_MEASURE_H

#include <stddef.h>

#include "model/model.h"
#include "profile/layer_times.h"

#define PROFILE_BUDGET_S 1.5

/* Allocates and fills t (free with profile_times_free); source says "measured on ...".
 * Returns 0, or -1 with err (one line) and t empty: a layer that cannot run on this device
 * (device_check_layers), or a model without layers. */
int profile_measure(pt_layer_times *t, const pt_model *m, double budget_s, char *err,
                    size_t errsz);

#endif
