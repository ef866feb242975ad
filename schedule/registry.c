/* schedule/registry.c: the table of schedules (schedule/registry.h). */
#include "schedule/registry.h"

#include <string.h>

#include "core/error.h"
#include "schedule/schedule.h"

extern const pt_schedule_type schedule_1f1b, schedule_dualpipev, schedule_gpipe,
    schedule_interleaved_1f1b, schedule_looped_bfs, schedule_v_half, schedule_v_min,
    schedule_zb_h1, schedule_zb_h2, schedule_zbv;

/* One entry per schedule (declared above), in the order errors list the names. */
const pt_schedule_type *const schedule_types[] = {
    &schedule_1f1b, &schedule_gpipe, &schedule_interleaved_1f1b, &schedule_looped_bfs,
    &schedule_zb_h1, &schedule_zb_h2, &schedule_zbv, &schedule_dualpipev, &schedule_v_half,
    &schedule_v_min, NULL};

static int file_in_flight(int stage, int n_stages, int n_micro) { return n_micro; }

const pt_schedule_type schedule_file_type = {
    .name = "file",
    .doc = "the per-rank action lists of pipeline.schedule_file",
    .in_flight_doc = "at most all",
    .virtual_stages = SCHEDULE_ANY_V,
    .in_flight = file_in_flight,
};

#define SCHEDULE_MAX 64

const pt_schedule_type *schedule_find(const char *name) {
  for (int i = 0; schedule_types[i]; i++)
    if (!strcmp(schedule_types[i]->name, name)) return schedule_types[i];
  return NULL;
}

int schedule_virtual_stages(const pt_schedule_type *t, const spec_pipeline *p) {
  if (t->virtual_stages != SCHEDULE_ANY_V) return t->virtual_stages;
  return p->virtual_stages > 0 ? (int)p->virtual_stages : 1;
}

/* pipeline.virtual_stages against an entry with a fixed count. */
static void check_virtual_stages(const pt_schedule_type *t, const spec_pipeline *p,
                                 spec_errors *e) {
  int fixed = t->virtual_stages;
  if (fixed == SCHEDULE_ANY_V || p->virtual_stages == 0 || p->virtual_stages == fixed) return;
  spec_error(e, spec_find(p->node, "virtual_stages"), 0, "pipeline.virtual_stages: schedule %s "
             "runs %d chunk%s per rank, got %lld; leave it out, or pick interleaved_1f1b or "
             "looped_bfs for another count", t->name, fixed, fixed == 1 ? "" : "s",
             (long long)p->virtual_stages);
}

const pt_schedule_type *schedule_from_spec(const spec_pipeline *p, spec_errors *e) {
  if (p->schedule_file[0]) return e->failed ? NULL : &schedule_file_type;
  const pt_schedule_type *t = schedule_find(p->schedule);
  if (t && !e->failed) check_virtual_stages(t, p, e);
  if (t || e->failed) return e->failed ? NULL : t;
  spec_node *at = spec_find(p->node, "schedule");
  if (!at) pt_fatal("the spec's default schedule '%s' is not registered", p->schedule);
  const char *names[SCHEDULE_MAX + 1];
  int n = 0;
  while (n < SCHEDULE_MAX && schedule_types[n]) names[n] = schedule_types[n]->name, n++;
  names[n] = NULL;
  spec_node_choice(at, names, e);
  return NULL;
}

int schedule_chunk_in_flight(const pt_schedule_type *t, int chunk, int n_ranks, int v,
                             int n_micro, int *w_pending) {
  pt_schedule s;
  if (schedule_build_v(&s, t, n_ranks, v, n_micro, NULL, 0) != 0) return -1;
  int slots = chunk >= 0 && chunk < s.n_chunks ? s.n_slots[chunk] : -1;
  if (w_pending) *w_pending = slots >= 0 ? s.n_w_pending[chunk] : -1;
  schedule_free(&s);
  return slots;
}

int schedule_measure_in_flight(const pt_schedule_type *t, int stage, int n_stages,
                               int n_micro) {
  pt_schedule s;
  int v = t->virtual_stages == SCHEDULE_ANY_V ? 1 : t->virtual_stages, sum = 0;
  if (schedule_build_v(&s, t, n_stages, v, n_micro, NULL, 0) != 0)
    return n_micro * v; /* a layout it does not take: the most it could hold */
  for (int c = 0; c < s.n_chunks; c++) sum += s.chunk_rank[c] == stage ? s.n_slots[c] : 0;
  schedule_free(&s);
  return sum;
}
