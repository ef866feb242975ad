/* partition/auto_fail.c: when no layout fits, the one error that says where and what would fit
 * (partition/auto.h). Each change is tried with the same search, smallest first: a checkpoint
 * interval, another schedule, a smaller micro-batch, more stages. */
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
  if (ok) *best = r.c[0], best->bounds = NULL, best->stage_bytes = NULL;
  auto_result_free(&r);
  return ok;
}

static int uniform_cap(const spec_node *cap) {
  return cap && (cap->kind == SPEC_SCALAR || (cap->kind == SPEC_SEQ && cap->n_items == 1));
}

static void smallest_change(const pt_model *m, const pt_layer_times *t, int force,
                            const pt_auto_result *r, char *out, size_t outsz) {
  pt_spec sp = *m->spec;
  pt_auto_candidate c;
  char what[160];
  sp.train.activation_checkpoint_interval = SPEC_AUTO;
  if (!r->ckpt_auto && fits_with(m, t, force, &sp, &c)) {
    describe(&c, what, sizeof what);
    snprintf(out, outsz, "set train.activation_checkpoint_interval: %d (%s fits)", c.ckpt, what);
    return;
  }
  if (!r->schedule_auto && !sp.pipeline.schedule_file[0]) {
    snprintf(sp.pipeline.schedule, sizeof sp.pipeline.schedule, "auto");
    sp.pipeline.virtual_stages = 0;
    if (fits_with(m, t, force, &sp, &c)) {
      describe(&c, what, sizeof what);
      snprintf(out, outsz, "use another schedule: %s fits (pipeline.schedule: auto finds it)", what);
      return;
    }
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
