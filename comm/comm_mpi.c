/* comm/comm_mpi.c: groups and host collectives over MPI, and comm.h's device-buffer calls
 * handed to the group's transport (comm_transport.h), chosen once per group. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/comm_check.h"
#include "comm/comm_transport.h"
#include "core/clock.h"
#include "core/error.h"

/* A transport and its state for one group. */
typedef struct {
  const comm_transport *t;
  void *state;
} comm_lane;

struct pt_comm {
  MPI_Comm mpi;
  comm_lane host;   /* host buffers: MPI */
  comm_lane device; /* device buffers: the host lane until comm_use_device picks another */
};

/* The lanes' transport is MPI's even before comm_init (whose state it then gets). */
static pt_comm g_world = {.host = {&comm_transport_mpi, NULL},
                          .device = {&comm_transport_mpi, NULL}};
static int g_local_rank, g_local_size = 1;
static MPI_Comm g_node = MPI_COMM_NULL; /* this host's ranks */
#define HOST_NAME_BYTES 64
static char (*g_hosts)[HOST_NAME_BYTES]; /* every world rank's host, by rank */
static int g_world_size;
static comm_wait_hook g_wait_hook;

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

static void gather_hosts(void) {
  char name[MPI_MAX_PROCESSOR_NAME] = "", mine[HOST_NAME_BYTES] = "";
  int len = 0;
  PT_CHECK_MPI(MPI_Get_processor_name(name, &len));
  snprintf(mine, sizeof mine, "%s", name);
  PT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &g_world_size));
  g_hosts = pt_calloc((size_t)g_world_size, sizeof *g_hosts);
  PT_CHECK_MPI(MPI_Allgather(mine, HOST_NAME_BYTES, MPI_CHAR, g_hosts, HOST_NAME_BYTES, MPI_CHAR,
                             MPI_COMM_WORLD));
}

const char *comm_host_name(int rank) {
  return g_hosts && rank >= 0 && rank < g_world_size ? g_hosts[rank] : "";
}

void comm_init(int *argc, char ***argv) {
  int provided;
  PT_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  /* errors come back as codes, so PT_CHECK_MPI can report them with the rank */
  PT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  g_world.mpi = MPI_COMM_WORLD;
  g_world.host.state = comm_transport_mpi.open(MPI_COMM_WORLD, NULL, NULL, 0);
  g_world.device = g_world.host;
  int rank;
  PT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  pt_error_set_rank(rank);
  pt_error_set_abort_hook(abort_all);
  gather_hosts();
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

static int own_device_lane(const pt_comm *c) { return c->device.state != c->host.state; }

static comm_lane lane_split(comm_lane parent, MPI_Comm child, int color, int key) {
  return (comm_lane){parent.t, parent.t->split(parent.state, child, color, key)};
}

pt_comm *comm_split(pt_comm *parent, int color, int key) {
  pt_comm *c = pt_calloc(1, sizeof *c);
  /* a negative color means "not a member": MPI hands back MPI_COMM_NULL */
  PT_CHECK_MPI(MPI_Comm_split(parent->mpi, color < 0 ? MPI_UNDEFINED : color, key, &c->mpi));
  c->host = lane_split(parent->host, c->mpi, color, key);
  c->device = own_device_lane(parent) ? lane_split(parent->device, c->mpi, color, key) : c->host;
  return c;
}

void comm_free(pt_comm *c) {
  if (!c || c == &g_world) return;
  if (own_device_lane(c)) c->device.t->close(c->device.state);
  c->host.t->close(c->host.state);
  if (c->mpi != MPI_COMM_NULL) PT_CHECK_MPI(MPI_Comm_free(&c->mpi));
  free(c);
}

const comm_traits *comm_device_traits(spec_comm_backend backend) {
  const comm_transport *t = comm_transport_find(1, backend);
  return t ? &t->traits : &comm_transport_mpi.traits;
}

int comm_use_device(spec_comm_backend backend, void *stream, char *err, size_t errsz) {
  const comm_transport *t = comm_transport_find(1, backend);
  if (!t) {
    snprintf(err, errsz, "this pipetrain was built without the GPU backend");
    return -1;
  }
  void *state = t->open(g_world.mpi, stream, err, errsz);
  if (!state) return -1;
  g_world.device = (comm_lane){t, state};
  return 0;
}

void comm_send_async(pt_comm *c, const void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  c->device.t->send(c->device.state, buf, bytes, peer, tag, r);
}

void comm_recv_async(pt_comm *c, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  c->device.t->recv(c->device.state, buf, bytes, peer, tag, r);
}

void comm_send_host_async(pt_comm *c, const void *buf, size_t bytes, int peer, int tag,
                          pt_request *r) {
  c->host.t->send(c->host.state, buf, bytes, peer, tag, r);
}

void comm_recv_host_async(pt_comm *c, void *buf, size_t bytes, int peer, int tag, pt_request *r) {
  c->host.t->recv(c->host.state, buf, bytes, peer, tag, r);
}

void comm_set_wait_hook(comm_wait_hook hook) { g_wait_hook = hook; }

void comm_note_wait(MPI_Comm mpi, const char *call, int peer, int relay) {
  if (!g_wait_hook) return;
  int world = -1;
  if (call && peer >= 0) { /* the hook names world ranks, the ones users see */
    MPI_Group group, all;
    PT_CHECK_MPI(MPI_Comm_group(mpi, &group));
    PT_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &all));
    PT_CHECK_MPI(MPI_Group_translate_ranks(group, 1, &peer, all, &world));
    MPI_Group_free(&group), MPI_Group_free(&all);
  }
  g_wait_hook(call, world, relay);
}

