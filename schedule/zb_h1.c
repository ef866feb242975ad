/* schedule/zb_h1.c: Zero Bubble H1 (Qi et al., ICLR 2024). The backward is split into I (the
 * input gradient, on the critical path) and W (the weight gradient, free to wait); stages run
 * 1F1B's order of forwards and I passes and put each W into the first gap, holding at most P
 * micro-batches (1F1B's peak) until their W. With unit costs the step idles (P - 1) / (3M +
 * P - 1), a third of 1F1B's bubble. */
#include "schedule/emit.h"

static int zb_h1_cap(int n_stages, int n_micro) { return n_stages < n_micro ? n_stages : n_micro; }
static int zb_h1_in_flight(int stage, int n_stages, int n_micro) {
  return zb_h1_cap(n_stages, n_micro);
}
static int zb_h1_warm(int s, int P) { return P - s; }

static void zb_h1_generate(schedule_gen *g) {
  schedule_run_zero_bubble(g, zb_h1_warm, zb_h1_cap(g->P, g->M));
}

const pt_schedule_type schedule_zb_h1 = {
    .name = "zb_h1",
    .doc = "1F1B with the backward split into I and W, each W filling a gap: a third of the bubble",
    .in_flight_doc = "P",
    .bubble_doc = "(P - 1) / (3M + P - 1), M >= P",
    .virtual_stages = 1,
    .placement = PT_PLACE_LOOP,
    .splits_backward = 1,
    .in_flight = zb_h1_in_flight,
    .generate = zb_h1_generate,
};
