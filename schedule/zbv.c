/* schedule/zbv.c: Zero Bubble V (Qi et al., ICLR 2024, section 6). Two chunks per rank in a V
 * (rank r holds chunks r and 2P - 1 - r), the backward split into I and W. Every rank takes
 * whatever is ready, a forward first, then an I, then a W, the oldest micro-batch first,
 * holding at most 2P chunk micro-batches in flight at once: 1F1B's activation memory, as each
 * chunk is half a stage (the slots, each chunk's own peak, add up to at most 2P + P/2 + 1).
 * With unit costs it idles only the first forward's way down, (P - 1) / (6M + P - 1), for
 * M >= 2P - 1. */
#include "schedule/emit.h"

static void zbv_generate(schedule_gen *g) {
  schedule_policy p = {.rank_cap = 2 * g->P, .split = 1};
  schedule_list_run(g, &p);
}

static int zbv_in_flight(int stage, int n_stages, int n_micro);

const pt_schedule_type schedule_zbv = {
    .name = "zbv",
    .doc = "two chunks per rank in a V, I and W split, greedy within 1F1B's memory: no bubble but "
           "the fill",
    .in_flight_doc = "about 2P chunk",
    .bubble_doc = "(P - 1) / (6M + P - 1), M >= 2P - 1",
    .virtual_stages = 2,
    .placement = PT_PLACE_V,
    .splits_backward = 1,
    .in_flight = zbv_in_flight,
    .generate = zbv_generate,
};

static int zbv_in_flight(int stage, int n_stages, int n_micro) {
  return schedule_measure_in_flight(&schedule_zbv, stage, n_stages, n_micro);
}
