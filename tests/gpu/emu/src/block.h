/* tests/gpu/emu/src/block.h: one block of a kernel, its threads run as fibers on the calling OS
 * thread (block.cpp: the scheduler, barriers, exits; warp.cpp: warp operations).
 *
 * A thread runs until it reaches a switch point (a barrier, a warp operation, an atomic) or
 * returns; the scheduler then picks the next thread in the order PT_EMU_ORDER names:
 *   inorder  round robin upwards from the thread after the last one run
 *   reverse  the same downwards
 *   random   any ready thread (seeded)
 *   warp     the lanes of one warp, in order, as far as they can go; then a random other warp
 * Blocks run one after another, never interleaved, so a __shared__ static is the block's own. */
#ifndef PT_EMU_BLOCK_H
#define PT_EMU_BLOCK_H

#include <cstdint>
#include <vector>

#include "cuda_runtime.h"
#include "fiber.h"
#include "internal.h"

namespace pt_emu {

struct kernel_info {
  const char *name, *file; /* the kernel and its launch site */
  int line;
  void (*body)(void *);    /* calls the kernel with the launch's arguments */
  void *call;
  dim3 grid, block;
};

/* Runs every thread of block idx to completion; a broken rule ends the process (fail). */
void run_block(const kernel_info &k, uint3 idx);

namespace blk {

enum tstate : unsigned char { T_READY, T_BARRIER, T_WARP, T_DONE };

struct tfiber {
  fiber ctx;
  thread_ids ids;
  int index, warp, lane;
  tstate st;
  const char *what, *file; /* where it waits */
  int line;
  uint64_t result;         /* of its last warp operation */
  int barrier_result;      /* of its last __syncthreads_or/and/count */
};

/* A warp operation some lanes of a warp have reached and the rest of its mask has not. in and
 * param are written by each lane as it arrives and read only for the lanes of mask: left
 * uninitialised (a constructor of its own), since clearing them cost a tenth of the emulator's
 * time in the kernels' warp reductions. */
struct warp_slot {
  int kind, width;
  unsigned mask, arrived;
  const char *what, *file;
  int line;
  uint64_t in[32];
  int param[32];
  warp_slot() {}
};

struct warp_state {
  unsigned live;       /* lanes that exist (a block's last warp may be partial) */
  unsigned exited;     /* lanes that have returned */
  unsigned at_barrier; /* lanes waiting at the block's barrier */
  std::vector<warp_slot> pending;
};

struct block_state {
  const kernel_info *k;
  uint3 idx;
  int n, exited;
  int at_barrier; /* threads waiting at the current barrier */
  int bkind, bpred_or, bpred_and, bpred_count, bline;
  const char *bwhat, *bfile;
  std::vector<warp_state> warps;
  std::vector<int> ready, pos, warp_ready; /* the ready threads; pos -1: not ready */
  thread_order order;                      /* PT_EMU_ORDER */
  int cursor, cur_warp, lane_cursor;
};

extern block_state g_block;
extern std::vector<tfiber *> &g_threads; /* g_threads[i]: thread i of the running block */
extern tfiber *g_cur;                   /* the running thread */

/* The running thread, or the process ends: what was called from host code. */
tfiber &current(const char *what, const char *file, int line);
void make_ready(int i);
void make_unready(int i);
/* A switch point: the next thread in the order runs (this one again, if it is ready and next);
 * returns when this thread is picked again. */
void switch_out();
/* fail() with the kernel, its launch site, the block and the running thread named first. */
[[noreturn]] void kernel_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The lanes of warp w waiting in a warp operation whose mask includes lane l, or nullptr. */
const warp_slot *slot_waiting_for(int w, int l);

} // namespace blk
} // namespace pt_emu

#endif
