/* Schedule generators against the validator and their closed forms, the registry against the
 * spec and the docs, and the validator against broken lists. Usage: test_schedule
 * [docs/schedules.md]. Schedule files: test_schedule_file.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"
#include "schedule/schedule_sim.h"
#include "test_util.h"

#define MAX_P 8
#define MAX_M 16

static int min_int(int a, int b) { return a < b ? a : b; }

/* The chunk counts per rank to try for entry t. */
static int vs_of(const pt_schedule_type *t, int *vs) {
  if (t->virtual_stages != SCHEDULE_ANY_V) return vs[0] = t->virtual_stages, 1;
  for (int v = 1; v <= 3; v++) vs[v - 1] = v;
  return 3;
}

/* Chunk c's actions on its rank, counted and checked in list order: every forward and
 * backward once, W for each I (after it), weight gradients in ascending micro-batch order, and
 * the peaks the schedule declares. */
static void check_chunk(const pt_schedule *s, int c) {
  int r = s->chunk_rank[c], M = s->n_micro, n[ACT_KINDS] = {0}, held = 0, pend = 0, peak = 0,
      peak_pend = 0, next_w = 0, ordered = 1, i_first = 1;
  unsigned char *has_i = calloc((size_t)M, 1);
  for (int i = 0; i < s->n_acts[r]; i++) {
    const pt_action *a = &s->acts[r][i];
    if (a->chunk != c) continue;
    n[a->kind]++;
    held += a->kind == ACT_FORWARD;
    if (a->kind == ACT_BACKWARD_INPUT) has_i[a->mb] = 1, pend++;
    if (a->kind == ACT_BACKWARD || a->kind == ACT_BACKWARD_WEIGHT) {
      ordered &= a->mb == next_w++;
      held--;
    }
    if (a->kind == ACT_BACKWARD_WEIGHT) i_first &= has_i[a->mb], pend--;
    peak = held > peak ? held : peak;
    peak_pend = pend > peak_pend ? pend : peak_pend;
  }
  free(has_i);
  const char *name = s->name;
  int P = s->n_ranks;
  CHECK(n[ACT_FORWARD] == M && n[ACT_BACKWARD] + n[ACT_BACKWARD_INPUT] == M &&
            n[ACT_BACKWARD_WEIGHT] == n[ACT_BACKWARD_INPUT],
        "%s P=%d C=%d M=%d chunk %d: %d F, %d B, %d I, %d W", name, P, s->n_chunks, M, c,
        n[ACT_FORWARD], n[ACT_BACKWARD], n[ACT_BACKWARD_INPUT], n[ACT_BACKWARD_WEIGHT]);
  CHECK(ordered && i_first, "%s P=%d M=%d chunk %d: weight gradients out of order or a W before "
        "its I", name, P, M, c);
  CHECK(peak == s->n_slots[c] && peak_pend == s->n_w_pending[c],
        "%s P=%d M=%d chunk %d: peaks %d in flight, %d W pending; declared %d, %d", name, P, M, c,
        peak, peak_pend, s->n_slots[c], s->n_w_pending[c]);
  CHECK(s->type->splits_backward || n[ACT_BACKWARD_INPUT] == 0, "%s: I without splits_backward",
        name);
}

/* The placement (chunks per rank, where each runs) and every rank's step end. */
static void check_layout(const pt_schedule *s, int v) {
  int P = s->n_ranks, ok = s->n_chunks == P * v;
  for (int c = 0; ok && c < s->n_chunks; c++)
    ok = s->chunk_rank[c] == (s->placement == PT_PLACE_V && c >= P ? 2 * P - 1 - c : c % P);
  CHECK(ok && s->placement == s->type->placement, "%s P=%d v=%d: placement", s->name, P, v);
  for (int r = 0; r < P; r++) {
    int n = s->n_acts[r];
    CHECK(n >= 3 && s->acts[r][n - 3].kind == ACT_REDUCE_TIED && s->acts[r][n - 2].kind ==
          ACT_REDUCE_DP && s->acts[r][n - 1].kind == ACT_OPTIMIZER, "%s rank %d: step end", s->name, r);
  }
}

