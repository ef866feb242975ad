/* tests/gpu/emu/src/streams.h: streams and events as real queues (streams.cpp).
 *
 * Every operation (kernel, copy, memset, cuBLAS product, event record, event wait, an NCCL
 * fake's transfer) is queued on its stream with the completions it depends on: the stream's
 * earlier work (implicitly: a stream runs in order), an event's recorded position
 * (cudaStreamWaitEvent), and the legacy default stream's implicit ordering: work on it waits for
 * all earlier work of every blocking stream of its device, and work on a blocking stream waits
 * for earlier work on it. Streams created with cudaStreamNonBlocking take no part in that.
 *
 * Nothing runs when queued. A synchronisation point drains: it runs ready operations one at a
 * time until what it waits for has completed, picking among the streams' ready heads in the
 * order PT_EMU_STREAMS names:
 *   order   the lowest issue number first: the device as one queue in issue order
 *   lazy    only what the awaited work depends on; other streams wait for their own sync
 *   random  any ready head (seeded): other streams' work before, between or after, or not yet
 */
#ifndef PT_EMU_STREAMS_H
#define PT_EMU_STREAMS_H

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "internal.h"

namespace pt_emu {

/* How many operations of one stream have completed; owner is null once the stream is gone
 * (its operations had all completed then). */
struct completion {
  uint64_t count = 0;
  struct ::pt_emu_stream *owner = nullptr;
};

/* Done when c->count >= upto. */
struct dep {
  std::shared_ptr<completion> c;
  uint64_t upto = 0;
  bool done() const { return c->count >= upto; }
};

struct op_spec {
  const char *what, *file;
  int line;
  pt_emu_op_fn fn;
  void (*after)(void *);
  void *arg;
  bool external; /* queued with pt_emu_enqueue: may answer AGAIN */
};

/* Queues o on s behind its earlier work, the legacy stream's implicit ordering and extra.
 * Returns the dependency that is done when o has completed. */
dep enqueue(struct ::pt_emu_stream *s, const op_spec &o, const dep *extra = nullptr);

/* Queues f() (a callable, copied) as an operation that completes when it returns. */
template <class F>
dep enqueue_fn(struct ::pt_emu_stream *s, const char *what, const char *file, int line, F f,
               const dep *extra = nullptr) {
  F *held = new F(std::move(f));
  op_spec o{what, file, line,
            [](void *p) { (*static_cast<F *>(p))(); return PT_EMU_OP_DONE; },
            [](void *p) { delete static_cast<F *>(p); }, held, false};
  return enqueue(s, o, extra);
}

/* The stream a handle names: 0 and cudaStreamLegacy the current device's legacy stream. A
 * handle that is not a live stream ends the process (what, file, line name the call). */
struct ::pt_emu_stream *resolve_stream(cudaStream_t s, const char *what, const char *file, int line);
bool stream_valid(cudaStream_t s);

/* The dependency "everything queued on s so far". */
dep stream_tail(struct ::pt_emu_stream *s);

/* Drains until d is done (a host wait). */
void drain(const dep &d, const char *what, const char *file, int line);
/* Drains until every stream of device is empty (device -1: of every device). */
void drain_device(int device, const char *what, const char *file, int line);
/* A poll: runs at most one operation towards d; true when d is done. */
bool query(const dep &d);

int current_device();
void set_current_device(int device);
double now_ms();

} // namespace pt_emu

#endif
