/* The NCCL check with the step end's reductions (schedule.h: schedule_check_rendezvous_in):
 * tied and data-parallel sums are rendezvous of their own groups, on their own communicators,
 * and do not issue the sends the transport holds back; only a wait or a FLUSH does.
 *   - every registered schedule, P = 2, 3, 4, passes with a tie group over the first and the
 *     last rank, with data parallelism, with both, and under "any layout" (NULL);
 *   - the same schedules without their FLUSH (the lowering before it existed) are refused: a
 *     deadlock with the tie (the last rank blocked in TIE with its last gradient held while
 *     rank 0 waits for it), a held send at DP with replicas, each in one line that says so;
 *     with several chunks per rank (a stream per link, nothing held) they still pass;
 *   - FLUSH in the structure: anywhere before OPT, not after it.
 * Usage: test_schedule_reduce. */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"
#include "test_util.h"

/* A layout of P ranks: a tie group over ranks 0 and P - 1 (ties), dp replicas. */
typedef struct {
  unsigned char tie[64];
  pt_sched_reductions red;
} layout;

static const pt_sched_reductions *make_layout(layout *l, int P, int ties, int dp) {
  memset(l, 0, sizeof *l);
  l->tie[0] = l->tie[P - 1] = 1;
  l->red = (pt_sched_reductions){.n_ties = ties, .tie = l->tie, .dp = dp};
  return &l->red;
}

/* s without its FLUSH actions: what the builder emitted before FLUSH existed. */
static void drop_flush(pt_schedule *s) {
  for (int r = 0; r < s->n_ranks; r++) {
    int n = 0;
    for (int i = 0; i < s->n_acts[r]; i++)
      if (s->acts[r][i].kind != ACT_FLUSH) s->acts[r][n++] = s->acts[r][i];
    s->n_acts[r] = n;
  }
}

static int has_flush_before_tie(const pt_schedule *s, int r) {
  int n = s->n_acts[r];
  return n >= 4 && s->acts[r][n - 4].kind == ACT_FLUSH && s->acts[r][n - 3].kind == ACT_REDUCE_TIED;
}

/* Schedule t, P ranks, its own chunks (2 where it takes any), M micro-batches: passes every
 * layout as built; without FLUSH, one chunk per rank fails with the tie and with replicas. */
static void check_type(const pt_schedule_type *t, int P, int M) {
  int v = t->virtual_stages == SCHEDULE_ANY_V ? (M % 2 ? 1 : 2) : t->virtual_stages;
  pt_schedule s;
  char err[1024] = "";
  if (schedule_build_v(&s, t, P, v, M, err, sizeof err) != 0) return; /* below its minimum */
  layout l;
  const pt_sched_reductions *lays[4] = {make_layout(&l, P, 1, 1), NULL, NULL, NULL};
  layout l2, l3;
  lays[1] = make_layout(&l2, P, 0, 2), lays[2] = make_layout(&l3, P, 1, 2);
  for (int r = 0; r < P; r++)
    CHECK(has_flush_before_tie(&s, r), "%s P=%d M=%d rank %d: no FLUSH before TIE", t->name, P,
          M, r);
  for (int k = 0; k < 4; k++)
    CHECK(schedule_check_rendezvous_in(&s, lays[k], NULL, err, sizeof err) == 0,
          "%s P=%d v=%d M=%d layout %d: %s", t->name, P, v, M, k, err);
  drop_flush(&s);
  int chunked = s.n_chunks > P;
  int tie_rc = schedule_check_rendezvous_in(&s, lays[0], NULL, err, sizeof err);
  CHECK(chunked ? tie_rc == 0 : tie_rc != 0 && strstr(err, "deadlock") &&
            strstr(err, "waits in TIE") && strstr(err, "held back") && strstr(err, "FLUSH"),
        "%s P=%d v=%d M=%d without FLUSH, tie over ranks 0 and %d: rc %d '%s'", t->name, P, v,
        M, P - 1, tie_rc, err);
  int dp_rc = schedule_check_rendezvous_in(&s, lays[1], NULL, err, sizeof err);
  CHECK(chunked ? dp_rc == 0 : dp_rc != 0 && strstr(err, "enters the data-parallel reduction") &&
            strstr(err, "put FLUSH before the step's reductions"),
        "%s P=%d v=%d M=%d without FLUSH, 2 replicas: rc %d '%s'", t->name, P, v, M, dp_rc, err);
  CHECK(chunked || schedule_check_rendezvous(&s, err, sizeof err) != 0,
        "%s P=%d M=%d without FLUSH: passes any layout", t->name, P, M);
  schedule_free(&s);
}

