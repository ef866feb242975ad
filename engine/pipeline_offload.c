/* pipeline.offload in the pipelined engine: each chunk's frames and host buffers from this
 * rank's action list (schedule/schedule_offload.h), the prefetches issued when the compute
 * action before a backward starts, and the copies on the trace's copy track. */
#include <string.h>

#include "engine/pipeline_private.h"
#include "engine/stage_offload.h"
#include "schedule/schedule_offload.h"

void pipeline_offload_init(pt_pipeline *p, pt_chunk *k) {
  const pt_offload_choice *c = p->plan.offload ? &p->plan.offload[p->stage_id] : NULL;
  if (!c || (c->fraction[0] <= 0 && c->fraction[1] <= 0)) {
    part_stage_init(&p->part, &k->stage, k->first, k->last, k->slots);
    return;
  }
  pt_offload_sim sim[OFFLOAD_KINDS];
  stage_offload_plan plan = {.n_micro = p->sched.n_micro};
  for (int kind = 0; kind < OFFLOAD_KINDS; kind++) {
    memset(&sim[kind], 0, sizeof sim[kind]);
    if (c->fraction[kind] <= 0) continue;
    schedule_offload_sim(&p->sched, k->id, c->fraction[kind], &sim[kind]);
    plan.frames[kind] = sim[kind].frames;
    plan.hosts[kind] = sim[kind].hosts;
    plan.offloaded[kind] = sim[kind].offloaded;
  }
  part_stage_init_offload(&p->part, &k->stage, k->first, k->last, k->slots, &plan);
  for (int kind = 0; kind < OFFLOAD_KINDS; kind++) schedule_offload_free(&sim[kind]);
}

void pipeline_offload_prefetch(pt_pipeline *p, const pt_action *acts, int n, int i) {
  int j = schedule_prefetch_at(acts, n, i);
  pt_chunk *k = j >= 0 ? pipeline_chunk(p, acts[j].chunk) : NULL;
  if (k && k->stage.offload) stage_offload_prefetch(&k->stage, acts[j].mb % k->slots);
}

void pipeline_offload_trace(pt_pipeline *p) {
  for (int i = 0; i < p->n_chunks; i++) {
    int n;
    const stage_offload_span *s = stage_offload_take_spans(&p->chunks[i].stage, &n);
    int chunk = p->plan.virtual_stages > 1 ? p->chunks[i].id : -1;
    for (int j = 0; j < n && trace_active(&p->trace, p->part.step + 1); j++)
      trace_add_chunk(&p->trace, s[j].prefetch ? "prefetch" : "offload", "copy", s[j].mb, chunk,
                      p->part.step + 1, s[j].t0, s[j].t1);
  }
}
