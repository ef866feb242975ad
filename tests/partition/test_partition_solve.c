/* part_solve: hand-computed cases, a brute-force comparison over all contiguous partitions of
 * small random instances (objectives, earliest bounds, failure explanation), and an
 * O(P * n^2) reference DP on larger instances (objective values, callback-call bounds). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/solve.h"
#include "core/error.h"
#include "test_util.h"

#define MAXN 16
#define MAXP 16

/* ---- memory model: 1F1B-like, params + (P - s) in-flight activations of the largest layer ---- */

typedef struct {
  int n;
  const double *param, *act;
  long calls, bad_calls;
} mem_model;

static double mem_range(const mem_model *m, int n_stages, int stage, int a, int b) {
  double sum = 0, peak = 0;
  for (int i = a; i < b; i++) {
    sum += m->param[i];
    peak = fmax(peak, m->act[i]);
  }
  return sum + (n_stages - stage) * peak;
}

static double mem_callback(void *ctx, int n_stages, int stage, int first, int last) {
  mem_model *m = ctx;
  m->calls++;
  if (stage < 0 || stage >= n_stages || first < 0 || first >= last || last > m->n) {
    m->bad_calls++;
    return 0;
  }
  return mem_range(m, n_stages, stage, first, last);
}

static double rel_slack(double x) { return 1e-9 * fmax(1.0, x); }
static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

/* ---- table-driven cases ---- */

typedef struct {
  const char *name;
  int n, P;
  double w[MAXN], t[MAXN];
  int time_is_weight, memory, cap_uniform;
  double param[MAXN], act[MAXN], cap[MAXP];
  int rc;
  int bounds[MAXP + 1];
  double max_w, max_t;
  part_failure why;
} solve_case;

#define ONES10 {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
#define FAIL(st, ly, nd, cp, fp, fs) {.stage = st, .layer = ly, .need = nd, .cap = cp, \
                                      .fit_prefix = fp, .fit_stages = fs}