/* The in-flight rules written out where they have a closed form; -1: the entry's own. */
static int expected_in_flight(const char *name, int P, int M, int st) {
  if (!strcmp(name, "gpipe") || !strcmp(name, "looped_bfs")) return M;
  if (!strcmp(name, "1f1b")) return min_int(P - st, M);
  if (!strcmp(name, "zb_h1")) return min_int(P, M);
  if (!strcmp(name, "zb_h2")) return min_int(2 * P - 1, M);
  return -1;
}

/* The most slots a rank of the V schedules holds over its two chunks (docs/schedules.md). */
static int v_bound(const char *name, int P) {
  if (!strcmp(name, "v_half")) return P + 2;
  if (!strcmp(name, "v_min")) return 2 * P / 3 + 3;
  return !strcmp(name, "zbv") ? 2 * P + P / 2 + 1 : !strcmp(name, "dualpipev") ? 3 * P : -1;
}

/* The registry's in-flight count (the entry's own chunks per rank) against the built slots. */
static void check_in_flight(const pt_schedule *s) {
  for (int r = 0; r < s->n_ranks; r++) {
    int sum = 0, want = s->type->in_flight(r, s->n_ranks, s->n_micro);
    int rule = expected_in_flight(s->name, s->n_ranks, s->n_micro, r);
    int bound = v_bound(s->name, s->n_ranks);
    for (int c = 0; c < s->n_chunks; c++) sum += s->chunk_rank[c] == r ? s->n_slots[c] : 0;
    CHECK(sum == want && (rule < 0 || rule == want) && (bound < 0 || sum <= bound),
          "%s P=%d M=%d rank %d: %d slots, registry says %d, closed form %d, bound %d", s->name,
          s->n_ranks, s->n_micro, r, sum, want, rule, bound);
  }
}

static void check_built(const pt_schedule *s, int v) {
  char err[1024] = "";
  CHECK(schedule_validate(s, err, sizeof err) == 0, "%s P=%d v=%d M=%d: %s", s->name, s->n_ranks,
        v, s->n_micro, err);
  CHECK(schedule_check_rendezvous(s, err, sizeof err) == 0, "%s P=%d v=%d M=%d: %s", s->name,
        s->n_ranks, v, s->n_micro, err);
  check_layout(s, v);
  for (int c = 0; c < s->n_chunks; c++) check_chunk(s, c);
  int own = s->type->virtual_stages == SCHEDULE_ANY_V ? 1 : s->type->virtual_stages;
  if (v == own) check_in_flight(s);
}

/* Every registered schedule on every layout up to 8 ranks, 16 micro-batches (3 chunks per
 * rank where it takes any): valid under MPI's and NCCL's rules, exact, its declared peaks;
 * below its fewest micro-batches a refusal that names the bound. */
static void test_generators(void) {
  for (int k = 0; schedule_types[k]; k++) {
    const pt_schedule_type *t = schedule_types[k];
    CHECK(schedule_find(t->name) == t, "%s: not found by name", t->name);
    int vs[3], nv = vs_of(t, vs);
    for (int P = 1; P <= MAX_P; P++)
      for (int j = 0; j < nv; j++)
        for (int M = 1; M <= MAX_M; M++) {
          pt_schedule s;
          char err[512] = "";
          int need = t->min_micro ? t->min_micro(P) : 1;
          int rc = schedule_build_v(&s, t, P, vs[j], M, err, sizeof err);
          if (M < need) {
            CHECK(rc == -1 && strstr(err, t->min_micro_doc) && strstr(err, "micro-batches"),
                  "%s P=%d M=%d: below its minimum: rc %d '%s'", t->name, P, M, rc, err);
            continue;
          }
          CHECK(rc == 0 && s.type == t, "build %s P=%d v=%d M=%d: %s", t->name, P, vs[j], M, err);
          if (rc == 0) check_built(&s, vs[j]);
          schedule_free(&s);
        }
  }
  pt_schedule s;
  CHECK(schedule_build(&s, "zigzag", 2, 2) == -1, "unknown schedule accepted");
}

