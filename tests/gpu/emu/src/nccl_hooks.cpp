/* The NCCL emulation's stream hooks (tests/gpu/emu/nccl/nccl_emu_stream.h) on this emulator's
 * queues (emu.h, pt_emu_enqueue): a fake NCCL operation is queued on its stream like a kernel and
 * polled at the emulator's synchronisation points until its peer has matched it. */
#include <cstdlib>

#include "emu.h"
#include "nccl_emu_stream.h"

namespace {
struct nccl_hook {
  nccl_emu_poll_fn poll;
  void (*after)(void *);
  void *arg;
};

pt_emu_op_status hook_run(void *p) {
  nccl_hook *h = static_cast<nccl_hook *>(p);
  return h->poll(h->arg) == NCCL_EMU_DONE ? PT_EMU_OP_DONE : PT_EMU_OP_AGAIN;
}

void hook_after(void *p) {
  nccl_hook *h = static_cast<nccl_hook *>(p);
  if (h->after) h->after(h->arg);
  std::free(h);
}
} // namespace

extern "C" void nccl_emu_stream_enqueue(cudaStream_t s, const char *what, nccl_emu_poll_fn poll,
                                        void (*after)(void *), void *arg) {
  nccl_hook *h = static_cast<nccl_hook *>(std::malloc(sizeof *h));
  if (!h) std::abort();
  *h = nccl_hook{poll, after, arg};
  pt_emu_enqueue(s, what, hook_run, hook_after, h);
}

extern "C" void nccl_emu_stream_progress(void) { pt_emu_progress(); }

extern "C" void nccl_emu_check_device(const char *what, const void *ptr, size_t bytes) {
  pt_emu_check_device_range("(the NCCL emulation)", 0, what, ptr, bytes);
}
