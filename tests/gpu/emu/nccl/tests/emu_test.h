/* tests/gpu/emu/nccl/tests/emu_test.h: what the NCCL emulation's tests share. Host buffers stand
 * for device buffers (the stand-in streams check nothing). */
#ifndef PT_NCCL_EMU_TEST_H
#define PT_NCCL_EMU_TEST_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl_emu.h"
#include "test_util.h"

/* A call that must succeed; on failure the job ends (peers would otherwise wait for this rank). */
#define MUST(ok, call, text)                                                              \
  do {                                                                                    \
    if (!(ok)) {                                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, call, text);          \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
    }                                                                                     \
  } while (0)
/* The shape of core/error.h's PT_CHECK_CALL: ok and text are applied to the result. */
#define MUST_CALL(type, call, ok, text)        \
  do {                                         \
    type rc_ = (call);                         \
    MUST(ok(rc_), #call, text(rc_));           \
  } while (0)
static inline const char *emu_test_mpi_text(int rc) {
  static char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  return MPI_Error_string(rc, text, &len) == MPI_SUCCESS ? text : "an MPI error";
}
static inline const char *emu_test_nccl_text(ncclResult_t r) {
  return r == ncclSuccess ? "" : ncclGetLastError(NULL);
}
static inline const char *emu_test_cuda_text(cudaError_t e) {
  return e == cudaSuccess ? "" : "a CUDA error";
}
#define EMU_TEST_MPI_OK(r) ((r) == MPI_SUCCESS)
#define EMU_TEST_NCCL_OK(r) ((r) == ncclSuccess)
#define EMU_TEST_CUDA_OK(r) ((r) == cudaSuccess)
#define MPI_MUST(call) MUST_CALL(int, call, EMU_TEST_MPI_OK, emu_test_mpi_text)
#define NCCL_MUST(call) MUST_CALL(ncclResult_t, call, EMU_TEST_NCCL_OK, emu_test_nccl_text)
#define CUDA_MUST(call) MUST_CALL(cudaError_t, call, EMU_TEST_CUDA_OK, emu_test_cuda_text)

static inline void emu_test_init(int *argc, char ***argv, int *rank, int *size) {
  MPI_MUST(MPI_Init(argc, argv));
  MPI_MUST(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_MUST(MPI_Comm_rank(MPI_COMM_WORLD, rank));
  MPI_MUST(MPI_Comm_size(MPI_COMM_WORLD, size));
}

/* A communicator over all of MPI_COMM_WORLD: rank 0 makes the id, MPI shares it. */
static inline ncclComm_t emu_test_world(int rank, int size) {
  ncclUniqueId id;
  ncclComm_t c;
  if (rank == 0) NCCL_MUST(ncclGetUniqueId(&id));
  MPI_MUST(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  NCCL_MUST(ncclCommInitRank(&c, size, id, rank));
  return c;
}

/* Every rank's summary; the job fails when any rank's checks did. */
static inline int emu_test_end(const char *name, int rank) {
  char label[128];
  snprintf(label, sizeof label, "%s (rank %d)", name, rank);
  int rc = test_summary(label);
  MPI_MUST(MPI_Finalize());
  return rc;
}

#endif
