/* comm/comm_mpi.c: groups, host transfers and collectives over MPI; device buffers are handed
 * to comm_nccl.c in GPU builds (see comm_device.h). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/comm_check.h"
#include "core/error.h"
#ifdef PT_HAVE_GPU
#include "comm/comm_device.h"
#include "kernels/cuda/gpu.h"
/* A device buffer of a group with a device transport goes there. */
#define ON_DEVICE(c, buf) ((c)->dev && comm_device_owns(buf))
#else
typedef struct comm_device comm_device;
#define ON_DEVICE(c, buf) 0
#endif

struct pt_comm {
  MPI_Comm mpi;
  comm_device *dev; /* GPU builds, after comm_use_device(): the device transport */
};

static pt_comm g_world;
static int g_local_rank, g_local_size = 1;
static MPI_Comm g_node = MPI_COMM_NULL; /* this host's ranks */

const char *comm_mpi_error_text(int code) {
  static char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", code);
  return text;
}

static void abort_all(int code) {
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, code);
}

int comm_launched(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") ||
         getenv("SLURM_NTASKS");
}

void comm_init(int *argc, char ***argv) {
  int provided;
  PT_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  /* errors come back as codes, so PT_CHECK_MPI can report them with the rank */
  PT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  g_world.mpi = MPI_COMM_WORLD;
  int rank;
  PT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  pt_error_set_rank(rank);
  pt_error_set_abort_hook(abort_all);
  PT_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &g_node));
  PT_CHECK_MPI(MPI_Comm_rank(g_node, &g_local_rank));
  PT_CHECK_MPI(MPI_Comm_size(g_node, &g_local_size));
}

void comm_node_allgather(const void *mine, size_t bytes, void *out) {
  if (g_node == MPI_COMM_NULL) { /* not launched: this process is the node */
    memcpy(out, mine, bytes);
    return;
  }
  PT_CHECK_MPI(MPI_Allgather(mine, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, g_node));
}

void comm_finalize(void) {
  if (g_node != MPI_COMM_NULL) PT_CHECK_MPI(MPI_Comm_free(&g_node));
  PT_CHECK_MPI(MPI_Finalize());
}
pt_comm *comm_world(void) { return &g_world; }
int comm_local_rank(void) { return g_local_rank; }
int comm_local_size(void) { return g_local_size; }

int comm_rank(const pt_comm *c) {
  int r;
  PT_CHECK_MPI(MPI_Comm_rank(c->mpi, &r));
  return r;
}

int comm_size(const pt_comm *c) {
  int n;
  PT_CHECK_MPI(MPI_Comm_size(c->mpi, &n));
  return n;
}

pt_comm *comm_split(pt_comm *parent, int color, int key) {
  pt_comm *c = pt_calloc(1, sizeof *c);
  /* a negative color means "not a member": MPI hands back MPI_COMM_NULL */
  PT_CHECK_MPI(MPI_Comm_split(parent->mpi, color < 0 ? MPI_UNDEFINED : color, key, &c->mpi));
#ifdef PT_HAVE_GPU
  if (parent->dev) c->dev = comm_device_split(parent->dev, c->mpi, color, key);
#endif
  return c;
}

void comm_free(pt_comm *c) {
  if (!c || c == &g_world) return;
#ifdef PT_HAVE_GPU
  comm_device_free(c->dev);
#endif
  if (c->mpi != MPI_COMM_NULL) PT_CHECK_MPI(MPI_Comm_free(&c->mpi));
  free(c);
}

int comm_use_device(int nccl, void *stream, char *err, size_t errsz) {
#ifdef PT_HAVE_GPU
  g_world.dev = comm_device_create(g_world.mpi, nccl, stream, err, errsz);
  return g_world.dev ? 0 : -1;
#else
  (void)nccl, (void)stream;
  snprintf(err, errsz, "this pipetrain was built without the GPU backend");
  return -1;
#endif
}