static void test_registered(void) {
  for (int k = 0; schedule_types[k]; k++)
    for (int P = 2; P <= 4; P++)
      for (int M = P; M <= 2 * P + 1; M++) check_type(schedule_types[k], P, M);
}

/* The case, message and all: 2-stage 1F1B, tie over both stages, no FLUSH. */
static void test_tied_1f1b(void) {
  pt_schedule s;
  char err[1024] = "";
  layout l;
  schedule_build(&s, "1f1b", 2, 4);
  drop_flush(&s);
  CHECK(schedule_validate(&s, err, sizeof err) == 0, "MPI's rules do not care: %s", err);
  CHECK(schedule_check_rendezvous_in(&s, make_layout(&l, 2, 1, 1), NULL, err, sizeof err) != 0 &&
            strstr(err, "rank 0, action 0B3: 1f1b, 2 ranks, 4 micro-batches: deadlock") &&
            strstr(err, "rank 1 waits in TIE for its tie group (ranks 0, 1) with 1sG3 held back"),
        "2-stage 1F1B, tied, no FLUSH: '%s'", err);
  CHECK(schedule_check_rendezvous_in(&s, make_layout(&l, 2, 0, 1), NULL, err, sizeof err) == 0,
        "no tie, no replicas: nothing blocks at the step end, OPT waits for the sends: %s", err);
  CHECK(schedule_check_rendezvous_in(&s, make_layout(&l, 2, 0, 2), NULL, err, sizeof err) != 0 &&
            strstr(err, "rank 1, action DP: 1f1b, 2 ranks, 4 micro-batches: enters the "
                   "data-parallel reduction with 1sG3 held back, so rank 0 waits for it"),
        "2-stage 1F1B, 2 replicas, no FLUSH: '%s'", err);
  schedule_free(&s);
}

/* Tie groups are summed in one order on every rank: ranks in two groups meet them in turn. */
static void test_two_groups(void) {
  pt_schedule s;
  char err[1024] = "";
  unsigned char tie[2 * 3] = {1, 1, 0, /* group 0: ranks 0, 1 */ 0, 1, 1 /* group 1: 1, 2 */};
  pt_sched_reductions red = {2, tie, 2};
  schedule_build(&s, "zb_h1", 3, 6);
  CHECK(schedule_check_rendezvous_in(&s, &red, NULL, err, sizeof err) == 0, "two groups: %s",
        err);
  pt_sched_reductions bad = {1, NULL, 1};
  CHECK(schedule_check_rendezvous_in(&s, &bad, NULL, err, sizeof err) != 0 &&
            strstr(err, "make no layout"), "a tie group without a table: '%s'", err);
  schedule_free(&s);
}

/* FLUSH stands anywhere before OPT; after it, the step has ended. */
static void test_structure(void) {
  pt_schedule s;
  char err[1024] = "";
  schedule_build(&s, "gpipe", 2, 3);
  int n = s.n_acts[0];
  pt_action flush = s.acts[0][n - 4];
  s.acts[0][n - 4] = s.acts[0][n - 3], s.acts[0][n - 3] = flush; /* TIE FLUSH DP OPT */
  CHECK(schedule_validate(&s, err, sizeof err) == 0, "FLUSH between TIE and DP: %s", err);
  s.acts[0][n - 3] = s.acts[0][n - 2], s.acts[0][n - 2] = s.acts[0][n - 1];
  s.acts[0][n - 1] = flush; /* TIE DP OPT FLUSH */
  CHECK(schedule_validate(&s, err, sizeof err) != 0 &&
            strstr(err, "rank 0, action FLUSH: FLUSH stands alone, before OPT"),
        "FLUSH after OPT: '%s'", err);
  char text[48];
  CHECK(!strcmp(schedule_action_text(&flush, text, sizeof text), "FLUSH") &&
            !strcmp(schedule_action_code(ACT_FLUSH), "FLUSH"),
        "FLUSH's code: '%s'", text);
  schedule_free(&s);
}

int main(void) {
  test_registered();
  test_tied_1f1b();
  test_two_groups();
  test_structure();
  return test_summary("schedule_reduce");
}
