/* schedule/v_half.c: V-Half (Qi et al., "Pipeline Parallelism with Controllable Memory",
 * NeurIPS 2024). Like v_min.c, one block per micro-batch every 6 unit passes on every rank of a
 * V, but the forward goes down two passes per rank and the I comes back up two per rank: rank
 * r's down chunk lives about 6P - 3r passes and its up chunk about 3r, so a rank holds at most
 * P + 2 micro-batches of its two half-stage chunks, half of 1F1B's 2P. Idle: (7P - 7 + h) / 2
 * passes of the fill and the drain (h = 3 for even P, the gap that keeps the block's passes
 * apart), once 2M > P. */
#include "schedule/emit.h"

/* F down at 2r, F up on the way back, I up from rank 0 two per rank, I down back. */
static void v_half_block(int r, int P, int t[V_PASSES]) {
  int gap = P % 2 == 0 ? 3 : 0;
  t[V_F_DOWN] = 2 * r;
  t[V_F_UP] = 3 * P - 2 - r;
  t[V_I_UP] = 3 * P + gap - 1 + 2 * r;
  t[V_I_DOWN] = 6 * P + gap - 2 - r;
}

static int v_half_in_flight(int stage, int n_stages, int n_micro) {
  return schedule_v_block_in_flight(v_half_block, stage, n_stages, n_micro);
}

static void v_half_generate(schedule_gen *g) { schedule_run_v_block(g, v_half_block); }

const pt_schedule_type schedule_v_half = {
    .name = "v_half",
    .doc = "two chunks per rank in a V, I and W split, one block repeated: half of 1F1B's "
           "activations, about 3/5 of its bubble",
    .in_flight_doc = "at most P + 2 chunk",
    .bubble_doc = "(7P - 7 + h) / (12M + 7P - 7 + h), h = 3 for even P, else 0; 2M > P",
    .virtual_stages = 2,
    .placement = PT_PLACE_V,
    .splits_backward = 1,
    .in_flight = v_half_in_flight,
    .generate = v_half_generate,
};