static MPI_Request *new_request(pt_request *r) {
  MPI_Request *q = pt_calloc(1, sizeof *q);
  r->impl = q;
  return q;
}

void comm_send_async(pt_comm *c, const void *buf, size_t bytes, int peer, int tag, pt_request *r) {
#ifdef PT_HAVE_GPU
  if (ON_DEVICE(c, buf)) return comm_device_send(c->dev, buf, bytes, peer, tag, r);
#endif
  if (bytes > (size_t)INT32_MAX) pt_fatal("message of %zu bytes is too large for MPI", bytes);
  PT_CHECK_MPI(MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->mpi, new_request(r)));
}

void comm_recv_async(pt_comm *c, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
#ifdef PT_HAVE_GPU
  if (ON_DEVICE(c, buf)) return comm_device_recv(c->dev, buf, bytes, peer, tag, r);
#endif
  if (bytes > (size_t)INT32_MAX) pt_fatal("message of %zu bytes is too large for MPI", bytes);
  PT_CHECK_MPI(MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->mpi, new_request(r)));
}

void comm_wait(pt_request *r) {
  if (!r->impl) return;
#ifdef PT_HAVE_GPU
  if (comm_device_wait(r)) return;
#endif
  PT_CHECK_MPI(MPI_Wait((MPI_Request *)r->impl, MPI_STATUS_IGNORE));
  free(r->impl);
  r->impl = NULL;
}

void comm_group_start(pt_comm *c) {
#ifdef PT_HAVE_GPU
  if (c->dev) comm_device_group_start(c->dev);
#endif
  (void)c;
}

void comm_group_end(pt_comm *c) {
#ifdef PT_HAVE_GPU
  if (c->dev) comm_device_group_end(c->dev);
#endif
  (void)c;
}

void comm_flush(pt_comm *c) {
#ifdef PT_HAVE_GPU
  if (c->dev) comm_device_flush(c->dev);
#endif
  (void)c;
}

void comm_connect(pt_comm *c, const int *peers, int n) {
#ifdef PT_HAVE_GPU
  if (!c->dev || n == 0) return;
  void *buf = gpu_alloc(NULL, 2 * (size_t)n); /* n bytes out, n bytes in */
  pt_request *q = pt_calloc(2 * (size_t)n, sizeof *q);
  comm_group_start(c);
  for (int i = 0; i < n; i++) {
    comm_send_async(c, (char *)buf + i, 1, peers[i], PT_TAG_CONNECT, &q[2 * i]);
    comm_recv_async(c, (char *)buf + n + i, 1, peers[i], PT_TAG_CONNECT, &q[2 * i + 1]);
  }
  comm_group_end(c);
  for (int i = 0; i < 2 * n; i++) comm_wait(&q[i]);
  free(q);
  gpu_free(buf);
#else
  (void)c, (void)peers, (void)n;
#endif
}

/* Chain sum: rank 0's buffer goes to rank 1, which adds its own and passes it on; the last rank
 * holds ((x0 + x1) + x2) + ... and broadcasts it. O(size) latency, but the order of additions
 * is fixed, which is what makes results reproducible across layouts. */
static void chain_sum_f32(pt_comm *c, float *buf, size_t n);
#define DEFINE_CHAIN_SUM(NAME, TYPE, MPITYPE)                                              \
  void NAME(pt_comm *c, TYPE *buf, size_t n) {                                             \
    int rank = comm_rank(c), size = comm_size(c), tag = PT_TAG_CHAIN_SUM;                  \
    if (size == 1 || n == 0) return;                                                       \
    if (n > (size_t)INT32_MAX) pt_fatal("reduction of %zu elements is too large", n);     \
    if (rank > 0) {                                                                        \
      TYPE *acc = malloc(sizeof(TYPE) * n);                                                \
      if (!acc) pt_fatal("out of memory in a reduction of %zu elements", n);               \
      PT_CHECK_MPI(MPI_Recv(acc, (int)n, MPITYPE, rank - 1, tag, c->mpi, MPI_STATUS_IGNORE)); \
      for (size_t i = 0; i < n; i++) buf[i] = acc[i] + buf[i];                             \
      free(acc);                                                                           \
    }                                                                                      \
    if (rank < size - 1) PT_CHECK_MPI(MPI_Send(buf, (int)n, MPITYPE, rank + 1, tag, c->mpi)); \
    PT_CHECK_MPI(MPI_Bcast(buf, (int)n, MPITYPE, size - 1, c->mpi));                       \
  }

