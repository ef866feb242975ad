/* comm/comm_host.c: the MPI transport on host memory (comm_transport.h): every group's host
 * buffers, and a CPU rank's device buffers (which are host memory). Its state per group is the
 * group's MPI communicator. */
#include <mpi.h>
#include <stdlib.h>

#include "comm/comm_check.h"
#include "comm/comm_transport.h"
#include "core/error.h"

typedef struct {
  MPI_Comm mpi;
} host_link;

static void *host_open(MPI_Comm mpi, void *stream, char *err, size_t errsz) {
  (void)stream, (void)err, (void)errsz;
  host_link *h = pt_calloc(1, sizeof *h);
  h->mpi = mpi;
  return h;
}

static void *host_split(void *parent, MPI_Comm child, int color, int key) {
  (void)parent, (void)key;
  return color < 0 ? NULL : host_open(child, NULL, NULL, 0);
}

static void host_close(void *state) { free(state); }

static MPI_Request *new_request(pt_request *r) {
  MPI_Request *q = pt_calloc(1, sizeof *q);
  r->impl = q;
  r->via = &comm_transport_mpi;
  return q;
}

static void host_send(void *state, const void *buf, size_t bytes, int peer, int tag,
                      pt_request *r) {
  if (bytes > (size_t)INT32_MAX) pt_fatal("message of %zu bytes is too large for MPI", bytes);
  PT_CHECK_MPI(MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, ((host_link *)state)->mpi,
                         new_request(r)));
}

static void host_recv(void *state, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  if (bytes > (size_t)INT32_MAX) pt_fatal("message of %zu bytes is too large for MPI", bytes);
  PT_CHECK_MPI(MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, ((host_link *)state)->mpi,
                         new_request(r)));
}

static void host_wait(pt_request *r) {
  PT_CHECK_MPI(MPI_Wait((MPI_Request *)r->impl, MPI_STATUS_IGNORE));
  free(r->impl);
  r->impl = NULL;
  r->via = NULL;
}

/* MPI matches by tag and needs no grouping, holds nothing, and connects lazily at no cost. */
static void host_nothing(void *state) { (void)state; }
static void host_connect(void *state, const int *peers, int n) {
  (void)state, (void)peers, (void)n;
}

/* Chain sum: rank 0's buffer goes to rank 1, which adds its own and passes it on; the last rank
 * holds ((x0 + x1) + x2) + ... and sends it to each rank in turn. O(size) latency, but the order
 * of additions is fixed, which is what makes results reproducible across layouts; and every
 * transfer has one known peer, so a rank that stopped is named by the rank waiting on it
 * (comm_note_wait), where a broadcast's tree would hide it. The chain alone (CHAIN) also starts
 * the reduce-scatter, which hands the last rank's sum out by range instead. */
#define DEFINE_CHAIN(NAME, TYPE, MPITYPE)                                                  \
  static void NAME(MPI_Comm mpi, TYPE *buf, size_t n, int rank, int size) {                \
    int tag = PT_TAG_CHAIN_SUM;                                                            \
    if (n > (size_t)INT32_MAX) pt_fatal("reduction of %zu elements is too large", n);     \
    if (rank > 0) {                                                                        \
      TYPE *acc = malloc(sizeof(TYPE) * n);                                                \
      if (!acc) pt_fatal("out of memory in a reduction of %zu elements", n);               \
      comm_note_wait(mpi, "the running sum", rank - 1, 0);                                 \
      PT_CHECK_MPI(MPI_Recv(acc, (int)n, MPITYPE, rank - 1, tag, mpi, MPI_STATUS_IGNORE)); \
      for (size_t i = 0; i < n; i++) buf[i] = acc[i] + buf[i];                             \
      free(acc);                                                                           \
    }                                                                                      \
    if (rank < size - 1) {                                                                 \
      comm_note_wait(mpi, "the running sum", rank + 1, 0);                                 \
      PT_CHECK_MPI(MPI_Send(buf, (int)n, MPITYPE, rank + 1, tag, mpi));                    \
    }                                                                                      \
  }

DEFINE_CHAIN(chain_f32, float, MPI_FLOAT)
DEFINE_CHAIN(chain_f64, double, MPI_DOUBLE)

/* The chain's end: the last rank sends its sum (n elements of type, n checked by the chain) to
 * each rank in turn, one known peer per transfer. */
static void send_sum(MPI_Comm mpi, void *buf, size_t n, MPI_Datatype type, int rank, int size) {
  int tag = PT_TAG_CHAIN_SUM;
  if (rank < size - 1) {
    comm_note_wait(mpi, "the sum", size - 1, 1);
    PT_CHECK_MPI(MPI_Recv(buf, (int)n, type, size - 1, tag, mpi, MPI_STATUS_IGNORE));
  }
  for (int r = 0; rank == size - 1 && r < size - 1; r++) {
    comm_note_wait(mpi, "the sum", r, 0);
    PT_CHECK_MPI(MPI_Send(buf, (int)n, type, r, tag, mpi));
  }
  comm_note_wait(mpi, NULL, -1, 0);
}

