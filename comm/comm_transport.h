/* comm/comm_transport.h: a transport, what carries a group's device buffers (internal to
 * comm/; comm.h says which calls take device buffers). One table per transport, each in a file
 * of its own; comm_registry.c lists those this build has, and a group's is picked from that
 * list once: the world's by comm_use_device (the rank's device and comm.backend), a split
 * group's is its parent's. comm_mpi.c calls through the table, never looking at a buffer's
 * address. Every group also keeps MPI (comm_transport_mpi) beside it for host buffers.
 *
 * A transport keeps its own state per group (a void *: each table's functions know their own).
 * A request (pt_request) it starts carries the table in via, so comm_wait finds it.
 */
#ifndef PT_COMM_TRANSPORT_H
#define PT_COMM_TRANSPORT_H

#include <mpi.h>
#include <stddef.h>

#include "comm/comm.h"

typedef struct comm_transport {
  comm_traits traits;        /* name; in_order, holds_sends: what the schedule checks assume */
  int gpu;                   /* carries GPU memory (a GPU rank's); 0: host memory */
  spec_comm_backend backend; /* the comm.backend it is; SPEC_COMM_AUTO: any */
  /* The world's state (collective over mpi). stream: the rank's compute stream (GPU). NULL
   * with err on failure. */
  void *(*open)(MPI_Comm mpi, void *stream, char *err, size_t errsz);
  /* The state of a group split from parent's (collective over parent's group, members or not;
   * color < 0: not a member, NULL back). */
  void *(*split)(void *parent, MPI_Comm child, int color, int key);
  void (*close)(void *state);
  void (*send)(void *state, const void *buf, size_t bytes, int peer, int tag, pt_request *r);
  void (*recv)(void *state, void *buf, size_t bytes, int peer, int tag, pt_request *r);
  void (*wait)(pt_request *r); /* r->impl is this transport's; frees it and empties r */
  void (*group_start)(void *state);
  void (*group_end)(void *state);
  void (*flush)(void *state);
  void (*sum_f32)(void *state, float *buf, size_t n);       /* comm_allreduce_sum_f32 */
  void (*allreduce_f32)(void *state, float *buf, size_t n); /* ..._sum_f32_unordered */
  /* comm_reduce_scatter_sum_f32, comm_allgather_f32 (ends: comm.h) */
  void (*reduce_scatter_f32)(void *state, float *buf, size_t n, const size_t *ends);
  void (*allgather_f32)(void *state, float *buf, size_t n, const size_t *ends);
  void (*connect)(void *state, const int *peers, int n);
} comm_transport;

/* MPI on host memory (comm_host.c): a CPU rank's device buffers and every rank's host ones. */
extern const comm_transport comm_transport_mpi;

/* The registry (comm_registry.c): the first transport listed for memory gpu (1: GPU memory)
 * and backend (SPEC_COMM_AUTO: the first for that memory); NULL when this build has none. */
const comm_transport *comm_transport_find(int gpu, spec_comm_backend backend);

/* Host chain sums and MPI_Allreduce over an MPI communicator (comm_host.c), for comm_mpi.c's
 * f64 sum and the staged transport's host copies. */
void comm_host_sum_f32(MPI_Comm mpi, float *buf, size_t n);
void comm_host_sum_f64(MPI_Comm mpi, double *buf, size_t n);
void comm_host_allreduce_f32(MPI_Comm mpi, float *buf, size_t n);
/* The same for the sharded optimizer's halves (comm.h's ends), over an MPI communicator. */
void comm_host_reduce_scatter_f32(MPI_Comm mpi, float *buf, size_t n, const size_t *ends);
void comm_host_allgather_f32(MPI_Comm mpi, float *buf, size_t n, const size_t *ends);
/* Tells comm_set_wait_hook's hook (if any) that this rank is about to block on group rank peer
 * of mpi (-1: any), or (call NULL) that it no longer does. */
void comm_note_wait(MPI_Comm mpi, const char *call, int peer, int relay);

#endif
