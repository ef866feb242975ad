/* partition/auto_run.c: one candidate of the search (partition/auto.h): its boundaries, found by
 * moving one layer at a time from two starting splits, and its simulated step and memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "partition/auto_private.h"
#include "partition/plan.h"
#include "partition/solve.h"
#include "schedule/schedule_sim.h"

int auto_exhaustive_splits = 2000;

typedef struct {
  auto_ctx *a;
  pt_spec spec;         /* the spec with the candidate's schedule and interval */
  pt_model m;           /* the model seen through it */
  const pt_schedule *s;
  int C, ckpt;
  pt_sched_costs *costs; /* [C] */
  pt_sched_box *boxes;
  double *opt, *end;     /* [P] optimizer time, last action's end */
  auto_offload off;      /* pipeline.offload: the spec's shares and the searched ones */
  double rate;           /* offload copies, bytes per second */
} evaluator;

typedef struct {
  int64_t over, peak;
  double step, bubble, copy_s;
  int worst;
  int64_t *bytes;  /* [P] */
  double *offload; /* [P] the searched stages' shares */
} score;

/* Chunk c's F, B, I, W and transfers from its layers' times. Under checkpointing the backward
 * first runs the chunk's forward again, and a split schedule's I is the fused backward (W then
 * does nothing: engine/stage.h). */
static void chunk_costs(evaluator *ev, const int *b) {
  const pt_layer_times *t = ev->a->t;
  const pt_spec *sp = ev->m.spec;
  double elems = (double)sp->train.micro_batch_size * (ev->m.input_tokens ? (double)sp->seq_len : 1);
  double per_byte = 1.0 / t->p2p_bytes_per_s;
  double word = sp->train.precision == SPEC_PRECISION_BF16 ? 2 : 4; /* bf16 travels packed */
  for (int c = 0; c < ev->C; c++) {
    double f = 0, i = 0, w = 0;
    for (int l = b[c]; l < b[c + 1]; l++) f += t->f[l], i += t->i[l], w += t->w[l];
    double re = ev->ckpt ? f : 0;
    pt_sched_costs *k = &ev->costs[c];
    k->f = f, k->b = re + i + w;
    k->i = ev->ckpt ? re + i + w : i, k->w = ev->ckpt ? 0 : w;
    int out = ev->m.layers[b[c + 1] - 1].out_dim, in = ev->m.layers[b[c]].in_dim;
    k->send_act = c + 1 < ev->C ? t->p2p_latency_s + elems * out * word * per_byte : 0;
    k->send_grad = c > 0 ? t->p2p_latency_s + elems * in * word * per_byte : 0;
  }
}

/* Each rank's optimizer time, and with data parallelism the gradient all-reduce (a ring moves
 * 2 (D - 1) / D of the rank's gradients; a sharded optimizer's reduce-scatter and gather move
 * as much, and its update covers 1 / D of the layers' parameters). */
static void rank_costs(evaluator *ev, const pt_plan *p) {
  const pt_layer_times *t = ev->a->t;
  int D = p->data_parallel, shards = ev->m.spec->pipeline.shard_optimizer && D > 1 ? D : 1;
  for (int r = 0; r < ev->a->P; r++) {
    ev->opt[r] = 0;
    if (D > 1)
      ev->opt[r] = t->p2p_latency_s +
                   2.0 * (D - 1) / D * (double)p->mem[r].params / t->p2p_bytes_per_s;
  }
  for (int c = 0; c < ev->C; c++)
    for (int l = p->bounds[c]; l < p->bounds[c + 1]; l++)
      ev->opt[p->chunk_stage[c]] += t->opt[l] / shards;
}

static int simulate(evaluator *ev, const pt_sched_copies *copies, score *sc) {
  char err[256];
  double span = 0, busy = 0;
  int n = schedule_simulate_copies(ev->s, ev->costs, ev->C, copies, ev->boxes, &span, &busy,
                                   &sc->copy_s, err, sizeof err);
  if (n < 0) pt_fatal("planner: a built schedule cannot run: %s", err);
  for (int r = 0; r < ev->a->P; r++) ev->end[r] = 0;
  for (int i = 0; i < n; i++)
    ev->end[ev->boxes[i].stage] = fmax(ev->end[ev->boxes[i].stage], ev->boxes[i].t1);
  sc->step = 0;
  for (int r = 0; r < ev->a->P; r++) sc->step = fmax(sc->step, ev->end[r] + ev->opt[r]);
  sc->bubble = sched_bubble(ev->boxes, n, ev->a->P, 0.0, span);
  return 0;
}

