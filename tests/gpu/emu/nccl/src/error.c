/* tests/gpu/emu/nccl/src/error.c: NCCL's error texts, ncclGetLastError, and the emulation's
 * own fatal errors (one line, then MPI_Abort: a rank stuck in the emulation must take the job
 * down, not leave its peers waiting). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static char g_last[512];

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

/* NCCL keeps one last error per process (per thread), whatever comm names. */
const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return g_last;
}

ncclResult_t emu_fail(ncclResult_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last, sizeof g_last, fmt, ap);
  va_end(ap);
  return r;
}

int emu_world_rank(void) {
  int up = 0, rank = -1;
  if (MPI_Initialized(&up) == MPI_SUCCESS && up) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank; /* only for messages: a failure here must not hide the one being reported */
}

void emu_die(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "nccl-emu[rank %d]: %s\n", emu_world_rank(), line);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* MPI_Abort does not return; this is for the compiler */
}

void emu_fail_mpi(const char *file, int line, const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", code);
  emu_die("error: %s:%d: %s failed: MPI: %s", file, line, call, text);
}
