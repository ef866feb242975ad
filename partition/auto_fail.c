/* partition/auto_fail.c: when no layout fits, the one error that says where and what would fit
 * (partition/auto.h). Each change is tried with the same search, smallest first: a checkpoint
 * interval or another schedule (the faster of the two when both fit), then a smaller micro-batch,
 * then more stages. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "partition/auto_private.h"
#include "partition/memory.h"

/* "zbv (2 chunks per stage, checkpoint every 2 layers)" */
static void describe(const pt_auto_candidate *c, char *out, size_t outsz) {
  char chunks[48] = "", ckpt[48] = "no checkpointing";
  if (c->v > 1) snprintf(chunks, sizeof chunks, "%d chunks per stage, ", c->v);
  if (c->ckpt == 1) snprintf(ckpt, sizeof ckpt, "checkpoint every layer");
  else if (c->ckpt > 1) snprintf(ckpt, sizeof ckpt, "checkpoint every %d layers", c->ckpt);
  snprintf(out, outsz, "%s (%s%s)", c->schedule->name, chunks, ckpt);
}

/* The search under a changed spec: the best fitting candidate into *best, 1 if one fits. */
static int fits_with(const pt_model *m, const pt_layer_times *t, int force, const pt_spec *sp,
                     pt_auto_candidate *best) {
  pt_model mm = *m;
  mm.spec = sp;
  pt_auto_result r;
  spec_errors e = {0};
  int ok = auto_search_all(&mm, t, force, &r, &e) == 0 && r.n_fit > 0;
  if (ok) *best = r.c[0], best->bounds = NULL, best->stage_bytes = NULL, best->offload = NULL;
  auto_result_free(&r);
  return ok;
}

static int uniform_cap(const spec_node *cap) {
  return cap && (cap->kind == SPEC_SCALAR || (cap->kind == SPEC_SEQ && cap->n_items == 1));
}

static void describe_checkpointing(const pt_auto_candidate *c, char *out, size_t outsz) {
  char what[160];
  describe(c, what, sizeof what);
  snprintf(out, outsz, "set train.activation_checkpoint_interval: %d (%s fits)", c->ckpt, what);
}

/* The schedule that fits, and when it holds fewer micro-batches than the spec's, how many. */
static void describe_schedule(const pt_model *m, const pt_spec *sp, const pt_auto_candidate *c,
                              char *out, size_t outsz) {
  char what[160], fewer[96] = "";
  describe(c, what, sizeof what);
  const pt_schedule_type *was = schedule_find(m->spec->pipeline.schedule);
  int P = (int)sp->pipeline.stages, M = (int)sp->train.micro_batches;
  if (was && c->v == 1 && was->in_flight(0, P, M) > c->schedule->in_flight(0, P, M))
    snprintf(fewer, sizeof fewer, ", with %d micro-batches in flight on stage 0 instead of %d",
             c->schedule->in_flight(0, P, M), was->in_flight(0, P, M));
  snprintf(out, outsz, "use another schedule: %s fits%s (pipeline.schedule: auto finds it)", what,
           fewer);
}

static void smallest_change(const pt_model *m, const pt_layer_times *t, int force,
                            const pt_auto_result *r, char *out, size_t outsz) {
  pt_spec sp = *m->spec;
  pt_auto_candidate c, by_ckpt, by_schedule;
  int ckpt_fits = 0, schedule_fits = 0;
  if (!r->ckpt_auto) { /* one setting changed: the interval, or the schedule */
    pt_spec k = sp;
    k.train.activation_checkpoint_interval = SPEC_AUTO;
    ckpt_fits = fits_with(m, t, force, &k, &by_ckpt);
  }
  if (!r->schedule_auto && !sp.pipeline.schedule_file[0]) {
    pt_spec k = sp;
    snprintf(k.pipeline.schedule, sizeof k.pipeline.schedule, "auto");
    k.pipeline.virtual_stages = 0;
    schedule_fits = fits_with(m, t, force, &k, &by_schedule);
    if (!schedule_fits && !r->ckpt_auto) {
      k.train.activation_checkpoint_interval = SPEC_AUTO;
      schedule_fits = fits_with(m, t, force, &k, &by_schedule);
    }
  }
  if (ckpt_fits && (!schedule_fits || by_ckpt.step_s <= by_schedule.step_s)) {
    describe_checkpointing(&by_ckpt, out, outsz);
    return;
  }
  if (schedule_fits) {
    describe_schedule(m, &sp, &by_schedule, out, outsz);
    return;
  }
  sp.train.activation_checkpoint_interval = SPEC_AUTO; /* the bigger changes search the rest */
  if (!sp.pipeline.schedule_file[0]) {
    snprintf(sp.pipeline.schedule, sizeof sp.pipeline.schedule, "auto");
    sp.pipeline.virtual_stages = 0;
  }
  int64_t B = sp.train.micro_batch_size, M = sp.train.micro_batches;
  for (sp.train.micro_batch_size = B / 2; sp.train.micro_batch_size >= 1; sp.train.micro_batch_size /= 2)
    if (fits_with(m, t, force, &sp, &c)) {
      snprintf(out, outsz, "use a smaller micro-batch: train.micro_batch_size: %lld fits (with "
               "train.micro_batches: %lld the batch stays the same)",
               (long long)sp.train.micro_batch_size, (long long)(M * B / sp.train.micro_batch_size));
      return;
    }
  sp.train.micro_batch_size = B;
  int P = (int)sp.pipeline.stages;
  for (int k = P + 1; uniform_cap(sp.pipeline.max_memory) && k <= m->n_layers && k <= 2 * P + 8; k++) {
    sp.pipeline.stages = k;
    if (fits_with(m, t, force, &sp, &c)) {
      snprintf(out, outsz, "use more stages: pipeline.stages: %d fits", k);
      return;
    }
  }
  snprintf(out, outsz, "no checkpoint interval, schedule, micro-batch size or stage count tried "
           "fits: raise pipeline.max_memory");
}

void auto_explain_nothing_fits(const pt_model *m, const pt_layer_times *t, int force_partition,
                               const pt_auto_result *r, spec_errors *e) {
  spec_node *at = m->spec->pipeline.max_memory ? m->spec->pipeline.max_memory
                                               : m->spec->pipeline.node;
  const pt_auto_candidate *best = NULL;
  for (int i = 0; i < r->n && !best; i++)
    if (!r->c[i].why[0]) best = &r->c[i];
  if (!best) {
    spec_error(e, m->spec->pipeline.node, 0, "no schedule can run this layout: %s: %s",
               r->n ? r->c[0].schedule->name : "none", r->n ? r->c[0].why : "nothing to try");
    return;
  }
  char what[160], need[32], cap[32], change[512];
  describe(best, what, sizeof what);
  int s = best->worst_stage;
  memory_format_size(best->stage_bytes[s], need, sizeof need);
  memory_format_size((int64_t)r->cap[s], cap, sizeof cap);
  smallest_change(m, t, force_partition, r, change, sizeof change);
  spec_error(e, at, 0, "no plan fits pipeline.max_memory: the closest, %s, puts %s on stage %d "
             "against its cap of %s; %s", what, need, s, cap, change);
}
