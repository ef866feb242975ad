/* The placeholder NCCL (nccl.h here): every call fails. TODO(NCCL fake): replace this folder. */
#include "nccl.h"

#define STUB_TEXT "NCCL is not emulated yet (tests/gpu/emu/nccl_stub): use comm.backend: mpi"

const char *ncclGetErrorString(ncclResult_t result) {
  return result == ncclSuccess ? "no error" : "invalid usage (" STUB_TEXT ")";
}
const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return STUB_TEXT;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  (void)id;
  return ncclInvalidUsage;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  (void)comm, (void)nranks, (void)id, (void)rank;
  return ncclInvalidUsage;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  (void)comm, (void)color, (void)key, (void)newcomm, (void)config;
  return ncclInvalidUsage;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  (void)comm;
  return ncclInvalidUsage;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  (void)comm;
  return ncclInvalidUsage;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
  (void)comm;
  if (async_error) *async_error = ncclInvalidUsage;
  return ncclInvalidUsage;
}
ncclResult_t ncclGroupStart(void) { return ncclInvalidUsage; }
ncclResult_t ncclGroupEnd(void) { return ncclInvalidUsage; }
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  (void)buf, (void)count, (void)type, (void)peer, (void)comm, (void)stream;
  return ncclInvalidUsage;
}
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  (void)buf, (void)count, (void)type, (void)peer, (void)comm, (void)stream;
  return ncclInvalidUsage;
}
ncclResult_t ncclBroadcast(const void *sendbuf, void *recvbuf, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuf, (void)recvbuf, (void)count, (void)type, (void)root, (void)comm, (void)stream;
  return ncclInvalidUsage;
}