static const solve_case g_cases[] = {
    {.name = "uniform 10/4: earliest bounds put the short stage first", .n = 10, .P = 4,
     .w = ONES10, .time_is_weight = 1, .bounds = {0, 1, 4, 7, 10}, .max_w = 3, .max_t = 3},
    {.name = "uniform 10/4 with equal times", .n = 10, .P = 4, .w = ONES10, .t = ONES10,
     .bounds = {0, 1, 4, 7, 10}, .max_w = 3, .max_t = 3},
    {.name = "one huge layer, weight only", .n = 9, .P = 4, .w = {1, 1, 1, 100, 1, 1, 1, 1, 1},
     .time_is_weight = 1, .bounds = {0, 1, 3, 4, 9}, .max_w = 100, .max_t = 100},
    {.name = "one huge layer, time breaks the tie", .n = 9, .P = 4,
     .w = {1, 1, 1, 100, 1, 1, 1, 1, 1}, .t = {2, 2, 2, 3, 2, 2, 2, 2, 2},
     .bounds = {0, 3, 4, 6, 9}, .max_w = 100, .max_t = 6},
    {.name = "type count, weight only", .n = 10, .P = 2, .w = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0},
     .time_is_weight = 1, .bounds = {0, 4, 10}, .max_w = 2, .max_t = 2},
    {.name = "type count, time secondary", .n = 10, .P = 2, .w = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0},
     .t = ONES10, .bounds = {0, 5, 10}, .max_w = 2, .max_t = 5},
    {.name = "all zero", .n = 5, .P = 3, .t = {0, 0, 0, 0, 0}, .bounds = {0, 1, 2, 5}},
    {.name = "no cap", .n = 8, .P = 2, .w = {1, 1, 1, 1, 1, 1, 1, 1}, .time_is_weight = 1,
     .memory = 1, .param = {1, 1, 1, 1, 1, 1, 1, 1}, .bounds = {0, 4, 8}, .max_w = 4, .max_t = 4},
    {.name = "binding cap on stage 0 only", .n = 8, .P = 2, .w = {1, 1, 1, 1, 1, 1, 1, 1},
     .time_is_weight = 1, .memory = 1, .param = {1, 1, 1, 1, 1, 1, 1, 1}, .cap = {3, 0},
     .bounds = {0, 3, 8}, .max_w = 5, .max_t = 5},
    {.name = "uniform cap, 1F1B activations shrink later stages' room", .n = 6, .P = 3,
     .w = {1, 1, 1, 1, 1, 1}, .time_is_weight = 1, .memory = 1, .param = {1, 1, 1, 1, 1, 1},
     .act = {1, 1, 1, 1, 1, 1}, .cap = {4, 4, 4}, .cap_uniform = 1, .bounds = {0, 1, 3, 6},
     .max_w = 3, .max_t = 3},
    {.name = "heterogeneous caps", .n = 6, .P = 3, .w = {1, 1, 1, 1, 1, 1}, .time_is_weight = 1,
     .memory = 1, .param = {1, 1, 1, 1, 1, 1}, .act = {1, 1, 1, 1, 1, 1}, .cap = {5, 3, 0},
     .bounds = {0, 2, 3, 6}, .max_w = 3, .max_t = 3},
    {.name = "too little memory: 4 layers fit in 2 stages, 4 stages fit all", .n = 6, .P = 2,
     .w = {1, 1, 1, 1, 1, 1}, .time_is_weight = 1, .memory = 1, .param = {2, 2, 2, 2, 2, 2},
     .act = {1, 1, 1, 1, 1, 1}, .cap = {6, 6}, .cap_uniform = 1, .rc = -2,
     .why = FAIL(-1, -1, 0, 0, 4, 4)},
    {.name = "stage 0 cannot hold layer 0, the only layer it can hold alone", .n = 5, .P = 2, .w = {1, 1, 1, 1, 1},
     .time_is_weight = 1, .memory = 1, .param = {2, 1, 0.5, 1, 2}, .act = {1, 1, 1, 1, 1},
     .cap = {2.4, 10}, .rc = -2, .why = FAIL(0, 0, 4, 2.4, 0, 0)},
    {.name = "stage 0 starved, uniform caps: no stage count helps", .n = 5, .P = 2,
     .w = {1, 1, 1, 1, 1}, .time_is_weight = 1, .memory = 1, .param = {2, 1, 0.5, 1, 2},
     .act = {1, 1, 1, 1, 1}, .cap = {2.4, 2.4}, .cap_uniform = 1, .rc = -2,
     .why = FAIL(0, 0, 4, 2.4, 0, 0)},
    {.name = "stage 1 (the last) cannot hold the last layer, stage 0 uncapped", .n = 5, .P = 2, .w = {1, 1, 1, 1, 1},
     .time_is_weight = 1, .memory = 1, .param = {2, 1, 0.5, 1, 2}, .act = {1, 1, 1, 1, 1},
     .cap = {0, 1.4}, .rc = -2, .why = FAIL(1, 4, 3, 1.4, 0, 0)},
    {.name = "P == n", .n = 4, .P = 4, .w = {3, 1, 2, 5}, .t = {1, 7, 1, 1},
     .bounds = {0, 1, 2, 3, 4}, .max_w = 5, .max_t = 7},
    {.name = "P == n, one layer too big", .n = 4, .P = 4, .w = {3, 1, 2, 5}, .time_is_weight = 1,
     .memory = 1, .param = {1, 1, 9, 1}, .cap = {5, 5, 5, 5}, .cap_uniform = 1, .rc = -2,
     .why = FAIL(2, 2, 9, 5, 0, 0)},
    {.name = "P == 1", .n = 5, .P = 1, .w = {1, 2, 3, 4, 5}, .t = {1, 1, 1, 1, 1},
     .bounds = {0, 5}, .max_w = 15, .max_t = 5},
    {.name = "P == 1 over the cap", .n = 5, .P = 1, .w = {1, 2, 3, 4, 5}, .time_is_weight = 1,
     .memory = 1, .param = {1, 1, 1, 1, 1}, .cap = {2}, .cap_uniform = 1, .rc = -2,
     .why = FAIL(-1, -1, 0, 0, 2, 3)},
    {.name = "P > n", .n = 3, .P = 4, .w = {1, 1, 1}, .time_is_weight = 1, .rc = -1},
    {.name = "P == 0", .n = 3, .P = 0, .w = {1, 1, 1}, .time_is_weight = 1, .rc = -1},
};

