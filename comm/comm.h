/* comm/comm.h: the communication interface the engine uses, whatever the transport.
 *
 * A pt_comm is a group of ranks (the world, a pipeline, a data-parallel group, a tie group).
 * Point-to-point calls are asynchronous: they return at once with a request that comm_wait()
 * completes; the buffer must stay untouched until then. For device buffers over NCCL,
 * "completes" is in stream order: comm_wait returns at once, and work queued on the rank's
 * compute stream afterwards runs after the transfer (which waited for the work queued before
 * the send or receive call); the host touches such buffers only after synchronising the
 * compute stream. Reductions here are deterministic:
 * floats are summed in group-rank order ((x0 + x1) + x2) + ..., so results do not depend on
 * the transport's reduction tree, and a pipelined run can match the sequential one bit for bit.
 * Every failing call aborts the whole job with the rank and the call in the message.
 *
 * Two kinds of buffer, told apart by the call, never by looking at the address:
 *   device buffers  the rank's compute memory (device_alloc's: GPU memory on a GPU rank, host
 *                   memory on a CPU rank): comm_send_async, comm_recv_async,
 *                   comm_allreduce_sum_f32, comm_allreduce_sum_f32_unordered, comm_connect's
 *                   exchange. They go through the group's device transport.
 *   host buffers    host memory on every rank: comm_send_host_async, comm_recv_host_async and
 *                   every other call (f64 sums, u64 reductions, gathers, broadcast): sizes,
 *                   statistics, host copies of weights. They go through MPI.
 * Transports (comm_transport.h; the list in comm_registry.c): a group's device transport is
 * chosen once, when comm_use_device() runs (the world) or the group is split (its parent's):
 * MPI (comm_host.c) until comm_use_device; on a GPU rank NCCL (nccl/comm_nccl.c) or MPI
 * through pinned host copies (nccl/comm_staged.c), by comm.backend. NCCL matches transfers
 * between two ranks in the order they are issued (tags are MPI's only): the engine issues them
 * in schedule order, and checks its schedule under those rules (comm_traits).
 */
#ifndef PT_COMM_H
#define PT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "spec/spec.h"

typedef struct pt_comm pt_comm;
struct comm_transport;

typedef struct {
  void *impl;                       /* the transport's request; NULL when nothing is pending */
  const struct comm_transport *via; /* the transport that completes it */
} pt_request;

/* Starts the transport (MPI_Init) and installs the abort hook so pt_fatal() ends every rank. */
void comm_init(int *argc, char ***argv);
void comm_finalize(void);
/* Launched by mpirun/srun (or already initialised)? Decides whether a run needs comm_init. */
int comm_launched(void);
pt_comm *comm_world(void);
int comm_rank(const pt_comm *c);
int comm_size(const pt_comm *c);
/* Ranks of parent with the same color form a new group, ordered by key (collective over
 * parent). A rank passing a negative color joins no group: free what it gets back. */
pt_comm *comm_split(pt_comm *parent, int color, int key);
void comm_free(pt_comm *c);
/* Node-local rank and size (ranks sharing this host). */
int comm_local_rank(void);
/* The host world rank `rank` runs on (its MPI processor name, the hostname, cut to 63 bytes),
 * gathered once by comm_init so that messages about another rank can name its host; "" before
 * comm_init or for a rank out of range. */
const char *comm_host_name(int rank);
int comm_local_size(void);
/* Every rank of this node gets every node-local rank's `bytes` bytes, in local-rank order
 * (out: local_size * bytes). Collective over the node. */
void comm_node_allgather(const void *mine, size_t bytes, void *out);

/* Point-to-point tags, one name per kind of message, so that two kinds can never match each
 * other's receives. From 0 up: the micro-batches' activations (2 mb) and gradients (2 mb + 1),
 * mb counting on over the rounds of chunk boundaries (engine/pipeline_step.c tag_of);
 * everything else above any micro-batch's. The values are the ones these messages always had. */
