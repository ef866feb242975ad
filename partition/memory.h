/* partition/memory.h: memory a pipeline stage will use, estimated before anything is allocated.
 *
 * Mirrors what the engine allocates (model/model.c, engine/stage.c, the trainer):
 *   params      the stage's parameters (a tied weight held twice by one stage counts once;
 *               held by two stages, it counts on both)
 *   grads       same size as params, plus a gradient buffer for each tied copy that shares
 *               a weight stored on the same stage
 *   optimizer   AdamW: 2 x params (m, v); SGD: 1 x params; with pipeline.shard_optimizer over
 *               D > 1 replicas, of the largest of the D ranges optimizer_shard_end cuts the
 *               parameters into (about params / D)
 *   weight_copy train.precision bf16 where the device's products read a bf16 copy of the
 *               parameters (device_weight_copy_used; model/model.h's params_bf16): params / 2;
 *               else 0
 *   activations per micro-batch in flight: the stage input, the kept layer outputs and (without
 *               activation checkpointing) every layer's saved state (train.precision bf16: as
 *               engine/stage_store.h keeps them, the outputs as bf16 and the saved parts forward
 *               writes bf16 or float32, layer_saved_rest_bytes), plus the engine's
 *               gradient buffers (received, to send) and targets (train.precision bf16: and
 *               the packed bf16 messages to and from other ranks, half a float buffer each,
 *               two each way); times the in-flight count
 *   workspace   checkpoint recompute buffers, the largest layer scratch, two gradient buffers,
 *               bf16's float32 working buffers (a kept output of each parity, the largest
 *               saved area without checkpointing),
 *               and the data buffers of the end stages (the loss gradient has no buffer: it
 *               is written over the last stage's output, engine/stage.h stage_loss_gradient)
 *   stash       split-backward schedules only (memory_add_stash): per micro-batch between its
 *               I and W, the output gradient of every layer with parameters (what its
 *               backward_weight reads later); times the schedule's n_w_pending for the stage.
 *               None under activation checkpointing, where I runs the fused backward. bf16:
 *               the douts as bf16 (float32 on the model's last layer) and the saved parts only
 *               backward_input writes. Counted in activations too (stash says how much of them it is).
 *   comm        ranks on a GPU whose device buffers go over NCCL (memory_uses_nccl) only; 0
 *               elsewhere. The device chain sums' scratch (comm/nccl/comm_nccl.c: each
 *               communicator keeps a device copy of the largest buffer it summed: the rank's
 *               gradients on the data-parallel group when there are replicas, the tied weight
 *               on each tie group) and NCCL's own buffers, comm_peers x memory_nccl_peer_bytes():
 *               a peer is a rank this one exchanges with over a NCCL communicator (its pipeline
 *               neighbours; two ring neighbours in the data-parallel group, or every other
 *               replica when the optimizer is sharded (its gather); every other holder
 *               of a tied weight, whom a tie chain may visit). The engine counts the same
 *               figures in its measured peak as it makes them (the scratch when allocated, a
 *               peer's buffers at the first transfer with it), since NCCL's own allocations
 *               are not visible to it; what NCCL really takes per peer depends on its version,
 *               transport and tuning (NCCL_NCHANNELS_PER_PEER, NCCL_BUFFSIZE, ...).
 * Saved areas and scratch are sized for the kernel table the stage will run with (the model's
 * device once allocated, else device_kernels_for(pipeline.device)): on a GPU the attention keeps
 * B*H*T log-sum-exps where the CPU keeps its B*H*T*T probabilities.
 * The in-flight count is the schedule's (schedule/registry.h: 1F1B min(P - s, M), GPipe M).
 * All sizes in bytes. */
#ifndef PT_PARTITION_MEMORY_H
#define PT_PARTITION_MEMORY_H

#include <stdint.h>
#include <stdlib.h>

#include "model/model.h"

typedef struct {
  int64_t params, grads, optimizer, weight_copy, activations, workspace, stash, comm;
  int64_t activations_host; /* pipeline.offload: stashed activations in host memory instead */
  int64_t total;
  int in_flight, w_pending;
  int comm_peers; /* peers whose NCCL buffers comm counts */
} pt_stage_memory;

/* The assumption behind comm's NCCL part: NCCL keeps, for each peer and each of
 * MEMORY_NCCL_CHANNELS channels, a send and a receive connection with a buffer of NCCL_BUFFSIZE
 * bytes (NCCL's default 4 MiB; the environment's NCCL_BUFFSIZE when set, as NCCL reads it). */