static void run_case(const solve_case *c) {
  mem_model m = {.n = c->n, .param = c->param, .act = c->act};
  part_problem p = {.n_layers = c->n, .n_stages = c->P, .weight = c->w,
                    .time = c->time_is_weight ? c->w : c->t, .cap_uniform = c->cap_uniform};
  if (c->memory) p.stage_memory = mem_callback, p.ctx = &m, p.cap = c->cap;
  int bounds[MAXP + 1] = {0};
  double mw = -1, mt = -1;
  part_failure why;
  memset(&why, 0x5a, sizeof why);
  int rc = part_solve(&p, bounds, &mw, &mt, &why);
  CHECK(rc == c->rc, "%s: rc %d, want %d", c->name, rc, c->rc);
  CHECK(m.bad_calls == 0, "%s: %ld out-of-range memory calls", c->name, m.bad_calls);
  if (rc == 0 && c->rc == 0) {
    for (int s = 0; s <= c->P; s++)
      CHECK(bounds[s] == c->bounds[s], "%s: bounds[%d] = %d, want %d", c->name, s, bounds[s],
            c->bounds[s]);
    CHECK(close_to(mw, c->max_w), "%s: max weight %g, want %g", c->name, mw, c->max_w);
    CHECK(close_to(mt, c->max_t), "%s: max time %g, want %g", c->name, mt, c->max_t);
  }
  if (rc == -2 && c->rc == -2) {
    const part_failure *e = &c->why;
    CHECK(why.stage == e->stage, "%s: why.stage %d, want %d", c->name, why.stage, e->stage);
    if (e->stage >= 0) {
      CHECK(why.layer == e->layer, "%s: why.layer %d, want %d", c->name, why.layer, e->layer);
      CHECK(close_to(why.need, e->need), "%s: why.need %g, want %g", c->name, why.need, e->need);
      CHECK(why.cap == e->cap, "%s: why.cap %g, want %g", c->name, why.cap, e->cap);
    }
    CHECK(why.fit_prefix == e->fit_prefix, "%s: fit_prefix %d, want %d", c->name, why.fit_prefix,
          e->fit_prefix);
    CHECK(why.fit_stages == e->fit_stages, "%s: fit_stages %d, want %d", c->name, why.fit_stages,
          e->fit_stages);
  }
}

static void test_table(void) {
  for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) run_case(&g_cases[i]);
}

/* A cap with no memory callback, and a callback with no cap, constrain nothing and call
 * nothing; a NULL why is allowed on failure. */
static void test_unconstrained_paths(void) {
  double w[6] = {1, 1, 1, 1, 1, 1}, param[6] = {5, 5, 5, 5, 5, 5}, act[6] = {0};
  double cap[3] = {1, 1, 1};
  mem_model m = {.n = 6, .param = param, .act = act};
  part_problem p = {.n_layers = 6, .n_stages = 3, .weight = w, .time = w, .cap = cap};
  int bounds[4];
  CHECK(part_solve(&p, bounds, NULL, NULL, NULL) == 0, "cap without callback must be ignored");
  CHECK(bounds[1] == 2 && bounds[2] == 4, "bounds %d %d", bounds[1], bounds[2]);
  p.cap = NULL, p.stage_memory = mem_callback, p.ctx = &m;
  CHECK(part_solve(&p, bounds, NULL, NULL, NULL) == 0, "callback without cap must be ignored");
  CHECK(m.calls == 0, "%ld memory calls without any cap", m.calls);
  p.cap = cap;
  CHECK(part_solve(&p, bounds, NULL, NULL, NULL) == -2, "infeasible with why == NULL");
  double bad[6] = {1, 1, -1, 1, 1, 1};
  p.weight = bad, p.time = w;
  CHECK(part_solve(&p, bounds, NULL, NULL, NULL) == -1, "negative weight must be rejected");
  p.weight = w, p.time = NULL, p.cap = NULL;
  CHECK(part_solve(&p, bounds, NULL, NULL, NULL) == 0, "time == NULL means time is weight");
}

