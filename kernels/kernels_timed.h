/* kernels/kernels_timed.h: a kernel table that times another, for a per-kernel breakdown of a
 * training step (bench_train; installed with device_interpose_kernels, device/device.h).
 *
 * kernels_timed_wrap fills t->table with a copy of the inner table (its name, ctx and precision,
 * the bf16 entries present or NULL as there) whose every entry calls the inner table's entry
 * with the inner table and adds to its tally: the wall time of the call (CLOCK_MONOTONIC), one
 * call, and its work from the shapes: FLOPs for the matrix products and attention, bytes for the
 * rest. The results are the inner table's, bit for bit.
 *
 * Work, in closed form (floats count 4 bytes):
 *   gemm        2 N Ni No per product (linear forward, backward input, backward weight; a
 *               fused linear+GELU call counts its product, kernels_cpu's is timed as its
 *               two calls)
 *   attention   2 B T (T + 1) d forward, twice that backward: QK^T and PV over the causal half
 *               (a document mask does less; the count does not shrink for it)
 *   others      bytes read plus bytes written, each operand once (an accumulated one twice); a
 *               gathered table (embedding, positions) counts the rows it reads
 * The time is the host's: on a device whose kernels return before they finish (a GPU) it is the
 * time to queue them. The optimizer_chunks entry reads its chunk list on the host, so the table
 * suits host-addressable devices only (cpu, emulated). One thread calls it at a time. */
#ifndef PT_KERNELS_TIMED_H
#define PT_KERNELS_TIMED_H

#include <stdint.h>

#include "kernels/kernels.h"

/* Where a kernel's time goes, in report order. */
typedef enum {
  PT_KCAT_GEMM,       /* linear products */
  PT_KCAT_ATTENTION,  /* attention forward and backward */
  PT_KCAT_NORM,       /* layernorm, rmsnorm */
  PT_KCAT_ACTIVATION, /* gelu, relu, swiglu, rope */
  PT_KCAT_LOSS,       /* loss, loss_acc */
  PT_KCAT_OPTIMIZER,  /* optimizer updates, sums of squares (grad norm), finite checks */
  PT_KCAT_OTHER,      /* copy, add, scale, colsum, embeddings, positions, bf16 rounding */
  PT_KCAT_COUNT
} pt_kernel_category;

/* Every timed entry: PT_KERNELS_ENTRIES, then the bf16 ones. */
#define PT_KT_ENUM(entry) PT_KT_##entry,
typedef enum {
  PT_KERNELS_ENTRIES(PT_KT_ENUM) PT_KT_round_bf16, PT_KT_pack_bf16, PT_KT_unpack_bf16,
  PT_KT_round_pack_bf16,
  PT_KT_COUNT
} pt_kernel_entry;

typedef struct {
  double seconds;              /* wall time inside the entry */
  double work;                 /* FLOPs or bytes (kernels_timed_counts_flops) */
  int64_t calls;
  pt_kernel_category category; /* set by the first call */
} pt_kernel_tally;

/* Its first member is the table handed out, so an entry finds the rest from its k. */
typedef struct {
  pt_kernels table;
  const pt_kernels *inner;
  pt_kernel_tally entry[PT_KT_COUNT];
} pt_kernels_timed;

/* Makes t time `inner` (tallies zeroed) and returns &t->table. Given &t->table itself (a device
 * whose set_precision changed its table in place), wraps t->inner again, taking its precision
 * and bf16 entries anew. t must outlive every use of the table. */
const pt_kernels *kernels_timed_wrap(pt_kernels_timed *t, const pt_kernels *inner);
/* Zeroes the tallies (after a warm-up). */
void kernels_timed_reset(pt_kernels_timed *t);
/* The tallies summed by category into out[PT_KCAT_COUNT]. */
void kernels_timed_by_category(const pt_kernels_timed *t, pt_kernel_tally out[PT_KCAT_COUNT]);
const char *kernels_timed_category_name(pt_kernel_category c); /* "gemm", ..., "copies/other" */
const char *kernels_timed_entry_name(pt_kernel_entry e);        /* "linear_forward", ... */
/* 1 when a category's work is FLOPs (gemm, attention), 0 when it is bytes. */
int kernels_timed_counts_flops(pt_kernel_category c);

#endif
