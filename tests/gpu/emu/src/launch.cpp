/* Kernel launches: the configuration checked as CUDA does (an error returned, and left for
 * cudaGetLastError), the kernel queued on its stream, and when the stream gets there, its
 * blocks run one after another (block.h) in an order that follows PT_EMU_ORDER: upwards for
 * inorder, downwards for reverse, a seeded permutation for random and warp. */
#include "block.h"
#include "streams.h"

namespace pt_emu {
namespace {

struct launch {
  kernel_info k;
  void (*destroy)(void *);
};

uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

pt_emu_op_status run_grid(void *p) {
  const kernel_info &k = static_cast<launch *>(p)->k;
  const uint64_t gx = k.grid.x, gy = k.grid.y, n = gx * gy * k.grid.z;
  uint64_t a = 1, c = 0; /* block number i runs as block (a * i + c) mod n */
  thread_order o = cfg().threads;
  if (o == thread_order::reverse) a = n - 1, c = n - 1;
  if ((o == thread_order::random || o == thread_order::warp) && n > 1) {
    do a = 1 + rng_below(n - 1);
    while (gcd(a, n) != 1);
    c = rng_below(n);
  }
  for (uint64_t i = 0; i < n; i++) {
    uint64_t b = static_cast<uint64_t>((static_cast<unsigned __int128>(a) * i + c) % n);
    run_block(k, uint3{static_cast<unsigned>(b % gx), static_cast<unsigned>(b / gx % gy),
                       static_cast<unsigned>(b / (gx * gy))});
  }
  return PT_EMU_OP_DONE;
}

bool valid_config(dim3 g, dim3 b) {
  uint64_t threads = uint64_t(b.x) * b.y * b.z;
  return g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 0x7fffffffu && g.y <= 65535 && g.z <= 65535 &&
         b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 &&
         threads <= 1024;
}

} // namespace

cudaError_t enqueue_launch(const launch_site &site, void (*body)(void *), void (*destroy)(void *),
                           void *call) {
  api_enter(site.kernel, site.file, site.line);
  if (!valid_config(site.grid, site.block)) {
    destroy(call);
    set_last_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  if (site.smem != 0)
    fail("%s:%d: kernel %s: %zu bytes of dynamic shared memory: not emulated (extern __shared__)",
         site.file, site.line, site.kernel, site.smem);
  pt_emu_stream *s = resolve_stream(site.stream, site.kernel, site.file, site.line);
  g_counters.launches++;
  if (cfg().count_only) {
    destroy(call);
    return cudaSuccess;
  }
  launch *l = new launch{kernel_info{site.kernel, site.file, site.line, body, call, site.grid,
                                     site.block}, destroy};
  enqueue(s, op_spec{site.kernel, site.file, site.line, run_grid,
                     [](void *p) {
                       launch *q = static_cast<launch *>(p);
                       q->destroy(q->k.call);
                       delete q;
                     },
                     l, false});
  return cudaSuccess;
}

} // namespace pt_emu
