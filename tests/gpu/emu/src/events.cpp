/* Events: a recorded event is a position in a stream (streams.h): "done" once the stream's work
 * queued before the record has completed. Waiting on it from another stream queues a no-op
 * there that depends on that position, so what is queued behind the wait runs after it. */
#include <memory>
#include <unordered_set>

#include "streams.h"

struct pt_emu_event {
  unsigned flags;
  bool recorded;
  pt_emu::dep at;                /* the last record's position */
  std::shared_ptr<double> stamp; /* when the last record ran (ms), for cudaEventElapsedTime */
};

namespace pt_emu {
namespace {
std::unordered_set<const pt_emu_event *> g_events;

pt_emu_event *check(cudaEvent_t e, const char *what, const char *file, int line) {
  if (!g_events.count(e))
    fail("%s at %s:%d: %p is not a live event (destroyed, or never created)", what, file, line,
         static_cast<const void *>(e));
  return e;
}
} // namespace
} // namespace pt_emu

using namespace pt_emu;

extern "C" {

cudaError_t pt_emu_cudaEventCreateWithFlags(const char *file, int line, cudaEvent_t *event,
                                            unsigned int flags) {
  api_enter("cudaEventCreateWithFlags", file, line);
  const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming;
  if (!event || (flags & ~known)) return cudaErrorInvalidValue;
  *event = new pt_emu_event{flags, false, {}, nullptr};
  g_events.insert(*event);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaEventCreate(const char *file, int line, cudaEvent_t *event) {
  return pt_emu_cudaEventCreateWithFlags(file, line, event, cudaEventDefault);
}

/* Queued waits and records hold what they need: destroying is safe at any time, as in CUDA. */
cudaError_t pt_emu_cudaEventDestroy(const char *file, int line, cudaEvent_t event) {
  api_enter("cudaEventDestroy", file, line);
  if (!g_events.erase(event)) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}

cudaError_t pt_emu_cudaEventRecord(const char *file, int line, cudaEvent_t event,
                                   cudaStream_t stream) {
  api_enter("cudaEventRecord", file, line);
  pt_emu_event *e = check(event, "cudaEventRecord", file, line);
  pt_emu_stream *s = resolve_stream(stream, "cudaEventRecord", file, line);
  std::shared_ptr<double> stamp = std::make_shared<double>(0.0);
  e->at = enqueue_fn(s, "cudaEventRecord", file, line, [stamp] { *stamp = now_ms(); });
  e->stamp = stamp;
  e->recorded = true;
  return cudaSuccess;
}

/* Waits for the record made before this call; an event never recorded is no wait at all. */
cudaError_t pt_emu_cudaStreamWaitEvent(const char *file, int line, cudaStream_t stream,
                                       cudaEvent_t event, unsigned int flags) {
  api_enter("cudaStreamWaitEvent", file, line);
  pt_emu_event *e = check(event, "cudaStreamWaitEvent", file, line);
  pt_emu_stream *s = resolve_stream(stream, "cudaStreamWaitEvent", file, line);
  if (flags != 0) return cudaErrorInvalidValue;
  if (e->recorded) enqueue_fn(s, "cudaStreamWaitEvent", file, line, [] {}, &e->at);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaEventSynchronize(const char *file, int line, cudaEvent_t event) {
  api_enter_wait("cudaEventSynchronize", file, line);
  pt_emu_event *e = check(event, "cudaEventSynchronize", file, line);
  count_sync(file, line);
  if (e->recorded) drain(e->at, "cudaEventSynchronize", file, line);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaEventQuery(const char *file, int line, cudaEvent_t event) {
  api_enter("cudaEventQuery", file, line);
  pt_emu_event *e = check(event, "cudaEventQuery", file, line);
  g_counters.queries++;
  return !e->recorded || query(e->at) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t pt_emu_cudaEventElapsedTime(const char *file, int line, float *ms, cudaEvent_t start,
                                        cudaEvent_t end) {
  api_enter("cudaEventElapsedTime", file, line);
  pt_emu_event *a = check(start, "cudaEventElapsedTime", file, line);
  pt_emu_event *b = check(end, "cudaEventElapsedTime", file, line);
  if (!ms) return cudaErrorInvalidValue;
  if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
  if (!a->recorded || !b->recorded || !a->at.done() || !b->at.done()) return cudaErrorNotReady;
  *ms = static_cast<float>(*b->stamp - *a->stamp);
  return cudaSuccess;
}

} // extern "C"
