/* profile/layer_times.h: how long each layer of a configured model takes on the device a run
 * uses, the costs the planner (partition/auto.h) simulates schedules with.
 *
 * Units: seconds per micro-batch of micro_batch_size samples (x seq_len tokens when the model
 * reads tokens), on one rank with that rank's threads. f[l], i[l], w[l]: the layer's forward,
 * backward_input and backward_weight; a layer without parameters has w[l] = 0 (its
 * backward_weight runs inside I). The last layer's f includes the loss and its gradient.
 * opt[l]: one optimizer update of the parameters layer l holds (per step, not per micro-batch).
 * A transfer of n bytes between neighbouring stages takes p2p_latency_s + n / p2p_bytes_per_s.
 * An offload copy (pipeline.offload) of n bytes between the device and pinned host memory takes
 * n / copy_bytes_per_s, either way.
 *
 * Where times come from (source says which, for --plan to print):
 *   measured  profile_measure(): every distinct layer shape timed on the current device
 *   cache     a file an earlier measurement wrote (profile_cache_load), keyed by what the
 *             times depend on (profile_times_key) and the machine
 *   trace     an earlier run's trace (observe/trace_times.h, pipe_train --plan --from-trace)
 *   flops     layer_cost FLOPs at a measured GEMM rate: the fallback, never cached
 * Ownership: the arrays belong to the struct (profile_times_alloc / profile_times_free). Any rank
 * may call these; a pipelined run measures on rank 0 and broadcasts (engine/auto_plan.c), so that
 * every rank plans from the same numbers.
 */
#ifndef PT_PROFILE_LAYER_TIMES_H
#define PT_PROFILE_LAYER_TIMES_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct {
  int n_layers;
  double *f, *i, *w; /* [n_layers] seconds per micro-batch */
  double *opt;       /* [n_layers] seconds per step */
  double p2p_latency_s, p2p_bytes_per_s;
  double copy_bytes_per_s; /* device <-> pinned host (host memcpy on the host kinds) */
  char source[320];  /* e.g. "measured on cpu (1 thread) in 1.4 s", "cache ~/.cache/..." */
} pt_layer_times;

void profile_times_alloc(pt_layer_times *t, int n_layers);
void profile_times_free(pt_layer_times *t);
/* Copies src into dst (dst allocated here; free with profile_times_free). */
void profile_times_copy(pt_layer_times *dst, const pt_layer_times *src);

/* Allocates t with estimates from the layers' FLOP counts (layer_cost) at gflops GFLOP/s
 * (micro_batch_size samples of profile_tokens_per_sample tokens): F the forward FLOPs,
 * I and W half the backward FLOPs each (all of it in I without parameters); optimizer 10 flops
 * per parameter; transfers at the defaults below. */
void profile_times_from_flops(pt_layer_times *t, const pt_model *m, double gflops);
/* T of a micro-batch as these times count it: seq_len when the model reads tokens, else 1. */
int profile_tokens_per_sample(const pt_model *m);

/* Transfer defaults when nothing is measured: MPI between ranks of one node on the host. */
#define PROFILE_P2P_LATENCY_S 20e-6
#define PROFILE_P2P_BYTES_PER_S 4e9
/* Offload copy default when nothing is measured (flops, a trace): a PCIe 4.0 x16 link's
 * practical host <-> device rate. */
#define PROFILE_COPY_BYTES_PER_S 16e9

#endif
