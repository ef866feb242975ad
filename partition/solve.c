/* partition/solve.c: exact optimal contiguous partitions (see solve.h).
 *
 * Both objectives are bottlenecks (a maximum over stages), so rather than a min-max DP over
 * (stage, start, end) triples, O(P * n^2), the solver searches the objective value. For a limit
 * X on stage weight (and Y on stage time), "does a plan exist" is a reachability DP over
 * (stage, start) costing O(P * n): from a start a, the ends a stage may take form an interval
 * [a + 1, e] because weights and times are non-negative and memory is monotone in the range.
 * The optimum is the smallest feasible double, and non-negative doubles order like their bit
 * patterns, so bisecting the bits finds it exactly (an attained stage sum) in at most 64 steps.
 *
 *   pass 1: W* = least feasible weight limit;
 *   pass 2: T* = least feasible time limit with weights <= W* + slack (skipped when time ==
 *           weight);
 *   pass 3: the reachability table for (W* + slack, T* + slack) says which (stage, start)
 *           suffixes can still be completed, so a forward walk taking the smallest such end at
 *           every stage yields the lexicographically smallest bounds among the optima.
 *
 * Stage sums are prefix-sum differences; the slack, 1e-9 * max(1, value), makes sums that are
 * equal in exact arithmetic but round differently count as ties.
 *
 * Memory: for every (stage, start) the last end that fits is found by a two-pointer scan (a
 * range that fits means its sub-ranges fit, so the end never moves back): at most
 * 2 * (n - P + 1) callback calls per stage, O(P * n) in all, made once before the search.
 * Total cost O(P * n * 64) time, O(P * n) space. Only a failure costs more: explaining it
 * tries other stage counts (see part_fit_stages).
 */
#include "partition/solve.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct {
  const part_problem *p;
  int n, P;
  double *wsum, *tsum;  /* prefix sums [n + 1]; tsum == wsum when time is weight */
  int *mem_end;         /* [P][n + 1]: last end b with [a, b) fitting stage s (a: none) */
  int *wend, *tend;     /* [n + 1]: last end within the current weight / time limit */
  int use_tend;         /* the current check limits time too */
  unsigned char *ok;    /* [P + 1][n + 1]: the suffix from (stage s, start a) can be completed */
  int *count;           /* [n + 2]: prefix counts of one ok row */
} part_ws;

static double part_slack(double x) { return 1e-9 * fmax(1.0, x); }

static int part_min3(int a, int b, int c) {
  int m = a < b ? a : b;
  return m < c ? m : c;
}

/* The cap that binds stage s, or 0 when nothing is checked there (the callback then is never
 * called for it). */
static double part_stage_cap(const part_problem *p, int s) {
  if (!p->stage_memory || !p->cap || !(p->cap[s] > 0)) return 0;
  return p->cap[s];
}

/* Rejects what the contract forbids; NaN or negative weights would break the monotone sums
 * every interval argument here relies on. */
static int part_input_valid(const part_problem *p) {
  if (p->n_stages < 1 || p->n_stages > p->n_layers || !p->weight) return 0;
  for (int i = 0; i < p->n_layers; i++) {
    if (!(p->weight[i] >= 0) || !isfinite(p->weight[i])) return 0;
    if (p->time && (!(p->time[i] >= 0) || !isfinite(p->time[i]))) return 0;
  }
  return 1;
}

static double *part_prefix_sums(const double *v, int n) {
  double *sum = pt_calloc((size_t)n + 1, sizeof *sum);
  for (int i = 0; i < n; i++) sum[i + 1] = sum[i] + v[i];
  return sum;
}

/* end[a] for each start a in [lo, hi] (only where want[a] when want is given): the largest end
 * b <= emax (the stage's last possible end) such that [a, b) fits `cap` at `stage` of
 * `n_stages`, or a when not even layer a fits. If [a, r) fits then so does [a', r) for
 * a < a' < r (monotone memory), so r never moves back: one failing call per start plus one
 * call per step of r. */
