/* schedule/dualpipev.c: DualPipeV, the V-shaped form of DeepSeek's DualPipe (DeepSeek-V3
 * report, 2024). Two chunks per rank in a V: rank r holds d = r (on the way down) and
 * u = 2P - 1 - r (on the way up). After filling the V, every rank pairs the forward of one
 * micro-batch with the backward of another, on the other chunk (F d, B u, F u, B d), so that
 * on hardware the two can overlap each other's communication. The up chunk's first backwards
 * and the second half of the drain are split into I and W, the W passes filling the gaps.
 * Needs M >= 2P. */
#include <stdlib.h>

#include "core/error.h"
#include "schedule/emit.h"

typedef struct {
  schedule_list *l;
  int next[2][2]; /* [down, up][forward, backward]: the next micro-batch */
  int chunk[2];
} dp_rank;

static void put(dp_rank *x, int side, pt_action_kind kind) {
  int *n = &x->next[side][kind != ACT_FORWARD];
  schedule_list_push(x->l, (pt_action){kind, (*n)++, x->chunk[side]}, x->l->n);
}

/* Rank r's forwards and backwards, phase by phase (counts add up to M per chunk and kind). */
static void dp_order(dp_rank *x, int r, int P, int M) {
  enum { D, U };
  for (int i = 0; i < 2 * (P - 1 - r); i++) put(x, D, ACT_FORWARD);
  for (int i = 0; i < r + 1; i++) put(x, D, ACT_FORWARD), put(x, U, ACT_FORWARD);
  for (int i = 0; i < P - 1 - r; i++) put(x, U, ACT_BACKWARD_INPUT), put(x, U, ACT_FORWARD);
  for (int i = 0; i < M - 2 * P + r + 1; i++) { /* the pairs: F d with B u, F u with B d */
    put(x, D, ACT_FORWARD), put(x, U, ACT_BACKWARD);
    put(x, U, ACT_FORWARD), put(x, D, ACT_BACKWARD);
  }
  for (int i = 0; i < P - 1 - r; i++)
    put(x, U, ACT_BACKWARD), put(x, U, ACT_FORWARD), put(x, D, ACT_BACKWARD);
  /* the drain: backwards of both chunks, switching to I half way (the W passes fill it) */
  pt_action_kind k = ACT_BACKWARD;
  for (int i = 0; i < r + 1; i++) {
    if (i == (r + 1) / 2 && r % 2 == 1) k = ACT_BACKWARD_INPUT;
    put(x, U, k);
    if (i == (r + 1) / 2 && r % 2 == 0) k = ACT_BACKWARD_INPUT;
    put(x, D, k);
  }
  for (int i = 0; i < P - 1 - r; i++) put(x, D, k);
}

static void dualpipev_generate(schedule_gen *g) {
  schedule_list *order = pt_calloc((size_t)g->P, sizeof *order);
  for (int r = 0; r < g->P; r++) {
    dp_rank x = {.l = &order[r], .chunk = {r, 2 * g->P - 1 - r}};
    dp_order(&x, r, g->P, g->M);
  }
  schedule_policy p = {.order = order};
  schedule_list_run(g, &p);
  for (int r = 0; r < g->P; r++) schedule_list_free(&order[r]);
  free(order);
}

static int dualpipev_min_micro(int n_ranks) { return 2 * n_ranks; }
static int dualpipev_in_flight(int stage, int n_stages, int n_micro);

const pt_schedule_type schedule_dualpipev = {
    .name = "dualpipev",
    .doc = "two chunks per rank in a V, the forward of one micro-batch paired with the backward "
           "of another",
    .in_flight_doc = "3P chunk",
    .bubble_doc = "(P - 1) / (6M + P - 1)",
    .virtual_stages = 2,
    .placement = PT_PLACE_V,
    .splits_backward = 1,
    .min_micro = dualpipev_min_micro,
    .min_micro_doc = "2P",
    .in_flight = dualpipev_in_flight,
    .generate = dualpipev_generate,
};

static int dualpipev_in_flight(int stage, int n_stages, int n_micro) {
  return schedule_measure_in_flight(&schedule_dualpipev, stage, n_stages, n_micro);
}
