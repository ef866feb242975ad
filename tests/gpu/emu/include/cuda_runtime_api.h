/* tests/gpu/emu/include/cuda_runtime_api.h: the CUDA EMULATOR's stand-in for NVIDIA's header of
 * the same name (docs/gpu.md, "The emulated GPU"). Not the real API: the types, constants and
 * functions pipetrain's GPU code uses, with the real names and values, implemented on the CPU by
 * pt_cudaemu (tests/gpu/emu/src). C11 and C++17.
 *
 * Each function is a macro over pt_emu_<name>(__FILE__, __LINE__, ...): a misuse the emulator
 * finds (a host pointer where device memory is required, a copy in the wrong direction) is
 * reported with the caller's file and line, then the process aborts.
 */
#ifndef PT_EMU_CUDA_RUNTIME_API_H
#define PT_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>

/* Tells code (tests) that it runs on the emulator. */
#define PT_CUDA_EMULATION 1
#define CUDART_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

/* The real enumerators' values, for the ones the emulator returns. */
typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};

struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void *devicePointer;
  void *hostPointer;
};

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int multiProcessorCount;
  int major;
  int minor;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
};
typedef struct cudaDeviceProp cudaDeviceProp;

/* Handles: pointers to the emulator's objects (tests/gpu/emu/src/streams.h). */
typedef struct pt_emu_stream *cudaStream_t;
typedef struct pt_emu_event *cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaMemAttachGlobal 0x01

typedef struct uint3 {
  unsigned int x, y, z;
} uint3;

typedef struct dim3 {
  unsigned int x, y, z;
#ifdef __cplusplus
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
#endif
} dim3;

const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);

#define PT_EMU_AT const char *file, int line
cudaError_t pt_emu_cudaGetDeviceCount(PT_EMU_AT, int *count);
cudaError_t pt_emu_cudaSetDevice(PT_EMU_AT, int device);
cudaError_t pt_emu_cudaGetDevice(PT_EMU_AT, int *device);
cudaError_t pt_emu_cudaGetDeviceProperties(PT_EMU_AT, struct cudaDeviceProp *prop, int device);
cudaError_t pt_emu_cudaDeviceGetPCIBusId(PT_EMU_AT, char *bus_id, int len, int device);
cudaError_t pt_emu_cudaDeviceSynchronize(PT_EMU_AT);
cudaError_t pt_emu_cudaDriverGetVersion(PT_EMU_AT, int *version);
cudaError_t pt_emu_cudaRuntimeGetVersion(PT_EMU_AT, int *version);
cudaError_t pt_emu_cudaGetLastError(PT_EMU_AT);
cudaError_t pt_emu_cudaPeekAtLastError(PT_EMU_AT);

cudaError_t pt_emu_cudaMalloc(PT_EMU_AT, void **ptr, size_t bytes);
cudaError_t pt_emu_cudaFree(PT_EMU_AT, void *ptr);
cudaError_t pt_emu_cudaMallocManaged(PT_EMU_AT, void **ptr, size_t bytes, unsigned int flags);
cudaError_t pt_emu_cudaMallocHost(PT_EMU_AT, void **ptr, size_t bytes);
cudaError_t pt_emu_cudaHostAlloc(PT_EMU_AT, void **ptr, size_t bytes, unsigned int flags);
cudaError_t pt_emu_cudaFreeHost(PT_EMU_AT, void *ptr);
cudaError_t pt_emu_cudaMemGetInfo(PT_EMU_AT, size_t *free_bytes, size_t *total_bytes);
cudaError_t pt_emu_cudaPointerGetAttributes(PT_EMU_AT, struct cudaPointerAttributes *attr,
                                            const void *ptr);
cudaError_t pt_emu_cudaMemcpy(PT_EMU_AT, void *dst, const void *src, size_t bytes,
                              enum cudaMemcpyKind kind);
