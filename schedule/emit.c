/* schedule/emit.c: compute orders into full action lists (schedule/emit.h). */
#include "schedule/emit.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void schedule_list_push(schedule_list *l, pt_action a, int src) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    pt_action *a2 = pt_calloc((size_t)l->cap, sizeof *a2);
    int *s2 = pt_calloc((size_t)l->cap, sizeof *s2);
    if (l->n) {
      memcpy(a2, l->a, sizeof *a2 * (size_t)l->n);
      memcpy(s2, l->src, sizeof *s2 * (size_t)l->n);
    }
    free(l->a), free(l->src);
    l->a = a2, l->src = s2;
  }
  l->a[l->n] = a;
  l->src[l->n++] = src;
}

void schedule_list_free(schedule_list *l) {
  free(l->a), free(l->src);
  memset(l, 0, sizeof *l);
}

void schedule_emit(schedule_gen *g, int r, pt_action_kind kind, int chunk, int mb) {
  schedule_list *l = &g->rank[r];
  schedule_list_push(l, (pt_action){kind, mb, chunk}, l->n);
}

int schedule_local_chunk(const schedule_gen *g, int r, int c) {
  for (int k = 0, seen = 0; k < g->C; k++)
    if (g->chunk_rank[k] == r && seen++ == c) return k;
  return -1;
}

void schedule_alloc(pt_schedule *s, int P, int v, int M, pt_placement placement) {
  memset(s, 0, sizeof *s);
  s->n_ranks = P, s->n_chunks = P * v, s->n_micro = M, s->placement = placement;
  s->chunk_rank = pt_calloc((size_t)s->n_chunks, sizeof(int));
  for (int c = 0; c < s->n_chunks; c++)
    s->chunk_rank[c] = placement == PT_PLACE_V && c >= P ? 2 * P - 1 - c : c % P;
  s->acts = pt_calloc((size_t)P, sizeof(pt_action *));
  s->n_acts = pt_calloc((size_t)P, sizeof(int));
  s->n_slots = pt_calloc((size_t)s->n_chunks, sizeof(int));
  s->n_w_pending = pt_calloc((size_t)s->n_chunks, sizeof(int));
}

int schedule_is_local(const pt_schedule *s, int chunk, int dir) {
  int other = chunk + dir;
  return other >= 0 && other < s->n_chunks && s->chunk_rank[other] == s->chunk_rank[chunk];
}

static int has_peer(const pt_schedule *s, int chunk, int dir) {
  int other = chunk + dir;
  return other >= 0 && other < s->n_chunks && !schedule_is_local(s, chunk, dir);
}

/* Peak micro-batches between forward and release (B or W), and between I and W, per chunk:
 * every action of a chunk is on its one rank, so list order is time order. */
static void measure_slots(pt_schedule *s, const schedule_list *lists) {
  for (int r = 0; r < s->n_ranks; r++) {
    int *held = pt_calloc(2 * (size_t)s->n_chunks, sizeof(int)), *pend = held + s->n_chunks;
    for (int i = 0; i < lists[r].n; i++) {
      pt_action_kind k = lists[r].a[i].kind;
      int c = lists[r].a[i].chunk;
      if (c < 0) continue;
      held[c] += k == ACT_FORWARD ? 1 : k == ACT_BACKWARD || k == ACT_BACKWARD_WEIGHT ? -1 : 0;
      pend[c] += k == ACT_BACKWARD_INPUT ? 1 : k == ACT_BACKWARD_WEIGHT ? -1 : 0;
      if (held[c] > s->n_slots[c]) s->n_slots[c] = held[c];
      if (pend[c] > s->n_w_pending[c]) s->n_w_pending[c] = pend[c];
    }
    free(held);
  }
}