/* interleaved_1f1b with one chunk per rank is 1F1B, action for action. */
static void test_interleaved_is_1f1b(void) {
  for (int P = 1; P <= MAX_P; P++)
    for (int M = 1; M <= MAX_M; M++) {
      pt_schedule a, b;
      schedule_build(&a, "1f1b", P, M);
      schedule_build(&b, "interleaved_1f1b", P, M);
      int same = 1;
      for (int r = 0; r < P; r++)
        same &= a.n_acts[r] == b.n_acts[r] &&
                !memcmp(a.acts[r], b.acts[r], sizeof(pt_action) * (size_t)a.n_acts[r]);
      CHECK(same, "P=%d M=%d: interleaved_1f1b with v = 1 differs from 1f1b", P, M);
      schedule_free(&a), schedule_free(&b);
    }
}

/* The unit-cost step time of entry `name` on (P, v, M), or -1 where its closed form does not
 * apply (the bubble_doc's condition): the busy time of a rank plus the idle the formula gives. */
static double closed_span(const char *name, int P, int v, int M) {
  if (!strcmp(name, "gpipe") || !strcmp(name, "1f1b")) return 3.0 * (M + P - 1);
  if (!strcmp(name, "interleaved_1f1b") || !strcmp(name, "looped_bfs"))
    return M >= P ? 3.0 * (v * M + P - 1) : -1;
  if (!strcmp(name, "zb_h1") || !strcmp(name, "zb_h2")) return M >= P ? 3.0 * M + P - 1 : -1;
  if (!strcmp(name, "zbv")) return M >= 2 * P - 1 ? 6.0 * M + P - 1 : -1;
  if (!strcmp(name, "dualpipev")) return 6.0 * M + P - 1;
  if (!strcmp(name, "v_half")) return 2 * M > P ? 6.0 * M + (7 * P - 7 + (P % 2 ? 0 : 3)) / 2 : -1;
  if (!strcmp(name, "v_min")) return P >= 2 && M >= 2 ? 6.0 * M + 4 * P - 5 + (P % 3 ? 0 : 2) : -1;
  return -1;
}

/* Simulated bubble (unit costs) = the closed form of docs/schedules.md wherever it applies. */
static void test_bubbles(void) {
  for (int k = 0; schedule_types[k]; k++) {
    const pt_schedule_type *t = schedule_types[k];
    int vs[3], nv = vs_of(t, vs);
    for (int P = 1; P <= MAX_P; P++)
      for (int j = 0; j < nv; j++)
        for (int M = t->min_micro ? t->min_micro(P) : 1; M <= MAX_M; M++) {
          double want = closed_span(t->name, P, vs[j], M), step = 0, per[MAX_P], mean = 0;
          pt_schedule s;
          char err[256] = "";
          if (want < 0 || schedule_build_v(&s, t, P, vs[j], M, err, sizeof err) != 0) continue;
          double all = schedule_time(&s, &schedule_unit_costs, 1, &step, per, err, sizeof err);
          double busy = 3.0 * vs[j] * M; /* per rank: F 1 + B 2, or F + I + W */
          for (int r = 0; r < P; r++) mean += per[r] / P;
          CHECK(step == want && fabs(all - (1.0 - busy / want)) < 1e-12 && fabs(mean - all) < 1e-12,
                "%s P=%d v=%d M=%d: step %g bubble %g (mean of ranks %g), closed form %g and %g",
                t->name, P, vs[j], M, step, all, mean, want, 1.0 - busy / want);
          schedule_free(&s);
        }
  }
}

/* Costs other than unit: zb_h1 idles (P - 1)(F + I - W), zb_h2 only (P - 1) F once M >= 2P - 1
 * (Qi et al., table 1, with the optimizer step synchronous). */
