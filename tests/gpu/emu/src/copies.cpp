/* cudaMemcpy and cudaMemset, plain and async: the pointers checked against the kind when called
 * (memory.h), the bytes moved when the stream gets there (streams.h). Host memory is read and
 * written then too, as a DMA engine would: a host buffer reused before the copy's stream was
 * synchronised shows. As CUDA: cudaMemcpy waits for the copy unless it is device to device, and
 * cudaMemset does not wait; both run on the legacy default stream. */
#include <cstdio>
#include <cstring>
#include <vector>

#include "memory.h"
#include "streams.h"

namespace pt_emu {
namespace {

const char *kind_name(cudaMemcpyKind k) {
  static const char *const names[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice",
                                      "cudaMemcpyDeviceToHost", "cudaMemcpyDeviceToDevice",
                                      "cudaMemcpyDefault"};
  return names[k];
}

struct queued {
  dep done;      /* once the copy has run */
  bool on_device; /* device to device */
};

/* Checks both ends against kind (cudaMemcpyDefault: whatever they are), counts the bytes and
 * queues the copy. */
queued queue_copy(const char *api, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
               pt_emu_stream *s, const char *file, int line) {
  char role[128];
  bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {
    const block_info *d = find_block(dst), *r = find_block(src);
    dst_dev = d && d->device >= 0, src_dev = r && r->device >= 0;
  }
  std::snprintf(role, sizeof role, "%s(%s) destination", api, kind_name(kind));
  if (dst_dev) require_device(role, dst, bytes, file, line);
  else require_host(role, dst, file, line);
  std::snprintf(role, sizeof role, "%s(%s) source", api, kind_name(kind));
  if (src_dev) require_device(role, src, bytes, file, line);
  else require_host(role, src, file, line);
  if (dst_dev && src_dev) g_counters.d2d_bytes += bytes;
  else if (dst_dev) g_counters.h2d_bytes += bytes;
  else if (src_dev) g_counters.d2h_bytes += bytes;
  if (dst_dev && !src_dev && !find_block(src)) {
    /* From pageable memory CUDA stages the source before the call returns, so the caller may
     * reuse its buffer at once; only pinned memory (cudaMallocHost) is read when the copy runs. */
    std::vector<unsigned char> staged(static_cast<const unsigned char *>(src),
                                      static_cast<const unsigned char *>(src) + bytes);
    return {enqueue_fn(s, api, file, line,
                       [dst, staged] { std::memcpy(dst, staged.data(), staged.size()); }),
            false};
  }
  if (dst_dev && src_dev && cfg().count_only) return {stream_tail(s), true};
  return {enqueue_fn(s, api, file, line, [dst, src, bytes] { std::memmove(dst, src, bytes); }),
          dst_dev && src_dev};
}

bool valid_kind(int kind) { return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault; }

} // namespace
} // namespace pt_emu

using namespace pt_emu;

extern "C" {

cudaError_t pt_emu_cudaMemcpyAsync(const char *file, int line, void *dst, const void *src,
                                   size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
  api_enter("cudaMemcpyAsync", file, line);
  if (!valid_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  pt_emu_stream *s = resolve_stream(stream, "cudaMemcpyAsync", file, line);
  if (bytes > 0) queue_copy("cudaMemcpyAsync", dst, src, bytes, kind, s, file, line);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaMemcpy(const char *file, int line, void *dst, const void *src,
                              size_t bytes, enum cudaMemcpyKind kind) {
  api_enter_wait("cudaMemcpy", file, line);
  if (!valid_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (bytes == 0) return cudaSuccess;
  pt_emu_stream *legacy = resolve_stream(nullptr, "cudaMemcpy", file, line);
  queued q = queue_copy("cudaMemcpy", dst, src, bytes, kind, legacy, file, line);
  if (q.on_device) return cudaSuccess; /* device to device: no host wait */
  count_sync(file, line);
  drain(q.done, "cudaMemcpy", file, line);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaMemsetAsync(const char *file, int line, void *ptr, int value, size_t bytes,
                                   cudaStream_t stream) {
  api_enter("cudaMemsetAsync", file, line);
  pt_emu_stream *s = resolve_stream(stream, "cudaMemsetAsync", file, line);
  if (bytes == 0) return cudaSuccess;
  require_device("cudaMemsetAsync destination", ptr, bytes, file, line);
  g_counters.memset_bytes += bytes;
  if (cfg().count_only) return cudaSuccess;
  enqueue_fn(s, "cudaMemsetAsync", file, line, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}

/* Asynchronous to the host for device memory, on the legacy default stream (CUDA's rules). */
cudaError_t pt_emu_cudaMemset(const char *file, int line, void *ptr, int value, size_t bytes) {
  api_enter("cudaMemset", file, line);
  if (bytes == 0) return cudaSuccess;
  require_device("cudaMemset destination", ptr, bytes, file, line);
  g_counters.memset_bytes += bytes;
  if (cfg().count_only) return cudaSuccess;
  enqueue_fn(resolve_stream(nullptr, "cudaMemset", file, line), "cudaMemset", file, line,
             [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}

} // extern "C"
