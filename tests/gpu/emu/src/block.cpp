/* A block's threads as fibers (block.h): the scheduler and its orders, barriers, returns, and
 * the diagnosis when no thread can go on. */
#include "block.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "internal.h"

/* The __shared__ statics of every kernel (pt_emu_device.h); the linker defines these bounds. */
extern "C" {
extern char __start_pt_emu_shared[] __attribute__((weak));
extern char __stop_pt_emu_shared[] __attribute__((weak));
}

namespace pt_emu {

const thread_ids *g_ids = nullptr;

namespace blk {

block_state g_block;
/* Kept for the process's life (fibers are reused by every launch); never destroyed, so the
 * fibers stay reachable at exit rather than reported as leaks. */
std::vector<tfiber *> &g_threads = *new std::vector<tfiber *>();
tfiber *g_cur;

namespace {
fiber g_sched; /* the host thread's context, where switch_out returns to */

void thread_exit();

/* Every fiber runs this forever: one thread of a block, then (reused) one of the next block. */
void fiber_main(void *) {
  for (;;) {
    g_block.k->body(g_block.k->call);
    thread_exit();
  }
}

void thread_exit() {
  tfiber &f = *g_cur;
  block_state &b = g_block;
  if (b.at_barrier > 0)
    kernel_fail("returns while %d other thread(s) wait at %s (%s:%d): every thread of a block "
                "must reach every barrier", b.at_barrier, b.bwhat, b.bfile, b.bline);
  if (const warp_slot *s = slot_waiting_for(f.warp, f.lane))
    kernel_fail("returns while lanes 0x%08x of its warp wait for it in %s (mask 0x%08x) at %s:%d",
                s->arrived, s->what, s->mask, s->file, s->line);
  f.st = T_DONE;
  make_unready(f.index);
  b.exited++;
  b.warps[static_cast<size_t>(f.warp)].exited |= 1u << f.lane;
  switch_out();
}

void ensure_threads(int n) {
  while (static_cast<int>(g_threads.size()) < n) {
    tfiber *f = new tfiber();
    f->index = static_cast<int>(g_threads.size());
    f->warp = f->index >> 5;
    f->lane = f->index & 31;
    fiber_make(f->ctx, cfg().stack_bytes, fiber_main, nullptr);
    g_threads.push_back(f);
  }
}

/* The next ready thread from the cursor on, upwards (step 1) or downwards (-1). */
int pick_scan(int step) {
  block_state &b = g_block;
  int i = b.cursor;
  for (int k = 0; k < b.n; k++) {
    if (b.pos[static_cast<size_t>(i)] >= 0) {
      b.cursor = i + step == b.n ? 0 : i + step < 0 ? b.n - 1 : i + step;
      return i;
    }
    i = i + step == b.n ? 0 : i + step < 0 ? b.n - 1 : i + step;
  }
  return -1;
}

int pick_warp() {
  block_state &b = g_block;
  if (b.warp_ready[static_cast<size_t>(b.cur_warp)] == 0) {
    b.cur_warp = b.ready[rng_below(b.ready.size())] >> 5;
    b.lane_cursor = 0;
  }
  for (int l = 0; l < 32; l++) {
    int lane = (b.lane_cursor + l) & 31, i = b.cur_warp * 32 + lane;
    if (i < b.n && b.pos[static_cast<size_t>(i)] >= 0) {
      b.lane_cursor = (lane + 1) & 31;
      return i;
    }
  }
  return -1;
}

/* The next thread to run, in PT_EMU_ORDER's order; -1 when none is ready. */
int pick() {
  block_state &b = g_block;
  if (b.ready.empty()) return -1;
  switch (b.order) {
  case thread_order::inorder: return pick_scan(1);
  case thread_order::reverse: return pick_scan(-1);
  case thread_order::random: return b.ready[rng_below(b.ready.size())];
  case thread_order::warp: return pick_warp();
  }
  return -1;
}

[[noreturn]] void deadlock() {
  block_state &b = g_block;
  std::string why;
  char line[512];
  std::snprintf(line, sizeof line, "no thread can go on: %d of %d returned", b.exited, b.n);
  why += line;
  if (b.at_barrier > 0) {
    std::snprintf(line, sizeof line, "; %d wait at %s (%s:%d)", b.at_barrier, b.bwhat, b.bfile,
                  b.bline);
    why += line;
  }
  for (size_t w = 0; w < b.warps.size(); w++)
    for (const warp_slot &s : b.warps[w].pending) {
      std::snprintf(line, sizeof line, "; warp %zu: lanes 0x%08x wait in %s (mask 0x%08x) at %s:%d",
                    w, s.arrived, s.what, s.mask, s.file, s.line);
      why += line;
    }
  g_cur = nullptr;
  kernel_fail("%s", why.c_str());
}

/* A GPU's shared memory starts undefined: 0xff bytes make a read before any write show (NaN). */
void poison_shared() {
  char *a = __start_pt_emu_shared, *z = __stop_pt_emu_shared;
  if (a && z > a) std::memset(a, 0xff, static_cast<size_t>(z - a));
}

void reset_block(const kernel_info &k, uint3 idx, int n) {
  block_state &b = g_block;
  b.k = &k;
  b.idx = idx;
  b.n = n;
  b.exited = b.at_barrier = 0;
  size_t nwarps = static_cast<size_t>((n + 31) / 32);
  b.warps.resize(nwarps);
  for (size_t w = 0; w < nwarps; w++) {
    int lanes = n - static_cast<int>(w) * 32;
    b.warps[w].live = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
    b.warps[w].exited = b.warps[w].at_barrier = 0;
    b.warps[w].pending.clear();
  }
  b.ready.clear();
  b.pos.assign(static_cast<size_t>(n), -1);
  b.warp_ready.assign(nwarps, 0);
  b.order = cfg().threads;
  b.cursor = b.order == thread_order::reverse ? n - 1 : 0;
  b.cur_warp = b.order == thread_order::warp ? static_cast<int>(rng_below(nwarps)) : 0;
  b.lane_cursor = 0;
}
} // namespace

tfiber &current(const char *what, const char *file, int line) {
  if (!g_cur) fail("%s called outside a kernel (%s:%d)", what, file, line);
  return *g_cur;
}

void make_ready(int i) {
  block_state &b = g_block;
  size_t u = static_cast<size_t>(i);
  if (b.pos[u] >= 0) return;
  b.pos[u] = static_cast<int>(b.ready.size());
  b.ready.push_back(i);
  b.warp_ready[u >> 5]++;
}

void make_unready(int i) {
  block_state &b = g_block;
  size_t u = static_cast<size_t>(i);
  int p = b.pos[u];
  if (p < 0) return;
  int last = b.ready.back();
  b.ready[static_cast<size_t>(p)] = last;
  b.pos[static_cast<size_t>(last)] = p;
  b.ready.pop_back();
  b.pos[u] = -1;
  b.warp_ready[u >> 5]--;
}

/* Straight to the next thread, without a detour through the scheduler (half the switches); to
 * the scheduler only when no thread is ready (the block is done, or stuck). */
void switch_out() {
  tfiber *me = g_cur;
  int i = pick();
  if (i < 0) return fiber_switch(me->ctx, g_sched);
  tfiber *next = g_threads[static_cast<size_t>(i)];
  if (next == me) return;
  g_cur = next;
  g_ids = &next->ids;
  fiber_switch(me->ctx, next->ctx);
}

void kernel_fail(const char *fmt, ...) {
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const block_state &b = g_block;
  if (g_cur)
    fail("kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u): %s", b.k->name,
         b.k->file, b.k->line, b.idx.x, b.idx.y, b.idx.z, g_cur->ids.thread.x,
         g_cur->ids.thread.y, g_cur->ids.thread.z, msg);
  fail("kernel %s (launched at %s:%d), block (%u,%u,%u): %s", b.k->name, b.k->file, b.k->line,
       b.idx.x, b.idx.y, b.idx.z, msg);
}

} // namespace blk

void run_block(const kernel_info &k, uint3 idx) {
  using namespace blk;
  const int n = static_cast<int>(k.block.x * k.block.y * k.block.z);
  ensure_threads(n);
  reset_block(k, idx, n);
  for (int i = 0; i < n; i++) {
    tfiber *f = g_threads[static_cast<size_t>(i)];
    unsigned u = static_cast<unsigned>(i);
    f->ids = {{u % k.block.x, (u / k.block.x) % k.block.y, u / (k.block.x * k.block.y)},
              idx, k.block, k.grid};
    f->st = T_READY;
    make_ready(i);
  }
  poison_shared();
  for (;;) {
    int i = pick();
    if (i < 0) {
      if (g_block.exited == n) break;
      deadlock();
    }
    g_cur = g_threads[static_cast<size_t>(i)];
    g_ids = &g_cur->ids;
    fiber_switch(g_sched, g_cur->ctx);
  }
  g_cur = nullptr;
  g_ids = nullptr;
}

/* ---- the block-wide switch points (pt_emu_device.h) ----------------------------------------- */

namespace {
void release_barrier() {
  blk::block_state &b = blk::g_block;
  int r = b.bkind == SYNC_OR ? b.bpred_or : b.bkind == SYNC_AND ? b.bpred_and
        : b.bkind == SYNC_COUNT ? b.bpred_count : 0;
  for (int i = 0; i < b.n; i++) {
    blk::tfiber *f = blk::g_threads[static_cast<size_t>(i)];
    if (f->st != blk::T_BARRIER) continue;
    f->st = blk::T_READY;
    f->barrier_result = r;
    blk::make_ready(i);
  }
  for (blk::warp_state &w : b.warps) w.at_barrier = 0;
  b.at_barrier = 0;
}
} // namespace

int block_sync(sync_kind kind, int pred, const char *what, const char *file, int line) {
  using namespace blk;
  tfiber &f = current(what, file, line);
  block_state &b = g_block;
  if (b.exited > 0)
    kernel_fail("reaches %s at %s:%d after %d thread(s) of the block returned: the barrier can "
                "never complete (every thread of a block must reach every barrier)",
                what, file, line, b.exited);
  if (const warp_slot *s = slot_waiting_for(f.warp, f.lane))
    kernel_fail("reaches %s at %s:%d while lanes 0x%08x of its warp wait for it in %s (mask "
                "0x%08x) at %s:%d", what, file, line, s->arrived, s->what, s->mask, s->file,
                s->line);
  if (b.at_barrier == 0) {
    b.bkind = kind, b.bwhat = what, b.bfile = file, b.bline = line;
    b.bpred_or = 0, b.bpred_and = 1, b.bpred_count = 0;
  } else if (b.bline != line || b.bkind != kind || (b.bfile != file && std::strcmp(b.bfile, file))) {
    kernel_fail("reaches %s at %s:%d while %d thread(s) wait at %s at %s:%d: the threads of a "
                "block reach different barriers (a barrier in divergent code)", what, file, line,
                b.at_barrier, b.bwhat, b.bfile, b.bline);
  }
  b.bpred_or |= pred != 0;
  b.bpred_and &= pred != 0;
  b.bpred_count += pred != 0;
  f.st = T_BARRIER;
  f.what = what, f.file = file, f.line = line;
  make_unready(f.index);
  b.warps[static_cast<size_t>(f.warp)].at_barrier |= 1u << f.lane;
  if (++b.at_barrier == b.n) release_barrier();
  switch_out();
  return f.barrier_result;
}

void atomic_point(const char *what, const char *file, int line) {
  blk::current(what, file, line);
  blk::switch_out(); /* stays ready: only lets the order pick another thread first */
}

unsigned active_mask(const char *file, int line) {
  blk::tfiber &f = blk::current("__activemask", file, line);
  const blk::warp_state &w = blk::g_block.warps[static_cast<size_t>(f.warp)];
  return w.live & ~w.exited;
}

} // namespace pt_emu
