/* Streams as queues and the drains that run them (streams.h), and the API entry checks. */
#include "streams.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_set>

#include "block.h"

namespace pt_emu {
struct op {
  uint64_t seq;
  std::vector<dep> deps;
  op_spec spec;
  uint64_t again_round;
};
} // namespace pt_emu

struct pt_emu_stream {
  int device;
  unsigned flags;
  bool legacy, destroyed;
  std::deque<pt_emu::op> q;
  std::shared_ptr<pt_emu::completion> done;
  uint64_t issued;
  int externals; /* queued external operations */
};

namespace pt_emu {

namespace {
std::vector<pt_emu_stream *> g_streams;            /* live, and destroyed ones still draining */
std::unordered_set<const pt_emu_stream *> g_valid; /* handles the program may use */
std::vector<pt_emu_stream *> g_legacy, g_per_thread; /* per device, made when first used */
int g_device;
uint64_t g_seq, g_round = 1;
int g_in_op;     /* > 0 while a queued operation runs */
int g_externals; /* queued external operations not yet done */
pthread_t g_thread;
bool g_thread_known;

pt_emu_stream *new_stream(int device, unsigned flags, bool legacy) {
  pt_emu_stream *s = new pt_emu_stream{device, flags, legacy, false, {}, nullptr, 0, 0};
  s->done = std::make_shared<completion>();
  s->done->owner = s;
  g_streams.push_back(s);
  return s;
}

void free_stream(pt_emu_stream *s) {
  g_streams.erase(std::find(g_streams.begin(), g_streams.end(), s));
  s->done->owner = nullptr;
  delete s;
}

pt_emu_stream *per_device(std::vector<pt_emu_stream *> &v, int device, bool legacy) {
  if (v.size() <= static_cast<size_t>(device)) v.resize(static_cast<size_t>(device) + 1, nullptr);
  pt_emu_stream *&s = v[static_cast<size_t>(device)];
  if (!s) s = new_stream(device, cudaStreamDefault, legacy);
  return s;
}

bool ready(const op &o) {
  for (const dep &d : o.deps)
    if (!d.done()) return false;
  return true;
}

bool runnable_head(const pt_emu_stream *s) {
  return !s->q.empty() && ready(s->q.front()) && s->q.front().again_round != g_round;
}

/* lazy: follow the awaited work's first unmet dependency to a stream whose head can run. */
pt_emu_stream *pick_lazy(const dep &target) {
  pt_emu_stream *s = target.c->owner;
  while (s && !s->q.empty()) {
    const op &h = s->q.front();
    const dep *blocker = nullptr;
    for (const dep &d : h.deps)
      if (!d.done()) {
        blocker = &d;
        break;
      }
    if (!blocker) return h.again_round == g_round ? nullptr : s;
    s = blocker->c->owner;
  }
  return nullptr;
}

/* The stream whose head runs next (PT_EMU_STREAMS), or null when no head can run now. */
pt_emu_stream *pick(const dep *target) {
  if (cfg().streams == stream_order::lazy && target) return pick_lazy(*target);
  static std::vector<pt_emu_stream *> cands;
  cands.clear();
  for (pt_emu_stream *s : g_streams)
    if (runnable_head(s)) cands.push_back(s);
  if (cands.empty()) return nullptr;
  if (cfg().streams == stream_order::random) return cands[rng_below(cands.size())];
  return *std::min_element(cands.begin(), cands.end(), [](const pt_emu_stream *a, const pt_emu_stream *b) {
    return a->q.front().seq < b->q.front().seq;
  });
}

/* Runs s's head; false when it answered AGAIN (it stays, and is skipped for this round). */
bool run_one(pt_emu_stream *s) {
  const op_spec spec = s->q.front().spec;
  g_in_op++;
  pt_emu_op_status r = spec.fn(spec.arg);
  g_in_op--;
  if (r == PT_EMU_OP_AGAIN) {
    if (!spec.external)
      fail("%s (queued at %s:%d) answered AGAIN but was not queued with pt_emu_enqueue",
           spec.what, spec.file, spec.line);
    s->q.front().again_round = g_round;
    return false;
  }
  s->q.pop_front();
  s->done->count++;
  if (spec.external) g_externals--, s->externals--;
  if (spec.after) spec.after(spec.arg);
  if (s->destroyed && s->q.empty()) free_stream(s);
  return true;
}

bool any_again() {
  for (const pt_emu_stream *s : g_streams)
    if (!s->q.empty() && s->q.front().again_round == g_round) return true;
  return false;
}

[[noreturn]] void stuck(const char *what, const char *file, int line) {
  std::string why;
  char buf[512];
  for (const pt_emu_stream *s : g_streams) {
    if (s->q.empty()) continue;
    const op &h = s->q.front();
    std::snprintf(buf, sizeof buf, "\n  stream %p: %zu queued, first %s (%s:%d)%s",
                  static_cast<const void *>(s), s->q.size(), h.spec.what, h.spec.file,
                  h.spec.line, ready(h) ? "" : " waiting for another stream");
    why += buf;
  }
  fail("%s at %s:%d waits for work that can never run:%s", what, file, line, why.c_str());
}

/* One step of a drain: run a ready operation, or wait a little for external ones. */
void step(const dep *target, const char *what, const char *file, int line) {
  if (pt_emu_stream *s = pick(target)) {
    run_one(s);
    return;
  }
  if (!any_again()) stuck(what, file, line);
  g_round++;
  struct timespec nap = {0, 20000};
  if (nanosleep(&nap, nullptr) != 0 && errno != EINTR) fail("nanosleep failed: %s", strerror(errno));
}

/* Communication must not wait for this process's next synchronisation (a GPU runs it on its
 * own): a stream carrying external operations runs what is ready at its head, up to and
 * including them, at every API call. */
void progress_externals() {
  for (size_t i = 0; i < g_streams.size(); i++) {
    pt_emu_stream *s = g_streams[i];
    bool ran = false;
    while (s->externals > 0 && runnable_head(s)) {
      bool destroyed = s->destroyed && s->q.size() == 1;
      if (!run_one(s)) break;
      ran = true;
      if (destroyed) break; /* s is gone */
    }
    if (ran) i = static_cast<size_t>(-1); /* what ran may have readied another stream */
  }
  g_round++;
}
} // namespace

void api_enter(const char *what, const char *file, int line) {
  cfg();
  counters_at_exit_once();
  if (blk::g_cur) blk::kernel_fail("calls %s (%s:%d): host API inside a kernel", what, file, line);
  if (!g_thread_known) {
    g_thread = pthread_self();
    g_thread_known = true;
  } else if (!pthread_equal(g_thread, pthread_self())) {
    fail("%s at %s:%d: called from a second thread; the emulator is single-threaded", what, file,
         line);
  }
  if (g_externals > 0 && g_in_op == 0) progress_externals();
}

void api_enter_wait(const char *what, const char *file, int line) {
  api_enter(what, file, line);
  if (g_in_op > 0)
    fail("%s at %s:%d waits for the device from inside a queued operation, which would wait for "
         "itself", what, file, line);
}

dep enqueue(pt_emu_stream *s, const op_spec &o, const dep *extra) {
  op x{++g_seq, {}, o, 0};
  if (extra && !extra->done()) x.deps.push_back(*extra);
  if (s->legacy) { /* after all earlier work of the device's blocking streams */
    for (pt_emu_stream *t : g_streams)
      if (t != s && t->device == s->device && !(t->flags & cudaStreamNonBlocking) &&
          t->issued > t->done->count)
        x.deps.push_back(stream_tail(t));
  } else if (!(s->flags & cudaStreamNonBlocking)) { /* after earlier legacy work */
    pt_emu_stream *l = per_device(g_legacy, s->device, true);
    if (l->issued > l->done->count) x.deps.push_back(stream_tail(l));
  }
  s->q.push_back(std::move(x));
  s->issued++;
  if (o.external) g_externals++, s->externals++;
  return stream_tail(s);
}

dep stream_tail(pt_emu_stream *s) { return dep{s->done, s->issued}; }

bool stream_valid(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || g_valid.count(s);
}

pt_emu_stream *resolve_stream(cudaStream_t s, const char *what, const char *file, int line) {
  if (s == nullptr || s == cudaStreamLegacy) return per_device(g_legacy, g_device, true);
  if (s == cudaStreamPerThread) return per_device(g_per_thread, g_device, false);
  if (!g_valid.count(s))
    fail("%s at %s:%d: %p is not a live stream (destroyed, or never created)", what, file, line,
         static_cast<const void *>(s));
  return s;
}

void drain(const dep &d, const char *what, const char *file, int line) {
  while (!d.done()) step(&d, what, file, line);
}

void drain_device(int device, const char *what, const char *file, int line) {
  for (;;) {
    bool busy = false;
    for (const pt_emu_stream *s : g_streams) busy |= !s->q.empty() && (device < 0 || s->device == device);
    if (!busy) return;
    step(nullptr, what, file, line);
  }
}

bool query(const dep &d) {
  if (d.done()) return true;
  if (cfg().streams == stream_order::random && rng_below(2) == 0) return false; /* not yet */
  if (pt_emu_stream *s = pick(&d)) run_one(s);
  else if (any_again()) g_round++;
  else stuck("a query", "(poll)", 0);
  return d.done();
}

int current_device() { return g_device; }
void set_current_device(int device) { g_device = device; }

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

} // namespace pt_emu