/* ---- brute force over all C(n - 1, P - 1) partitions ---- */

typedef struct {
  int n, P;
  double w[MAXN], t[MAXN];
  int time_is_weight, mode, cap_uniform;
  double param[MAXN], act[MAXN], cap[MAXP];
} instance;

static const double *inst_time(const instance *x) { return x->time_is_weight ? x->w : x->t; }

static int stage_fits(const instance *x, int n_stages, const double *cap, int s, int a, int b) {
  if (x->mode == 0 || !(cap[s] > 0)) return 1;
  mem_model m = {.n = x->n, .param = x->param, .act = x->act};
  return mem_range(&m, n_stages, s, a, b) <= cap[s];
}

/* All partitions of [0, n) into P non-empty stages, bounds in lexicographic order. */
static int enumerate(int n, int P, int (*out)[MAXP + 1]) {
  int b[MAXP + 1], count = 0, s = 1;
  b[0] = 0, b[P] = n;
  if (P == 1) {
    memcpy(out[0], b, sizeof b);
    return 1;
  }
  b[1] = 0;
  while (s >= 1) { /* b[s] advances; deeper stages restart just after it */
    if (++b[s] > n - P + s) {
      s--;
      continue;
    }
    if (s == P - 1) {
      memcpy(out[count++], b, sizeof b);
    } else {
      b[s + 1] = b[s];
      s++;
    }
  }
  return count;
}

static int plan_fits(const instance *x, int n_stages, const double *cap, const int *b) {
  for (int s = 0; s < n_stages; s++)
    if (!stage_fits(x, n_stages, cap, s, b[s], b[s + 1])) return 0;
  return 1;
}

static double stage_max(const double *v, const int *b, int P) {
  double m = 0;
  for (int s = 0; s < P; s++) {
    double sum = 0;
    for (int i = b[s]; i < b[s + 1]; i++) sum += v[i];
    m = fmax(m, sum);
  }
  return m;
}

typedef struct {
  int feasible, bounds[MAXP + 1];
  double max_w, max_t; /* of the chosen plan */
  part_failure why;
} brute_answer;

static int any_plan_fits(const instance *x, int n, int n_stages, const double *cap) {
  static int parts[1 << 12][MAXP + 1];
  int count = enumerate(n, n_stages, parts);
  for (int i = 0; i < count; i++)
    if (plan_fits(x, n_stages, cap, parts[i])) return 1;
  return 0;
}

static void brute_explain(const instance *x, part_failure *why) {
  memset(why, 0, sizeof *why);
  why->stage = why->layer = -1;
  for (int s = 0; s < x->P && x->P > 1 && why->stage < 0; s++) {
    if (!(x->cap[s] > 0)) continue;
    mem_model m = {.n = x->n, .param = x->param, .act = x->act};
    int best = -1;
    double need = 0;
    /* stage 0 holds layer 0, the last stage the last layer, a middle stage any of s..n-P+s */
    int lo = s == x->P - 1 ? x->n - 1 : s, hi = s == 0 ? 0 : x->n - x->P + s;
    for (int l = lo; l <= hi; l++) {
      double v = mem_range(&m, x->P, s, l, l + 1);
      if (best < 0 || v < need) best = l, need = v;
    }
    if (need > x->cap[s]) why->stage = s, why->layer = best, why->need = need, why->cap = x->cap[s];
  }
  for (int k = x->n; k >= x->P && !why->fit_prefix; k--)
    if (any_plan_fits(x, k, x->P, x->cap)) why->fit_prefix = k;
  if (!x->cap_uniform) return;
  double ucap[MAXN];
  for (int i = 0; i < MAXN; i++) ucap[i] = x->cap[0];
  for (int k = x->P + 1; k <= x->n && !why->fit_stages; k++)
    if (any_plan_fits(x, x->n, k, ucap)) why->fit_stages = k;
}

