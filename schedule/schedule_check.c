/* schedule_validate: runs every stage's action list together as the executor would (sends never
 * block; a FORWARD/BACKWARD waits for its matching send; a slot's output may be overwritten only
 * once the next stage has posted the receive of its previous send; reductions are collective)
 * and reports the first mismatch or a deadlock. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/schedule.h"

enum { F_RECV_ACT = 1, F_FWD = 2, F_SEND_ACT = 4, F_RECV_GRAD = 8, F_BWD = 16, F_SEND_GRAD = 32 };

typedef struct {
  const pt_schedule *s;
  int *pc;       /* [stage] */
  int *flags;    /* [stage * M + mb] */
  int *slot_mb;  /* [stage * max_slots + slot]: micro-batch holding the slot, -1 free */
  int *last_sent;/* [stage * max_slots + slot]: last micro-batch sent from the slot, -1 none */
  int max_slots;
  char *err;
  size_t errsz;
} sim;

static int fail(sim *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->err, x->errsz, fmt, ap);
  va_end(ap);
  return -1;
}

static int *flag(sim *x, int st, int mb) { return &x->flags[st * x->s->n_micro + mb]; }
static int slot_of(const sim *x, int st, int mb) { return mb % x->s->n_slots[st]; }
static int *slot_holder(sim *x, int st, int mb) {
  return &x->slot_mb[st * x->max_slots + slot_of(x, st, mb)];
}

/* A slot is taken by the first action that writes it (receive, load or forward). */
static int take_slot(sim *x, int st, int mb) {
  int *h = slot_holder(x, st, mb);
  if (*h >= 0 && *h != mb)
    return fail(x, "stage %d: micro-batch %d needs slot %d while micro-batch %d still holds it",
                st, mb, slot_of(x, st, mb), *h);
  *h = mb;
  return 0;
}

/* 1: done, 0: must wait, -1: error (err set). */
static int step_micro(sim *x, int st, const pt_action *a) {
  int P = x->s->n_stages, mb = a->mb, *f = flag(x, st, mb);
  switch (a->kind) {
  case ACT_RECV_ACT:
    if (st == 0) return fail(x, "stage 0 receives an activation (mb %d) from no one", mb);
    if (*f & F_RECV_ACT) return fail(x, "stage %d receives micro-batch %d twice", st, mb);
    *f |= F_RECV_ACT;
    return take_slot(x, st, mb) ? -1 : 1;
  case ACT_LOAD:
    return take_slot(x, st, mb) ? -1 : 1;
  case ACT_FORWARD: {
    if (*f & F_FWD) return fail(x, "stage %d runs forward of micro-batch %d twice", st, mb);
    if (st > 0 && !(*f & F_RECV_ACT))
      return fail(x, "stage %d runs forward of micro-batch %d without receiving it", st, mb);
    if (st > 0 && !(*flag(x, st - 1, mb) & F_SEND_ACT)) return 0;
    int prev = x->last_sent[st * x->max_slots + slot_of(x, st, mb)];
    if (prev >= 0 && st + 1 < P && !(*flag(x, st + 1, prev) & F_RECV_ACT)) return 0;
    if (take_slot(x, st, mb)) return -1;
    *f |= F_FWD;
    return 1;
  }
  case ACT_SEND_ACT:
    if (st == P - 1) return fail(x, "the last stage sends an activation (mb %d)", mb);
    if (!(*f & F_FWD)) return fail(x, "stage %d sends micro-batch %d before its forward", st, mb);
    if (*f & F_SEND_ACT) return fail(x, "stage %d sends micro-batch %d twice", st, mb);
    *f |= F_SEND_ACT;
    x->last_sent[st * x->max_slots + slot_of(x, st, mb)] = mb;
    return 1;
  case ACT_RECV_GRAD:
    if (st == P - 1) return fail(x, "the last stage receives a gradient (mb %d)", mb);
    if (*f & F_RECV_GRAD) return fail(x, "stage %d receives gradient %d twice", st, mb);
    *f |= F_RECV_GRAD;
    return 1;
  case ACT_BACKWARD:
    if (!(*f & F_FWD) || (*f & F_BWD))
      return fail(x, "stage %d: backward of micro-batch %d %s", st, mb,
                  (*f & F_BWD) ? "runs twice" : "comes before its forward");
    if (st < P - 1 && !(*f & F_RECV_GRAD))
      return fail(x, "stage %d: backward of micro-batch %d without receiving its gradient", st, mb);
    if (st < P - 1 && !(*flag(x, st + 1, mb) & F_SEND_GRAD)) return 0;
    *f |= F_BWD;
    *slot_holder(x, st, mb) = -1;
    return 1;
  case ACT_SEND_GRAD:
    if (st == 0) return fail(x, "stage 0 sends a gradient (mb %d) to no one", mb);
    if (!(*f & F_BWD)) return fail(x, "stage %d sends gradient %d before its backward", st, mb);
    *f |= F_SEND_GRAD;
    return 1;
  default:
    return fail(x, "stage %d: unexpected action", st);
  }
}

