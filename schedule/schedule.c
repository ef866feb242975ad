/* schedule/schedule.c: building a registered schedule's lists for every rank. */
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/emit.h"

int schedule_build_v(pt_schedule *s, const pt_schedule_type *t, int n_ranks, int v, int n_micro,
                     char *err, size_t errsz) {
  memset(s, 0, sizeof *s);
  if (!t->generate) return pt_errorf(err, errsz, "schedule %s is read from a file", t->name);
  if (n_ranks < 1 || n_micro < 1 || v < 1)
    return pt_errorf(err, errsz, "schedule %s: %d ranks, %d chunks per rank, %d micro-batches: "
                     "each must be at least 1", t->name, n_ranks, v, n_micro);
  if (t->virtual_stages != SCHEDULE_ANY_V && v != t->virtual_stages)
    return pt_errorf(err, errsz, "schedule %s runs %d chunks per rank, not %d", t->name,
                     t->virtual_stages, v);
  int need = t->min_micro ? t->min_micro(n_ranks) : 1;
  if (n_micro < need)
    return pt_errorf(err, errsz, "schedule %s needs at least %s = %d micro-batches per step on "
                     "%d ranks (train.micro_batches), got %d", t->name, t->min_micro_doc, need,
                     n_ranks, n_micro);
  schedule_alloc(s, n_ranks, v, n_micro, t->placement);
  s->type = t;
  snprintf(s->name, sizeof s->name, "%s", t->name);
  schedule_gen g = {n_ranks, v, s->n_chunks, n_micro, s->chunk_rank,
                    pt_calloc((size_t)n_ranks, sizeof(schedule_list))};
  t->generate(&g);
  schedule_lower(s, &g, 1, 1);
  for (int r = 0; r < n_ranks; r++) schedule_list_free(&g.rank[r]);
  free(g.rank);
  return 0;
}

int schedule_build(pt_schedule *s, const char *name, int n_ranks, int n_micro) {
  const pt_schedule_type *t = schedule_find(name);
  memset(s, 0, sizeof *s);
  if (!t) return -1;
  int v = t->virtual_stages == SCHEDULE_ANY_V ? 1 : t->virtual_stages;
  return schedule_build_v(s, t, n_ranks, v, n_micro, NULL, 0);
}

int schedule_build_spec(pt_schedule *s, const pt_spec *spec, char *err, size_t errsz) {
  const spec_pipeline *p = &spec->pipeline;
  int P = (int)p->stages, M = (int)spec->train.micro_batches;
  if (p->schedule_file[0])
    return schedule_from_file(s, p->schedule_file, P, M, (int)p->virtual_stages, err, errsz);
  const pt_schedule_type *t = schedule_find(p->schedule);
  memset(s, 0, sizeof *s);
  if (!t) return pt_errorf(err, errsz, "unknown schedule '%s'", p->schedule);
  return schedule_build_v(s, t, P, schedule_virtual_stages(t, p), M, err, errsz);
}

void schedule_free(pt_schedule *s) {
  for (int r = 0; s->acts && r < s->n_ranks; r++) free(s->acts[r]);
  free(s->acts), free(s->n_acts), free(s->chunk_rank), free(s->n_slots), free(s->n_w_pending);
  memset(s, 0, sizeof *s);
}