static int evaluate(evaluator *ev, const int *bounds, score *sc, spec_errors *e) {
  pt_plan p;
  if (plan_build_layout(&p, &ev->m, ev->s, bounds, e) != 0) return -1;
  pt_auto_result *r = ev->a->r;
  if (!r->cap && p.cap) {
    r->cap = pt_calloc((size_t)p.n_stages, sizeof(double));
    memcpy(r->cap, p.cap, sizeof(double) * (size_t)p.n_stages);
  }
  for (int s = 0; s < p.n_stages; s++) sc->bytes[s] = p.mem[s].total;
  if (ev->off.search) auto_offload_choose(&ev->off, &ev->m, &p, sc->bytes);
  memcpy(sc->offload, ev->off.choice, sizeof(double) * (size_t)p.n_stages);
  for (int s = 0; s < p.n_stages; s++) p.mem[s].total = sc->bytes[s]; /* the searched offload in */
  sc->worst = plan_over_cap(&p, &sc->over);
  sc->peak = 0;
  for (int s = 0; s < p.n_stages; s++)
    if (sc->bytes[s] > sc->peak) sc->peak = sc->bytes[s];
  chunk_costs(ev, bounds);
  rank_costs(ev, &p);
  const pt_sched_copies *copies = auto_offload_copies(&ev->off, &ev->m, &p, ev->rate);
  plan_free(&p);
  r->evaluations++;
  return simulate(ev, copies, sc);
}

/* Fewer bytes over the caps, then a shorter step (beyond rounding), then less memory. */
static int better(const score *x, const score *y) {
  if (x->over != y->over) return x->over < y->over;
  if (fabs(x->step - y->step) > 1e-9 * fmax(x->step, y->step)) return x->step < y->step;
  return x->peak < y->peak;
}

static void swap_scores(score *x, score *y) {
  score t = *x;
  *x = *y, *y = t;
}

/* Whether moving boundaries j .. j + width - 1 by d keeps every chunk non-empty; moves them. */
static int shift(int *b, int C, int j, int width, int d) {
  if (j + width > C) return 0;
  for (int k = j; k < j + width; k++) b[k] += d;
  int ok = 1;
  for (int k = j - 1; k < j + width && ok; k++) ok = b[k] < b[k + 1];
  if (!ok)
    for (int k = j; k < j + width; k++) b[k] -= d;
  return ok;
}

/* Moves a boundary, or two neighbouring ones together (a chunk sliding), by one or two layers
 * while that helps: a local optimum of the split. */
static void improve(evaluator *ev, int *b, score *best, score *tmp, spec_errors *e) {
  static const int steps[] = {-1, 1, -2, 2};
  for (int round = 0, moved = 1; moved && round < AUTO_MAX_ROUNDS && !e->failed; round++) {
    moved = 0;
    for (int width = 1; width <= 2; width++)
      for (int j = 1; j < ev->C; j++)
        for (int k = 0; k < 4; k++) {
          if (!shift(b, ev->C, j, width, steps[k])) continue;
          if (evaluate(ev, b, tmp, e) == 0 && better(tmp, best)) {
            swap_scores(best, tmp);
            moved = 1;
          } else {
            shift(b, ev->C, j, width, -steps[k]);
          }
        }
  }
}

/* The number of splits of n layers into C non-empty chunks, C(n - 1, C - 1), as a double. */
static double count_splits(int n, int C) {
  double x = 1;
  for (int k = 1; k < C; k++) x = x * (n - C + k) / k;
  return x;
}

/* The next split in lexicographic order; 0 after the last. */
static int next_split(int *b, int C, int n) {
  for (int j = C - 1; j >= 1; j--)
    if (b[j] < n - (C - j)) {
      b[j]++;
      for (int k = j + 1; k < C; k++) b[k] = b[k - 1] + 1;
      return 1;
    }
  return 0;
}

