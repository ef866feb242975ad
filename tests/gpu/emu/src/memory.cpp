/* Device and pinned memory, and the pointer checks (memory.h). */
#include "memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "cuda_runtime.h"
#include "streams.h"

namespace pt_emu {

namespace {
std::map<uintptr_t, block_info> g_blocks; /* by base address */
std::vector<size_t> g_used; /* device bytes in use, per device: another process's count too */

size_t &used(int device) {
  if (g_used.size() <= static_cast<size_t>(device))
    g_used.resize(static_cast<size_t>(device) + 1, cfg().held_bytes);
  return g_used[static_cast<size_t>(device)];
}

/* 256-byte aligned as cudaMalloc's; the size rounded up so aligned_alloc accepts it. */
void *take(size_t bytes) {
  size_t rounded = (bytes + 255) & ~static_cast<size_t>(255);
  return std::aligned_alloc(256, rounded ? rounded : 256);
}

const char *where(const block_info &b, char *buf, size_t n) {
  std::snprintf(buf, n, "%s block of %zu bytes allocated at %s:%d",
                b.device < 0 ? "a pinned host" : "a device", b.bytes, b.file, b.line);
  return buf;
}
} // namespace

const block_info *find_block(const void *p) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = g_blocks.upper_bound(a);
  if (it == g_blocks.begin()) return nullptr;
  --it;
  const block_info &b = it->second;
  return a < b.base + (b.bytes ? b.bytes : 1) ? &b : nullptr;
}

void require_device(const char *what, const void *p, size_t bytes, const char *file, int line) {
  const block_info *b = find_block(p);
  char buf[512];
  if (!b || b->device < 0)
    fail("%s:%d: %s %p is %s, not device memory", file, line, what, p,
         b ? where(*b, buf, sizeof buf) : "host memory (no live cudaMalloc block holds it)");
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (bytes > b->base + b->bytes - a)
    fail("%s:%d: %s [%p, +%zu bytes) runs %zu bytes past the end of %s", file, line, what, p,
         bytes, static_cast<size_t>(a + bytes - (b->base + b->bytes)), where(*b, buf, sizeof buf));
}

void require_host(const char *what, const void *p, const char *file, int line) {
  const block_info *b = find_block(p);
  char buf[512];
  if (b && b->device >= 0)
    fail("%s:%d: %s %p is device memory (%s), not host memory: the copy's direction is wrong",
         file, line, what, p, where(*b, buf, sizeof buf));
}

void check_kernel_pointer(const launch_site &site, int arg, const void *p) {
  const char *c = static_cast<const char *>(p);
  if (!c || find_block(c) || find_block(c - 1)) return; /* in a block, or one past its end */
  fail("%s:%d: kernel %s: argument %d (%p) is host memory, not device memory", site.file,
       site.line, site.kernel, arg + 1, p);
}

} // namespace pt_emu

using namespace pt_emu;

extern "C" {

/* A device block of the current device; managed: not counted against its memory. */
static cudaError_t device_block(const char *file, int line, void **ptr, size_t bytes,
                                int managed) {
  if (!ptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  int dev = current_device();
  if (!managed && bytes > cfg().memory_bytes - used(dev)) return cudaErrorMemoryAllocation;
  void *p = take(bytes);
  if (!p) return cudaErrorMemoryAllocation;
  if (!cfg().count_only)
    std::memset(p, 0xff, bytes); /* a GPU's new memory is not zeroed: reading it shows (NaN) */
  else if (bytes < (1u << 20))
    std::memset(p, 0, bytes); /* the sums and flags the host reads back stay 0 */
  if (!managed) used(dev) += bytes;
  g_blocks[reinterpret_cast<uintptr_t>(p)] =
      block_info{reinterpret_cast<uintptr_t>(p), bytes, dev, managed, file, line};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t pt_emu_cudaMalloc(const char *file, int line, void **ptr, size_t bytes) {
  api_enter("cudaMalloc", file, line);
  return device_block(file, line, ptr, bytes, 0);
}

/* Device memory only here (no host access is emulated): what the program relies on is that
 * a GPU commits a page only where something touches it, so the block does not count against
 * the device's memory. */
cudaError_t pt_emu_cudaMallocManaged(const char *file, int line, void **ptr, size_t bytes,
                                     unsigned int flags) {
  api_enter("cudaMallocManaged", file, line);
  if (flags != cudaMemAttachGlobal) return cudaErrorInvalidValue;
  return device_block(file, line, ptr, bytes, 1);
}

/* As CUDA, freeing waits for the device first (the memory may still be in use). */
cudaError_t pt_emu_cudaFree(const char *file, int line, void *ptr) {
  api_enter_wait("cudaFree", file, line);
  if (!ptr) return cudaSuccess;
  auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_blocks.end() || it->second.device < 0) return cudaErrorInvalidValue;
  count_sync(file, line);
  drain_device(-1, "cudaFree", file, line);
  if (!it->second.managed) used(it->second.device) -= it->second.bytes;
  g_blocks.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaHostAlloc(const char *file, int line, void **ptr, size_t bytes,
                                 unsigned int flags) {
  api_enter("cudaHostAlloc", file, line);
  if (!ptr) return cudaErrorInvalidValue;
  void *p = take(bytes);
  if (!p) return cudaErrorMemoryAllocation;
  g_blocks[reinterpret_cast<uintptr_t>(p)] = block_info{reinterpret_cast<uintptr_t>(p), bytes, -1, 0, file, line};
  *ptr = p;
  (void)flags;
  return cudaSuccess;
}

cudaError_t pt_emu_cudaMallocHost(const char *file, int line, void **ptr, size_t bytes) {
  return pt_emu_cudaHostAlloc(file, line, ptr, bytes, cudaHostAllocDefault);
}

cudaError_t pt_emu_cudaFreeHost(const char *file, int line, void *ptr) {
  api_enter_wait("cudaFreeHost", file, line);
  if (!ptr) return cudaSuccess;
  auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_blocks.end() || it->second.device >= 0) return cudaErrorInvalidValue;
  count_sync(file, line);
  drain_device(-1, "cudaFreeHost", file, line);
  g_blocks.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaMemGetInfo(const char *file, int line, size_t *free_bytes,
                                  size_t *total_bytes) {
  api_enter("cudaMemGetInfo", file, line);
  if (!free_bytes || !total_bytes) return cudaErrorInvalidValue;
  *total_bytes = cfg().memory_bytes;
  *free_bytes = cfg().memory_bytes - used(current_device());
  return cudaSuccess;
}

cudaError_t pt_emu_cudaPointerGetAttributes(const char *file, int line,
                                            struct cudaPointerAttributes *attr, const void *ptr) {
  api_enter("cudaPointerGetAttributes", file, line);
  if (!attr) return cudaErrorInvalidValue;
  const block_info *b = find_block(ptr);
  attr->type = !b ? cudaMemoryTypeUnregistered : b->device < 0 ? cudaMemoryTypeHost
                                                               : cudaMemoryTypeDevice;
  attr->device = b && b->device >= 0 ? b->device : current_device();
  attr->devicePointer = b ? const_cast<void *>(ptr) : nullptr;
  attr->hostPointer = b && b->device < 0 ? const_cast<void *>(ptr) : nullptr;
  return cudaSuccess;
}

void pt_emu_check_device_range(const char *file, int line, const char *what, const void *ptr,
                               size_t bytes) {
  require_device(what, ptr, bytes, file, line);
}

} // extern "C"
