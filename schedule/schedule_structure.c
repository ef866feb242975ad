/* schedule/schedule_structure.c: the shape checks every other check relies on, and the sweep
 * the simulations share (schedule/check.h). */
#include <stdarg.h>
#include <stdio.h>

#include "schedule/check.h"

int schedule_fail_at(const pt_schedule *s, pt_sched_where *where, int r, int index, char *err,
                     size_t errsz, const char *fmt, ...) {
  char what[768], text[48];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (index >= 0)
    snprintf(err, errsz, "rank %d, action %s: %s", r,
             schedule_action_text(&s->acts[r][index], text, sizeof text), what);
  else if (errsz)
    snprintf(err, errsz, "rank %d: %s", r, what);
  if (where) *where = (pt_sched_where){r, index};
  return -1;
}

static const pt_action_kind step_end[3] = {ACT_REDUCE_TIED, ACT_REDUCE_DP, ACT_OPTIMIZER};

static int is_step_end(pt_action_kind k) {
  return k == ACT_REDUCE_TIED || k == ACT_REDUCE_DP || k == ACT_OPTIMIZER;
}

/* ends: how many of the step end's reductions came before action i. A FLUSH may stand
 * anywhere before OPT (it only issues what is held). */
static int check_action(const pt_schedule *s, pt_sched_where *where, int r, int i, int ends,
                        char *err, size_t errsz) {
  const pt_action *a = &s->acts[r][i];
  if (a->kind < 0 || a->kind >= ACT_KINDS)
    return schedule_fail_at(s, where, r, i, err, errsz, "unknown action kind %d", (int)a->kind);
  if (is_step_end(a->kind))
    return a->kind == step_end[ends < 3 ? ends : 2] && ends < 3 ? 0
           : schedule_fail_at(s, where, r, i, err, errsz, "the step ends with TIE DP OPT, once "
                              "each and in that order");
  if (a->kind == ACT_FLUSH)
    return a->mb < 0 && a->chunk < 0 && ends < 3 ? 0
           : schedule_fail_at(s, where, r, i, err, errsz, "FLUSH stands alone, before OPT");
  if (ends > 0)
    return schedule_fail_at(s, where, r, i, err, errsz, "comes after the step's reductions (TIE "
                            "DP OPT end the step)");
  if (a->chunk < 0 || a->chunk >= s->n_chunks || a->mb < 0 || a->mb >= s->n_micro)
    return schedule_fail_at(s, where, r, i, err, errsz, "out of range (chunks 0..%d, "
                            "micro-batches 0..%d)", s->n_chunks - 1, s->n_micro - 1);
  if (s->chunk_rank[a->chunk] != r)
    return schedule_fail_at(s, where, r, i, err, errsz, "chunk %d runs on rank %d", a->chunk,
                            s->chunk_rank[a->chunk]);
  return 0;
}

int schedule_check_structure(const pt_schedule *s, pt_sched_where *where, char *err,
                             size_t errsz) {
  for (int c = 0; c < s->n_chunks; c++)
    if (s->n_slots[c] < 1)
      return schedule_fail_at(s, where, s->chunk_rank[c], -1, err, errsz, "chunk %d never runs "
                              "a forward", c);
  for (int r = 0; r < s->n_ranks; r++) {
    int ends = 0;
    for (int i = 0; i < s->n_acts[r]; i++) {
      if (check_action(s, where, r, i, ends, err, errsz) != 0) return -1;
      ends += is_step_end(s->acts[r][i].kind);
    }
    if (ends != 3)
      return schedule_fail_at(s, where, r, -1, err, errsz, "the step does not end with TIE DP OPT");
  }
  return 0;
}

int schedule_sweep(const pt_schedule *s, int *pc, schedule_step_fn step, void *ctx) {
  for (int moved = 1; moved;) {
    moved = 0;
    for (int r = 0; r < s->n_ranks; r++)
      while (pc[r] < s->n_acts[r]) {
        int rc = step(ctx, r, pc[r], &s->acts[r][pc[r]]);
        if (rc < 0) return -1;
        if (rc == 0) break;
        pc[r]++, moved = 1;
      }
  }
  for (int r = 0; r < s->n_ranks; r++)
    if (pc[r] < s->n_acts[r]) return 1;
  return 0;
}