static void brute_solve(const instance *x, brute_answer *ans) {
  static int parts[1 << 12][MAXP + 1];
  static double mw[1 << 12], mt[1 << 12];
  static int ok[1 << 12];
  int count = enumerate(x->n, x->P, parts);
  double wstar = INFINITY, tstar = INFINITY;
  memset(ans, 0, sizeof *ans);
  for (int i = 0; i < count; i++) {
    ok[i] = plan_fits(x, x->P, x->cap, parts[i]);
    mw[i] = stage_max(x->w, parts[i], x->P);
    mt[i] = stage_max(inst_time(x), parts[i], x->P);
    if (ok[i]) wstar = fmin(wstar, mw[i]);
  }
  if (wstar == INFINITY) {
    brute_explain(x, &ans->why);
    return;
  }
  for (int i = 0; i < count; i++)
    if (ok[i] && mw[i] <= wstar + rel_slack(wstar)) tstar = fmin(tstar, mt[i]);
  for (int i = 0; i < count; i++) /* lexicographic order: the first match is the earliest */
    if (ok[i] && mw[i] <= wstar + rel_slack(wstar) && mt[i] <= tstar + rel_slack(tstar)) {
      ans->feasible = 1;
      memcpy(ans->bounds, parts[i], sizeof ans->bounds);
      ans->max_w = mw[i], ans->max_t = mt[i];
      return;
    }
}

/* ---- random instances ---- */

static unsigned long long g_rng = 0x9e3779b97f4a7c15ull;

static unsigned rnd(unsigned bound) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (unsigned)(g_rng >> 11) % bound;
}

/* Zeros, small integers (exact ties) and tenths (ties only in exact arithmetic) dominate. */
static double rnd_value(void) {
  switch (rnd(5)) {
    case 0: return 0;
    case 1: case 2: return 1 + rnd(3);
    case 3: return 0.1 * (1 + rnd(5));
    default: return rnd(1 << 20) / (double)(1 << 18);
  }
}

/* A cap around the memory of a random range (often exactly equal to one), 0 now and then. */
static double rnd_cap(const instance *x, int s) {
  mem_model m = {.n = x->n, .param = x->param, .act = x->act};
  int a = (int)rnd((unsigned)x->n), len = 1 + (int)rnd((unsigned)(x->n - a));
  double v = mem_range(&m, x->P, s < x->P ? s : 0, a, a + len);
  switch (rnd(4)) {
    case 0: return v;
    case 1: return v * 0.5;
    default: return v * (1 + rnd(3) * 0.25);
  }
}

/* The largest stage memory of an even split into k stages: a uniform cap that fits k stages,
 * so failing instances often have a fit_stages answer. */
static double even_split_cap(const instance *x, int k) {
  mem_model m = {.n = x->n, .param = x->param, .act = x->act};
  double c = 0;
  for (int s = 0; s < k; s++)
    c = fmax(c, mem_range(&m, k, s, s * x->n / k, (s + 1) * x->n / k));
  return c;
}

