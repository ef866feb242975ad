/* comm/comm_device.h: device buffers behind comm.h (GPU builds only; internal to comm/).
 *
 * A group's calls route by pointer: a buffer in GPU memory goes through the group's device
 * transport, a host buffer through MPI as before, so the engine's small host exchanges (sizes,
 * statistics) and its activations can share one group. Two device transports:
 *   NCCL    a NCCL communicator per group (the world's from a unique id broadcast over MPI,
 *           the others by ncclCommSplit), its own stream, sends grouped with their receives;
 *   staged  MPI on pinned host copies (a pool per group, reused): works wherever MPI does,
 *           several ranks may share a GPU.
 * Float sums keep comm.h's fixed order ((x0 + x1) + x2) + ... on both, so results match the
 * host path bit for bit.
 */
#ifndef PT_COMM_DEVICE_H
#define PT_COMM_DEVICE_H

#include <mpi.h>
#include <stddef.h>

#include "comm/comm.h"

typedef struct comm_device comm_device;

/* Collective over mpi. stream: the rank's compute stream (device work that produces a buffer
 * is queued there before the send). Returns NULL with err on failure. */
comm_device *comm_device_create(MPI_Comm mpi, int nccl, void *stream, char *err, size_t errsz);
/* The device state of a group split from parent's (collective over parent's group; color < 0:
 * not a member, NULL back). */
comm_device *comm_device_split(comm_device *parent, MPI_Comm child, int color, int key);
void comm_device_free(comm_device *d);
int comm_device_owns(const void *buf); /* buf is GPU memory */

void comm_device_send(comm_device *d, const void *buf, size_t bytes, int peer, int tag,
                      pt_request *r);
void comm_device_recv(comm_device *d, void *buf, size_t bytes, int peer, int tag, pt_request *r);
/* Completes r when it is a device request (returns 1), else returns 0. NCCL: the compute stream
 * waits for the transfer, the host does not (comm_nccl.c, dev_req); staged: the host waits for
 * MPI, the copy to the device is queued on the compute stream. */
int comm_device_wait(pt_request *r);
void comm_device_group_start(comm_device *d);
void comm_device_group_end(comm_device *d);
/* comm_flush: the held NCCL sends out as one group (staged, or inside a group: nothing). */
void comm_device_flush(comm_device *d);
void comm_device_sum_f32(comm_device *d, float *buf, size_t n);
/* comm_allreduce_sum_f32_unordered: ncclAllReduce (NCCL), MPI_Allreduce on a host copy
 * (staged). */
void comm_device_allreduce_f32(comm_device *d, float *buf, size_t n);
/* The host chain sum over an MPI communicator (comm_mpi.c), for the staged transport. */
void comm_host_sum_f32(MPI_Comm mpi, float *buf, size_t n);
/* MPI_Allreduce's sum in place (comm_mpi.c), for the staged transport. */
void comm_host_allreduce_f32(MPI_Comm mpi, float *buf, size_t n);

#endif