/* Every split, when there are few enough: the exact optimum. */
static int exhaustive(evaluator *ev, int *b, score *best, score *tmp, spec_errors *e) {
  int C = ev->C, n = ev->m.n_layers, *cur = pt_calloc((size_t)C + 1, sizeof(int)), have = 0;
  for (int k = 0; k < C; k++) cur[k] = k;
  cur[C] = n;
  do {
    if (evaluate(ev, cur, tmp, e) != 0) break;
    if (!have || better(tmp, best)) {
      swap_scores(best, tmp);
      memcpy(b, cur, sizeof(int) * ((size_t)C + 1));
      have = 1;
    }
  } while (next_split(cur, C, n));
  free(cur);
  return have;
}

/* The split that balances the slowest chunk's time, memory aside. */
static int start_by_time(const evaluator *ev, int *b) {
  const pt_layer_times *t = ev->a->t;
  int n = ev->m.n_layers;
  double *w = pt_calloc((size_t)n, sizeof *w);
  for (int l = 0; l < n; l++) w[l] = t->f[l] * (ev->ckpt ? 2 : 1) + t->i[l] + t->w[l];
  part_problem prob = {.n_layers = n, .n_stages = ev->C, .weight = w, .time = w};
  int rc = part_solve(&prob, b, NULL, NULL, NULL);
  free(w);
  return rc;
}

/* The spec's own partition method for this schedule (balanced FLOPs and memory-aware under
 * auto), without the caps when no split of that method fits them. */
static int start_by_method(const evaluator *ev, int searched, int *b, char *why, size_t whysz) {
  pt_spec sp = ev->spec;
  pt_model m = ev->m;
  m.spec = &sp;
  if (searched) sp.pipeline.partition = SPEC_PARTITION_BALANCED, sp.pipeline.boundaries = NULL;
  pt_plan p;
  spec_errors e = {0};
  int rc = plan_build(&p, &m, &e);
  if (rc != 0 && sp.pipeline.max_memory) {
    sp.pipeline.max_memory = NULL;
    e = (spec_errors){0};
    rc = plan_build(&p, &m, &e);
  }
  if (rc != 0) return snprintf(why, whysz, "%.300s", e.msg), -1;
  memcpy(b, p.bounds, sizeof(int) * ((size_t)ev->C + 1));
  plan_free(&p);
  return 0;
}

static void evaluator_init(evaluator *ev, auto_ctx *a, const pt_auto_candidate *c,
                           const pt_schedule *s) {
  memset(ev, 0, sizeof *ev);
  ev->a = a, ev->s = s, ev->C = s->n_chunks, ev->ckpt = c->ckpt;
  ev->spec = *a->m->spec;
  ev->spec.train.activation_checkpoint_interval = c->ckpt;
  if (a->r->shard_auto) ev->spec.pipeline.shard_optimizer = c->shard;
  if (c->schedule != &schedule_file_type) {
    snprintf(ev->spec.pipeline.schedule, sizeof ev->spec.pipeline.schedule, "%s", c->schedule->name);
    ev->spec.pipeline.virtual_stages = c->v;
  }
  ev->m = *a->m;
  ev->m.spec = &ev->spec;
  ev->costs = pt_calloc((size_t)ev->C, sizeof *ev->costs);
  ev->boxes = pt_calloc(3 * (size_t)ev->C * (size_t)s->n_micro + 1, sizeof *ev->boxes);
  ev->opt = pt_calloc(2 * (size_t)a->P, sizeof(double));
  ev->end = ev->opt + a->P;
  auto_offload_init(&ev->off, &ev->m, s, a->r->offload_auto);
  ev->rate = auto_copy_rate(a->t);
}

static void evaluator_free(evaluator *ev) {
  free(ev->costs), free(ev->boxes), free(ev->opt);
  auto_offload_free(&ev->off);
}

