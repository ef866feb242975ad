/* schedule/gpipe.c: GPipe. Every micro-batch stays in flight until the backwards start. */
#include "schedule/emit.h"

static int gpipe_in_flight(int stage, int n_stages, int n_micro) { return n_micro; }

static void gpipe_generate(schedule_gen *g) {
  for (int r = 0; r < g->P; r++) {
    for (int mb = 0; mb < g->M; mb++) schedule_emit(g, r, ACT_FORWARD, r, mb);
    for (int mb = 0; mb < g->M; mb++) schedule_emit(g, r, ACT_BACKWARD, r, mb);
  }
}

const pt_schedule_type schedule_gpipe = {
    .name = "gpipe",
    .doc = "every forward, then every backward: each stage keeps all M micro-batches",
    .in_flight_doc = "all",
    .bubble_doc = "(P - 1) / (M + P - 1)",
    .virtual_stages = 1,
    .placement = PT_PLACE_LOOP,
    .in_flight = gpipe_in_flight,
    .generate = gpipe_generate,
};