DEFINE_CHAIN_SUM(chain_sum_f32, float, MPI_FLOAT)
DEFINE_CHAIN_SUM(comm_allreduce_sum_f64, double, MPI_DOUBLE)

void comm_allreduce_sum_f32(pt_comm *c, float *buf, size_t n) {
#ifdef PT_HAVE_GPU
  if (ON_DEVICE(c, buf)) return comm_device_sum_f32(c->dev, buf, n);
#endif
  chain_sum_f32(c, buf, n);
}

static void host_allreduce_f32(MPI_Comm mpi, float *buf, size_t n) {
  if (n > (size_t)INT32_MAX) pt_fatal("reduction of %zu elements is too large", n);
  PT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, mpi));
}

void comm_allreduce_sum_f32_unordered(pt_comm *c, float *buf, size_t n) {
  if (n == 0) return;
#ifdef PT_HAVE_GPU
  if (ON_DEVICE(c, buf)) return comm_device_allreduce_f32(c->dev, buf, n);
#endif
  host_allreduce_f32(c->mpi, buf, n);
}

#ifdef PT_HAVE_GPU
void comm_host_sum_f32(MPI_Comm mpi, float *buf, size_t n) {
  pt_comm c = {.mpi = mpi};
  chain_sum_f32(&c, buf, n);
}

void comm_host_allreduce_f32(MPI_Comm mpi, float *buf, size_t n) { host_allreduce_f32(mpi, buf, n); }
#endif

void comm_allreduce_max_u64(pt_comm *c, uint64_t *buf, size_t n) {
  PT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_UINT64_T, MPI_MAX, c->mpi));
}

void comm_allreduce_min_u64(pt_comm *c, uint64_t *buf, size_t n) {
  PT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_UINT64_T, MPI_MIN, c->mpi));
}

void comm_allgatherv_f64(pt_comm *c, const double *mine, int n_mine, double *out,
                         const int *counts) {
  int size = comm_size(c);
  int *displs = pt_calloc((size_t)size, sizeof(int));
  for (int i = 1; i < size; i++) displs[i] = displs[i - 1] + counts[i - 1];
  PT_CHECK_MPI(MPI_Allgatherv(mine, n_mine, MPI_DOUBLE, out, counts, displs, MPI_DOUBLE, c->mpi));
  free(displs);
}

int comm_first_failed(pt_comm *c, int failed) {
  uint64_t first = failed ? (uint64_t)comm_rank(c) : UINT64_MAX;
  comm_allreduce_min_u64(c, &first, 1);
  return first == UINT64_MAX ? -1 : (int)first;
}

void comm_allgather_int(pt_comm *c, int mine, int *out) {
  PT_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_INT, out, 1, MPI_INT, c->mpi));
}

void comm_allgather_u64(pt_comm *c, const uint64_t *mine, int n, uint64_t *out) {
  PT_CHECK_MPI(MPI_Allgather(mine, n, MPI_UINT64_T, out, n, MPI_UINT64_T, c->mpi));
}

void comm_broadcast(pt_comm *c, void *buf, size_t bytes, int root) {
  if (bytes > (size_t)INT32_MAX) pt_fatal("broadcast of %zu bytes is too large for MPI", bytes);
  PT_CHECK_MPI(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->mpi));
}

void comm_barrier(pt_comm *c) { PT_CHECK_MPI(MPI_Barrier(c->mpi)); }
