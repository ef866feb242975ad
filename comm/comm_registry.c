/* comm/comm_registry.c: the transports this build has (comm_transport.h), in order of
 * preference: comm_transport_find takes the first that fits a rank's memory and comm.backend,
 * so SPEC_COMM_AUTO gets the first listed for that memory. A new transport is a file defining
 * its table, and its declaration and entry here. The one place where builds differ: GPU
 * transports exist in GPU builds only. */
#include <stddef.h>

#include "comm/comm_transport.h"

extern const comm_transport comm_transport_nccl;   /* nccl/comm_nccl.c (GPU builds) */
extern const comm_transport comm_transport_staged; /* nccl/comm_staged.c (GPU builds) */

static const comm_transport *const g_transports[] = {
#ifdef PT_HAVE_GPU
    &comm_transport_nccl,
    &comm_transport_staged,
#endif
    &comm_transport_mpi,
};

const comm_transport *comm_transport_find(int gpu, spec_comm_backend backend) {
  for (size_t i = 0; i < sizeof g_transports / sizeof *g_transports; i++) {
    const comm_transport *t = g_transports[i];
    if (t->gpu == gpu && (backend == SPEC_COMM_AUTO || t->backend == SPEC_COMM_AUTO ||
                          t->backend == backend))
      return t;
  }
  return NULL;
}
