/* The emulator's settings, from the environment at the first call (docs/gpu.md lists them),
 * its random numbers and its error report. */
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.h"

namespace pt_emu {

namespace {
bool g_reading; /* inside read_config: fail() must not ask for the settings */
uint64_t g_rng;

const char *env_or(const char *name, const char *dflt) {
  const char *v = std::getenv(name);
  return v && v[0] ? v : dflt;
}

/* A whole positive decimal number, or the run ends naming the variable. */
uint64_t env_count(const char *name, uint64_t dflt, uint64_t max) {
  const char *v = std::getenv(name);
  if (!v || !v[0]) return dflt;
  char *end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || n > max)
    fail("%s=%s: expected a whole number from 0 to %llu", name, v, (unsigned long long)max);
  return n;
}

template <class E> E env_choice(const char *name, const char *const *names, E dflt) {
  const char *v = std::getenv(name);
  if (!v || !v[0]) return dflt;
  for (int i = 0; names[i]; i++)
    if (!std::strcmp(v, names[i])) return static_cast<E>(i);
  fail("%s=%s: expected one of %s|%s|%s%s%s", name, v, names[0], names[1], names[2],
       names[3] ? "|" : "", names[3] ? names[3] : "");
}

const char *const k_thread_orders[] = {"inorder", "reverse", "random", "warp", nullptr};
const char *const k_stream_orders[] = {"order", "lazy", "random", nullptr};

config read_config() {
  g_reading = true;
  config c;
  c.threads = env_choice("PT_EMU_ORDER", k_thread_orders, thread_order::inorder);
  c.streams = env_choice("PT_EMU_STREAMS", k_stream_orders, stream_order::order);
  c.seed = env_count("PT_EMU_SEED", 1, UINT64_MAX);
  c.devices = static_cast<int>(env_count("PT_EMU_DEVICES", 2, 64));
  c.memory_bytes = static_cast<size_t>(env_count("PT_EMU_MEMORY_MB", 16384, 1u << 24)) << 20;
  c.held_bytes = static_cast<size_t>(env_count("PT_EMU_MEMORY_HELD_MB", 0, 1u << 24)) << 20;
  if (c.held_bytes > c.memory_bytes) fail("PT_EMU_MEMORY_HELD_MB: at most PT_EMU_MEMORY_MB");
  c.stack_bytes = static_cast<size_t>(env_count("PT_EMU_STACK_KB", 128, 1u << 16)) << 10;
  if (c.stack_bytes < (32u << 10)) fail("PT_EMU_STACK_KB: at least 32");
  const char *fibers = env_or("PT_EMU_FIBERS", "fast");
  if (std::strcmp(fibers, "fast") && std::strcmp(fibers, "ucontext"))
    fail("PT_EMU_FIBERS=%s: expected fast|ucontext", fibers);
  c.ucontext = !std::strcmp(fibers, "ucontext");
  c.counters = env_or("PT_EMU_COUNTERS", nullptr);
  if (c.counters && !std::strcmp(c.counters, "0")) c.counters = nullptr;
  c.count_only = env_count("PT_EMU_COUNT_ONLY", 0, 1) != 0;
  g_rng = c.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  g_reading = false;
  return c;
}
} // namespace

const config &cfg() {
  static const config c = read_config();
  return c;
}

const char *thread_order_name(thread_order o) { return k_thread_orders[static_cast<int>(o)]; }
const char *stream_order_name(stream_order o) { return k_stream_orders[static_cast<int>(o)]; }

uint64_t rng_next() {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * 0x2545F4914F6CDD1Dull;
}

uint64_t rng_below(uint64_t n) { return (rng_next() >> 11) % n; }

void fail(const char *fmt, ...) {
  std::fflush(stdout);
  std::fputs("pt_emu: error: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (!g_reading) {
    const config &c = cfg();
    std::fprintf(stderr, "\n  (CUDA emulator, tests/gpu/emu: PT_EMU_ORDER=%s PT_EMU_STREAMS=%s "
                 "PT_EMU_SEED=%llu)", thread_order_name(c.threads), stream_order_name(c.streams),
                 (unsigned long long)c.seed);
  }
  std::fputc('\n', stderr);
  std::abort();
}

} // namespace pt_emu
