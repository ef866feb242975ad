/* schedule/looped_bfs.c: looped breadth-first (Lamy-Poirier, 2023).
 * Rank r holds v chunks, r, r + P, ...; it runs every micro-batch's forward of its first
 * chunk, then of the next, then the backwards from its last chunk down, each chunk's in
 * ascending micro-batch order (torch's ScheduleLoopedBFS runs them descending; a file in that
 * order is split into I and W, schedule_file_fix.c). GPipe over v chunks: every micro-batch in
 * flight, the bubble divided by v for M >= P. */
#include "schedule/emit.h"

static int bfs_in_flight(int stage, int n_stages, int n_micro) { return n_micro; }

static void bfs_generate(schedule_gen *g) {
  for (int r = 0; r < g->P; r++) {
    for (int j = 0; j < 2 * g->v; j++) { /* chunks up with forwards, then down with backwards */
      pt_action_kind k = j < g->v ? ACT_FORWARD : ACT_BACKWARD;
      int c = schedule_local_chunk(g, r, j < g->v ? j : 2 * g->v - 1 - j);
      for (int mb = 0; mb < g->M; mb++) schedule_emit(g, r, k, c, mb);
    }
  }
}

const pt_schedule_type schedule_looped_bfs = {
    .name = "looped_bfs",
    .doc = "v chunks per rank, every forward chunk by chunk, then every backward: GPipe over "
           "chunks",
    .in_flight_doc = "all (per chunk)",
    .bubble_doc = "(P - 1) / (vM + P - 1), M >= P",
    .virtual_stages = SCHEDULE_ANY_V,
    .placement = PT_PLACE_LOOP,
    .in_flight = bfs_in_flight,
    .generate = bfs_generate,
};
