/* schedule/schedule.c: building a registered schedule's lists for every stage, and printing
 * them. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/emit.h"

/* The reductions and the optimizer close every stage's step, whatever the schedule. */
static void emit_step_end(schedule_gen *g) {
  schedule_emit(g, ACT_REDUCE_TIED, -1);
  schedule_emit(g, ACT_REDUCE_DP, -1);
  schedule_emit(g, ACT_OPTIMIZER, -1);
}

/* Moves each receive as early as its buffer allows, so data can arrive while the stage computes:
 * RECV_ACT of mb right after the BACKWARD that frees its slot (mb - slots), RECV_GRAD of mb right
 * after mb's FORWARD. Relative order of receives is kept, so MPI matches them in order. */
static void hoist_receives(schedule_gen *l, int slots) {
  pt_action *out = pt_calloc((size_t)l->n, sizeof *out);
  int n = 0;
  for (int i = 0; i < l->n; i++) {
    pt_action a = l->acts[i];
    if (a.kind == ACT_RECV_ACT || a.kind == ACT_RECV_GRAD) continue;
    if (i == 0 || n == 0) /* receives for the first slots go first */
      for (int j = 0; j < l->n; j++)
        if (l->acts[j].kind == ACT_RECV_ACT && l->acts[j].mb < slots) out[n++] = l->acts[j];
    out[n++] = a;
    for (int j = 0; j < l->n; j++) {
      pt_action r = l->acts[j];
      if ((r.kind == ACT_RECV_ACT && a.kind == ACT_BACKWARD && r.mb == a.mb + slots) ||
          (r.kind == ACT_RECV_GRAD && a.kind == ACT_FORWARD && r.mb == a.mb))
        out[n++] = r;
    }
  }
  memcpy(l->acts, out, sizeof *out * (size_t)n);
  free(out);
}

int schedule_build(pt_schedule *s, const char *name, int n_stages, int n_micro) {
  const pt_schedule_type *type = schedule_find(name);
  if (!type) return -1;
  memset(s, 0, sizeof *s);
  s->type = type;
  s->n_stages = n_stages;
  s->n_micro = n_micro;
  s->acts = pt_calloc((size_t)n_stages, sizeof(pt_action *));
  s->n_acts = pt_calloc((size_t)n_stages, sizeof(int));
  s->n_slots = pt_calloc((size_t)n_stages, sizeof(int));
  for (int st = 0; st < n_stages; st++) {
    schedule_gen g = {.s = st, .P = n_stages, .M = n_micro};
    type->generate(&g);
    emit_step_end(&g);
    s->n_slots[st] = type->in_flight(st, n_stages, n_micro);
    hoist_receives(&g, s->n_slots[st]);
    s->acts[st] = g.acts;
    s->n_acts[st] = g.n;
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
          "rG/sG: gradient, L: load, F: forward, B: backward)\n", s->type->name, s->n_stages,
          s->n_micro);
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
