/* The planner behind `auto` (partition/auto.h) against independent references:
 *   - the simulator with transfer costs against closed forms (one micro-batch through two
 *     stages; uniform GPipe and 1F1B: (M + P - 1)(F + B));
 *   - the searched split against brute force over every split, each simulated by this file's
 *     own cost sums, both with the search trying every split and with its local moves alone
 *     (which must find the global optimum on these models too);
 *   - memory caps: the choice fits, and no fitting split is faster (brute force again);
 *   - ties go to less memory; nothing fits: one line naming the stage, its bytes against its
 *     cap, and the change that fits.
 * Layer times are set by hand, so the answers do not depend on this machine's speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "partition/auto.h"
#include "partition/plan.h"
#include "schedule/schedule.h"
#include "schedule/schedule_sim.h"
#include "test_util.h"

#define NL 8

/* 8 linear layers of 64 features (T = 1), 512 samples a micro-batch: activations outweigh the
 * parameters, so where the split falls and checkpointing change the memory. */
static const char *SPEC_FMT =
    "layers:\n"
    "  - linear: {out: 64, repeat: 8}\n"
    "loss: mse\n"
    "data: {path: %s, format: f32, inputs: 64, targets: 64}\n"
    "train: {micro_batch_size: 512, micro_batches: 4, activation_checkpoint_interval: 0}\n"
    "pipeline: {stages: 2}\n";
static char g_data[64];

typedef struct {
  pt_spec spec;
  pt_model model;
} loaded;

static int load(loaded *L, const char *const *over, int n_over) {
  char text[1024];
  snprintf(text, sizeof text, SPEC_FMT, g_data);
  spec_errors e = {0};
  memset(L, 0, sizeof *L);
  int rc = spec_load_text(text, strlen(text), "t.yaml", over, n_over, &L->spec, &e);
  if (rc == 0) rc = model_configure(&L->model, &L->spec, &e);
  CHECK(rc == 0, "spec did not load: %s", e.msg);
  return rc;
}

static void unload(loaded *L) {
  model_free(&L->model);
  spec_free(&L->spec);
}

/* F = a, I = a, W = w_share * a per layer; no optimizer; transfers free unless asked. */
static void set_times(pt_layer_times *t, const double *a, double w_share, double p2p_s) {
  profile_times_alloc(t, NL);
  for (int l = 0; l < NL; l++) t->f[l] = a[l], t->i[l] = a[l], t->w[l] = w_share * a[l];
  t->p2p_latency_s = p2p_s, t->p2p_bytes_per_s = 1e30;
  snprintf(t->source, sizeof t->source, "set by the test");
}

/* This file's own step for a split: chunk sums, simulated, no optimizer. */
static double step_of(const pt_schedule *s, const pt_layer_times *t, const int *b, double p2p) {
  pt_sched_costs c[64];
  for (int k = 0; k < s->n_chunks; k++) {
    double f = 0, i = 0, w = 0;
    for (int l = b[k]; l < b[k + 1]; l++) f += t->f[l], i += t->i[l], w += t->w[l];
    c[k] = (pt_sched_costs){f, i + w, i, w, k + 1 < s->n_chunks ? p2p : 0, k > 0 ? p2p : 0};
  }
  double step = 0;
  char err[256];
  CHECK(schedule_time(s, c, s->n_chunks, &step, NULL, err, sizeof err) >= 0, "%s", err);
  return step;
}

/* Every split of NL layers into C chunks, in turn: returns 0 when there is none left. */
static int next_split(int *b, int C) {
  for (int j = C - 1; j >= 1; j--)
    if (b[j] < NL - (C - j)) {
      b[j]++;
      for (int k = j + 1; k < C; k++) b[k] = b[k - 1] + 1;
      return 1;
    }
  return 0;
}

static void first_split(int *b, int C) {
  for (int k = 0; k < C; k++) b[k] = k;
  b[C] = NL;
}

