/* comm/nccl/comm_staged.c: the staged transport (comm_transport.h): a GPU rank's device
 * buffers over MPI through pinned host copies (a pool per group, reused; comm_pinned.h). Works
 * wherever MPI does; several ranks may share a GPU. MPI matches by tag, in no fixed order, and
 * nothing is held back. Float sums keep comm.h's fixed order ((x0 + x1) + x2) + ... (the host
 * chain on the copy), so results match the host path bit for bit. GPU builds only. */
#include <stdlib.h>

#include "comm/comm_check.h"
#include "comm/nccl/comm_gpu.h"
#include "comm/nccl/comm_pinned.h"
#include "core/error.h"
#include "kernels/cuda/gpu.h"

typedef struct {
  MPI_Comm mpi;
  int size;
  cudaStream_t compute; /* where the buffers are produced and consumed */
  pinned_pool pool;     /* the host copies' buffers, reused */
} staged_link;

typedef struct {
  staged_link *d;
  int recv;
  void *buf;
  size_t bytes;
  MPI_Request mpi;
  int slab; /* the pinned host copy (d->pool) */
} staged_req;

extern const comm_transport comm_transport_staged;

static staged_link *link_new(MPI_Comm mpi, cudaStream_t compute) {
  staged_link *d = pt_calloc(1, sizeof *d);
  d->mpi = mpi, d->compute = compute;
  PT_CHECK_MPI(MPI_Comm_size(mpi, &d->size));
  return d;
}

static void *staged_open(MPI_Comm mpi, void *stream, char *err, size_t errsz) {
  (void)err, (void)errsz;
  return link_new(mpi, (cudaStream_t)stream);
}

static void *staged_split(void *parent, MPI_Comm child, int color, int key) {
  (void)key;
  return color < 0 ? NULL : link_new(child, ((staged_link *)parent)->compute);
}

static void staged_close(void *state) {
  staged_link *d = state;
  if (!d) return;
  pinned_free(&d->pool);
  free(d);
}

static staged_req *req_new(staged_link *d, void *buf, size_t bytes, int recv, pt_request *r) {
  staged_req *q = pt_calloc(1, sizeof *q);
  *q = (staged_req){.d = d, .recv = recv, .buf = buf, .bytes = bytes, .mpi = MPI_REQUEST_NULL};
  q->slab = pinned_take(&d->pool, bytes);
  r->impl = q;
  r->via = &comm_transport_staged;
  return q;
}

static void staged_send(void *state, const void *buf, size_t bytes, int peer, int tag,
                        pt_request *r) {
  staged_link *d = state;
  staged_req *q = req_new(d, (void *)buf, bytes, 0, r);
  void *host = pinned_host(&d->pool, q->slab);
  PT_CHECK_CUDA(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, d->compute));
  PT_CHECK_CUDA(cudaStreamSynchronize(d->compute)); /* MPI reads the host copy */
  PT_CHECK_MPI(MPI_Isend(host, (int)bytes, MPI_BYTE, peer, tag, d->mpi, &q->mpi));
}

static void staged_recv(void *state, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  staged_link *d = state;
  staged_req *q = req_new(d, buf, bytes, 1, r);
  PT_CHECK_MPI(MPI_Irecv(pinned_host(&d->pool, q->slab), (int)bytes, MPI_BYTE, peer, tag, d->mpi,
                         &q->mpi));
}

/* MPI has the host copy (the host waits for the peer here, as MPI must); a receive's copy to
 * the device is queued on the compute stream, and its buffer reused once that copy ran. */
static void staged_wait(pt_request *r) {
  staged_req *q = r->impl;
  staged_link *d = q->d;
  PT_CHECK_MPI(MPI_Wait(&q->mpi, MPI_STATUS_IGNORE));
  if (q->recv)
    PT_CHECK_CUDA(cudaMemcpyAsync(q->buf, pinned_host(&d->pool, q->slab), q->bytes,
                                  cudaMemcpyHostToDevice, d->compute));
  pinned_give(&d->pool, q->slab, q->recv ? d->compute : NULL);
  free(q);
  r->impl = NULL;
  r->via = NULL;
}

/* MPI needs no grouping and holds nothing back. */
static void staged_nothing(void *state) { (void)state; }

/* A pinned host copy of buf, reduced over MPI by op (ends: comm.h's ranges, or NULL), copied
 * back (queued on the compute stream; the copy's buffer is reused once it ran). */
typedef void (*host_op)(MPI_Comm mpi, float *buf, size_t n, const size_t *ends);

static void staged_reduce(staged_link *d, float *buf, size_t n, host_op op, const size_t *ends) {
  if (d->size == 1 || n == 0) return;
  int slab = pinned_take(&d->pool, n * sizeof(float));
  float *host = pinned_host(&d->pool, slab);
  PT_CHECK_CUDA(cudaMemcpyAsync(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost, d->compute));
  PT_CHECK_CUDA(cudaStreamSynchronize(d->compute));
  op(d->mpi, host, n, ends);
  PT_CHECK_CUDA(cudaMemcpyAsync(buf, host, n * sizeof(float), cudaMemcpyHostToDevice, d->compute));
  pinned_give(&d->pool, slab, d->compute);
}

static void host_sum(MPI_Comm mpi, float *buf, size_t n, const size_t *ends) {
  (void)ends;
  comm_host_sum_f32(mpi, buf, n);
}

static void host_allreduce(MPI_Comm mpi, float *buf, size_t n, const size_t *ends) {
  (void)ends;
  comm_host_allreduce_f32(mpi, buf, n);
}

static void staged_sum_f32(void *state, float *buf, size_t n) {
  staged_reduce(state, buf, n, host_sum, NULL);
}

/* comm.dp_reduce: allreduce: MPI_Allreduce on the host copy. */
static void staged_allreduce_f32(void *state, float *buf, size_t n) {
  staged_reduce(state, buf, n, host_allreduce, NULL);
}

/* The sharded optimizer's halves on the whole host copy (the host path's, so the same bits). */
static void staged_reduce_scatter_f32(void *state, float *buf, size_t n, const size_t *ends) {
  staged_reduce(state, buf, n, comm_host_reduce_scatter_f32, ends);
}

static void staged_allgather_f32(void *state, float *buf, size_t n, const size_t *ends) {
  staged_reduce(state, buf, n, comm_host_allgather_f32, ends);
}

static void staged_connect(void *state, const int *peers, int n) {
  comm_gpu_connect(&comm_transport_staged, state, peers, n);
}

const comm_transport comm_transport_staged = {
    .traits = {.name = "staged", .in_order = 0, .holds_sends = 0},
    .gpu = 1,
    .backend = SPEC_COMM_MPI,
    .open = staged_open,
    .split = staged_split,
    .close = staged_close,
    .send = staged_send,
    .recv = staged_recv,
    .wait = staged_wait,
    .group_start = staged_nothing,
    .group_end = staged_nothing,
    .flush = staged_nothing,
    .sum_f32 = staged_sum_f32,
    .allreduce_f32 = staged_allreduce_f32,
    .reduce_scatter_f32 = staged_reduce_scatter_f32,
    .allgather_f32 = staged_allgather_f32,
    .connect = staged_connect,
};