using namespace pt_emu;

extern "C" {

cudaError_t pt_emu_cudaStreamCreateWithFlags(const char *file, int line, cudaStream_t *stream,
                                             unsigned int flags) {
  api_enter("cudaStreamCreateWithFlags", file, line);
  if (!stream || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking))) return cudaErrorInvalidValue;
  *stream = new_stream(g_device, flags, false);
  g_valid.insert(*stream);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaStreamCreate(const char *file, int line, cudaStream_t *stream) {
  return pt_emu_cudaStreamCreateWithFlags(file, line, stream, cudaStreamDefault);
}

/* As CUDA: returns at once; queued work still runs, then the stream goes away. */
cudaError_t pt_emu_cudaStreamDestroy(const char *file, int line, cudaStream_t stream) {
  api_enter("cudaStreamDestroy", file, line);
  if (!g_valid.count(stream)) return cudaErrorInvalidResourceHandle;
  g_valid.erase(stream);
  stream->destroyed = true;
  if (stream->q.empty()) free_stream(stream);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaStreamSynchronize(const char *file, int line, cudaStream_t stream) {
  api_enter_wait("cudaStreamSynchronize", file, line);
  count_sync(file, line);
  drain(stream_tail(resolve_stream(stream, "cudaStreamSynchronize", file, line)),
        "cudaStreamSynchronize", file, line);
  return cudaSuccess;
}

cudaError_t pt_emu_cudaStreamQuery(const char *file, int line, cudaStream_t stream) {
  api_enter("cudaStreamQuery", file, line);
  g_counters.queries++;
  return query(stream_tail(resolve_stream(stream, "cudaStreamQuery", file, line)))
             ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t pt_emu_cudaDeviceSynchronize(const char *file, int line) {
  api_enter_wait("cudaDeviceSynchronize", file, line);
  count_sync(file, line);
  drain_device(g_device, "cudaDeviceSynchronize", file, line);
  return cudaSuccess;
}

void pt_emu_enqueue(cudaStream_t s, const char *what, pt_emu_op_fn fn, void (*after)(void *),
                    void *arg) {
  api_enter(what, "(pt_emu_enqueue)", 0);
  g_counters.external_ops++;
  enqueue(resolve_stream(s, what, "(pt_emu_enqueue)", 0),
          op_spec{what, "(pt_emu_enqueue)", 0, fn, after, arg, true});
}

void pt_emu_progress(void) {
  api_enter("pt_emu_progress", "(pt_emu_progress)", 0);
  if (g_in_op > 0) return;
  while (pt_emu_stream *s = pick(nullptr)) run_one(s);
  g_round++;
}

} // extern "C"
