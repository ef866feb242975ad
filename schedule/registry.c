/* schedule/registry.c: the table of schedules (schedule/registry.h). */
#include "schedule/registry.h"

#include <string.h>

#include "core/error.h"

extern const pt_schedule_type schedule_1f1b, schedule_gpipe;

/* One entry per schedule (declared above), in the order errors list the names. */
const pt_schedule_type *const schedule_types[] = {&schedule_1f1b, &schedule_gpipe, NULL};

#define SCHEDULE_MAX 64

const pt_schedule_type *schedule_find(const char *name) {
  for (int i = 0; schedule_types[i]; i++)
    if (!strcmp(schedule_types[i]->name, name)) return schedule_types[i];
  return NULL;
}

const pt_schedule_type *schedule_from_spec(const spec_pipeline *p, spec_errors *e) {
  const pt_schedule_type *t = schedule_find(p->schedule);
  if (t || e->failed) return t;
  spec_node *at = spec_find(p->node, "schedule");
  if (!at) pt_fatal("the spec's default schedule '%s' is not registered", p->schedule);
  const char *names[SCHEDULE_MAX + 1];
  int n = 0;
  while (n < SCHEDULE_MAX && schedule_types[n]) names[n] = schedule_types[n]->name, n++;
  names[n] = NULL;
  spec_node_choice(at, names, e);
  return NULL;
}