void comm_wait(pt_request *r) {
  if (r->impl) r->via->wait(r);
}

/* Host transfers need no grouping or flushing on MPI: only the device lane's transport. */
void comm_group_start(pt_comm *c) { c->device.t->group_start(c->device.state); }
void comm_group_end(pt_comm *c) { c->device.t->group_end(c->device.state); }
void comm_flush(pt_comm *c) { c->device.t->flush(c->device.state); }

void comm_connect(pt_comm *c, const int *peers, int n) {
  if (n > 0) c->device.t->connect(c->device.state, peers, n);
}

void comm_allreduce_sum_f32(pt_comm *c, float *buf, size_t n) {
  c->device.t->sum_f32(c->device.state, buf, n);
}

void comm_allreduce_sum_f32_unordered(pt_comm *c, float *buf, size_t n) {
  c->device.t->allreduce_f32(c->device.state, buf, n);
}

void comm_reduce_scatter_sum_f32(pt_comm *c, float *buf, size_t n, const size_t *ends) {
  c->device.t->reduce_scatter_f32(c->device.state, buf, n, ends);
}

void comm_allgather_f32(pt_comm *c, float *buf, size_t n, const size_t *ends) {
  c->device.t->allgather_f32(c->device.state, buf, n, ends);
}

void comm_allreduce_sum_f64(pt_comm *c, double *buf, size_t n) {
  comm_host_sum_f64(c->mpi, buf, n);
}

/* The one rank a collective of a two-rank communicator waits on (a tie group of two stages, the
 * usual), so the watchdog names it; -1 in larger ones, where any of the others may be missing. */
static int only_peer(MPI_Comm mpi) {
  int size = 0, rank = 0;
  PT_CHECK_MPI(MPI_Comm_size(mpi, &size));
  PT_CHECK_MPI(MPI_Comm_rank(mpi, &rank));
  return size == 2 ? 1 - rank : -1;
}

void comm_allreduce_max_u64(pt_comm *c, uint64_t *buf, size_t n) {
  comm_note_wait(c->mpi, "a reduction", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_UINT64_T, MPI_MAX, c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
}

void comm_allreduce_min_u64(pt_comm *c, uint64_t *buf, size_t n) {
  comm_note_wait(c->mpi, "a reduction", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_UINT64_T, MPI_MIN, c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
}

void comm_allgatherv_f64(pt_comm *c, const double *mine, int n_mine, double *out,
                         const int *counts) {
  int size = comm_size(c);
  int *displs = pt_calloc((size_t)size, sizeof(int));
  for (int i = 1; i < size; i++) displs[i] = displs[i - 1] + counts[i - 1];
  comm_note_wait(c->mpi, "a gather", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Allgatherv(mine, n_mine, MPI_DOUBLE, out, counts, displs, MPI_DOUBLE, c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
  free(displs);
}

int comm_first_failed(pt_comm *c, int failed) {
  uint64_t first = failed ? (uint64_t)comm_rank(c) : UINT64_MAX;
  comm_allreduce_min_u64(c, &first, 1);
  return first == UINT64_MAX ? -1 : (int)first;
}

void comm_allgather_int(pt_comm *c, int mine, int *out) {
  comm_note_wait(c->mpi, "a gather", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_INT, out, 1, MPI_INT, c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
}

void comm_allgather_u64(pt_comm *c, const uint64_t *mine, int n, uint64_t *out) {
  comm_note_wait(c->mpi, "a gather", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Allgather(mine, n, MPI_UINT64_T, out, n, MPI_UINT64_T, c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
}

void comm_broadcast(pt_comm *c, void *buf, size_t bytes, int root) {
  if (bytes > (size_t)INT32_MAX) pt_fatal("broadcast of %zu bytes is too large for MPI", bytes);
  comm_note_wait(c->mpi, "a broadcast", root, 0);
  PT_CHECK_MPI(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
}

int comm_barrier_within(pt_comm *c, double seconds) {
  MPI_Request rq;
  comm_note_wait(c->mpi, "a barrier", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Ibarrier(c->mpi, &rq));
  int done = 0;
  const struct timespec pause = {0, 1000000}; /* 1 ms: this is an exit, not a hot path */
  for (double t0 = pt_now_s(); !done && pt_now_s() - t0 < seconds; nanosleep(&pause, NULL))
    PT_CHECK_MPI(MPI_Test(&rq, &done, MPI_STATUS_IGNORE));
  comm_note_wait(c->mpi, NULL, -1, 0);
  return done ? 0 : -1;
}

void comm_barrier(pt_comm *c) {
  comm_note_wait(c->mpi, "a barrier", only_peer(c->mpi), 0);
  PT_CHECK_MPI(MPI_Barrier(c->mpi));
  comm_note_wait(c->mpi, NULL, -1, 0);
}
