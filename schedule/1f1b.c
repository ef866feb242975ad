/* schedule/1f1b.c: one forward, one backward. A stage starts a micro-batch's backward as soon
 * as the later stages have returned its gradient, so it never holds more than the stages
 * from it to the last. */
#include "schedule/emit.h"

static int f1b_in_flight(int stage, int n_stages, int n_micro) {
  int k = n_stages - stage;
  return k < n_micro ? k : n_micro;
}

/* P - s - 1 warm-up forwards fill the pipeline below this stage, then one forward and one
 * backward alternate, then the remaining backwards drain it. */
static void f1b_generate(schedule_gen *g) {
  int warm = g->P - g->s - 1 < g->M ? g->P - g->s - 1 : g->M;
  for (int mb = 0; mb < warm; mb++) schedule_emit_forward(g, mb);
  for (int i = 0; i < g->M - warm; i++) {
    schedule_emit_forward(g, warm + i);
    schedule_emit_backward(g, i);
  }
  for (int mb = g->M - warm; mb < g->M; mb++) schedule_emit_backward(g, mb);
}

const pt_schedule_type schedule_1f1b = {
    .name = "1f1b",
    .doc = "P - s - 1 warm-up forwards on stage s, then one forward and one backward in turn",
    .in_flight_doc = "P - stage",
    .in_flight = f1b_in_flight,
    .generate = f1b_generate,
};