static void rnd_instance(instance *x) {
  memset(x, 0, sizeof *x);
  x->n = 1 + (int)rnd(9);
  x->P = 1 + (int)rnd((unsigned)x->n);
  x->time_is_weight = rnd(4) == 0;
  for (int i = 0; i < x->n; i++) {
    x->w[i] = rnd_value(), x->t[i] = rnd_value();
    x->param[i] = rnd_value(), x->act[i] = rnd(3) ? rnd_value() : 0;
  }
  /* 0 none, 1 callback and no cap, 2 uniform, 3 mixed, 4 tight uniform, 5 fits more stages */
  x->mode = (int)rnd(6);
  double c = rnd_cap(x, (int)rnd((unsigned)x->P));
  if (x->mode == 5) c = even_split_cap(x, x->P + (int)rnd((unsigned)(x->n - x->P + 1)));
  for (int s = 0; s < x->P; s++) {
    if (x->mode == 2 || x->mode == 5) x->cap[s] = c;
    if (x->mode == 3) x->cap[s] = rnd(4) ? rnd_cap(x, s) : 0;
    if (x->mode == 4) x->cap[s] = c * 0.3;
  }
  x->cap_uniform = x->mode == 2 || x->mode == 4 || x->mode == 5;
}

static void print_list(const char *name, const double *v, int n) {
  fprintf(stderr, "  %s:", name);
  for (int i = 0; i < n; i++) fprintf(stderr, " %.17g", v[i]);
  fputc('\n', stderr);
}

static void print_instance(int id, const instance *x) {
  fprintf(stderr, "instance %d: n %d P %d mode %d uniform %d time_is_weight %d\n", id, x->n,
          x->P, x->mode, x->cap_uniform, x->time_is_weight);
  print_list("weight", x->w, x->n);
  if (!x->time_is_weight) print_list("time", x->t, x->n);
  print_list("param", x->param, x->n);
  print_list("act", x->act, x->n);
  print_list("cap", x->cap, x->P);
}

static void compare_failure(int id, const part_failure *got, const part_failure *want) {
  CHECK(got->stage == want->stage, "#%d why.stage %d, want %d", id, got->stage, want->stage);
  if (want->stage >= 0 && got->stage == want->stage) {
    CHECK(got->layer == want->layer, "#%d why.layer %d, want %d", id, got->layer, want->layer);
    CHECK(close_to(got->need, want->need), "#%d why.need %g, want %g", id, got->need, want->need);
    CHECK(got->cap == want->cap, "#%d why.cap %g, want %g", id, got->cap, want->cap);
  }
  CHECK(got->fit_prefix == want->fit_prefix, "#%d fit_prefix %d, want %d", id, got->fit_prefix,
        want->fit_prefix);
  CHECK(got->fit_stages == want->fit_stages, "#%d fit_stages %d, want %d", id, got->fit_stages,
        want->fit_stages);
}

static void check_random(int id, const instance *x, int *failures_seen) {
  mem_model m = {.n = x->n, .param = x->param, .act = x->act};
  part_problem p = {.n_layers = x->n, .n_stages = x->P, .weight = x->w, .time = inst_time(x),
                    .cap_uniform = x->cap_uniform};
  if (x->mode) p.stage_memory = mem_callback, p.ctx = &m, p.cap = x->mode == 1 ? NULL : x->cap;
  int bounds[MAXP + 1], failed_before = g_failed;
  double mw = -1, mt = -1;
  part_failure why;
  brute_answer want;
  brute_solve(x, &want);
  int rc = part_solve(&p, bounds, &mw, &mt, &why);
  CHECK(rc == (want.feasible ? 0 : -2), "#%d rc %d, brute force feasible %d", id, rc,
        want.feasible);
  CHECK(m.bad_calls == 0, "#%d %ld out-of-range memory calls", id, m.bad_calls);
  long limit = 3L * x->P * (x->n - x->P + 1);
  if (rc == 0 || !x->cap_uniform)
    CHECK(m.calls <= limit, "#%d %ld memory calls > %ld", id, m.calls, limit);
  if (rc == 0 && want.feasible) {
    for (int s = 0; s <= x->P; s++)
      CHECK(bounds[s] == want.bounds[s], "#%d bounds[%d] = %d, want %d", id, s, bounds[s],
            want.bounds[s]);
    CHECK(close_to(mw, want.max_w), "#%d max weight %.17g, want %.17g", id, mw, want.max_w);
    CHECK(close_to(mt, want.max_t), "#%d max time %.17g, want %.17g", id, mt, want.max_t);
  }
  if (rc == -2 && !want.feasible) {
    compare_failure(id, &why, &want.why);
    ++*failures_seen;
  }
  if (g_failed != failed_before) print_instance(id, x);
}

