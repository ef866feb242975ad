/* tests/gpu/emu/src/internal.h: what the emulator's parts share: its settings (read once from
 * the environment), its random numbers, its error report and the API entry check. */
#ifndef PT_EMU_INTERNAL_H
#define PT_EMU_INTERNAL_H

#include <cstddef>
#include <cstdint>

#include "../emu.h"

namespace pt_emu {

enum class thread_order { inorder, reverse, random, warp };
enum class stream_order { order, lazy, random };

struct config {
  thread_order threads; /* PT_EMU_ORDER */
  stream_order streams; /* PT_EMU_STREAMS */
  uint64_t seed;        /* PT_EMU_SEED */
  int devices;          /* PT_EMU_DEVICES */
  size_t memory_bytes;  /* PT_EMU_MEMORY_MB, per device */
  size_t held_bytes;    /* PT_EMU_MEMORY_HELD_MB: of each device's, held by another process */
  size_t stack_bytes;   /* PT_EMU_STACK_KB, per emulated thread */
  bool ucontext;        /* PT_EMU_FIBERS=ucontext: the portable switch instead of the fast one */
  const char *counters; /* PT_EMU_COUNTERS: NULL, "1" (stderr) or a file */
  /* PT_EMU_COUNT_ONLY=1: calls are checked and counted (the counters, the kernels' cost
   * ledger) but kernels, products, memsets and device-to-device copies do not run, so a
   * model at its real size costs no compute and no memory beyond what the host writes
   * (bench/gpu_roofline.c). Host copies still run. New blocks under 1 MiB read as zeros. */
  bool count_only;
};
const config &cfg();
const char *thread_order_name(thread_order o);
const char *stream_order_name(stream_order o);

/* xorshift64*, seeded with PT_EMU_SEED: the same sequence, hence the same orders, every run. */
uint64_t rng_next();
uint64_t rng_below(uint64_t n); /* n > 0 */

/* "pt_emu: error: MESSAGE" plus the settings that reproduce it, on stderr, then abort(). */
[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Every API function starts here: refuses a call from inside a kernel or a queued operation
 * (which would wait on itself) and from a second OS thread, and lets communication progress. */
void api_enter(const char *what, const char *file, int line);
/* The same for functions that wait for the device (synchronize, blocking copies, cudaFree). */
void api_enter_wait(const char *what, const char *file, int line);

extern pt_emu_counters g_counters;
void counters_at_exit_once(); /* registers the PT_EMU_COUNTERS report (first API call) */
/* One host wait, called from file:line (the caller of the CUDA function): counted in
 * g_counters.syncs and, per call site, in the PT_EMU_COUNTERS file's "pt_emu sync site" lines. */
void count_sync(const char *file, int line);

void set_last_error(cudaError_t e);

} // namespace pt_emu

#endif
