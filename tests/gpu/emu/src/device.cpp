/* The emulated devices (PT_EMU_DEVICES of them, default 2 so that two ranks on one machine have
 * one each), their properties, and CUDA's error state and texts. */
#include <cstdio>
#include <cstring>

#include "streams.h"

namespace pt_emu {
namespace {
cudaError_t g_last = cudaSuccess;

bool valid_device(int d) { return d >= 0 && d < cfg().devices; }
} // namespace

void set_last_error(cudaError_t e) { g_last = e; }
} // namespace pt_emu

using namespace pt_emu;

extern "C" {

cudaError_t pt_emu_cudaGetDeviceCount(const char *file, int line, int *count) {
  api_enter("cudaGetDeviceCount", file, line);
  if (!count) return cudaErrorInvalidValue;
  *count = cfg().devices;
  return cfg().devices > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t pt_emu_cudaSetDevice(const char *file, int line, int device) {
  api_enter("cudaSetDevice", file, line);
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  set_current_device(device);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaGetDevice(const char *file, int line, int *device) {
  api_enter("cudaGetDevice", file, line);
  if (!device) return cudaErrorInvalidValue;
  *device = current_device();
  return cudaSuccess;
}

cudaError_t pt_emu_cudaGetDeviceProperties(const char *file, int line, struct cudaDeviceProp *p,
                                           int device) {
  api_enter("cudaGetDeviceProperties", file, line);
  if (!p) return cudaErrorInvalidValue;
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "pipetrain CUDA emulator %d (host CPU)", device);
  p->totalGlobalMem = cfg().memory_bytes;
  p->sharedMemPerBlock = 48 << 10;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->multiProcessorCount = 1;
  p->major = 9;
  p->minor = 0;
  p->pciBusID = 0xee;
  p->pciDeviceID = device;
  return cudaSuccess;
}

/* A bus id no machine has: placement then says the GPU is not in the topology. */
cudaError_t pt_emu_cudaDeviceGetPCIBusId(const char *file, int line, char *bus_id, int len,
                                         int device) {
  api_enter("cudaDeviceGetPCIBusId", file, line);
  if (!bus_id || len <= 0) return cudaErrorInvalidValue;
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  std::snprintf(bus_id, static_cast<size_t>(len), "0000:ee:%02x.0", device);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaDriverGetVersion(const char *file, int line, int *version) {
  api_enter("cudaDriverGetVersion", file, line);
  if (!version) return cudaErrorInvalidValue;
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t pt_emu_cudaRuntimeGetVersion(const char *file, int line, int *version) {
  return pt_emu_cudaDriverGetVersion(file, line, version);
}

cudaError_t pt_emu_cudaGetLastError(const char *file, int line) {
  api_enter("cudaGetLastError", file, line);
  cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}

cudaError_t pt_emu_cudaPeekAtLastError(const char *file, int line) {
  api_enter("cudaPeekAtLastError", file, line);
  return g_last;
}

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define PT_EMU_NAME(x) case x: return #x;
    PT_EMU_NAME(cudaSuccess)
    PT_EMU_NAME(cudaErrorInvalidValue)
    PT_EMU_NAME(cudaErrorMemoryAllocation)
    PT_EMU_NAME(cudaErrorInitializationError)
    PT_EMU_NAME(cudaErrorInvalidConfiguration)
    PT_EMU_NAME(cudaErrorInvalidDevicePointer)
    PT_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    PT_EMU_NAME(cudaErrorNoDevice)
    PT_EMU_NAME(cudaErrorInvalidDevice)
    PT_EMU_NAME(cudaErrorInvalidResourceHandle)
    PT_EMU_NAME(cudaErrorNotReady)
    PT_EMU_NAME(cudaErrorIllegalAddress)
    PT_EMU_NAME(cudaErrorLaunchFailure)
    PT_EMU_NAME(cudaErrorNotSupported)
    PT_EMU_NAME(cudaErrorUnknown)
#undef PT_EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory (PT_EMU_MEMORY_MB per emulated device)";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected (PT_EMU_DEVICES=0)";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorNotReady: return "device not ready";
  default: return cudaGetErrorName(e);
  }
}

} // extern "C"