/* Least step over every split that fits the caps (check_caps 0: none). */
static double brute_force(const pt_model *m, const pt_schedule *s, const pt_layer_times *t,
                          double p2p, int check_caps) {
  int C = s->n_chunks, b[65];
  double best = INFINITY;
  first_split(b, C);
  do {
    if (check_caps) {
      pt_plan p;
      spec_errors e = {0};
      CHECK(plan_build_layout(&p, m, s, b, &e) == 0, "%s", e.msg);
      int64_t over;
      int worst = plan_over_cap(&p, &over);
      plan_free(&p);
      if (worst >= 0) continue;
    }
    best = fmin(best, step_of(s, t, b, p2p));
  } while (next_split(b, C));
  return best;
}

static void test_sim_closed_forms(void) {
  pt_schedule s;
  char err[256];
  CHECK(schedule_build(&s, "1f1b", 2, 1) == 0, "build");
  pt_sched_costs c[2] = {{1, 2, 1, 1, 0.5, 0}, {1.5, 3, 1.5, 1.5, 0, 0.25}};
  double step = 0;
  schedule_time(&s, c, 2, &step, NULL, err, sizeof err);
  /* F0, send, F1, B1, send back, B0 */
  CHECK(fabs(step - (1 + 0.5 + 1.5 + 3 + 0.25 + 2)) < 1e-12, "one micro-batch: step %g", step);
  schedule_free(&s);
  const char *names[] = {"gpipe", "1f1b"};
  for (int k = 0; k < 2; k++) {
    CHECK(schedule_build(&s, names[k], 3, 5) == 0, "build");
    pt_sched_costs u = {0.7, 1.3, 0.65, 0.65, 0, 0};
    schedule_time(&s, &u, 1, &step, NULL, err, sizeof err);
    CHECK(fabs(step - (5 + 3 - 1) * 2.0) < 1e-9, "%s uniform: step %g, closed form 14", names[k], step);
    schedule_free(&s);
  }
}

/* The searched split of a fixed schedule equals the brute-force optimum. */
static void check_optimum(const char *schedule, const char *v, const double *a, double w_share,
                          double p2p) {
  char s1[64], s2[64];
  snprintf(s1, sizeof s1, "pipeline.schedule=%s", schedule);
  snprintf(s2, sizeof s2, "pipeline.virtual_stages=%s", v);
  const char *over[] = {"pipeline.partition=auto", s1, s2};
  loaded L;
  if (load(&L, over, 3) != 0) return;
  pt_layer_times t;
  set_times(&t, a, w_share, p2p);
  pt_auto_result r;
  spec_errors e = {0};
  int rc = auto_search(&L.model, &t, 0, &r, &e);
  CHECK(rc == 0 && r.n_fit >= 1, "%s: search failed: %s", schedule, e.msg);
  pt_schedule s;
  char err[256];
  CHECK(schedule_build_v(&s, schedule_find(schedule), 2, atoi(v), 4, err, sizeof err) == 0, "%s", err);
  double want = brute_force(&L.model, &s, &t, p2p, 0);
  if (rc == 0) {
    double got = step_of(&s, &t, r.c[0].bounds, p2p);
    CHECK(fabs(r.c[0].step_s - want) <= 1e-9 * want && fabs(got - want) <= 1e-9 * want,
          "%s v=%s (exhaustive limit %d): searched step %g (re-simulated %g), brute force %g",
          schedule, v, auto_exhaustive_splits, r.c[0].step_s, got, want);
  }
  schedule_free(&s);
  auto_result_free(&r);
  profile_times_free(&t);
  unload(&L);
}

static void test_search_optimum(void) {
  const double skew[NL] = {1, 1, 1, 1, 1, 1, 1, 5}, ramp[NL] = {1, 2, 3, 4, 5, 6, 7, 8};
  const double spike[NL] = {0.5, 4, 0.5, 0.5, 3, 0.5, 0.5, 2};
  const double *models[] = {skew, ramp, spike};
  const char *sched[][2] = {{"1f1b", "1"}, {"gpipe", "1"}, {"zb_h1", "1"}, {"zb_h2", "1"},
                            {"interleaved_1f1b", "2"}, {"zbv", "2"}, {"dualpipev", "2"},
                            {"v_half", "2"}, {"v_min", "2"}};
  for (int exhaustive = 1; exhaustive >= 0; exhaustive--) { /* every split, then local moves */
    auto_exhaustive_splits = exhaustive ? 2000 : 0;
    for (int m = 0; m < 3; m++)
      for (int k = 0; k < 9; k++) check_optimum(sched[k][0], sched[k][1], models[m], 0.5, 0.05);
  }
  auto_exhaustive_splits = 2000;
}

