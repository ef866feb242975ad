/* schedule/schedule_sim.c: running action lists in simulated time (schedule/schedule_sim.h). */
#include "schedule/schedule_sim.h"

#include <stdlib.h>

#include "core/error.h"
#include "schedule/check.h"
#include "schedule/schedule_offload.h"

const pt_sched_costs schedule_unit_costs = {1.0, 2.0, 1.0, 1.0, 0.0, 0.0};

typedef struct {
  const pt_schedule *s;
  const pt_sched_costs *costs;
  int n_costs;
  int *pc;           /* [rank] next action */
  double *clock;     /* [rank] when the rank's previous action was done */
  double *act_at;    /* [chunk * M + mb] when chunk's output of mb left (or was handed over) */
  double *grad_at;   /* [chunk * M + mb] when chunk's input gradient of mb left */
  double *input_at;  /* [chunk * M + mb] when the I or B of mb ended on the chunk */
  const pt_sched_copies *cp; /* NULL: no offload copies */
  double *copy_clock;        /* [rank] when its copy stream is free (overlap) */
  double *out_end, *pre_end; /* [(chunk * M + mb) * n_kinds + k] copy-out, prefetch done (-1) */
  double copy_busy, copy_exposed;
  pt_sched_box *boxes;
  int n, cap;
  char *err;
  size_t errsz;
} sim;

static const pt_sched_costs *costs_of(const sim *x, int chunk) {
  return &x->costs[x->n_costs > 1 ? chunk : 0];
}

static double cost_of(const sim *x, const pt_action *a) {
  const pt_sched_costs *c = costs_of(x, a->chunk);
  switch (a->kind) {
  case ACT_FORWARD: return c->f;
  case ACT_BACKWARD: return c->b;
  case ACT_BACKWARD_INPUT: return c->i;
  default: return c->w;
  }
}

static pt_sched_box_kind box_kind(pt_action_kind k) {
  return k == ACT_FORWARD ? SCHED_BOX_F : k == ACT_BACKWARD ? SCHED_BOX_B
         : k == ACT_BACKWARD_INPUT ? SCHED_BOX_I : SCHED_BOX_W;
}

/* When a's input is there, or -1 while it is not. */
static double ready_at(const sim *x, const pt_action *a) {
  int M = x->s->n_micro, cell = a->chunk * M + a->mb, last = x->s->n_chunks - 1;
  if (a->kind == ACT_FORWARD) return a->chunk > 0 ? x->act_at[cell - M] : 0.0;
  if (a->kind == ACT_BACKWARD_WEIGHT) return x->input_at[cell];
  return a->chunk < last ? x->grad_at[cell + M] : 0.0;
}

static double later(double a, double b) { return a > b ? a : b; }

/* Whether kind k of a's chunk sends a's micro-batch to host memory. */
static int goes_out(const sim *x, const pt_action *a, int k) {
  const unsigned char *off = x->cp->offloaded[a->chunk * x->cp->n_kinds + k];
  return off && off[a->mb];
}

/* A copy of `secs` issued at t on rank r after `after` (a prefetch after its copy-out): when it
 * is done. Without overlap it runs at once, on the rank (the caller holds the rank till then). */
static double sim_copy(sim *x, int r, double t, double after, double secs) {
  x->copy_busy += secs;
  if (!x->cp->overlap) {
    x->copy_exposed += secs;
    return t + secs;
  }
  double t0 = later(later(t, x->copy_clock[r]), after);
  return x->copy_clock[r] = t0 + secs;
}

/* Issues at t the prefetches of backward b not issued yet. Returns when the rank goes on (later
 * than t where a copy holds it). */
static double sim_issue_prefetch(sim *x, int r, const pt_action *b, double t) {
  int K = x->cp->n_kinds, cell = (b->chunk * x->s->n_micro + b->mb) * K;
  for (int k = 0; k < K; k++) {
    if (!goes_out(x, b, k) || x->pre_end[cell + k] >= 0) continue;
    x->pre_end[cell + k] = sim_copy(x, r, t, x->out_end[cell + k], x->cp->in_s[b->chunk * K + k]);
    if (!x->cp->overlap) t = x->pre_end[cell + k];
  }
  return t;
}

