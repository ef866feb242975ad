/* schedule/emit.h: what schedule generators (gpipe.c, zb_h1.c, ...) write every rank's compute
 * order with, and what the builder turns it into full action lists with. Private to schedule/:
 * the rest of the code sees finished lists (schedule.h).
 *
 * A generator writes only FORWARD, BACKWARD, BACKWARD_INPUT and BACKWARD_WEIGHT actions, per
 * rank, in the order the rank runs them: directly (schedule_emit), or by giving each rank's
 * forwards and backwards in order and letting schedule_list_run place them in time with unit
 * costs (F = I = W = 1, B = 2, communication free), W passes filling the idle time. The builder
 * adds the transfers, loads and step-end reductions (schedule_lower).
 */
#ifndef PT_SCHEDULE_EMIT_H
#define PT_SCHEDULE_EMIT_H

#include "schedule/registry.h"
#include "schedule/schedule.h"

/* A growing action list; src[i]: where action i came from, which the builder carries onto the
 * actions it derives (a generator's running index; a schedule file's line, for messages). */
typedef struct {
  pt_action *a;
  int *src;
  int n, cap;
} schedule_list;

struct schedule_gen {
  int P, v, C, M;        /* ranks, chunks per rank, chunks, micro-batches of a step */
  const int *chunk_rank; /* [chunk] */
  schedule_list *rank;   /* [rank]: the compute order being written */
};

void schedule_list_push(schedule_list *l, pt_action a, int src);
void schedule_list_free(schedule_list *l);

/* Appends (kind, chunk, mb) to rank r's compute order. */
void schedule_emit(schedule_gen *g, int r, pt_action_kind kind, int chunk, int mb);
/* The c-th chunk (0 .. v-1) that rank r holds, in model order. */
int schedule_local_chunk(const schedule_gen *g, int r, int c);

/* Appends to l the 1F1B order of one chunk: `warm` forwards, then one backward (bwd: B or I)
 * and one forward in turn, then the remaining backwards. */
void schedule_order_1f1b(schedule_list *l, int chunk, int M, int warm, pt_action_kind bwd);

/* How schedule_list_run places actions in time. */
typedef struct {
  /* [rank]: its forwards and B or I backwards in order (each chunk's in ascending
   * micro-batch order); NULL: every rank picks among its ready actions, forward first, then
   * I, then W, the lowest micro-batch first, the later chunk first. */
  const schedule_list *order;
  int chunk_cap; /* a forward waits while this many of its chunk are in flight; 0: no cap */
  int rank_cap;  /* the same over the rank's chunks; 0: no cap */
  int split;     /* with order NULL: I and W instead of B */
} schedule_policy;

/* Runs every rank's actions with unit costs under policy p, each as soon as it is ready (its
 * inputs done, its in-flight cap not reached), a W (oldest I first) whenever the next one is
 * not, and appends the resulting order to g. pt_fatal when the policy cannot finish (a
 * generator bug: the tests run every layout). */
void schedule_list_run(schedule_gen *g, const schedule_policy *p);

/* Zero-bubble stages: on every stage s the 1F1B order with I for B and warm(s, P) forwards
 * first, W passes filling the gaps, at most cap micro-batches in flight per stage. */
void schedule_run_zero_bubble(schedule_gen *g, int (*warm)(int s, int P), int cap);

/* A V schedule built from one repeating block (Qi et al., NeurIPS 2024: V-Half, V-Min). On
 * rank r, micro-batch k's six passes run at time t[j] + 6k with unit costs (F = I = W = 1):
 * t[V_F_DOWN] the forward of the down chunk r, then the up chunk 2P - 1 - r's forward, its I,
 * the down chunk's I; the first four come from the entry, their residues mod 6 distinct. The
 * W passes take the two residues left: the up chunk's W the first after its I, the down
 * chunk's the next one after its own I. */
enum { V_F_DOWN, V_F_UP, V_I_UP, V_I_DOWN, V_W_UP, V_W_DOWN, V_PASSES };
typedef void (*schedule_v_block)(int r, int P, int t[V_PASSES]);
/* Rank r's block with its W times filled in. */
void schedule_v_block_times(schedule_v_block block, int r, int P, int t[V_PASSES]);
/* Every rank's passes in the order of their block times (no two coincide). */
void schedule_run_v_block(schedule_gen *g, schedule_v_block block);
/* The activation slots of rank r's two chunks, closed form: a chunk holds micro-batch k from
 * its forward to its W, so min(M, floor((t_W - t_F) / 6) + 1) of them at once. */
int schedule_v_block_in_flight(schedule_v_block block, int r, int P, int M);

/* Turns g's compute orders into s's full lists: with `transfers`, the receives, sends and
 * loads each action needs (none between chunks on one rank); with `step_end`, FLUSH (the held
 * sends out), the reductions and the optimizer. Receives, added or already in the lists, are
 * posted as early as their buffers allow. Fills n_slots and n_w_pending from the orders.
 * Takes the lists from g. */
void schedule_lower(pt_schedule *s, schedule_gen *g, int transfers, int step_end);
/* Allocates s for P ranks, v chunks each, M micro-batches under a placement. */
void schedule_alloc(pt_schedule *s, int P, int v, int M, pt_placement placement);

#endif