static void test_random_small(void) {
  int failures_seen = 0, count = 3000;
  for (int id = 0; id < count; id++) {
    instance x;
    rnd_instance(&x);
    check_random(id, &x, &failures_seen);
  }
  CHECK(failures_seen > count / 10, "only %d infeasible instances: caps too loose", failures_seen);
}

/* ---- O(P * n^2) reference DP on larger instances ---- */

typedef struct {
  int n, P;
  double *w, *t, *param, *act, *cap;
  double *wsum, *tsum;
} big_instance;

/* ok[s][a]: stages s.. can cover [a, n) with stage sums <= wl / tl and memory within caps;
 * memory is summed incrementally, independent of the solver's scan. */
static void ref_reach(const big_instance *x, double wl, double tl, unsigned char *ok) {
  int n = x->n, P = x->P;
  memset(ok, 0, (size_t)(P + 1) * (n + 1));
  ok[(size_t)P * (n + 1) + n] = 1;
  for (int s = P - 1; s >= 0; s--)
    for (int a = s; a <= n - P + s; a++) {
      double par = 0, peak = 0;
      for (int b = a + 1; b <= n - P + s + 1; b++) {
        par += x->param[b - 1], peak = fmax(peak, x->act[b - 1]);
        if (x->cap[s] > 0 && par + (P - s) * peak > x->cap[s]) break;
        if (x->wsum[b] - x->wsum[a] > wl || x->tsum[b] - x->tsum[a] > tl) break;
        if (ok[(size_t)(s + 1) * (n + 1) + b]) {
          ok[(size_t)s * (n + 1) + a] = 1;
          break;
        }
      }
    }
}

/* Classic min-max DP: best[s][a] = min over b of max(sum(a, b), best[s + 1][b]). */
static double ref_minmax(const big_instance *x, const double *sum, double wl, double *best) {
  int n = x->n, P = x->P;
  for (size_t i = 0; i < (size_t)(P + 1) * (n + 1); i++) best[i] = INFINITY;
  best[(size_t)P * (n + 1) + n] = 0;
  for (int s = P - 1; s >= 0; s--)
    for (int a = s; a <= n - P + s; a++) {
      double par = 0, peak = 0, m = INFINITY;
      for (int b = a + 1; b <= n - P + s + 1; b++) {
        par += x->param[b - 1], peak = fmax(peak, x->act[b - 1]);
        if (x->cap[s] > 0 && par + (P - s) * peak > x->cap[s]) break;
        if (x->wsum[b] - x->wsum[a] > wl) break;
        m = fmin(m, fmax(sum[b] - sum[a], best[(size_t)(s + 1) * (n + 1) + b]));
      }
      best[(size_t)s * (n + 1) + a] = m;
    }
  return best[0];
}