/* Under a cap the unconstrained optimum breaks, the choice fits and no fitting split is faster. */
static void test_caps(void) {
  const double a[NL] = {1, 1, 1, 1, 1, 1, 1, 1};
  loaded L;
  const char *base[] = {"pipeline.partition=auto", "pipeline.schedule=1f1b"};
  if (load(&L, base, 2) != 0) return;
  pt_schedule s;
  CHECK(schedule_build(&s, "1f1b", 2, 4) == 0, "build");
  int b[3] = {0, 4, NL};
  pt_plan p;
  spec_errors e = {0};
  CHECK(plan_build_layout(&p, &L.model, &s, b, &e) == 0, "%s", e.msg);
  /* stage 0 holds two micro-batches in flight, stage 1 one: cap both just under stage 0's even
   * share, so the split must move a layer to stage 1 */
  char cap[64];
  snprintf(cap, sizeof cap, "pipeline.max_memory=%lld", (long long)p.mem[0].total - 1);
  plan_free(&p);
  unload(&L);
  const char *over[] = {"pipeline.partition=auto", "pipeline.schedule=1f1b", cap};
  if (load(&L, over, 3) != 0) return;
  pt_layer_times t;
  set_times(&t, a, 0.5, 0);
  pt_auto_result r;
  int rc = auto_search(&L.model, &t, 0, &r, &e);
  CHECK(rc == 0, "capped search failed: %s", e.msg);
  if (rc == 0) {
    CHECK(r.c[0].fits && r.c[0].bounds[1] < 4, "choice fits (%d) with stage 0 shorter: split at %d",
          r.c[0].fits, r.c[0].bounds[1]);
    double want = brute_force(&L.model, &s, &t, 0, 1);
    CHECK(fabs(r.c[0].step_s - want) <= 1e-9 * want, "capped: %g vs brute force %g",
          r.c[0].step_s, want);
  }
  auto_result_free(&r);
  schedule_free(&s);
  profile_times_free(&t);
  unload(&L);
}

/* Searches the model with every layer F = I = 1, W = w_share under the --set values over;
 * returns auto_search's result code (r filled; free it with auto_result_free). */
static int search_uniform(const char *const *over, int n_over, double w_share, pt_auto_result *r) {
  const double a[NL] = {1, 1, 1, 1, 1, 1, 1, 1};
  loaded L;
  memset(r, 0, sizeof *r);
  if (load(&L, over, n_over) != 0) return -1;
  pt_layer_times t;
  set_times(&t, a, w_share, 0);
  spec_errors e = {0};
  int rc = auto_search(&L.model, &t, 0, r, &e);
  CHECK(rc == 0, "%s", e.msg);
  profile_times_free(&t);
  unload(&L);
  return rc;
}

/* Equal steps: the one with less memory. With W = 0 and one chunk per stage GPipe, 1F1B and
 * ZB-H1 take the same time; 1F1B and ZB-H1 hold fewer micro-batches than GPipe. */
static void test_ties(void) {
  const char *over[] = {"pipeline.schedule=auto", "pipeline.virtual_stages=1"};
  pt_auto_result r;
  int rc = search_uniform(over, 2, 0, &r);
  for (int i = 1; rc == 0 && i < r.n_fit; i++) {
    double d = r.c[i].step_s - r.c[0].step_s;
    CHECK(d > -1e-9 * r.c[0].step_s, "candidate %d (%s) is faster than the choice", i,
          r.c[i].schedule->name);
    if (fabs(d) <= 1e-9 * r.c[0].step_s)
      CHECK(r.c[i].peak >= r.c[0].peak, "%s ties %s with less memory", r.c[i].schedule->name,
            r.c[0].schedule->name);
  }
  CHECK(rc == 0 && strcmp(r.c[0].schedule->name, "gpipe") != 0, "gpipe chosen over 1f1b");
  auto_result_free(&r);
}

