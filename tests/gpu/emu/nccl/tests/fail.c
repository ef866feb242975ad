/* tests/gpu/emu/nccl/tests/fail.c: failures the emulated NCCL returns, under mpirun (2 ranks or
 * more) with PT_EMU_NCCL_FAIL=getuniqueid@0 in the environment:
 *  - ncclGetUniqueId fails on world rank 0 only (ncclSystemError, a last-error text naming the
 *    injection); with PT_EMU_NCCL_FAIL=getuniqueid on every rank that calls it;
 *  - a zeroed id (what a rank shares when its ncclGetUniqueId failed and it carries on) makes
 *    ncclCommInitRank return ncclInvalidArgument on every rank, saying so, instead of hanging;
 *  - a rank out of range is refused; afterwards a good id still works;
 *  - ncclCommAbort drops a queued receive nobody matches: its stream drains. */
#include <string.h>

#include "emu_test.h"

static int g_rank, g_size;

static void injected(void) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  const char *last = ncclGetLastError(NULL);
  if (g_rank == 0)
    CHECK(r == ncclSystemError && strstr(last, "PT_EMU_NCCL_FAIL=getuniqueid@0") &&
          !strcmp(ncclGetErrorString(r), "unhandled system error"),
          "rank 0: %s, last error '%s'", ncclGetErrorString(r), last);
  else
    CHECK(r == ncclSuccess, "rank %d: %s (only rank 0 is told to fail)", g_rank, ncclGetErrorString(r));
  MUST(setenv("PT_EMU_NCCL_FAIL", "getuniqueid", 1) == 0, "setenv", "failed");
  CHECK(ncclGetUniqueId(&id) == ncclSystemError, "PT_EMU_NCCL_FAIL=getuniqueid: every rank fails");
  MUST(unsetenv("PT_EMU_NCCL_FAIL") == 0, "unsetenv", "failed");
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "no injection: ncclGetUniqueId works");
}

/* What the NCCL transport's open (comm/nccl/comm_nccl.c, nccl_open) once did: rank 0 zeroed the
 * id when ncclGetUniqueId failed and shared it. */
static void zeroed_id(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  MPI_MUST(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t c = (ncclComm_t)&id; /* anything but NULL: the failed call must reset it */
  ncclResult_t r = ncclCommInitRank(&c, g_size, id, g_rank);
  CHECK(r == ncclInvalidArgument && c == NULL && strstr(ncclGetLastError(NULL), "all zero bytes"),
        "a zeroed id: %s, last error '%s'", ncclGetErrorString(r), ncclGetLastError(NULL));
}

static void bad_rank_then_good(void) {
  ncclUniqueId id;
  ncclComm_t c;
  if (g_rank == 0) NCCL_MUST(ncclGetUniqueId(&id));
  MPI_MUST(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  CHECK(ncclCommInitRank(&c, g_size, id, g_size) == ncclInvalidArgument, "rank %d of %d", g_size,
        g_size);
  NCCL_MUST(ncclCommInitRank(&c, g_size, id, g_rank));
  ncclResult_t async = ncclInternalError;
  NCCL_MUST(ncclCommGetAsyncError(c, &async));
  CHECK(async == ncclSuccess, "no asynchronous error: %s", ncclGetErrorString(async));
  NCCL_MUST(ncclCommDestroy(c));
}

/* ncclCommAbort drops what is queued on the communicator: a receive no rank will match. */
static void abort_pending(void) {
  cudaStream_t s;
  CUDA_MUST(cudaStreamCreate(&s));
  ncclComm_t c = emu_test_world(g_rank, g_size);
  int in = -1;
  NCCL_MUST(ncclRecv(&in, 1, ncclInt, (g_rank + 1) % g_size, c, s));
  CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "the receive waits");
  NCCL_MUST(ncclCommAbort(c));
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(in == -1, "an aborted receive wrote %d", in);
  CUDA_MUST(cudaStreamDestroy(s));
}

int main(int argc, char **argv) {
  emu_test_init(&argc, &argv, &g_rank, &g_size);
  MUST(g_size >= 2, "fail", "needs 2 ranks or more");
  injected();
  zeroed_id();
  bad_rank_then_good();
  abort_pending();
  return emu_test_end("fail", g_rank);
}