/* Action i of rank r starts at t: the prefetch of the backward it precedes is issued. */
static double sim_prefetch(sim *x, int r, int i, double t) {
  int j = schedule_prefetch_at(x->s->acts[r], x->s->n_acts[r], i);
  return j < 0 ? t : sim_issue_prefetch(x, r, &x->s->acts[r][j], t);
}

/* A backward starting at t waits for its prefetches (issued now where none was). Returns when
 * it can start. */
static double sim_backward_ready(sim *x, int r, const pt_action *a, double t) {
  int K = x->cp->n_kinds, cell = (a->chunk * x->s->n_micro + a->mb) * K;
  t = sim_issue_prefetch(x, r, a, t);
  double at = t;
  for (int k = 0; k < K; k++)
    if (goes_out(x, a, k)) at = later(at, x->pre_end[cell + k]);
  if (x->cp->overlap) x->copy_exposed += at - t;
  return at;
}

/* A forward ended at t1: its copy-outs are issued. Returns when the rank goes on. */
static double sim_copy_out(sim *x, int r, const pt_action *a, double t1) {
  int K = x->cp->n_kinds, cell = (a->chunk * x->s->n_micro + a->mb) * K;
  double t = t1;
  for (int k = 0; k < K; k++) {
    if (!goes_out(x, a, k)) continue;
    x->out_end[cell + k] = sim_copy(x, r, t, 0.0, x->cp->out_s[a->chunk * K + k]);
    if (!x->cp->overlap) t = x->out_end[cell + k];
  }
  return t;
}

/* Runs a compute action once its input is there: it starts when both the rank and the input
 * are (and, offloaded, its prefetched tensors). 1: done, 0: waits, -1: error. */
static int sim_compute(sim *x, int r, int i, const pt_action *a) {
  double ready = ready_at(x, a);
  if (ready < 0) return 0;
  if (x->n == x->cap)
    return pt_errorf(x->err, x->errsz, "rank %d: more compute actions than 3 x %d chunks x %d "
                     "micro-batches", r, x->s->n_chunks, x->s->n_micro);
  double t0 = later(x->clock[r], ready);
  int backward = a->kind == ACT_BACKWARD || a->kind == ACT_BACKWARD_INPUT;
  if (x->cp) t0 = sim_prefetch(x, r, i, t0);
  if (x->cp && backward) t0 = sim_backward_ready(x, r, a, t0);
  double t1 = t0 + cost_of(x, a);
  x->boxes[x->n++] = (pt_sched_box){r, a->mb, box_kind(a->kind), t0, t1, a->chunk};
  x->clock[r] = t1;
  if (x->cp && a->kind == ACT_FORWARD) x->clock[r] = sim_copy_out(x, r, a, t1);
  int cell = a->chunk * x->s->n_micro + a->mb;
  if (a->kind == ACT_FORWARD && schedule_is_local(x->s, a->chunk, 1)) x->act_at[cell] = t1;
  if (a->kind == ACT_BACKWARD || a->kind == ACT_BACKWARD_INPUT) {
    x->input_at[cell] = t1;
    if (schedule_is_local(x->s, a->chunk, -1)) x->grad_at[cell] = t1;
  }
  return 1;
}

/* 1: done, 0: waits for a neighbour, -1: error. A send delays its data by the chunk's transfer
 * cost without holding the rank; receives, loads and reductions take no time. */
static int sim_action(sim *x, int r, int i, const pt_action *a) {
  int cell = a->chunk * x->s->n_micro + a->mb;
  switch (a->kind) {
  case ACT_FORWARD:
  case ACT_BACKWARD:
  case ACT_BACKWARD_INPUT:
  case ACT_BACKWARD_WEIGHT: return sim_compute(x, r, i, a);
  case ACT_SEND_ACT: x->act_at[cell] = x->clock[r] + costs_of(x, a->chunk)->send_act; return 1;
  case ACT_SEND_GRAD: x->grad_at[cell] = x->clock[r] + costs_of(x, a->chunk)->send_grad; return 1;
  default: return 1;
  }
}

static int sim_step(void *ctx, int r, int i, const pt_action *a) {
  sim *x = ctx;
  if (a->mb >= x->s->n_micro || a->chunk >= x->s->n_chunks)
    return pt_errorf(x->err, x->errsz, "rank %d: an action out of range", r);
  return sim_action(x, r, i, a);
}

