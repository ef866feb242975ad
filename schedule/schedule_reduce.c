/* schedule/schedule_reduce.c: the step end's reductions as the NCCL checks see them
 * (schedule/check.h: sched_reduce). The engine sums tied gradients group by group on
 * communicators of their own (engine/pipeline_ties.c), in one order on every rank, each sum a
 * chain that needs every member; so a rank leaves its REDUCE_TIED once each of its groups has
 * met, and a group meets when all its ranks are in (or past) their REDUCE_TIED and each has
 * met its earlier groups. The data-parallel sum joins a rank with its replicas, which run the
 * same list: in this one-pipeline simulation they arrive together, so it never blocks; what it
 * can do is keep a held send waiting, which the checks report. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/check.h"

void sched_reduce_init(sched_reduce *x, const pt_schedule *s, const pt_sched_reductions *red) {
  int P = s->n_ranks;
  memset(x, 0, sizeof *x);
  x->s = s;
  if (red) {
    x->red = *red;
  } else { /* any layout: one tie group over every rank, and replicas */
    x->own = pt_calloc((size_t)P, 1);
    memset(x->own, 1, (size_t)P);
    x->red = (pt_sched_reductions){.n_ties = P > 1, .tie = x->own, .dp = 2};
  }
  x->tie_at = pt_calloc((size_t)P, sizeof(int));
  for (int r = 0; r < P; r++) {
    x->tie_at[r] = -1;
    for (int i = 0; i < s->n_acts[r]; i++)
      if (s->acts[r][i].kind == ACT_REDUCE_TIED) x->tie_at[r] = i;
  }
  x->met = pt_calloc((size_t)x->red.n_ties + 1, sizeof(signed char));
}

void sched_reduce_free(sched_reduce *x) {
  free(x->own), free(x->tie_at), free(x->met);
  memset(x, 0, sizeof *x);
}

static int member(const sched_reduce *x, int g, int r) {
  return x->red.tie[(size_t)g * (size_t)x->s->n_ranks + (size_t)r] != 0;
}

int sched_reduce_exchanges(const sched_reduce *x, int r, pt_action_kind k) {
  if (k == ACT_REDUCE_DP) return x->red.dp > 1;
  for (int g = 0; k == ACT_REDUCE_TIED && g < x->red.n_ties; g++)
    if (member(x, g, r)) return 1;
  return 0;
}

/* Group g has met: every member in or past its TIE, each done with its earlier groups.
 * Memoised in x->met for one query (1 met, -1 not, 0 unknown). */
static int group_met(sched_reduce *x, const int *pc, int g) {
  if (x->met[g]) return x->met[g] > 0;
  int ok = 1;
  for (int m = 0; ok && m < x->s->n_ranks; m++) {
    if (!member(x, g, m)) continue;
    ok = x->tie_at[m] >= 0 && pc[m] >= x->tie_at[m];
    for (int h = 0; ok && h < g; h++) ok = !member(x, h, m) || group_met(x, pc, h);
  }
  x->met[g] = ok ? 1 : -1;
  return ok;
}

int sched_reduce_tie_met(sched_reduce *x, const int *pc, int r) {
  memset(x->met, 0, (size_t)x->red.n_ties + 1);
  for (int g = 0; g < x->red.n_ties; g++)
    if (member(x, g, r) && !group_met(x, pc, g)) return 0;
  return 1;
}

int sched_reduce_waits_for(sched_reduce *x, const int *pc, int r, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  memset(x->met, 0, (size_t)x->red.n_ties + 1);
  for (int g = 0; g < x->red.n_ties; g++) {
    if (!member(x, g, r) || group_met(x, pc, g)) continue;
    for (int m = 0; m < x->s->n_ranks && n + 1 < size; m++) {
      if (!member(x, g, m)) continue;
      int w = snprintf(buf + n, size - n, "%s%d", n ? ", " : "", m);
      if (w < 0 || (size_t)w >= size - n) break;
      n += (size_t)w;
    }
    return 1;
  }
  return 0;
}