static void keep_result(pt_auto_candidate *c, const score *sc, const int *b, int C, int P) {
  c->bounds = pt_calloc((size_t)C + 1, sizeof(int));
  memcpy(c->bounds, b, sizeof(int) * ((size_t)C + 1));
  c->stage_bytes = pt_calloc((size_t)P, sizeof(int64_t));
  memcpy(c->stage_bytes, sc->bytes, sizeof(int64_t) * (size_t)P);
  c->offload = pt_calloc((size_t)P, sizeof(double));
  memcpy(c->offload, sc->offload, sizeof(double) * (size_t)P);
  c->step_s = sc->step, c->bubble = sc->bubble, c->over = sc->over, c->peak = sc->peak;
  c->copy_s = sc->copy_s;
  c->worst_stage = sc->worst, c->fits = sc->over == 0;
}

void auto_run_candidate(auto_ctx *a, pt_auto_result *r, pt_auto_candidate *c,
                        const pt_schedule *s, spec_errors *e) {
  evaluator ev;
  evaluator_init(&ev, a, c, s);
  int C = ev.C, P = a->P, *b = pt_calloc(2 * ((size_t)C + 1), sizeof(int)), *b2 = b + C + 1;
  int64_t *bytes = pt_calloc(3 * (size_t)P, sizeof(int64_t));
  double *shares = pt_calloc(3 * (size_t)P, sizeof(double));
  score best = {.bytes = bytes, .offload = shares}, cur = {.bytes = bytes + P, .offload = shares + P},
        tmp = {.bytes = bytes + 2 * P, .offload = shares + 2 * P};
  int have = 0, exact = r->partition_auto &&
                         count_splits(a->m->n_layers, C) <= auto_exhaustive_splits;
  if (exact) {
    have = exhaustive(&ev, b, &best, &tmp, e);
  } else if (start_by_method(&ev, r->partition_auto, b, c->why, sizeof c->why) == 0 &&
             evaluate(&ev, b, &best, e) == 0) {
    have = 1;
    if (r->partition_auto) improve(&ev, b, &best, &tmp, e);
  }
  if (r->partition_auto && !exact && !e->failed && start_by_time(&ev, b2) == 0 &&
      evaluate(&ev, b2, &cur, e) == 0) {
    improve(&ev, b2, &cur, &tmp, e);
    if (!have || better(&cur, &best)) {
      swap_scores(&best, &cur);
      memcpy(b, b2, sizeof(int) * ((size_t)C + 1));
    }
    have = 1;
  }
  if (have) c->why[0] = '\0', keep_result(c, &best, b, C, P);
  free(b), free(bytes), free(shares);
  evaluator_free(&ev);
}

int auto_build_schedule(const auto_ctx *a, const pt_schedule_type *t, int v, pt_schedule *s,
                        char *why, size_t whysz) {
  if (t == &schedule_file_type) return schedule_build_spec(s, a->m->spec, why, whysz);
  return schedule_build_v(s, t, a->P, v, (int)a->m->spec->train.micro_batches, why, whysz);
}

int auto_predict(const pt_model *m, const pt_layer_times *t, double *step_s, double *bubble,
                 spec_errors *e) {
  const pt_spec *sp = m->spec;
  pt_schedule s;
  char err[512];
  if (schedule_build_spec(&s, sp, err, sizeof err) != 0) {
    spec_error(e, sp->pipeline.node, 0, "%s", err);
    return -1;
  }
  pt_plan p;
  int rc = plan_build(&p, m, e);
  if (rc == 0) {
    pt_auto_result r = {.n_stages = s.n_ranks};
    auto_ctx a = {.m = m, .t = t, .P = s.n_ranks, .r = &r};
    pt_auto_candidate c = {.schedule = s.type ? s.type : &schedule_file_type,
                           .v = s.n_chunks / s.n_ranks,
                           .ckpt = (int)sp->train.activation_checkpoint_interval};
    evaluator ev;
    evaluator_init(&ev, &a, &c, &s);
    int64_t *bytes = pt_calloc((size_t)s.n_ranks, sizeof(int64_t));
    double *shares = pt_calloc((size_t)s.n_ranks, sizeof(double));
    score sc = {.bytes = bytes, .offload = shares};
    rc = evaluate(&ev, p.bounds, &sc, e);
    *step_s = sc.step, *bubble = sc.bubble;
    free(bytes), free(shares);
    free(r.cap);
    evaluator_free(&ev);
    plan_free(&p);
  }
  schedule_free(&s);
  return rc;
}