/* A zero-bubble schedule beats 1F1B when W is half the backward (the reason they exist). */
static void test_prefers_zero_bubble(void) {
  const char *over[] = {"pipeline.schedule=auto", "pipeline.partition=auto"};
  pt_auto_result r;
  int rc = search_uniform(over, 2, 1, &r);
  CHECK(rc == 0 && r.c[0].schedule->splits_backward, "choice %s", rc == 0 ? r.c[0].schedule->name : "-");
  auto_result_free(&r);
}

/* Least memory of any split with the interval fixed (the brute force the advice must match). */
static int64_t least_peak(const char *ckpt) {
  const char *over[] = {"pipeline.schedule=1f1b", ckpt};
  loaded L;
  if (load(&L, over, 2) != 0) return 0;
  pt_schedule s;
  CHECK(schedule_build(&s, "1f1b", 2, 4) == 0, "build");
  int b[3];
  int64_t best = INT64_MAX;
  first_split(b, 2);
  do {
    pt_plan p;
    spec_errors e = {0};
    CHECK(plan_build_layout(&p, &L.model, &s, b, &e) == 0, "%s", e.msg);
    int64_t peak = p.mem[0].total > p.mem[1].total ? p.mem[0].total : p.mem[1].total;
    if (peak < best) best = peak;
    plan_free(&p);
  } while (next_split(b, 2));
  schedule_free(&s);
  unload(&L);
  return best;
}

static void expect_failure(const char *cap, const char *const *needles, int n) {
  const double a[NL] = {1, 1, 1, 1, 1, 1, 1, 1};
  const char *over[] = {"pipeline.schedule=1f1b", "pipeline.partition=auto", cap};
  loaded L;
  if (load(&L, over, 3) != 0) return;
  pt_layer_times t;
  set_times(&t, a, 0.5, 0);
  pt_auto_result r;
  spec_errors e = {0};
  CHECK(auto_search(&L.model, &t, 0, &r, &e) == -1, "%s: a plan was found", cap);
  CHECK(!strchr(e.msg, '\n'), "one line: %s", e.msg);
  for (int i = 0; i < n; i++) CHECK(strstr(e.msg, needles[i]), "'%s' not in: %s", needles[i], e.msg);
  auto_result_free(&r);
  profile_times_free(&t);
  unload(&L);
}

static void test_nothing_fits(void) {
  int64_t p0 = least_peak("train.activation_checkpoint_interval=0");
  int64_t p1 = least_peak("train.activation_checkpoint_interval=4");
  CHECK(p1 < p0, "checkpointing saves nothing here: %lld vs %lld", (long long)p1, (long long)p0);
  char cap[64];
  snprintf(cap, sizeof cap, "pipeline.max_memory=%lld", (long long)p1);
  const char *ckpt[] = {"no plan fits pipeline.max_memory", "on stage", "against its cap",
                        "train.activation_checkpoint_interval"};
  expect_failure(cap, ckpt, 4);
  const char *none[] = {"no plan fits", "raise pipeline.max_memory"};
  expect_failure("pipeline.max_memory=1000", none, 2);
}

int main(void) {
  snprintf(g_data, sizeof g_data, "/tmp/pt_test_auto_%ld.f32", (long)getpid());
  FILE *f = fopen(g_data, "wb");
  if (!f) pt_fatal("cannot create %s", g_data);
  for (int i = 0; i < 128 * 16; i++) {
    float v = (float)((i * 37) % 101) / 50.0f - 1.0f;
    fwrite(&v, sizeof v, 1, f);
  }
  fclose(f);
  test_sim_closed_forms();
  test_search_optimum();
  test_caps();
  test_ties();
  test_prefers_zero_bubble();
  test_nothing_fits();
  unlink(g_data);
  return test_summary("test_auto");
}
