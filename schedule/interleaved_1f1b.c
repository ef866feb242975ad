/* schedule/interleaved_1f1b.c: Megatron's interleaved 1F1B (Narayanan et al., SC 2021). Rank r
 * holds v chunks, r, r + P, ...; micro-batches go round in groups of at least P, a group's
 * forwards chunk after chunk, its backwards the other way. After (v - 1) groups' worth of
 * forwards plus 2(P - 1 - r), the rank alternates one forward and one backward. The bubble
 * shrinks by v against 1F1B: (P - 1) / (vM + P - 1) with unit costs and M >= P. */
#include <stdlib.h>

#include "core/error.h"
#include "schedule/emit.h"

/* The groups: M / P of them (at least one), sizes as equal as possible, larger first. */
static int group_size(int P, int M, int k) {
  int groups = M / P > 0 ? M / P : 1;
  return M / groups + (k < M % groups);
}

/* Rank r's forward (dir 1) or backward (dir -1) order of (chunk, mb), into out[v * M]. */
static void rank_order(const schedule_gen *g, int r, int dir, pt_action *out) {
  int n = 0;
  for (int base = 0, k = 0; base < g->M; base += group_size(g->P, g->M, k++))
    for (int j = 0; j < g->v; j++) {
      int c = schedule_local_chunk(g, r, dir > 0 ? j : g->v - 1 - j);
      for (int mb = base; mb < base + group_size(g->P, g->M, k); mb++)
        out[n++] = (pt_action){dir > 0 ? ACT_FORWARD : ACT_BACKWARD, mb, c};
    }
}

static void interleaved_generate(schedule_gen *g) {
  int total = g->v * g->M;
  pt_action *fwd = pt_calloc((size_t)total, sizeof *fwd);
  pt_action *bwd = pt_calloc((size_t)total, sizeof *bwd);
  for (int r = 0; r < g->P; r++) {
    rank_order(g, r, 1, fwd);
    rank_order(g, r, -1, bwd);
    int warm = g->v == 1 ? g->P - 1 - r
                         : (g->v - 1) * group_size(g->P, g->M, 0) + 2 * (g->P - 1 - r);
    int f = 0;
    for (; f < warm && f < total; f++) schedule_emit(g, r, fwd[f].kind, fwd[f].chunk, fwd[f].mb);
    for (int b = 0; b < total; b++) {
      if (f < total) schedule_emit(g, r, fwd[f].kind, fwd[f].chunk, fwd[f].mb), f++;
      schedule_emit(g, r, bwd[b].kind, bwd[b].chunk, bwd[b].mb);
    }
  }
  free(fwd), free(bwd);
}

static int interleaved_in_flight(int stage, int n_stages, int n_micro);

const pt_schedule_type schedule_interleaved_1f1b = {
    .name = "interleaved_1f1b",
    .doc = "v chunks per rank (pipeline.virtual_stages), 1F1B over them: the bubble divided by v",
    .in_flight_doc = "P - stage (v = 1; more with v > 1)",
    .bubble_doc = "(P - 1) / (vM + P - 1), M >= P",
    .virtual_stages = SCHEDULE_ANY_V,
    .placement = PT_PLACE_LOOP,
    .in_flight = interleaved_in_flight,
    .generate = interleaved_generate,
};

static int interleaved_in_flight(int stage, int n_stages, int n_micro) {
  return schedule_measure_in_flight(&schedule_interleaved_1f1b, stage, n_stages, n_micro);
}