static void part_fill_mem_ends(const part_problem *p, int n_stages, int stage, double cap,
                               int lo, int hi, int emax, const unsigned char *want, int *end) {
  int r = lo;
  for (int a = lo; a <= hi; a++) {
    if (want && !want[a]) continue;
    if (r < a) r = a;
    if (cap <= 0) r = emax;
    while (r < emax && p->stage_memory(p->ctx, n_stages, stage, a, r + 1) <= cap) r++;
    end[a] = r;
  }
}

static void part_ws_init(part_ws *w, const part_problem *p) {
  memset(w, 0, sizeof *w);
  w->p = p;
  w->n = p->n_layers;
  w->P = p->n_stages;
  size_t row = (size_t)w->n + 1;
  w->wsum = part_prefix_sums(p->weight, w->n);
  w->tsum = (p->time && p->time != p->weight) ? part_prefix_sums(p->time, w->n) : w->wsum;
  w->mem_end = pt_calloc((size_t)w->P * row, sizeof *w->mem_end);
  w->wend = pt_calloc(row, sizeof *w->wend);
  w->tend = pt_calloc(row, sizeof *w->tend);
  w->ok = pt_calloc((size_t)(w->P + 1) * row, 1);
  w->count = pt_calloc(row + 1, sizeof *w->count);
  for (int s = 0; s < w->P; s++)
    part_fill_mem_ends(p, w->P, s, part_stage_cap(p, s), s, s + w->n - w->P,
                       s + w->n - w->P + 1, NULL, w->mem_end + (size_t)s * row);
}

static void part_ws_free(part_ws *w) {
  if (w->tsum != w->wsum) free(w->tsum);
  free(w->wsum);
  free(w->mem_end);
  free(w->wend);
  free(w->tend);
  free(w->ok);
  free(w->count);
}

/* end[a] = the largest b with sum[b] - sum[a] <= limit. Rounded subtraction is monotone in both
 * operands, so the two-pointer scan stays exact for the computed sums. */
static void part_fill_limit_ends(const double *sum, int n, double limit, int *end) {
  int b = 0;
  for (int a = 0; a <= n; a++) {
    if (b < a) b = a;
    while (b < n && sum[b + 1] - sum[a] <= limit) b++;
    end[a] = b;
  }
}

/* Fills ok[s][a] backwards: stage s may start at a and end at some b in [a + 1, last end] from
 * which stages s + 1 .. P - 1 can be completed. Returns whether a whole plan exists. */
static int part_reach_suffix(part_ws *w) {
  int n = w->n, P = w->P;
  size_t row = (size_t)n + 1;
  memset(w->ok, 0, (size_t)(P + 1) * row);
  w->ok[(size_t)P * row + n] = 1;
  for (int s = P - 1; s >= 0; s--) {
    const unsigned char *next = w->ok + (size_t)(s + 1) * row;
    unsigned char *cur = w->ok + (size_t)s * row;
    const int *mem = w->mem_end + (size_t)s * row;
    for (int b = 0; b <= n; b++) w->count[b + 1] = w->count[b] + next[b];
    for (int a = s; a <= s + n - P; a++) {
      int e = part_min3(mem[a], w->wend[a], w->use_tend ? w->tend[a] : n);
      cur[a] = e > a && w->count[e + 1] > w->count[a + 1];
    }
  }
  return w->ok[0];
}

/* Whether some plan has every stage weight <= wlimit and time <= tlimit (INFINITY: no limit). */
static int part_feasible(part_ws *w, double wlimit, double tlimit) {
  part_fill_limit_ends(w->wsum, w->n, wlimit, w->wend);
  w->use_tend = tlimit < INFINITY;
  if (w->use_tend) part_fill_limit_ends(w->tsum, w->n, tlimit, w->tend);
  return part_reach_suffix(w);
}

static uint64_t part_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static double part_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* The least limit x in [0, top] that is feasible, top being feasible: on the weight when
 * on_time is 0, else on the time with the weight held at wlimit. */
static double part_min_limit(part_ws *w, int on_time, double wlimit, double top) {
  uint64_t lo = 0, hi = part_bits(top); /* from here on: lo infeasible, hi feasible */
  if (on_time ? part_feasible(w, wlimit, 0.0) : part_feasible(w, 0.0, INFINITY)) return 0.0;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    double x = part_from_bits(mid);
    if (on_time ? part_feasible(w, wlimit, x) : part_feasible(w, x, INFINITY))
      hi = mid;
    else
      lo = mid;
  }
  return part_from_bits(hi);
}

