/* comm/nccl/comm_gpu.h: what the GPU transports (comm_nccl.c, comm_staged.c) share; internal
 * to comm/, GPU builds only. */
#ifndef PT_COMM_GPU_H
#define PT_COMM_GPU_H

#include "comm/comm_transport.h"

/* comm_connect for a GPU transport t (state: its group's): a byte to and from each peer out of
 * a scratch GPU buffer, sent and received as one group, then waited for. */
void comm_gpu_connect(const comm_transport *t, void *state, const int *peers, int n);

#endif
