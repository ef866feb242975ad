/* tests/gpu/emu/nccl_stub/nccl.h: a PLACEHOLDER so that comm/nccl/comm_nccl.c compiles in the
 * emulated build (-DPT_GPU_EMULATION=ON) before the NCCL fake exists.
 *
 * TODO(NCCL fake): replace this folder by the fake NCCL over MPI (issue 15), and drop
 * pt_ncclstub from tests/gpu/emu/CMakeLists.txt. Until then every call fails with
 * ncclInvalidUsage: comm.backend nccl (and auto with GPUs) reports "NCCL is not emulated yet",
 * comm.backend mpi (device buffers through host copies) works, and the gpu_comm_nccl_* tests
 * are not registered in the emulated build.
 *
 * The declarations are NCCL 2.x's, for the calls comm_nccl.c makes. */
#ifndef PT_EMU_NCCL_STUB_H
#define PT_EMU_NCCL_STUB_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
} ncclResult_t;

typedef enum {
  ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3,
  ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8
} ncclDataType_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct pt_emu_nccl_comm *ncclComm_t;
typedef struct pt_emu_nccl_config ncclConfig_t;
#define NCCL_SPLIT_NOCOLOR -1

const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuf, void *recvbuf, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
