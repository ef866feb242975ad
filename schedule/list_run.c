/* schedule/list_run.c: placing every rank's forwards and backwards in time with unit costs,
 * W passes filling the gaps (schedule/emit.h: schedule_list_run). */
#include <stdlib.h>

#include "core/error.h"
#include "schedule/emit.h"

typedef struct {
  schedule_gen *g;
  const schedule_policy *p;
  int *nF, *nI, *nW; /* [chunk]: the next micro-batch to forward, to backward, to W */
  int *tF, *tI;      /* [chunk * M + mb]: when its forward / backward ends, -1 before */
  int *free_at;      /* [rank]: when the rank is free */
  int *pc;           /* [rank]: next action of p->order */
  int *held;         /* [rank]: micro-batches in flight over its chunks */
} runner;

static int cost_of(pt_action_kind k) { return k == ACT_BACKWARD ? 2 : 1; }
static int done(const int *t, int cell, int now) { return t[cell] >= 0 && t[cell] <= now; }

static int ready(const runner *x, int r, pt_action a, int now) {
  const schedule_gen *g = x->g;
  int c = a.chunk, m = a.mb, cell = c * g->M + m;
  if (a.kind == ACT_FORWARD) {
    if (m != x->nF[c] || m >= g->M || (c > 0 && !done(x->tF, cell - g->M, now))) return 0;
    if (x->p->chunk_cap && x->nF[c] - x->nW[c] >= x->p->chunk_cap) return 0;
    return !x->p->rank_cap || x->held[r] < x->p->rank_cap;
  }
  if (a.kind == ACT_BACKWARD_WEIGHT) return m == x->nW[c] && m < x->nI[c] && done(x->tI, cell, now);
  if (m != x->nI[c] || m >= x->nF[c] || !done(x->tF, cell, now)) return 0;
  if (c < g->C - 1 && !done(x->tI, cell + g->M, now)) return 0;
  return a.kind != ACT_BACKWARD || x->nW[c] == m; /* B adds weight gradients: after every W */
}

/* The W whose I ended first among r's chunks, if one is ready. */
static int pick_w(const runner *x, int r, int now, pt_action *out) {
  int best = -1, best_t = 0;
  for (int c = 0; c < x->g->C; c++) {
    pt_action w = {ACT_BACKWARD_WEIGHT, x->nW[c], c};
    if (x->g->chunk_rank[c] != r || !ready(x, r, w, now)) continue;
    int t = x->tI[c * x->g->M + w.mb];
    if (best < 0 || t < best_t) best = c, best_t = t;
  }
  if (best >= 0) *out = (pt_action){ACT_BACKWARD_WEIGHT, x->nW[best], best};
  return best >= 0;
}

/* Free choice: forward first, then I (or B), then W; the lowest micro-batch, the later chunk. */
static int pick_free(const runner *x, int r, int now, pt_action *out) {
  pt_action_kind bwd = x->p->split ? ACT_BACKWARD_INPUT : ACT_BACKWARD;
  int found = 0, best_key = 0;
  for (int c = x->g->C - 1; c >= 0; c--) {
    if (x->g->chunk_rank[c] != r) continue;
    pt_action cand[3] = {{ACT_FORWARD, x->nF[c], c}, {bwd, x->nI[c], c},
                         {ACT_BACKWARD_WEIGHT, x->nW[c], c}};
    for (int k = 0; k < (x->p->split ? 3 : 2); k++) {
      int key = (k * (x->g->M + 1) + cand[k].mb) * x->g->C + (x->g->C - 1 - c);
      if (!ready(x, r, cand[k], now) || (found && key >= best_key)) continue;
      found = 1, best_key = key, *out = cand[k];
    }
  }
  return found;
}

static int pick(runner *x, int r, int now, pt_action *out) {
  if (!x->p->order) return pick_free(x, r, now, out);
  const schedule_list *o = &x->p->order[r];
  if (x->pc[r] < o->n && ready(x, r, o->a[x->pc[r]], now)) {
    *out = o->a[x->pc[r]++];
    return 1;
  }
  return pick_w(x, r, now, out);
}

static void commit(runner *x, int r, pt_action a, int now) {
  int cell = a.chunk * x->g->M + a.mb, end = now + cost_of(a.kind);
  x->free_at[r] = end;
  if (a.kind == ACT_FORWARD) x->nF[a.chunk]++, x->tF[cell] = end, x->held[r]++;
  if (a.kind == ACT_BACKWARD || a.kind == ACT_BACKWARD_INPUT) x->nI[a.chunk]++, x->tI[cell] = end;
  if (a.kind == ACT_BACKWARD || a.kind == ACT_BACKWARD_WEIGHT) x->nW[a.chunk]++, x->held[r]--;
  schedule_emit(x->g, r, a.kind, a.chunk, a.mb);
}

/* Actions still to place: a forward and a backward per (chunk, mb), and a W per I. */
static int total_actions(const schedule_gen *g, const schedule_policy *p) {
  int n = 2 * g->C * g->M;
  if (!p->order) return n + (p->split ? g->C * g->M : 0);
  for (int r = 0; r < g->P; r++)
    for (int i = 0; i < p->order[r].n; i++) n += p->order[r].a[i].kind == ACT_BACKWARD_INPUT;
  return n;
}

void schedule_list_run(schedule_gen *g, const schedule_policy *p) {
  size_t C = (size_t)g->C, cells = C * (size_t)g->M, P = (size_t)g->P;
  runner x = {g, p, pt_calloc(C, sizeof(int)), pt_calloc(C, sizeof(int)), pt_calloc(C, sizeof(int)),
              pt_calloc(cells + 1, sizeof(int)), pt_calloc(cells + 1, sizeof(int)),
              pt_calloc(P, sizeof(int)), pt_calloc(P, sizeof(int)), pt_calloc(P, sizeof(int))};
  for (size_t i = 0; i < cells; i++) x.tF[i] = x.tI[i] = -1;
  int left = total_actions(g, p), limit = 4 * left + 16;
  for (int now = 0; left > 0; now++) {
    if (now > limit) pt_fatal("schedule generator stuck: %d ranks, %d chunks, %d micro-batches, %d "
                              "actions left at time %d", g->P, g->C, g->M, left, now);
    for (int r = 0; r < g->P; r++) {
      pt_action a;
      if (x.free_at[r] <= now && pick(&x, r, now, &a)) commit(&x, r, a, now), left--;
    }
  }
  free(x.nF), free(x.nI), free(x.nW), free(x.tF), free(x.tI);
  free(x.free_at), free(x.pc), free(x.held);
}
