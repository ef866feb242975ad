/* comm/nccl/comm_gpu.c: what the GPU transports share (comm_gpu.h). */
#include "comm/nccl/comm_gpu.h"

#include <stdlib.h>

#include "core/error.h"
#include "kernels/cuda/gpu.h"

void comm_gpu_connect(const comm_transport *t, void *state, const int *peers, int n) {
  void *buf = gpu_alloc(NULL, 2 * (size_t)n); /* n bytes out, n bytes in */
  pt_request *q = pt_calloc(2 * (size_t)n, sizeof *q);
  t->group_start(state);
  for (int i = 0; i < n; i++) {
    t->send(state, (char *)buf + i, 1, peers[i], PT_TAG_CONNECT, &q[2 * i]);
    t->recv(state, (char *)buf + n + i, 1, peers[i], PT_TAG_CONNECT, &q[2 * i + 1]);
  }
  t->group_end(state);
  for (int i = 0; i < 2 * n; i++)
    if (q[i].impl) q[i].via->wait(&q[i]);
  free(q);
  gpu_free(buf);
}
