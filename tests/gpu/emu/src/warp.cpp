/* Warp operations (shuffles, votes, __syncwarp) between the fibers of a block (block.h).
 *
 * A lane that calls one deposits its value and waits until every lane of the mask has called
 * the same operation with the same mask; the last one to arrive computes every lane's result.
 * What CUDA leaves undefined ends the process instead: a mask without the caller, naming lanes
 * that do not exist or have returned or wait at a barrier, lanes whose masks overlap but
 * differ, a different operation under the same mask, an offset outside the segment, a source
 * lane outside the mask. */
#include <cstring>

#include "block.h"
#include "internal.h"

namespace pt_emu {

namespace blk {
const warp_slot *slot_waiting_for(int w, int l) {
  for (const warp_slot &s : g_block.warps[static_cast<size_t>(w)].pending)
    if (s.mask & (1u << l)) return &s;
  return nullptr;
}
} // namespace blk

namespace {
using blk::kernel_fail;

bool is_shuffle(int kind) { return kind == W_IDX || kind == W_XOR || kind == W_DOWN || kind == W_UP; }

/* The rules checked when a lane calls (see the top of the file). */
void check_call(const blk::tfiber &f, warp_kind kind, unsigned mask, int param, int width,
                const char *what, const char *file, int line) {
  const blk::warp_state &w = blk::g_block.warps[static_cast<size_t>(f.warp)];
  if (!(mask & (1u << f.lane)))
    kernel_fail("%s at %s:%d with mask 0x%08x, which does not include the calling lane %d",
                what, file, line, mask, f.lane);
  if (mask & ~w.live)
    kernel_fail("%s at %s:%d: mask 0x%08x names lanes 0x%08x that do not exist in a block of %d "
                "threads", what, file, line, mask, mask & ~w.live, blk::g_block.n);
  if (mask & w.exited)
    kernel_fail("%s at %s:%d: mask 0x%08x names lanes 0x%08x that have returned", what, file, line,
                mask, mask & w.exited);
  if (unsigned waiting = mask & w.at_barrier) {
    const blk::tfiber *o = blk::g_threads[static_cast<size_t>(f.warp * 32 + __builtin_ctz(waiting))];
    kernel_fail("%s at %s:%d: mask 0x%08x names lane %d, which waits at %s (%s:%d)", what, file,
                line, mask, o->lane, o->what, o->file, o->line);
  }
  if (!is_shuffle(kind)) return;
  if (width < 1 || width > 32 || (width & (width - 1)))
    kernel_fail("%s at %s:%d: width %d is not a power of two from 1 to 32", what, file, line, width);
  if (kind != W_IDX && (param < 0 || param >= width))
    kernel_fail("%s at %s:%d: offset %d out of range [0, %d)", what, file, line, param, width);
}

/* The pending operation this lane joins, or a new one. */
blk::warp_slot &join(const blk::tfiber &f, warp_kind kind, unsigned mask, int width,
                     const char *what, const char *file, int line) {
  std::vector<blk::warp_slot> &pending = blk::g_block.warps[static_cast<size_t>(f.warp)].pending;
  for (blk::warp_slot &s : pending) {
    if (!(s.mask & mask)) continue;
    if (s.mask != mask)
      kernel_fail("%s at %s:%d with mask 0x%08x while lanes 0x%08x wait in %s with mask 0x%08x "
                  "(%s:%d): the masks of one warp operation differ", what, file, line, mask,
                  s.arrived, s.what, s.mask, s.file, s.line);
    if (s.kind != kind || s.width != width)
      kernel_fail("%s at %s:%d while lanes 0x%08x of the same mask wait in %s (%s:%d): different "
                  "warp operations", what, file, line, s.arrived, s.what, s.file, s.line);
    return s;
  }
  blk::warp_slot &s = pending.emplace_back();
  s.kind = kind, s.width = width, s.mask = mask, s.arrived = 0;
  s.what = what, s.file = file, s.line = line;
  return s;
}

/* The lane lane reads from in a shuffle, -1 for its own value (outside its segment). */
int source_lane(const blk::warp_slot &s, int lane) {
  const int base = lane & ~(s.width - 1), p = s.param[lane];
  int src = lane;
  switch (s.kind) {
  case W_IDX: src = base + (p & (s.width - 1)); break;
  case W_XOR: src = lane ^ p; break;
  case W_DOWN: src = lane + p; break;
  case W_UP: src = lane - p; break;
  }
  return src < base || src >= base + s.width ? -1 : src;
}

/* The last lane arrived: everyone's result, and the waiting lanes are ready again. */
void complete(int w, size_t slot_index) {
  std::vector<blk::warp_slot> &pending = blk::g_block.warps[static_cast<size_t>(w)].pending;
  const blk::warp_slot &s = pending[slot_index];
  uint64_t vote = 0;
  int all = 1;
  for (int l = 0; l < 32; l++)
    if (s.mask & (1u << l)) {
      vote |= s.in[l] ? 1ull << l : 0;
      all &= s.in[l] != 0;
    }
  for (int l = 0; l < 32; l++) {
    if (!(s.mask & (1u << l))) continue;
    blk::tfiber *f = blk::g_threads[static_cast<size_t>(w * 32 + l)];
    uint64_t r = 0;
    if (is_shuffle(s.kind)) {
      int src = source_lane(s, l);
      if (src >= 0 && !(s.mask & (1u << src)))
        kernel_fail("%s at %s:%d: lane %d reads lane %d, which is not in the mask 0x%08x", s.what,
                    s.file, s.line, l, src, s.mask);
      r = s.in[src >= 0 ? src : l];
    } else if (s.kind == W_BALLOT) {
      r = vote;
    } else if (s.kind == W_ANY) {
      r = vote != 0;
    } else if (s.kind == W_ALL) {
      r = static_cast<uint64_t>(all);
    }
    f->result = r;
    if (f->st == blk::T_WARP) {
      f->st = blk::T_READY;
      blk::make_ready(f->index);
    }
  }
  pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(slot_index));
}
} // namespace

uint64_t warp_op(warp_kind kind, unsigned mask, uint64_t bits, int param, int width,
                 const char *what, const char *file, int line) {
  blk::tfiber &f = blk::current(what, file, line);
  check_call(f, kind, mask, param, width, what, file, line);
  blk::warp_slot &s = join(f, kind, mask, width, what, file, line);
  s.in[f.lane] = bits;
  s.param[f.lane] = param;
  s.arrived |= 1u << f.lane;
  if (s.arrived == mask) {
    std::vector<blk::warp_slot> &pending = blk::g_block.warps[static_cast<size_t>(f.warp)].pending;
    complete(f.warp, static_cast<size_t>(&s - pending.data()));
  } else {
    f.st = blk::T_WARP;
    f.what = what, f.file = file, f.line = line;
    blk::make_unready(f.index);
  }
  blk::switch_out(); /* a switch point either way: the order decides who goes on first */
  return f.result;
}

} // namespace pt_emu