/* Round-robin over the ranks until none can move (the sweep schedule_validate runs). */
static int sim_sweep(sim *x) {
  const pt_schedule *s = x->s;
  int rc = schedule_sweep(s, x->pc, sim_step, x);
  for (int r = 0; rc > 0 && r < s->n_ranks; r++)
    if (x->pc[r] < s->n_acts[r]) {
      char text[48];
      return pt_errorf(x->err, x->errsz, "rank %d waits forever at %s (action %d)", r,
                       schedule_action_text(&s->acts[r][x->pc[r]], text, sizeof text), x->pc[r]);
    }
  return rc;
}

int schedule_simulate_copies(const pt_schedule *s, const pt_sched_costs *costs, int n_costs,
                             const pt_sched_copies *copies, pt_sched_box *boxes, double *span,
                             double *copy_busy, double *copy_exposed, char *err, size_t errsz) {
  size_t cells = (size_t)s->n_chunks * (size_t)s->n_micro, P = (size_t)s->n_ranks;
  size_t K = copies ? (size_t)copies->n_kinds : 0;
  sim x = {.s = s, .costs = costs, .n_costs = n_costs, .cp = copies, .boxes = boxes,
           .cap = 3 * (int)cells, .err = err, .errsz = errsz};
  x.pc = pt_calloc(P, sizeof(int));
  x.clock = pt_calloc(2 * P, sizeof(double));
  x.copy_clock = x.clock + P;
  x.act_at = pt_calloc((3 + 2 * K) * cells + 3, sizeof(double));
  x.grad_at = x.act_at + cells + 1, x.input_at = x.grad_at + cells + 1;
  x.out_end = x.input_at + cells + 1, x.pre_end = x.out_end + K * cells;
  for (size_t i = 0; i < (3 + 2 * K) * cells + 3; i++) x.act_at[i] = -1.0;
  int rc = sim_sweep(&x);
  *span = 0.0;
  for (int i = 0; i < x.n; i++)
    if (boxes[i].t1 > *span) *span = boxes[i].t1;
  for (size_t r = 0; copies && r < P; r++) /* the last copy-out may end after the compute */
    if (x.copy_clock[r] > *span) *span = x.copy_clock[r];
  if (copy_busy) *copy_busy = x.copy_busy;
  if (copy_exposed) *copy_exposed = x.copy_exposed;
  free(x.pc), free(x.clock), free(x.act_at);
  return rc < 0 ? -1 : x.n;
}

int schedule_simulate_costs(const pt_schedule *s, const pt_sched_costs *costs, int n_costs,
                            pt_sched_box *boxes, double *span, char *err, size_t errsz) {
  return schedule_simulate_copies(s, costs, n_costs, NULL, boxes, span, NULL, NULL, err, errsz);
}

int schedule_simulate(const pt_schedule *s, pt_sched_box *boxes, double *span, char *err,
                      size_t errsz) {
  return schedule_simulate_costs(s, &schedule_unit_costs, 1, boxes, span, err, errsz);
}

double schedule_time(const pt_schedule *s, const pt_sched_costs *costs, int n_costs,
                     double *step, double *bubble, char *err, size_t errsz) {
  pt_sched_box *boxes = pt_calloc(3 * (size_t)s->n_chunks * (size_t)s->n_micro + 1, sizeof *boxes);
  int n = schedule_simulate_costs(s, costs, n_costs, boxes, step, err, errsz);
  double all = n < 0 ? -1.0 : sched_bubble(boxes, n, s->n_ranks, 0.0, *step);
  for (int r = 0; bubble && n >= 0 && r < s->n_ranks; r++) {
    double busy = 0.0;
    for (int i = 0; i < n; i++) busy += boxes[i].stage == r ? boxes[i].t1 - boxes[i].t0 : 0.0;
    bubble[r] = *step > 0 ? 1.0 - busy / *step : 0.0;
  }
  free(boxes);
  return all;
}

double sched_bubble(const pt_sched_box *boxes, int n, int n_stages, double t0, double t1) {
  double busy = 0.0;
  for (int i = 0; i < n; i++)
    busy += (boxes[i].kind == SCHED_BOX_WAIT ? -1.0 : 1.0) * (boxes[i].t1 - boxes[i].t0);
  return t1 > t0 && n_stages > 0 ? 1.0 - busy / (n_stages * (t1 - t0)) : 0.0;
}