cudaError_t pt_emu_cudaMemcpyAsync(PT_EMU_AT, void *dst, const void *src, size_t bytes,
                                   enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t pt_emu_cudaMemset(PT_EMU_AT, void *ptr, int value, size_t bytes);
cudaError_t pt_emu_cudaMemsetAsync(PT_EMU_AT, void *ptr, int value, size_t bytes,
                                   cudaStream_t stream);

cudaError_t pt_emu_cudaStreamCreate(PT_EMU_AT, cudaStream_t *stream);
cudaError_t pt_emu_cudaStreamCreateWithFlags(PT_EMU_AT, cudaStream_t *stream, unsigned int flags);
cudaError_t pt_emu_cudaStreamDestroy(PT_EMU_AT, cudaStream_t stream);
cudaError_t pt_emu_cudaStreamSynchronize(PT_EMU_AT, cudaStream_t stream);
cudaError_t pt_emu_cudaStreamQuery(PT_EMU_AT, cudaStream_t stream);
cudaError_t pt_emu_cudaStreamWaitEvent(PT_EMU_AT, cudaStream_t stream, cudaEvent_t event,
                                       unsigned int flags);
cudaError_t pt_emu_cudaEventCreate(PT_EMU_AT, cudaEvent_t *event);
cudaError_t pt_emu_cudaEventCreateWithFlags(PT_EMU_AT, cudaEvent_t *event, unsigned int flags);
cudaError_t pt_emu_cudaEventDestroy(PT_EMU_AT, cudaEvent_t event);
cudaError_t pt_emu_cudaEventRecord(PT_EMU_AT, cudaEvent_t event, cudaStream_t stream);
cudaError_t pt_emu_cudaEventSynchronize(PT_EMU_AT, cudaEvent_t event);
cudaError_t pt_emu_cudaEventQuery(PT_EMU_AT, cudaEvent_t event);
cudaError_t pt_emu_cudaEventElapsedTime(PT_EMU_AT, float *ms, cudaEvent_t start, cudaEvent_t end);
#undef PT_EMU_AT

#define PT_EMU_HERE __FILE__, __LINE__
#define cudaGetDeviceCount(n) pt_emu_cudaGetDeviceCount(PT_EMU_HERE, n)
#define cudaSetDevice(d) pt_emu_cudaSetDevice(PT_EMU_HERE, d)
#define cudaGetDevice(d) pt_emu_cudaGetDevice(PT_EMU_HERE, d)
#define cudaGetDeviceProperties(p, d) pt_emu_cudaGetDeviceProperties(PT_EMU_HERE, p, d)
#define cudaDeviceGetPCIBusId(b, n, d) pt_emu_cudaDeviceGetPCIBusId(PT_EMU_HERE, b, n, d)
#define cudaDeviceSynchronize() pt_emu_cudaDeviceSynchronize(PT_EMU_HERE)
#define cudaDriverGetVersion(v) pt_emu_cudaDriverGetVersion(PT_EMU_HERE, v)
#define cudaRuntimeGetVersion(v) pt_emu_cudaRuntimeGetVersion(PT_EMU_HERE, v)
#define cudaGetLastError() pt_emu_cudaGetLastError(PT_EMU_HERE)
#define cudaPeekAtLastError() pt_emu_cudaPeekAtLastError(PT_EMU_HERE)
#define cudaMalloc(p, n) pt_emu_cudaMalloc(PT_EMU_HERE, (void **)(p), n)
#define cudaFree(p) pt_emu_cudaFree(PT_EMU_HERE, p)
#define cudaMallocManaged(p, n, f) pt_emu_cudaMallocManaged(PT_EMU_HERE, (void **)(p), n, f)
#define cudaMallocHost(p, n) pt_emu_cudaMallocHost(PT_EMU_HERE, (void **)(p), n)
#define cudaHostAlloc(p, n, f) pt_emu_cudaHostAlloc(PT_EMU_HERE, (void **)(p), n, f)
#define cudaFreeHost(p) pt_emu_cudaFreeHost(PT_EMU_HERE, p)
#define cudaMemGetInfo(f, t) pt_emu_cudaMemGetInfo(PT_EMU_HERE, f, t)
#define cudaPointerGetAttributes(a, p) pt_emu_cudaPointerGetAttributes(PT_EMU_HERE, a, p)
#define cudaMemcpy(d, s, n, k) pt_emu_cudaMemcpy(PT_EMU_HERE, d, s, n, k)
#define cudaMemcpyAsync(d, s, n, k, st) pt_emu_cudaMemcpyAsync(PT_EMU_HERE, d, s, n, k, st)
#define cudaMemset(p, v, n) pt_emu_cudaMemset(PT_EMU_HERE, p, v, n)
#define cudaMemsetAsync(p, v, n, st) pt_emu_cudaMemsetAsync(PT_EMU_HERE, p, v, n, st)
#define cudaStreamCreate(s) pt_emu_cudaStreamCreate(PT_EMU_HERE, s)
#define cudaStreamCreateWithFlags(s, f) pt_emu_cudaStreamCreateWithFlags(PT_EMU_HERE, s, f)
#define cudaStreamDestroy(s) pt_emu_cudaStreamDestroy(PT_EMU_HERE, s)
#define cudaStreamSynchronize(s) pt_emu_cudaStreamSynchronize(PT_EMU_HERE, s)
#define cudaStreamQuery(s) pt_emu_cudaStreamQuery(PT_EMU_HERE, s)
#define cudaStreamWaitEvent(s, e, f) pt_emu_cudaStreamWaitEvent(PT_EMU_HERE, s, e, f)
#define cudaEventCreate(e) pt_emu_cudaEventCreate(PT_EMU_HERE, e)
#define cudaEventCreateWithFlags(e, f) pt_emu_cudaEventCreateWithFlags(PT_EMU_HERE, e, f)
#define cudaEventDestroy(e) pt_emu_cudaEventDestroy(PT_EMU_HERE, e)
#define cudaEventRecord(e, s) pt_emu_cudaEventRecord(PT_EMU_HERE, e, s)
#define cudaEventSynchronize(e) pt_emu_cudaEventSynchronize(PT_EMU_HERE, e)
#define cudaEventQuery(e) pt_emu_cudaEventQuery(PT_EMU_HERE, e)
#define cudaEventElapsedTime(ms, a, b) pt_emu_cudaEventElapsedTime(PT_EMU_HERE, ms, a, b)

#ifdef __cplusplus
}
#endif

#endif