#define MEMORY_NCCL_CHANNELS 2
#define MEMORY_NCCL_BUFFSIZE_DEFAULT ((int64_t)4 << 20)
static inline int64_t memory_nccl_peer_bytes(void) {
  const char *env = getenv("NCCL_BUFFSIZE");
  char *end = NULL;
  long long b = env && *env ? strtoll(env, &end, 0) : 0;
  int64_t buf = b > 0 && end && !*end ? (int64_t)b : MEMORY_NCCL_BUFFSIZE_DEFAULT;
  return 2 * MEMORY_NCCL_CHANNELS * buf;
}
/* Ranks of spec s keep device buffers that NCCL carries: pipeline.device resolves to a kind
 * whose buffers the host cannot address (a GPU; device.h's host_addressable) and comm.backend
 * is nccl or auto. */
int memory_uses_nccl(const pt_spec *s);

/* pipeline.offload (partition/offload.h): the bytes one micro-batch keeps of the kind (its
 * OFFLOAD_OUTPUTS or OFFLOAD_SAVED tensors) in a device frame or a host buffer of
 * engine/stage_offload.c, each tensor rounded up to 64 bytes. memory_add_offload takes a chunk
 * whose pooled kind needs `frames` device frames instead of its in_flight slots and `hosts` host
 * buffers: activations (and total) lose the difference, activations_host gains the buffers. */
int64_t memory_offload_bytes(const pt_model *m, int first, int last, int kind);
void memory_add_offload(const pt_model *m, int first, int last, int kind, int frames, int hosts,
                        pt_stage_memory *out);

/* Estimate for layers [first, last) of a configured model (no storage needed). */
void memory_estimate_stage(const pt_model *m, int first, int last, int in_flight,
                           pt_stage_memory *out);
/* Estimate for a rank that runs n chunks (virtual stages) ranges[i], each estimated alone in
 * chunk[i] (memory_estimate_stage and, for split schedules, memory_add_stash): their
 * activations, stash and workspace added, except that the parameters are counted as
 * model_alloc_ranges lays them out (a tied weight shared by several of the rank's layers is
 * stored once, its later copies keep a gradient each) and a chunk whose previous chunk runs on
 * the same rank (local_prev[i]) has no input-gradient buffers: the engine writes them straight
 * into that chunk's. With one chunk, chunk[0]. */
void memory_estimate_rank(const pt_model *m, const pt_range *ranges,
                          const pt_stage_memory *chunk, const int *local_prev, int n,
                          pt_stage_memory *out);
/* The dout sets of a split-backward stage for w_pending micro-batches between I and W (0 under
 * checkpointing). A sum over the range's layers: it never grows when the range shrinks, so it is
 * its own bound for the partitioner. */
int64_t memory_stash_bytes(const pt_model *m, int first, int last, int w_pending);
/* Adds the stash of w_pending micro-batches to an estimate of the same range (stash,
 * activations, total). */
void memory_add_stash(const pt_model *m, int first, int last, int w_pending,
                      pt_stage_memory *out);
/* The part of the estimate the pipeline engine allocates beside the model, the stage's layers
 * and the optimizer (gradient and target slots, data buffers). */
int64_t memory_engine_bytes(const pt_model *m, int first, int last, int in_flight);
/* An upper bound of the estimate's total that never grows when the range shrinks (the exact
 * estimate can: a later start may read a wider input, and checkpoint segments move with the
 * start), comm included where the spec uses NCCL. The partitioner fits caps against it, so any
 * plan it picks fits exactly too. */
int64_t memory_bound_stage(const pt_model *m, int n_stages, int stage, int first, int last,
                           int in_flight);
/* Physical memory of this machine in bytes (0 if unknown). */
int64_t memory_machine_bytes(void);
/* Checks `need` bytes for one process (of `procs` sharing the machine) against its share of the
 * machine's memory: returns 0, or -1 with a one-line message in err naming `what` and the fix. */
int memory_check_fits(int64_t need, int procs, const char *what, char *err, size_t errsz);
/* The same against a GPU of `total` bytes with `free_b` of them free now, which `sharers` ranks
 * share (what names them all and need is their sum; 1: one rank, its own GPU). The message
 * says what is held elsewhere where that is over a tenth of the GPU (another job, other
 * ranks' contexts). */
int memory_check_device(int64_t need, int64_t free_b, int64_t total, int sharers,
                        const char *what, char *err, size_t errsz);
/* Parses "24GiB", "512 MiB", "1.5GB", "1000000" (KiB MiB GiB TiB = 2^10.., KB MB GB TB = 10^3..).
 * Returns bytes, or -1 if the text is not a size. */
int64_t memory_parse_size(const char *text);
/* "1.50 GiB"-style text into out. */
void memory_format_size(int64_t bytes, char *out, size_t outsz);

#endif