static void test_zero_bubble_costs(void) {
  pt_sched_costs c = {.f = 2, .b = 3, .i = 2, .w = 1};
  for (int P = 2; P <= MAX_P; P++)
    for (int M = P; M <= MAX_M; M++) {
      pt_schedule h1, h2;
      double s1 = 0, s2 = 0, work = M * (c.f + c.i + c.w);
      schedule_build(&h1, "zb_h1", P, M);
      schedule_build(&h2, "zb_h2", P, M);
      schedule_time(&h1, &c, 1, &s1, NULL, NULL, 0);
      schedule_time(&h2, &c, 1, &s2, NULL, NULL, 0);
      CHECK(s1 == work + (P - 1) * (c.f + c.i - c.w), "zb_h1 P=%d M=%d: step %g", P, M, s1);
      CHECK(M < 2 * P - 1 || s2 == work + (P - 1) * c.f, "zb_h2 P=%d M=%d: step %g", P, M, s2);
      schedule_free(&h1), schedule_free(&h2);
    }
}

/* V-Half and V-Min beyond the layouts test_generators runs, up to 24 ranks: the rank's
 * simulated peak (its chunks' slots, as the lists hold them) is the entry's closed form, within
 * the bound the docs give, against 1F1B's 2P half-stage micro-batches on stage 0 about a half
 * and a third; the simulated step is the closed form of the bubble. */
static void test_v_memory(void) {
  static const char *const names[] = {"v_half", "v_min"};
  for (int n = 0; n < 2; n++) {
    const pt_schedule_type *t = schedule_find(names[n]);
    CHECK(t != NULL, "%s: not registered", names[n]);
    if (!t) continue;
    for (int P = 2; P <= 24; P += P < 8 ? 1 : 4)
      for (int M = 1; M <= 3 * P; M += M < 4 ? 1 : P) {
        pt_schedule s;
        char err[256] = "";
        CHECK(schedule_build_v(&s, t, P, 2, M, err, sizeof err) == 0, "%s P=%d M=%d: %s",
              t->name, P, M, err);
        int peak = 0;
        for (int r = 0; r < P; r++) {
          int sum = s.n_slots[r] + s.n_slots[2 * P - 1 - r], want = t->in_flight(r, P, M);
          CHECK(sum == want && sum <= v_bound(t->name, P), "%s P=%d M=%d rank %d: %d slots, "
                "closed form %d, bound %d", t->name, P, M, r, sum, want, v_bound(t->name, P));
          peak = sum > peak ? sum : peak;
        }
        double share = (double)peak / (2 * P), goal = n == 0 ? 0.5 : 1.0 / 3;
        CHECK(M < 2 * P || share <= goal + 3.0 / P, "%s P=%d M=%d: peak %d of 1F1B's %d", t->name,
              P, M, peak, 2 * P);
        double step = 0, want = closed_span(t->name, P, 2, M);
        schedule_time(&s, &schedule_unit_costs, 1, &step, NULL, NULL, 0);
        CHECK(want < 0 || step == want, "%s P=%d M=%d: step %g, closed form %g", t->name, P, M,
              step, want);
        schedule_free(&s);
      }
  }
}

/* The figures docs/schedules.md quotes: P = 4, M = 8 and P = 8, M = 16, unit costs. */
static void print_bubbles(void) {
  for (int k = 0; schedule_types[k]; k++) {
    const pt_schedule_type *t = schedule_types[k];
    int v = t->virtual_stages == SCHEDULE_ANY_V ? 2 : t->virtual_stages;
    printf("%-17s v=%d", t->name, v);
    for (int P = 4; P <= 8; P += 4) {
      pt_schedule s;
      double step = 0;
      schedule_build_v(&s, t, P, v, 2 * P, NULL, 0);
      double b = schedule_time(&s, &schedule_unit_costs, 1, &step, NULL, NULL, 0);
      double want = closed_span(t->name, P, v, 2 * P);
      printf("  P=%d M=%2d: step %5.0f bubble %5.1f%% (closed form %5.1f%%)", P, 2 * P, step,
             100 * b, 100 * (1 - 3.0 * v * 2 * P / want));
      schedule_free(&s);
    }
    putchar('\n');
  }
}