/* Forward walk over the final ok table: the smallest completable end at every stage gives the
 * lexicographically smallest bounds (an earlier choice never depends on a later one). */
static void part_walk(const part_ws *w, int *bounds) {
  size_t row = (size_t)w->n + 1;
  int a = 0;
  bounds[0] = 0;
  for (int s = 0; s < w->P; s++) {
    const unsigned char *next = w->ok + (size_t)(s + 1) * row;
    int e = part_min3(w->mem_end[(size_t)s * row + a], w->wend[a],
                      w->use_tend ? w->tend[a] : w->n);
    int b = a + 1;
    while (b < e && !next[b]) b++;
    bounds[s + 1] = a = b;
  }
}

static double part_max_stage(const double *sum, const int *bounds, int P) {
  double m = 0;
  for (int s = 0; s < P; s++) m = fmax(m, sum[bounds[s + 1]] - sum[bounds[s]]);
  return m;
}

/* Passes 1-3 on a problem known to have a plan. */
static void part_optimise(part_ws *w, int *bounds) {
  double wstar = part_min_limit(w, 0, 0.0, w->wsum[w->n]);
  double wlimit = wstar + part_slack(wstar), tlimit = INFINITY;
  if (w->tsum != w->wsum) {
    double tstar = part_min_limit(w, 1, wlimit, w->tsum[w->n]);
    tlimit = tstar + part_slack(tstar);
  }
  part_feasible(w, wlimit, tlimit);
  part_walk(w, bounds);
}

/* The single layers stage s could hold alone in some valid plan: stage 0 always starts at layer 0
 * and the last stage always ends at the last layer; a middle stage s can hold any one of layers
 * s .. n - P + s. (With one stage there is no single-layer content: nothing to report.) */
static void part_single_layers(int s, int P, int n, int *lo, int *hi) {
  *lo = s == P - 1 ? n - 1 : s;
  *hi = s == 0 ? 0 : n - P + s;
}

/* The first capped stage that cannot hold even one layer it could hold alone; the least-memory
 * such layer goes into why. */
static void part_find_starved_stage(const part_ws *w, part_failure *why) {
  const part_problem *p = w->p;
  size_t row = (size_t)w->n + 1;
  for (int s = 0; s < w->P && w->P > 1; s++) {
    double cap = part_stage_cap(p, s);
    int lo, hi, starved = cap > 0;
    part_single_layers(s, w->P, w->n, &lo, &hi);
    for (int l = lo; l <= hi && starved; l++) starved = w->mem_end[(size_t)s * row + l] == l;
    if (!starved) continue;
    why->stage = s;
    why->cap = cap;
    for (int l = lo; l <= hi; l++) {
      double m = p->stage_memory(p->ctx, w->P, s, l, l + 1);
      if (l == lo || m < why->need) why->need = m, why->layer = l;
    }
    return;
  }
}

/* Marks in `next` every end reachable from a marked start in cur[lo..hi] through end[]; ends are
 * nondecreasing in the start, so each position is written once. Returns the largest end
 * marked, or -1 when none is. */
static int part_spread(const unsigned char *cur, const int *end, int lo, int hi,
                       unsigned char *next) {
  int filled = lo, last = -1; /* positions <= filled are done */
  for (int a = lo; a <= hi; a++) {
    if (!cur[a] || end[a] <= a) continue;
    for (int b = (a + 1 > filled + 1 ? a + 1 : filled + 1); b <= end[a]; b++) next[b] = 1;
    if (end[a] > filled) filled = end[a];
    last = filled;
  }
  return last;
}

/* The most leading layers that split into P stages fitting the caps: forward reachability
 * over the memory ends already computed (a prefix's stage windows lie inside the model's). */
static int part_fit_prefix(const part_ws *w) {
  size_t row = (size_t)w->n + 1;
  unsigned char *cur = pt_calloc(row, 1), *next = pt_calloc(row, 1);
  int best = 0;
  cur[0] = 1;
  for (int s = 0; s < w->P; s++) {
    memset(next, 0, row);
    int last = part_spread(cur, w->mem_end + (size_t)s * row, s, s + w->n - w->P, next);
    if (last < 0) break;
    if (s == w->P - 1) best = last;
    unsigned char *t = cur;
    cur = next;
    next = t;
  }
  free(cur);
  free(next);
  return best;
}