/* A compute action with the transfers and loads around it (schedule.h: local hand-off). */
static void expand_one(const pt_schedule *s, schedule_list *out, pt_action a, int src) {
  pt_action x = a;
  int last = s->n_chunks - 1;
  if (a.kind == ACT_FORWARD) {
    if (has_peer(s, a.chunk, -1)) x.kind = ACT_RECV_ACT, schedule_list_push(out, x, src);
    if (a.chunk == 0 || a.chunk == last) x.kind = ACT_LOAD, schedule_list_push(out, x, src);
    schedule_list_push(out, a, src);
    if (has_peer(s, a.chunk, 1)) x.kind = ACT_SEND_ACT, schedule_list_push(out, x, src);
  } else if (a.kind == ACT_BACKWARD || a.kind == ACT_BACKWARD_INPUT) {
    if (has_peer(s, a.chunk, 1)) x.kind = ACT_RECV_GRAD, schedule_list_push(out, x, src);
    schedule_list_push(out, a, src);
    if (has_peer(s, a.chunk, -1)) x.kind = ACT_SEND_GRAD, schedule_list_push(out, x, src);
  } else {
    schedule_list_push(out, a, src);
  }
}

static int is_receive(pt_action_kind k) { return k == ACT_RECV_ACT || k == ACT_RECV_GRAD; }

/* The RECV_GRADs of chunk c whose FORWARD is done, in the order of c's backwards (B or I): the
 * order its peer sends them in, which NCCL's per-link pairing needs (a chunk running its
 * backwards in descending order, torch's looped BFS, receives them so too). */
typedef struct {
  int *seq, *n_seq, *next; /* [c * M + k]: c's k-th backward's micro-batch; [c]: count, posted */
  unsigned char *fwd;      /* [c * M + mb]: forward done */
} grad_order;

static void grad_order_init(grad_order *o, const pt_schedule *s, const schedule_list *l) {
  size_t C = (size_t)s->n_chunks, cells = C * (size_t)s->n_micro;
  o->seq = pt_calloc(cells + 2 * C + 1, sizeof(int));
  o->n_seq = o->seq + cells, o->next = o->n_seq + C;
  o->fwd = pt_calloc(cells + 1, 1);
  for (int i = 0; i < l->n; i++) {
    const pt_action *a = &l->a[i];
    if ((a->kind == ACT_BACKWARD || a->kind == ACT_BACKWARD_INPUT) && o->n_seq[a->chunk] < s->n_micro)
      o->seq[a->chunk * s->n_micro + o->n_seq[a->chunk]++] = a->mb;
  }
}

/* After the FORWARD of (c, mb): the receives now due, in order. */
static void grad_order_post(grad_order *o, const pt_schedule *s, const schedule_list *l,
                            const int *at_grad, int c, int mb, schedule_list *out) {
  int M = s->n_micro;
  o->fwd[c * M + mb] = 1;
  for (; o->next[c] < o->n_seq[c] && o->fwd[c * M + o->seq[c * M + o->next[c]]]; o->next[c]++) {
    int j = at_grad[c * M + o->seq[c * M + o->next[c]]];
    if (j >= 0) schedule_list_push(out, l->a[j], l->src[j]);
  }
}

/* The first slots' RECV_ACTs, which go before anything else: in the order their loads and
 * forwards run, so that where a file put them changes nothing (a written schedule reads back as
 * itself); then any the rank never consumes (no load or forward of its micro-batch) in the
 * file's order, for the checks to refuse at its line. */
static void post_first_receives(const pt_schedule *s, const schedule_list *l, const int *at_act,
                                schedule_list *out) {
  unsigned char *posted = pt_calloc((size_t)l->n + 1, 1);
  for (int i = 0; i < l->n; i++) {
    const pt_action *a = &l->a[i];
    if ((a->kind != ACT_FORWARD && a->kind != ACT_LOAD) || a->mb >= s->n_slots[a->chunk])
      continue;
    int j = at_act[a->chunk * s->n_micro + a->mb];
    if (j >= 0 && !posted[j]) posted[j] = 1, schedule_list_push(out, l->a[j], l->src[j]);
  }
  for (int j = 0; j < l->n; j++)
    if (l->a[j].kind == ACT_RECV_ACT && l->a[j].mb < s->n_slots[l->a[j].chunk] && !posted[j])
      schedule_list_push(out, l->a[j], l->src[j]);
  free(posted);
}

/* Moves each receive as early as its buffer allows, so data can arrive while the rank computes:
 * RECV_ACT of (c, mb) right after the action releasing its slot (B or W of mb - slots[c]), the
 * first slots' before anything else (post_first_receives); RECV_GRAD of (c, mb) right after the
 * FORWARD of (c, mb), or later where c's backwards run in another order than its forwards
 * (grad_order). */
