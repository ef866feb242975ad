/* schedule/v_min.c: V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory",
 * NeurIPS 2024). Two chunks per rank in a V (rank r holds chunks r and 2P - 1 - r), the
 * backward split into I and W, every rank repeating one block per micro-batch every 6 unit
 * passes (schedule/emit.h: schedule_run_v_block). In the block the forward goes down and back
 * up one rank per pass, the I right behind it: rank r's down chunk lives about 4P - 2r passes
 * and its up chunk about 2r, so a rank holds at most floor(2P / 3) + 3 micro-batches of its two
 * half-stage chunks, a third of 1F1B's 2P as P grows. The fill and the drain leave the rest of
 * a block's way idle: 4P - 5 passes of a step of 6M + 4P - 5 (2 more when 3 divides P, the gap
 * that keeps the block's passes apart), for P, M >= 2. */
#include "schedule/emit.h"

/* F down at r, F up on the way back, I up from rank 0 at 2P + gap, I down back. */
static void v_min_block(int r, int P, int t[V_PASSES]) {
  int gap = P % 3 == 0 ? 2 : 0;
  t[V_F_DOWN] = r;
  t[V_F_UP] = 2 * P - 1 - r;
  t[V_I_UP] = 2 * P + gap + r;
  t[V_I_DOWN] = 4 * P + gap - 1 - r;
}

static int v_min_in_flight(int stage, int n_stages, int n_micro) {
  return schedule_v_block_in_flight(v_min_block, stage, n_stages, n_micro);
}

static void v_min_generate(schedule_gen *g) { schedule_run_v_block(g, v_min_block); }

const pt_schedule_type schedule_v_min = {
    .name = "v_min",
    .doc = "two chunks per rank in a V, I and W split, one block repeated: a third of 1F1B's "
           "activations, two thirds of its bubble",
    .in_flight_doc = "at most 2P/3 + 3 chunk",
    .bubble_doc = "(4P - 5 + g) / (6M + 4P - 5 + g), g = 2 where 3 divides P, else 0; P, M >= 2",
    .virtual_stages = 2,
    .placement = PT_PLACE_V,
    .splits_backward = 1,
    .in_flight = v_min_in_flight,
    .generate = v_min_generate,
};