/* Reductions are collective: a stage passes one only when every stage has reached the same
 * reduction (the conservative reading: tie groups may span any stages). */
static int step_collective(sim *x, int st, const pt_action *a) {
  if (a->kind == ACT_OPTIMIZER || a->kind == ACT_REDUCE_DP) return 1;
  for (int o = 0; o < x->s->n_stages; o++) {
    int pc = x->pc[o];
    if (o == st) continue;
    int at_same = pc < x->s->n_acts[o] && x->s->acts[o][pc].kind == a->kind;
    int past = 0;
    for (int i = 0; i < pc; i++) past |= x->s->acts[o][i].kind == a->kind;
    if (!at_same && !past) return 0;
  }
  return 1;
}

static int sim_run(sim *x) {
  const pt_schedule *s = x->s;
  for (int progress = 1; progress;) {
    progress = 0;
    for (int st = 0; st < s->n_stages; st++) {
      while (x->pc[st] < s->n_acts[st]) {
        const pt_action *a = &s->acts[st][x->pc[st]];
        if (a->mb >= s->n_micro) return fail(x, "stage %d: micro-batch %d out of range", st, a->mb);
        int r = a->mb >= 0 ? step_micro(x, st, a) : step_collective(x, st, a);
        if (r < 0) return -1;
        if (r == 0) break;
        x->pc[st]++;
        progress = 1;
      }
    }
  }
  for (int st = 0; st < s->n_stages; st++) {
    if (x->pc[st] == s->n_acts[st]) continue;
    const pt_action *a = &s->acts[st][x->pc[st]];
    return fail(x, "deadlock: stage %d waits forever at %s%d (action %d)", st,
                schedule_action_code(a->kind), a->mb, x->pc[st]);
  }
  return 0;
}

static int sim_check_complete(sim *x) {
  const pt_schedule *s = x->s;
  int P = s->n_stages;
  for (int st = 0; st < P; st++) {
    for (int mb = 0; mb < s->n_micro; mb++) {
      int f = *flag(x, st, mb);
      int want = F_FWD | F_BWD | (st > 0 ? F_RECV_ACT | F_SEND_GRAD : 0) |
                 (st < P - 1 ? F_SEND_ACT | F_RECV_GRAD : 0);
      if ((f & want) != want)
        return fail(x, "stage %d never completes micro-batch %d (forward, backward, its sends and "
                    "receives)", st, mb);
    }
  }
  return 0;
}

int schedule_validate(const pt_schedule *s, char *err, size_t errsz) {
  sim x = {.s = s, .err = err, .errsz = errsz};
  for (int st = 0; st < s->n_stages; st++)
    if (s->n_slots[st] > x.max_slots) x.max_slots = s->n_slots[st];
  if (x.max_slots < 1) return fail(&x, "a stage has no activation slots");
  x.pc = pt_calloc((size_t)s->n_stages, sizeof(int));
  x.flags = pt_calloc((size_t)s->n_stages * s->n_micro, sizeof(int));
  x.slot_mb = pt_calloc((size_t)s->n_stages * x.max_slots, sizeof(int));
  x.last_sent = pt_calloc((size_t)s->n_stages * x.max_slots, sizeof(int));
  for (int i = 0; i < s->n_stages * x.max_slots; i++) x.slot_mb[i] = x.last_sent[i] = -1;
  int rc = sim_run(&x);
  if (rc == 0) rc = sim_check_complete(&x);
  free(x.pc);
  free(x.flags);
  free(x.slot_mb);
  free(x.last_sent);
  return rc;
}