static void hoist_receives(const pt_schedule *s, schedule_list *l) {
  size_t cells = (size_t)s->n_chunks * (size_t)s->n_micro;
  int *at_act = pt_calloc(cells + 1, sizeof(int)), *at_grad = pt_calloc(cells + 1, sizeof(int));
  for (size_t i = 0; i < cells; i++) at_act[i] = at_grad[i] = -1;
  for (int i = 0; i < l->n; i++) {
    const pt_action *a = &l->a[i];
    if (is_receive(a->kind))
      (a->kind == ACT_RECV_ACT ? at_act : at_grad)[a->chunk * s->n_micro + a->mb] = i;
  }
  grad_order go;
  grad_order_init(&go, s, l);
  schedule_list out = {0};
  for (int i = 0; i < l->n; i++) {
    pt_action a = l->a[i];
    if (is_receive(a.kind)) continue;
    if (out.n == 0) post_first_receives(s, l, at_act, &out);
    schedule_list_push(&out, a, l->src[i]);
    int j = -1, cell = a.chunk * s->n_micro + a.mb;
    if ((a.kind == ACT_BACKWARD || a.kind == ACT_BACKWARD_WEIGHT) &&
        a.mb + s->n_slots[a.chunk] < s->n_micro)
      j = at_act[cell + s->n_slots[a.chunk]];
    if (j >= 0) schedule_list_push(&out, l->a[j], l->src[j]);
    if (a.kind == ACT_FORWARD) grad_order_post(&go, s, l, at_grad, a.chunk, a.mb, &out);
  }
  schedule_list_free(l);
  *l = out;
  free(at_act), free(at_grad), free(go.seq), free(go.fwd);
}

void schedule_lower(pt_schedule *s, schedule_gen *g, int transfers, int step_end) {
  measure_slots(s, g->rank);
  for (int r = 0; r < s->n_ranks; r++) {
    schedule_list *l = &g->rank[r], full = {0};
    for (int i = 0; i < l->n; i++)
      if (transfers) expand_one(s, &full, l->a[i], l->src[i]);
      else schedule_list_push(&full, l->a[i], l->src[i]);
    int last = l->n ? l->src[l->n - 1] : -1;
    /* held sends go out before the reductions, which block on groups of their own */
    static const pt_action_kind end[4] = {ACT_FLUSH, ACT_REDUCE_TIED, ACT_REDUCE_DP,
                                          ACT_OPTIMIZER};
    for (int k = 0; step_end && k < 4; k++)
      schedule_list_push(&full, (pt_action){end[k], -1, -1}, last);
    hoist_receives(s, &full); /* a file's receives too, wherever it put them */
    schedule_list_free(l);
    *l = full;
    s->acts[r] = pt_calloc((size_t)l->n + 1, sizeof(pt_action));
    if (l->n) memcpy(s->acts[r], l->a, sizeof(pt_action) * (size_t)l->n);
    s->n_acts[r] = l->n;
  }
}

void schedule_order_1f1b(schedule_list *l, int chunk, int M, int warm, pt_action_kind bwd) {
  int f = 0, b = 0;
  for (; f < warm && f < M; f++) schedule_list_push(l, (pt_action){ACT_FORWARD, f, chunk}, l->n);
  for (; b < M; b++) {
    schedule_list_push(l, (pt_action){bwd, b, chunk}, l->n);
    if (f < M) schedule_list_push(l, (pt_action){ACT_FORWARD, f++, chunk}, l->n);
  }
}

void schedule_run_zero_bubble(schedule_gen *g, int (*warm)(int s, int P), int cap) {
  schedule_list *order = pt_calloc((size_t)g->P, sizeof *order);
  for (int s = 0; s < g->P; s++)
    schedule_order_1f1b(&order[s], s, g->M, warm(s, g->P), ACT_BACKWARD_INPUT);
  schedule_policy p = {.order = order, .chunk_cap = cap};
  schedule_list_run(g, &p);
  for (int s = 0; s < g->P; s++) schedule_list_free(&order[s]);
  free(order);
}