static void check_big(int id, big_instance *x, int with_reference) {
  int n = x->n, P = x->P, *bounds = pt_calloc((size_t)P + 1, sizeof *bounds);
  mem_model m = {.n = n, .param = x->param, .act = x->act};
  part_problem p = {.n_layers = n, .n_stages = P, .weight = x->w, .time = x->t,
                    .stage_memory = mem_callback, .ctx = &m, .cap = x->cap};
  double mw = 0, mt = 0;
  int rc = part_solve(&p, bounds, &mw, &mt, NULL);
  long limit = 2L * P * (n - P + 1);
  CHECK(m.calls <= limit && m.bad_calls == 0, "big #%d: %ld memory calls (limit %ld), %ld bad",
        id, m.calls, limit, m.bad_calls);
  if (with_reference) {
    size_t cells = (size_t)(P + 1) * (n + 1);
    double *best = pt_calloc(cells, sizeof *best);
    unsigned char *ok = pt_calloc(cells, 1);
    double wstar = ref_minmax(x, x->wsum, INFINITY, best);
    CHECK((rc == 0) == (wstar < INFINITY), "big #%d: rc %d, reference W* %g", id, rc, wstar);
    if (rc == 0 && wstar < INFINITY) {
      double wl = wstar + rel_slack(wstar), tstar = ref_minmax(x, x->tsum, wl, best);
      CHECK(close_to(mw, wstar), "big #%d: W %.17g, reference %.17g", id, mw, wstar);
      CHECK(close_to(mt, tstar), "big #%d: T %.17g, reference %.17g", id, mt, tstar);
      /* earliest: a shorter stage s is a sub-range of the solver's, so it fits the limits and
       * memory too; it must not leave a completable suffix */
      ref_reach(x, wl, tstar + rel_slack(tstar), ok);
      CHECK(ok[0], "big #%d: reference finds no plan within its own optimum", id);
      for (int s = 0; s + 1 < P; s++)
        for (int b = bounds[s] + 1; b < bounds[s + 1]; b++)
          if (ok[(size_t)(s + 1) * (n + 1) + b]) {
            CHECK(0, "big #%d: stage %d could end at %d < %d", id, s, b, bounds[s + 1]);
            break;
          }
    }
    free(best);
    free(ok);
  }
  if (rc == 0) {
    CHECK(bounds[0] == 0 && bounds[P] == n, "big #%d: ends %d %d", id, bounds[0], bounds[P]);
    for (int s = 0; s < P; s++) {
      CHECK(bounds[s] < bounds[s + 1], "big #%d: empty stage %d", id, s);
      double need = mem_range(&m, P, s, bounds[s], bounds[s + 1]);
      CHECK(!(x->cap[s] > 0) || need <= x->cap[s], "big #%d: stage %d needs %g > cap %g", id, s,
            need, x->cap[s]);
    }
  }
  free(bounds);
}

static void big_fill(big_instance *x, int n, int P) {
  x->n = n, x->P = P;
  x->w = pt_calloc((size_t)n, sizeof(double)), x->t = pt_calloc((size_t)n, sizeof(double));
  x->param = pt_calloc((size_t)n, sizeof(double)), x->act = pt_calloc((size_t)n, sizeof(double));
  x->cap = pt_calloc((size_t)P, sizeof(double));
  x->wsum = pt_calloc((size_t)n + 1, sizeof(double));
  x->tsum = pt_calloc((size_t)n + 1, sizeof(double));
  double total = 0;
  for (int i = 0; i < n; i++) {
    x->w[i] = rnd(4) ? 1 + rnd(50) : 0, x->t[i] = rnd_value();
    x->param[i] = 1 + rnd(20), x->act[i] = rnd(8);
    total += x->param[i];
    x->wsum[i + 1] = x->wsum[i] + x->w[i], x->tsum[i + 1] = x->tsum[i] + x->t[i];
  }
  for (int s = 0; s < P; s++) /* room for about 1.3x an even share, less on early stages */
    x->cap[s] = rnd(6) ? 1.3 * total / P + (P - s) * 4 : 0;
}

static void big_free(big_instance *x) {
  free(x->w), free(x->t), free(x->param), free(x->act), free(x->cap);
  free(x->wsum), free(x->tsum);
}

static void test_big(void) {
  static const int sizes[][3] = {{40, 5, 1},  {100, 8, 1},  {200, 12, 1}, {300, 1, 1},
                                 {120, 120, 1}, {1000, 16, 1}, {3000, 64, 0}};
  for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
    big_instance x;
    big_fill(&x, sizes[i][0], sizes[i][1]);
    check_big(i, &x, sizes[i][2]);
    big_free(&x);
  }
}

int main(void) {
  test_table();
  test_unconstrained_paths();
  test_random_small();
  test_big();
  return test_summary("partition solve");
}
