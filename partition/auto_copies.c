/* partition/auto_copies.c: pipeline.offload in the planner's search (partition/auto.h): the
 * share each searched stage offloads, what it saves, and the copies the simulation runs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "partition/auto_private.h"
#include "partition/memory.h"

/* The shares a searched stage may offload, smallest first: the first that fits its cap wins
 * (fewer copies, and none where nothing is needed). */
static const double levels[AUTO_OFFLOAD_LEVELS] = {0.25, 0.5, 0.75, 1.0};

double auto_copy_rate(const pt_layer_times *t) {
  const char *env = getenv("PIPETRAIN_COPY_BYTES_PER_S");
  char *end = NULL;
  double v = env && *env ? strtod(env, &end) : 0;
  if (v > 0 && isfinite(v) && end && !*end) return v;
  return t->copy_bytes_per_s > 0 ? t->copy_bytes_per_s : PROFILE_COPY_BYTES_PER_S;
}

/* The offload walk of chunk c at share f, computed once per candidate. */
static const pt_offload_sim *sim_at(auto_offload *o, int c, double f) {
  for (int i = 0; i < o->n_sims; i++)
    if (o->sim_chunk[i] == c && o->sim_f[i] == f) return &o->sims[i];
  if (o->n_sims == o->cap_sims) {
    o->cap_sims = o->cap_sims ? 2 * o->cap_sims : 16;
    o->sims = realloc(o->sims, (size_t)o->cap_sims * sizeof *o->sims);
    o->sim_chunk = realloc(o->sim_chunk, (size_t)o->cap_sims * sizeof *o->sim_chunk);
    o->sim_f = realloc(o->sim_f, (size_t)o->cap_sims * sizeof *o->sim_f);
    if (!o->sims || !o->sim_chunk || !o->sim_f) pt_fatal("out of memory in the planner");
  }
  schedule_offload_sim(o->s, c, f, &o->sims[o->n_sims]);
  o->sim_chunk[o->n_sims] = c, o->sim_f[o->n_sims] = f;
  return &o->sims[o->n_sims++];
}

void auto_offload_init(auto_offload *o, const pt_model *m, const pt_schedule *s, int searching) {
  memset(o, 0, sizeof *o);
  int P = s->n_ranks, C = s->n_chunks, is_auto = 0;
  spec_errors e = {0};
  o->fixed = pt_calloc((size_t)P, sizeof *o->fixed);
  o->choice = pt_calloc((size_t)P, sizeof(double));
  if (offload_parse(m->spec, P, o->fixed, &is_auto, &e) != 0) /* plan_build_layout says why */
    memset(o->fixed, 0, sizeof *o->fixed * (size_t)P);
  spec_device kind = device_resolve(m->spec->pipeline.device);
  o->search = searching && is_auto && device_kind_offloads(kind);
  for (int st = 0; st < P && !o->search; st++) o->fixed[st].searched = 0;
  o->any = o->search || offload_any(o->fixed, P);
  o->s = s;
  o->masks = pt_calloc((size_t)C * OFFLOAD_KINDS, sizeof *o->masks);
  o->out_s = pt_calloc(2 * (size_t)C * OFFLOAD_KINDS, sizeof(double));
  o->in_s = o->out_s + (size_t)C * OFFLOAD_KINDS;
  o->copies = (pt_sched_copies){.n_kinds = OFFLOAD_KINDS,
                                .overlap = device_kind(m->spec->pipeline.device)->is.copies_overlap,
                                .offloaded = o->masks, .out_s = o->out_s, .in_s = o->in_s};
}

void auto_offload_free(auto_offload *o) {
  for (int i = 0; i < o->n_sims; i++) schedule_offload_free(&o->sims[i]);
  free(o->sims), free(o->sim_chunk), free(o->sim_f);
  free(o->fixed), free(o->choice), free(o->masks), free(o->out_s);
  memset(o, 0, sizeof *o);
}

/* The share of kind k stage st offloads: the spec's, or the planner's choice. */
static double share(const auto_offload *o, int st, int k) {
  return o->fixed[st].searched ? o->choice[st] : o->fixed[st].fraction[k];
}

/* What share f saves on stage st (the frames instead of the slots, both kinds, as
 * memory_add_offload counts it); the plan's bytes already hold the spec's fixed shares. */
static int64_t saving(auto_offload *o, const pt_model *m, const pt_plan *p, int st, double f) {
  int64_t b = 0;
  for (int c = 0; c < p->n_chunks; c++) {
    if (p->chunk_stage[c] != st) continue;
    const pt_offload_sim *x = sim_at(o, c, f);
    for (int k = 0; k < OFFLOAD_KINDS; k++)
      b += (int64_t)(p->chunk_in_flight[c] - x->frames) *
           memory_offload_bytes(m, p->bounds[c], p->bounds[c + 1], k);
  }
  return b;
}

void auto_offload_choose(auto_offload *o, const pt_model *m, const pt_plan *p, int64_t *bytes) {
  for (int st = 0; st < p->n_stages; st++) {
    o->choice[st] = 0;
    if (!o->fixed[st].searched || !p->cap || p->cap[st] <= 0 || (double)bytes[st] <= p->cap[st])
      continue;
    int64_t best = bytes[st];
    for (int l = 0; l < AUTO_OFFLOAD_LEVELS; l++) {
      int64_t left = bytes[st] - saving(o, m, p, st, levels[l]);
      if (left >= best) continue;
      best = left, o->choice[st] = levels[l];
      if ((double)left <= p->cap[st]) break;
    }
    bytes[st] = best;
  }
}

const pt_sched_copies *auto_offload_copies(auto_offload *o, const pt_model *m, const pt_plan *p,
                                           double rate) {
  if (!o->any) return NULL;
  for (int c = 0; c < p->n_chunks; c++)
    for (int k = 0; k < OFFLOAD_KINDS; k++) {
      int i = c * OFFLOAD_KINDS + k;
      double f = share(o, p->chunk_stage[c], k);
      o->masks[i] = f > 0 ? sim_at(o, c, f)->offloaded : NULL;
      o->out_s[i] = o->in_s[i] =
          (double)memory_offload_bytes(m, p->bounds[c], p->bounds[c + 1], k) / rate;
    }
  return &o->copies;
}