/* Whether the whole model fits n_stages stages, each capped at cap: forward reachability with
 * memory ends computed only from reachable starts, stopping once none is reachable. */
static int part_fits_stages(const part_problem *p, int n_stages, double cap,
                            unsigned char *cur, unsigned char *next, int *end) {
  int n = p->n_layers, lo = 0, hi = 0;
  memset(cur, 0, (size_t)n + 1);
  cur[0] = 1;
  for (int s = 0; s < n_stages; s++) {
    int wlo = s, whi = s + n - n_stages; /* starts stage s may have */
    if (lo < wlo) lo = wlo;
    if (hi > whi) hi = whi;
    if (lo > hi) return 0;
    part_fill_mem_ends(p, n_stages, s, cap, lo, hi, whi + 1, cur, end);
    memset(next + lo, 0, (size_t)(n + 1 - lo));
    int last = part_spread(cur, end, lo, hi, next);
    if (last < 0) return 0;
    hi = last;
    while (lo <= hi && !next[lo]) lo++;
    unsigned char *t = cur;
    cur = next;
    next = t;
  }
  return cur[n];
}

/* The last end b in [a, emax] with [a, b) fitting (a when layer a alone does not): memory only
 * grows with b, so bisection needs O(log n) calls. */
static int part_last_fit(const part_problem *p, int n_stages, int s, double cap, int a,
                         int emax) {
  int lo = a, hi = emax + 1; /* [a, lo) fits (empty when lo == a); [a, hi) does not */
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (p->stage_memory(p->ctx, n_stages, s, a, mid) <= cap)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* A necessary condition for part_fits_stages in O(n_stages log n) calls: the last end fitting
 * from a start never decreases as the start moves later, so u = last_fit(u) bounds every
 * stage's reachable ends from above; the model cannot fit unless u reaches n. (It is exact
 * when no stage is refused a single layer.) */
static int part_may_fit_stages(const part_problem *p, int n_stages, double cap) {
  int n = p->n_layers, u = 0;
  for (int s = 0; s < n_stages && u >= s; s++)
    u = part_last_fit(p, n_stages, s, cap, u, s + n - n_stages + 1);
  return u == n;
}

/* The smallest stage count above P whose plan fits with every stage capped at cap[0]. The cheap
 * bound rules out most counts (e.g. every count too small to hold the model), so the full
 * check runs rarely; worst case O(n) calls per stage of every count tried. */
static int part_fit_stages(const part_problem *p) {
  size_t row = (size_t)p->n_layers + 1;
  unsigned char *cur = pt_calloc(row, 1), *next = pt_calloc(row, 1);
  int *end = pt_calloc(row, sizeof *end), found = 0;
  for (int k = p->n_stages + 1; k <= p->n_layers && !found; k++)
    if (part_may_fit_stages(p, k, p->cap[0]) && part_fits_stages(p, k, p->cap[0], cur, next, end))
      found = k;
  free(cur);
  free(next);
  free(end);
  return found;
}

static void part_explain(const part_ws *w, part_failure *why) {
  memset(why, 0, sizeof *why);
  why->stage = why->layer = -1;
  part_find_starved_stage(w, why);
  why->fit_prefix = part_fit_prefix(w);
  if (w->p->cap_uniform && part_stage_cap(w->p, 0) > 0) why->fit_stages = part_fit_stages(w->p);
}

int part_solve(const part_problem *p, int *bounds, double *max_weight, double *max_time,
               part_failure *why) {
  if (!p || !bounds || !part_input_valid(p)) return -1;
  part_ws w;
  part_ws_init(&w, p);
  int rc = 0;
  if (!part_feasible(&w, INFINITY, INFINITY)) {
    if (why) part_explain(&w, why);
    rc = -2;
  } else {
    part_optimise(&w, bounds);
    if (max_weight) *max_weight = part_max_stage(w.wsum, bounds, w.P);
    if (max_time) *max_time = part_max_stage(w.tsum, bounds, w.P);
  }
  part_ws_free(&w);
  return rc;
}