enum {
  PT_TAG_CONNECT = 0,                  /* comm_connect's warm-up bytes (device transport: no tags) */
  PT_TAG_CHAIN_SUM = 77,               /* comm_allreduce_sum_*: the running sum to the next rank */
  PT_TAG_CLOCK_PING = 900,             /* trace clock offset: ping k is + k (k < 8) */
  PT_TAG_CLOCK_PONG = 950,             /* and its answer */
  PT_TAG_GATHER_PARAMS = 1 << 20,      /* pipeline_gather: a stage's weights to rank 0 */
  PT_TAG_GATHER_ROOT = (1 << 20) + 1,  /* pipeline_gather_root: small per-rank values to rank 0 */
  PT_TAG_GRAD_NORM = (1 << 20) + 2,    /* global_norm: per-tensor sums of squares to stage 0 */
  PT_TAG_SHARD_STATE = (1 << 20) + 3,  /* pipeline_shard_collect: a replica's optimizer range */
  PT_TAG_START_LINES = (1 << 20) + 16  /* engine/start_lines.c: each rank's start-up line to 0 */
};

/* Device buffers (see the top), over the group's device transport. */
void comm_send_async(pt_comm *c, const void *buf, size_t bytes, int peer, int tag, pt_request *r);
void comm_recv_async(pt_comm *c, void *buf, size_t bytes, int peer, int tag, pt_request *r);
/* Host buffers, over MPI whatever the device transport: they match only host calls. */
void comm_send_host_async(pt_comm *c, const void *buf, size_t bytes, int peer, int tag,
                          pt_request *r);
void comm_recv_host_async(pt_comm *c, void *buf, size_t bytes, int peer, int tag, pt_request *r);
void comm_wait(pt_request *r);   /* either kind; no-op for an empty request */
/* Grouping brackets for transports that need send/recv pairs issued together (NCCL); MPI: no-op. */
void comm_group_start(pt_comm *c);
void comm_group_end(pt_comm *c);
/* Issues the sends a transport holds back, without waiting for them. The device transport over
 * NCCL holds each send until the rank next waits for a transfer of the group (then issues them
 * with that receive, as one NCCL group), so a rank about to block on something else, such as a
 * reduction on another group, calls this first or its peers wait for those sends meanwhile (or
 * forever, when a peer is in that reduction too). The schedule's FLUSH action. MPI, staged
 * device buffers, and inside comm_group_start/end (the group goes out at its end): no-op. */
void comm_flush(pt_comm *c);

/* A GPU rank's device buffers on the world group and every group split from it afterwards
 * travel by the GPU transport that backend names (comm_registry.c): NCCL (SPEC_COMM_NCCL, and
 * SPEC_COMM_AUTO) or staged through host memory over MPI (SPEC_COMM_MPI; ranks may share a
 * GPU). stream: the rank's compute stream (cudaStream_t). Collective over the world; call it
 * after selecting the rank's GPU and before comm_split. 0, or -1 with err (a build without a
 * GPU transport: always). A rank that never calls it (CPU) keeps MPI for device buffers. */
int comm_use_device(spec_comm_backend backend, void *stream, char *err, size_t errsz);
/* What a device transport promises about matching, which the engine's schedule checks need
 * (schedule/schedule_rendezvous.c simulates a transport with both properties). */
typedef struct {
  const char *name;
  int in_order;    /* transfers between two ranks match in issue order, tags ignored (NCCL) */
  int holds_sends; /* sends wait for the rank's next wait on the group, or comm_flush */
} comm_traits;
/* The traits of the transport comm_use_device(backend) picks on a GPU rank (without one in
 * this build: host MPI's), known before it runs. */
const comm_traits *comm_device_traits(spec_comm_backend backend);
/* Sets up the device transport's connections to peers (one small exchange each, grouped) so
 * the first real transfer does not pay for it. Groups on MPI: nothing. Collective over the
 * listed peers, who must list this rank. */
