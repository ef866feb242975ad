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
 * Transports: MPI (comm_mpi.c) for host buffers; in GPU builds, once comm_use_device() ran,
 * buffers in GPU memory go over NCCL or over MPI through pinned host copies (comm_nccl.c),
 * chosen per call by where the buffer lives. NCCL matches transfers between two ranks in the
 * order they are issued (tags are MPI's only): the engine issues them in schedule order.
 */
#ifndef PT_COMM_H
#define PT_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct pt_comm pt_comm;

typedef struct {
  void *impl; /* backend request; NULL when nothing is pending */
  int device; /* impl is a device transfer's (GPU builds) */
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
  PT_TAG_GRAD_NORM = (1 << 20) + 2     /* global_norm: per-tensor sums of squares to stage 0 */
};

void comm_send_async(pt_comm *c, const void *buf, size_t bytes, int peer, int tag, pt_request *r);
void comm_recv_async(pt_comm *c, void *buf, size_t bytes, int peer, int tag, pt_request *r);
void comm_wait(pt_request *r);   /* no-op for an empty request */
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

/* GPU builds: device buffers on the world group and every group split from it afterwards
 * travel over NCCL (nccl = 1) or staged through host memory over MPI (nccl = 0; ranks may share
 * a GPU). stream: the rank's compute stream (cudaStream_t). Collective over the world; call it
 * after selecting the rank's GPU and before comm_split. 0, or -1 with err. CPU builds: -1. */
int comm_use_device(int nccl, void *stream, char *err, size_t errsz);
/* Sets up the device transport's connections to peers (one small exchange each, grouped) so
 * the first real transfer does not pay for it. Host-only groups: nothing. Collective over the
 * listed peers, who must list this rank. */
void comm_connect(pt_comm *c, const int *peers, int n);

/* In-place deterministic sum over the group (group-rank order). */
void comm_allreduce_sum_f32(pt_comm *c, float *buf, size_t n);
void comm_allreduce_sum_f64(pt_comm *c, double *buf, size_t n);
/* In-place sum over the group by the transport's own reduction (comm.dp_reduce: allreduce):
 * ncclAllReduce for device buffers on an NCCL group, else MPI_Allreduce (staged device buffers
 * on a host copy). O(log size) or ring latency instead of the chain's O(size), but the order of
 * additions is the library's: NOT bitwise equal to comm_allreduce_sum_f32 or a sequential run,
 * and it may change with the group size, the message size or the library's version. */
void comm_allreduce_sum_f32_unordered(pt_comm *c, float *buf, size_t n);
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

#endif
