#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct {
  pt_action *a;
  int n, cap;
} action_list;

static void push(action_list *l, pt_action_kind k, int mb) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    pt_action *na = pt_calloc((size_t)l->cap, sizeof *na);
    if (l->a) memcpy(na, l->a, sizeof *na * (size_t)l->n);
    free(l->a);
    l->a = na;
  }
  l->a[l->n++] = (pt_action){k, mb};
}

typedef struct {
  int s, P, M;
  action_list *l;
} gen_ctx;

static void emit_forward(gen_ctx *g, int mb) {
  if (g->s > 0) push(g->l, ACT_RECV_ACT, mb);
  if (g->s == 0 || g->s == g->P - 1) push(g->l, ACT_LOAD, mb);
  push(g->l, ACT_FORWARD, mb);
  if (g->s < g->P - 1) push(g->l, ACT_SEND_ACT, mb);
}

static void emit_backward(gen_ctx *g, int mb) {
  if (g->s < g->P - 1) push(g->l, ACT_RECV_GRAD, mb);
  push(g->l, ACT_BACKWARD, mb);
  if (g->s > 0) push(g->l, ACT_SEND_GRAD, mb);
}

static void emit_step_end(gen_ctx *g) {
  push(g->l, ACT_REDUCE_TIED, -1);
  push(g->l, ACT_REDUCE_DP, -1);
  push(g->l, ACT_OPTIMIZER, -1);
}

/* GPipe: all forwards, then all backwards (ascending); every micro-batch stays in flight. */
static int gen_gpipe(gen_ctx *g) {
  for (int mb = 0; mb < g->M; mb++) emit_forward(g, mb);
  for (int mb = 0; mb < g->M; mb++) emit_backward(g, mb);
  emit_step_end(g);
  return g->M;
}

/* 1F1B: P-s-1 warm-up forwards, then alternate one forward and one backward, then drain.
 * At most P-s micro-batches are in flight on stage s. */
static int gen_1f1b(gen_ctx *g) {
  int warm = g->P - g->s - 1 < g->M ? g->P - g->s - 1 : g->M;
  for (int mb = 0; mb < warm; mb++) emit_forward(g, mb);
  for (int i = 0; i < g->M - warm; i++) {
    emit_forward(g, warm + i);
    emit_backward(g, i);
  }
  for (int mb = g->M - warm; mb < g->M; mb++) emit_backward(g, mb);
  emit_step_end(g);
  return warm + 1 < g->M ? warm + 1 : g->M;
}

/* Moves each receive as early as its buffer allows, so data can arrive while the stage computes:
 * RECV_ACT of mb right after the BACKWARD that frees its slot (mb - slots), RECV_GRAD of mb right
 * after mb's FORWARD. Relative order of receives is kept, so MPI matches them in order. */
static void hoist_receives(action_list *l, int slots) {
  pt_action *out = pt_calloc((size_t)l->n, sizeof *out);
  int n = 0;
  for (int i = 0; i < l->n; i++) {
    pt_action a = l->a[i];
    if (a.kind == ACT_RECV_ACT || a.kind == ACT_RECV_GRAD) continue;
    if (i == 0 || n == 0) /* receives for the first slots go first */
      for (int j = 0; j < l->n; j++)
        if (l->a[j].kind == ACT_RECV_ACT && l->a[j].mb < slots) out[n++] = l->a[j];
    out[n++] = a;
    for (int j = 0; j < l->n; j++) {
      pt_action r = l->a[j];
      if ((r.kind == ACT_RECV_ACT && a.kind == ACT_BACKWARD && r.mb == a.mb + slots) ||
          (r.kind == ACT_RECV_GRAD && a.kind == ACT_FORWARD && r.mb == a.mb))
        out[n++] = r;
    }
  }
  memcpy(l->a, out, sizeof *out * (size_t)n);
  free(out);
}

int schedule_build(pt_schedule *s, const char *name, int n_stages, int n_micro) {
  int gpipe = strcmp(name, "gpipe") == 0;
  if (!gpipe && strcmp(name, "1f1b") != 0) return -1;
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->n_stages = n_stages;
  s->n_micro = n_micro;
  s->acts = pt_calloc((size_t)n_stages, sizeof(pt_action *));
  s->n_acts = pt_calloc((size_t)n_stages, sizeof(int));
  s->n_slots = pt_calloc((size_t)n_stages, sizeof(int));
  for (int st = 0; st < n_stages; st++) {
    action_list l = {0};
    gen_ctx g = {st, n_stages, n_micro, &l};
    s->n_slots[st] = gpipe ? gen_gpipe(&g) : gen_1f1b(&g);
    hoist_receives(&l, s->n_slots[st]);
    s->acts[st] = l.a;
    s->n_acts[st] = l.n;
  }
  return 0;
}

void schedule_free(pt_schedule *s) {
  for (int st = 0; st < s->n_stages; st++) free(s->acts[st]);
  free(s->acts);
  free(s->n_acts);
  free(s->n_slots);
  memset(s, 0, sizeof *s);
}

const char *schedule_action_code(pt_action_kind k) {
  static const char *const codes[] = {"rA", "L", "F", "sA", "rG", "B", "sG", "TIE", "DP", "OPT"};
  return codes[k];
}

void schedule_print(FILE *f, const pt_schedule *s) {
  fprintf(f, "schedule %s: %d stages, %d micro-batches (rA/sA: receive/send activation, "
          "rG/sG: gradient, L: load, F: forward, B: backward)\n", s->name, s->n_stages, s->n_micro);
  for (int st = 0; st < s->n_stages; st++) {
    fprintf(f, "stage %d (%d slot%s):", st, s->n_slots[st], s->n_slots[st] == 1 ? "" : "s");
    for (int i = 0; i < s->n_acts[st]; i++) {
      const pt_action *a = &s->acts[st][i];
      if (a->mb >= 0) fprintf(f, " %s%d", schedule_action_code(a->kind), a->mb);
      else fprintf(f, " %s", schedule_action_code(a->kind));
    }
    fputc('\n', f);
  }
}