void comm_connect(pt_comm *c, const int *peers, int n);

/* In-place deterministic sum over the group (group-rank order): f32 of a device buffer (the
 * device transport), f64 of a host buffer (MPI). */
void comm_allreduce_sum_f32(pt_comm *c, float *buf, size_t n);
void comm_allreduce_sum_f64(pt_comm *c, double *buf, size_t n);
/* In-place sum of a device buffer over the group by the transport's own reduction
 * (comm.dp_reduce: allreduce): ncclAllReduce over NCCL, else MPI_Allreduce (staged: on a host
 * copy). O(log size) or ring latency instead of the chain's O(size), but the order of
 * additions is the library's: NOT bitwise equal to comm_allreduce_sum_f32 or a sequential run,
 * and it may change with the group size, the message size or the library's version. */
void comm_allreduce_sum_f32_unordered(pt_comm *c, float *buf, size_t n);
/* The sharded optimizer's two halves (pipeline.shard_optimizer), on a device buffer of n floats
 * cut into one range per group rank: rank r's is [ends[r - 1], ends[r]) (from 0 for rank 0;
 * ends[size - 1] = n). comm_reduce_scatter_sum_f32 sums in comm_allreduce_sum_f32's order, so
 * with the same bits: afterwards each rank's own range holds the sum, and so does the whole
 * buffer of the last group rank (the chain ends there); the other ranks' other ranges hold
 * partial sums. comm_allgather_f32 copies every rank's range to every rank (no arithmetic). */
void comm_reduce_scatter_sum_f32(pt_comm *c, float *buf, size_t n, const size_t *ends);
void comm_allgather_f32(pt_comm *c, float *buf, size_t n, const size_t *ends);
/* The rest take host buffers. */
void comm_allreduce_max_u64(pt_comm *c, uint64_t *buf, size_t n);
void comm_allreduce_min_u64(pt_comm *c, uint64_t *buf, size_t n);
/* Concatenates each rank's `counts[rank]` doubles in group-rank order into out (all ranks). */
void comm_allgatherv_f64(pt_comm *c, const double *mine, int n_mine, double *out,
                         const int *counts);
void comm_allgather_int(pt_comm *c, int mine, int *out);
/* Every rank's n integers (the same n everywhere) in group-rank order into out [size * n] (all
 * ranks): sizes and checksums travel as integers, exact whatever their magnitude. */
void comm_allgather_u64(pt_comm *c, const uint64_t *mine, int n, uint64_t *out);
/* The lowest group rank that passed failed != 0, or -1 when none did: every rank learns whether
 * to stop and which one of them holds the message to print. Collective. */
int comm_first_failed(pt_comm *c, int failed);
void comm_broadcast(pt_comm *c, void *buf, size_t bytes, int root);
void comm_barrier(pt_comm *c);
/* A barrier that gives up after `seconds`: 0 when every rank came, -1 when one did not (its
 * request is left pending: call nothing collective on c after, exit). For ends where a rank that
 * broke its contract must not hang the job (engine/run.h run_exit). */
int comm_barrier_within(pt_comm *c, double seconds);

/* Who a blocked rank waits on, for the watchdog (observe/watchdog.h) to name a rank that
 * stopped. Before a collective blocks (and before each step of a chain sum) comm calls
 * hook(call, peer, relay): call names it ("a broadcast"), peer is the world rank waited on
 * (-1: any of the group; a collective of a group of two waits on the other rank, named so),
 * relay 1 when that rank is itself waiting on others (a reduction's
 * result from its last rank); after it returns, hook(NULL, -1, 0). NULL: nobody is told. */
typedef void (*comm_wait_hook)(const char *call, int peer, int relay);
void comm_set_wait_hook(comm_wait_hook hook);

#endif
