/* schedule/1f1b.c: one forward, one backward. A stage starts a micro-batch's backward as soon
 * as the later stages have returned its gradient, so it never holds more than the stages
 * from it to the last. */
#include "schedule/emit.h"

static int f1b_in_flight(int stage, int n_stages, int n_micro) {
  int k = n_stages - stage;
  return k < n_micro ? k : n_micro;
}

/* P - s - 1 warm-up forwards fill the pipeline below stage s, then one forward and one
 * backward alternate, then the remaining backwards drain it. */
static void f1b_generate(schedule_gen *g) {
  for (int s = 0; s < g->P; s++) schedule_order_1f1b(&g->rank[s], s, g->M, g->P - s, ACT_BACKWARD);
}

const pt_schedule_type schedule_1f1b = {
    .name = "1f1b",
    .doc = "P - s - 1 warm-up forwards on stage s, then one forward and one backward in turn",
    .in_flight_doc = "P - stage",
    .bubble_doc = "(P - 1) / (M + P - 1)",
    .virtual_stages = 1,
    .placement = PT_PLACE_LOOP,
    .in_flight = f1b_in_flight,
    .generate = f1b_generate,
};