/* pipeline.schedule and pipeline.virtual_stages against the registry: the spec's default and
 * every registered name resolve; an unknown name, a chunk count the schedule does not take and
 * a schedule named twice are errors at their value, spec-style. */
static const pt_schedule_type *resolve(const char *text, const char *set, spec_errors *e,
                                       int *v) {
  pt_spec spec;
  if (spec_load_text(text, strlen(text), "inline.yaml", &set, set ? 1 : 0, &spec, e) != 0)
    return NULL;
  const pt_schedule_type *t = schedule_from_spec(&spec.pipeline, e);
  if (t && v) *v = schedule_virtual_stages(t, &spec.pipeline);
  spec_free(&spec);
  return t;
}

static void test_spec_names(void) {
  spec_errors e = {0, ""};
  int v = 0;
  CHECK(resolve("layers: [gelu]\n", NULL, &e, &v) == schedule_find("1f1b") && v == 1, "default: %s",
        e.msg);
  for (int k = 0; schedule_types[k]; k++) {
    char set[128];
    snprintf(set, sizeof set, "pipeline.schedule=%s", schedule_types[k]->name);
    spec_errors ek = {0, ""};
    CHECK(resolve("layers: [gelu]\n", set, &ek, &v) == schedule_types[k], "%s: %s", set, ek.msg);
  }
  CHECK(resolve("layers: [gelu]\npipeline: {schedule: zbv}\n", NULL, &e, &v) && v == 2, "zbv: v %d", v);
  CHECK(resolve("layers: [gelu]\npipeline: {schedule: interleaved_1f1b, virtual_stages: 3}\n",
                NULL, &e, &v) && v == 3, "interleaved: v %d (%s)", v, e.msg);
  static const struct {
    const char *text, *set, *msg;
  } bad[] = {
      {"layers: [gelu]\npipeline: {schedule: zigzag}\n", NULL,
       "inline.yaml:2:22: error: pipeline.schedule: expected one of 1f1b, gpipe, interleaved_1f1b, "
       "looped_bfs, zb_h1, zb_h2, zbv, dualpipev, v_half, v_min, got 'zigzag'"},
      {"layers: [gelu]\n", "pipeline.schedule=1F1B",
       "--set pipeline.schedule=1F1B: error: pipeline.schedule: expected one of 1f1b, gpipe, "},
      {"layers: [gelu]\npipeline: {schedule: zbv, virtual_stages: 3}\n", NULL,
       "inline.yaml:2:43: error: pipeline.virtual_stages: schedule zbv runs 2 chunks per rank, got 3"},
      {"layers: [gelu]\npipeline: {virtual_stages: 2}\n", NULL,
       "inline.yaml:2:28: error: pipeline.virtual_stages: schedule 1f1b runs 1 chunk per rank, got 2"},
      {"layers: [gelu]\npipeline: {virtual_stages: 0}\n", NULL, "pipeline.virtual_stages"},
      {"layers: [gelu]\npipeline: {schedule: gpipe, schedule_file: tests/schedule/zb_p2.txt}\n",
       NULL, "inline.yaml:2:29: error: pipeline.schedule_file and pipeline.schedule both given"},
      {"layers: [gelu]\npipeline: {schedule_file: no/such/sched.txt}\n", NULL,
       "error: schedule file 'no/such/sched.txt' not found"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    spec_errors eb = {0, ""};
    CHECK(resolve(bad[i].text, bad[i].set, &eb, NULL) == NULL && eb.failed, "case %zu accepted", i);
    CHECK(strstr(eb.msg, bad[i].msg) != NULL, "case %zu: got '%s', want '%s'", i, eb.msg, bad[i].msg);
  }
  spec_errors ef = {0, ""};
  CHECK(resolve("layers: [gelu]\npipeline: {schedule_file: tests/schedule/zb_p2.txt}\n", NULL,
                &ef, NULL) == &schedule_file_type, "schedule_file: %s", ef.msg);
}

/* Mutations the validator must reject, each with its reason. */
static void expect_invalid(const char *name, int P, int M, void (*mutate)(pt_schedule *),
                           const char *needle) {
  pt_schedule s;
  char err[1024] = "";
  schedule_build(&s, name, P, M);
  mutate(&s);
  CHECK(schedule_validate(&s, err, sizeof err) != 0 && strstr(err, needle),
        "%s: mutation not caught as '%s' (got '%s')", name, needle, err);
  schedule_free(&s);
}

/* The index of (kind, chunk, mb) in rank r's list, or -1. */
static int find_action(const pt_schedule *s, int r, pt_action_kind k, int chunk, int mb) {
  for (int i = 0; i < s->n_acts[r]; i++)
    if (s->acts[r][i].kind == k && s->acts[r][i].chunk == chunk && s->acts[r][i].mb == mb) return i;
  return -1;
}

static void swap_actions(pt_schedule *s, int r, int i, int j) {
  pt_action t = s->acts[r][i];
  s->acts[r][i] = s->acts[r][j];
  s->acts[r][j] = t;
}

/* Moves rank r's action i to position j (later), shifting the ones between. */
static void move_action(pt_schedule *s, int r, int i, int j) {
  pt_action t = s->acts[r][i];
  memmove(s->acts[r] + i, s->acts[r] + i + 1, sizeof t * (size_t)(j - i));
  s->acts[r][j] = t;
}

static void drop_send(pt_schedule *s) { /* stage 1 never sends mb 2 */
  int i = find_action(s, 1, ACT_SEND_ACT, 1, 2);
  memmove(s->acts[1] + i, s->acts[1] + i + 1, sizeof(pt_action) * (size_t)(s->n_acts[1] - i - 1));
  s->n_acts[1]--;
}
static void swap_backward(pt_schedule *s) { /* stage 3 runs backward before forward for mb 0 */
  swap_actions(s, 3, find_action(s, 3, ACT_FORWARD, 3, 0), find_action(s, 3, ACT_BACKWARD, 3, 0));
}
static void late_send(pt_schedule *s) { /* stage 1 sends gradient 0 only at the end of its step */
  move_action(s, 1, find_action(s, 1, ACT_SEND_GRAD, 1, 0), s->n_acts[1] - 4);
}
static void small_slots(pt_schedule *s) { s->n_slots[0] = 2; /* 1F1B stage 0 needs 4 */ }
static void w_before_i(pt_schedule *s) { /* zb_h1 stage 2: W of mb 1 before its I */
  swap_actions(s, 2, find_action(s, 2, ACT_BACKWARD_INPUT, 2, 1),
               find_action(s, 2, ACT_BACKWARD_WEIGHT, 2, 1));
}
static void w_swapped(pt_schedule *s) { /* zb_h1 stage 1: W of mb 7 before W of mb 6 */
  swap_actions(s, 1, find_action(s, 1, ACT_BACKWARD_WEIGHT, 1, 6),
               find_action(s, 1, ACT_BACKWARD_WEIGHT, 1, 7));
}
static void b_swapped(pt_schedule *s) { /* gpipe stage 1: B of mb 2 before B of mb 1 */
  swap_actions(s, 1, find_action(s, 1, ACT_BACKWARD, 1, 1), find_action(s, 1, ACT_BACKWARD, 1, 2));
}
static void wrong_rank(pt_schedule *s) { s->acts[1][0].chunk = 0; /* rank 1 runs chunk 0 */ }
static void after_step(pt_schedule *s) { /* a W after the optimizer */
  move_action(s, 0, find_action(s, 0, ACT_BACKWARD_WEIGHT, 0, 7), s->n_acts[0] - 1);
}
static void local_send(pt_schedule *s) { /* zbv: rank 3 sends chunk 3's output to chunk 4, its own */
  s->acts[3][find_action(s, 3, ACT_FORWARD, 3, 0) + 1] = (pt_action){ACT_SEND_ACT, 0, 3};
}
static void local_order(pt_schedule *s) { /* zbv rank 3: chunk 4's forward of mb 0 before chunk 3's */
  swap_actions(s, 3, find_action(s, 3, ACT_FORWARD, 3, 0), find_action(s, 3, ACT_FORWARD, 4, 0));
}

/* The NCCL check must catch what cannot finish, under its rules as under MPI's. */
static void expect_rendezvous_stuck(void (*mutate)(pt_schedule *)) {
  pt_schedule s;
  char err[1024] = "";
  schedule_build(&s, "1f1b", 4, 6);
  mutate(&s);
  CHECK(schedule_check_rendezvous(&s, err, sizeof err) != 0 && strstr(err, "deadlock"),
        "rendezvous check did not catch the mutation (got '%s')", err);
  schedule_free(&s);
}

static void test_mutations(void) {
  expect_invalid("1f1b", 4, 6, drop_send, "deadlock");
  expect_invalid("1f1b", 4, 6, swap_backward, "rank 3, action 3B0: backward of micro-batch 0 "
                 "comes before its forward");
  expect_invalid("1f1b", 4, 6, late_send, "deadlock");
  expect_invalid("1f1b", 4, 6, small_slots, "slot");
  expect_invalid("zb_h1", 4, 8, w_before_i, "rank 2, action 2W1: W of micro-batch 1 before its I");
  expect_invalid("zb_h1", 4, 8, w_swapped, "rank 1, action 1W7: W of micro-batch 7 before micro-"
                 "batch 6's: on a chunk, weight gradients add up in ascending micro-batch order");
  expect_invalid("gpipe", 4, 6, b_swapped, "rank 1, action 1B2: B of micro-batch 2 before micro-batch 1's");
  expect_invalid("1f1b", 4, 6, wrong_rank, "chunk 0 runs on rank 0");
  expect_invalid("zb_h1", 4, 8, after_step, "after the step's reductions");
  expect_invalid("zbv", 4, 8, local_send, "chunk 3 hands over to chunk 4 on this rank");
  expect_invalid("zbv", 4, 8, local_order, "forward of micro-batch 0 before chunk 3's");
  expect_rendezvous_stuck(drop_send);
  expect_rendezvous_stuck(late_send);
}

/* docs/schedules.md's table of schedules, under "## Registered schedules", has exactly one
 * row per registry entry: "| `NAME` | CHUNKS | SPLIT | IN_FLIGHT_DOC | BUBBLE_DOC | DOC |". */
static void test_docs(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "cannot open %s", path);
  if (!f) return;
  char line[2048];
  int in_table = 0, seen[64] = {0};
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '#') in_table = !strcmp(line, "## Registered schedules");
    if (!in_table || strncmp(line, "| `", 3) != 0) continue;
    int known = 0;
    for (int k = 0; schedule_types[k] && k < 64; k++) {
      const pt_schedule_type *t = schedule_types[k];
      char want[2048], v[16];
      snprintf(v, sizeof v, "%d", t->virtual_stages);
      snprintf(want, sizeof want, "| `%s` | %s | %s | %s | %s | %s |", t->name,
               t->virtual_stages == SCHEDULE_ANY_V ? "v" : v, t->splits_backward ? "I, W" : "B",
               t->in_flight_doc, t->bubble_doc, t->doc);
      if (!strcmp(line, want)) known = 1, seen[k]++;
    }
    CHECK(known, "%s: row '%s' is no registered schedule's (name, chunks, backward, in flight, "
          "bubble and doc as in schedule/*.c)", path, line);
  }
  fclose(f);
  for (int k = 0; schedule_types[k] && k < 64; k++)
    CHECK(seen[k] == 1, "%s: %d rows for schedule %s under '## Registered schedules', want 1",
          path, seen[k], schedule_types[k]->name);
}

/* With an argument: only the check of docs/schedules.md (that path) against the registry. */
int main(int argc, char **argv) {
  if (argc > 1) {
    test_docs(argv[1]);
    return test_summary("schedule docs");
  }
  test_generators();
  test_interleaved_is_1f1b();
  test_bubbles();
  test_zero_bubble_costs();
  test_v_memory();
  test_spec_names();
  test_mutations();
  print_bubbles();
  return test_summary("schedule");
}
