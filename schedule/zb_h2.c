/* schedule/zb_h2.c: Zero Bubble H2 (Qi et al., ICLR 2024). Like zb_h1, with 2(P - s) - 1
 * warm-up forwards on stage s, so the start of the pipeline fills with forwards and its end
 * with W passes, holding up to 2P - 1 micro-batches. With the optimizer step synchronous it
 * idles only the unavoidable (P - 1) forwards of the first micro-batch's way down, whatever
 * W costs. */
#include "schedule/emit.h"

static int zb_h2_cap(int n_stages, int n_micro) {
  return 2 * n_stages - 1 < n_micro ? 2 * n_stages - 1 : n_micro;
}
static int zb_h2_in_flight(int stage, int n_stages, int n_micro) {
  return zb_h2_cap(n_stages, n_micro);
}
static int zb_h2_warm(int s, int P) { return 2 * (P - s) - 1; }

static void zb_h2_generate(schedule_gen *g) {
  schedule_run_zero_bubble(g, zb_h2_warm, zb_h2_cap(g->P, g->M));
}

const pt_schedule_type schedule_zb_h2 = {
    .name = "zb_h2",
    .doc = "zb_h1 with 2(P - s) - 1 warm-up forwards: no bubble but the first forward's way down",
    .in_flight_doc = "2P - 1",
    .bubble_doc = "(P - 1) / (3M + P - 1), M >= P",
    .virtual_stages = 1,
    .placement = PT_PLACE_LOOP,
    .splits_backward = 1,
    .in_flight = zb_h2_in_flight,
    .generate = zb_h2_generate,
};