/* This rank and the group's size; 0 when there is nothing to reduce (one rank, no elements). */
static int group_of(MPI_Comm mpi, size_t n, int *rank, int *size) {
  PT_CHECK_MPI(MPI_Comm_rank(mpi, rank));
  PT_CHECK_MPI(MPI_Comm_size(mpi, size));
  return *size > 1 && n > 0;
}

void comm_host_sum_f32(MPI_Comm mpi, float *buf, size_t n) {
  int rank, size;
  if (!group_of(mpi, n, &rank, &size)) return;
  chain_f32(mpi, buf, n, rank, size);
  send_sum(mpi, buf, n, MPI_FLOAT, rank, size);
}

void comm_host_sum_f64(MPI_Comm mpi, double *buf, size_t n) {
  int rank, size;
  if (!group_of(mpi, n, &rank, &size)) return;
  chain_f64(mpi, buf, n, rank, size);
  send_sum(mpi, buf, n, MPI_DOUBLE, rank, size);
}

/* comm.h's ends as MPI's counts and displacements (int: n was checked against INT32_MAX). */
static void range_counts(const size_t *ends, int size, int *counts, int *displs) {
  for (int r = 0; r < size; r++) {
    size_t lo = r ? ends[r - 1] : 0;
    displs[r] = (int)lo, counts[r] = (int)(ends[r] - lo);
  }
}

/* The chain, then the last rank's sum scattered by range (its own stays where it is). */
void comm_host_reduce_scatter_f32(MPI_Comm mpi, float *buf, size_t n, const size_t *ends) {
  int rank, size;
  if (!group_of(mpi, n, &rank, &size)) return;
  chain_f32(mpi, buf, n, rank, size);
  int *counts = pt_calloc((size_t)size, sizeof(int));
  int *displs = pt_calloc((size_t)size, sizeof(int));
  range_counts(ends, size, counts, displs);
  int last = rank == size - 1;
  comm_note_wait(mpi, "the sum", last ? -1 : size - 1, !last);
  PT_CHECK_MPI(MPI_Scatterv(buf, counts, displs, MPI_FLOAT,
                            last ? MPI_IN_PLACE : buf + displs[rank], counts[rank], MPI_FLOAT,
                            size - 1, mpi));
  comm_note_wait(mpi, NULL, -1, 0);
  free(counts), free(displs);
}

void comm_host_allgather_f32(MPI_Comm mpi, float *buf, size_t n, const size_t *ends) {
  int rank, size;
  if (!group_of(mpi, n, &rank, &size)) return;
  if (n > (size_t)INT32_MAX) pt_fatal("gather of %zu elements is too large", n);
  int *counts = pt_calloc((size_t)size, sizeof(int));
  int *displs = pt_calloc((size_t)size, sizeof(int));
  range_counts(ends, size, counts, displs);
  comm_note_wait(mpi, "a gather", -1, 0);
  PT_CHECK_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT,
                              mpi));
  comm_note_wait(mpi, NULL, -1, 0);
  free(counts), free(displs);
}

void comm_host_allreduce_f32(MPI_Comm mpi, float *buf, size_t n) {
  if (n == 0) return;
  if (n > (size_t)INT32_MAX) pt_fatal("reduction of %zu elements is too large", n);
  PT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, mpi));
}

static void host_sum_f32(void *state, float *buf, size_t n) {
  comm_host_sum_f32(((host_link *)state)->mpi, buf, n);
}

static void host_allreduce_f32(void *state, float *buf, size_t n) {
  comm_host_allreduce_f32(((host_link *)state)->mpi, buf, n);
}

static void host_reduce_scatter_f32(void *state, float *buf, size_t n, const size_t *ends) {
  comm_host_reduce_scatter_f32(((host_link *)state)->mpi, buf, n, ends);
}

static void host_allgather_f32(void *state, float *buf, size_t n, const size_t *ends) {
  comm_host_allgather_f32(((host_link *)state)->mpi, buf, n, ends);
}

const comm_transport comm_transport_mpi = {
    .traits = {.name = "mpi", .in_order = 0, .holds_sends = 0},
    .gpu = 0,
    .backend = SPEC_COMM_AUTO,
    .open = host_open,
    .split = host_split,
    .close = host_close,
    .send = host_send,
    .recv = host_recv,
    .wait = host_wait,
    .group_start = host_nothing,
    .group_end = host_nothing,
    .flush = host_nothing,
    .sum_f32 = host_sum_f32,
    .allreduce_f32 = host_allreduce_f32,
    .reduce_scatter_f32 = host_reduce_scatter_f32,
    .allgather_f32 = host_allgather_f32,
    .connect = host_connect,
};
