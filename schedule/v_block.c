/* schedule/v_block.c: V schedules from one repeating block (schedule/emit.h:
 * schedule_run_v_block), what v_half.c and v_min.c are built from. */
#include "schedule/emit.h"

#define V_PERIOD 6 /* a micro-batch's six passes of unit cost on a rank */

static int residue(int t) { return t % V_PERIOD; }

/* The first time after `after` whose residue no pass of t[0 .. n) has. */
static int first_free(const int *t, int n, int after) {
  for (int x = after + 1;; x++) {
    int taken = 0;
    for (int j = 0; j < n; j++) taken |= residue(t[j]) == residue(x);
    if (!taken) return x;
  }
}

void schedule_v_block_times(schedule_v_block block, int r, int P, int t[V_PASSES]) {
  block(r, P, t);
  t[V_W_UP] = first_free(t, V_W_UP, t[V_I_UP]);
  t[V_W_DOWN] = first_free(t, V_W_DOWN, t[V_I_DOWN]);
}

void schedule_run_v_block(schedule_gen *g, schedule_v_block block) {
  static const pt_action_kind kind[V_PASSES] = {ACT_FORWARD, ACT_FORWARD, ACT_BACKWARD_INPUT,
                                                ACT_BACKWARD_INPUT, ACT_BACKWARD_WEIGHT,
                                                ACT_BACKWARD_WEIGHT};
  for (int r = 0; r < g->P; r++) {
    int t[V_PASSES], end = 0, down = r, up = 2 * g->P - 1 - r;
    schedule_v_block_times(block, r, g->P, t);
    for (int j = 0; j < V_PASSES; j++) end = t[j] > end ? t[j] : end;
    end += V_PERIOD * (g->M - 1);
    for (int x = 0; x <= end; x++)
      for (int j = 0; j < V_PASSES; j++) {
        int k = (x - t[j]) / V_PERIOD;
        if (x >= t[j] && residue(x - t[j]) == 0 && k < g->M)
          schedule_emit(g, r, kind[j], j == V_F_DOWN || j == V_I_DOWN || j == V_W_DOWN ? down : up,
                        k);
      }
  }
}

static int held(int from, int to, int M) {
  int n = (to - from) / V_PERIOD + 1;
  return n < M ? n : M;
}

int schedule_v_block_in_flight(schedule_v_block block, int r, int P, int M) {
  int t[V_PASSES];
  schedule_v_block_times(block, r, P, t);
  return held(t[V_F_DOWN], t[V_W_DOWN], M) + held(t[V_F_UP], t[V_W_UP], M);
}
