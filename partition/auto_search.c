/* partition/auto_search.c: the search behind `auto` (partition/auto.h). */
#include "partition/auto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "partition/auto_private.h"
#include "partition/memory.h"
#include "partition/plan.h"
#include "partition/solve.h"
#include "schedule/schedule.h"

/* partition: auto with boundaries given is a plan already chosen (the --set values the search
 * wrote, which checkpoints keep): nothing to search. */
static int partition_open(const spec_pipeline *pl) {
  return pl->partition == SPEC_PARTITION_AUTO && !pl->boundaries && !pl->stage_layers;
}

/* Some stage's pipeline.offload says auto and the device can offload: the planner chooses. */
static int offload_open(const pt_spec *s) {
  int P = s->pipeline.stages > 0 ? (int)s->pipeline.stages : 1, is_auto = 0;
  pt_offload_choice *c = pt_calloc((size_t)P, sizeof *c);
  spec_errors e = {0};
  int rc = offload_parse(s, P, c, &is_auto, &e);
  free(c);
  return rc == 0 && is_auto && device_kind_offloads(device_resolve(s->pipeline.device));
}

int auto_wanted(const pt_spec *s) {
  return !strcmp(s->pipeline.schedule, "auto") || partition_open(&s->pipeline) ||
         s->train.activation_checkpoint_interval == SPEC_AUTO || offload_open(s) ||
         (s->pipeline.shard_auto && s->pipeline.data_parallel > 1);
}

/* Checkpoint intervals tried under auto: off, then segments of 1, 2, 3, 4, 6, 8, 12, ... layers
 * (a longer interval keeps fewer outputs per micro-batch but a larger recompute workspace). */
static int ckpt_choices(const pt_model *m, int auto_ckpt, int fixed, int *out) {
  if (!auto_ckpt) return out[0] = fixed, 1;
  int n = 0;
  out[n++] = 0;
  for (int k = 1; k <= m->n_layers && n < AUTO_MAX_CKPT; k = k < 4 ? k + 1 : k + k / 2) out[n++] = k;
  return n;
}

/* Chunks per stage to try for entry t: its fixed count; pipeline.virtual_stages when given or
 * the schedule is named; else 2, 3 and 4 (one chunk is plain 1F1B or GPipe). */
static int v_choices(const pt_schedule_type *t, const spec_pipeline *pl, int schedule_auto,
                     int *out) {
  if (t->virtual_stages != SCHEDULE_ANY_V) return out[0] = t->virtual_stages, 1;
  if (!schedule_auto || pl->virtual_stages > 0) return out[0] = schedule_virtual_stages(t, pl), 1;
  for (int v = 2; v <= AUTO_MAX_V; v++) out[v - 2] = v;
  return AUTO_MAX_V - 1;
}

static pt_auto_candidate *new_candidate(pt_auto_result *r, const pt_schedule_type *t, int v,
                                        int ckpt, int shard) {
  if (r->n == r->cap_c) {
    r->cap_c = r->cap_c ? 2 * r->cap_c : 32;
    r->c = realloc(r->c, (size_t)r->cap_c * sizeof *r->c);
    if (!r->c) pt_fatal("out of memory in the planner");
  }
  pt_auto_candidate *c = &r->c[r->n++];
  memset(c, 0, sizeof *c);
  c->schedule = t, c->v = v, c->ckpt = ckpt, c->shard = shard, c->worst_stage = -1;
  c->order = r->n;
  return c;
}

/* Why candidate (t, v) cannot run here at all, or 0. */
static int refuse_layout(const auto_ctx *a, const pt_schedule_type *t, int v, char *why,
                         size_t whysz) {
  const pt_spec *s = a->m->spec;
  int C = a->P * v;
  if (C > a->m->n_layers)
    return snprintf(why, whysz, "%d chunks for %d layers", C, a->m->n_layers), 1;
  if (v > 1 && a->P > 1 && memory_uses_nccl(s))
    return snprintf(why, whysz, "several chunks per stage need comm.backend: mpi on GPUs"), 1;
  if (t->virtual_stages != SCHEDULE_ANY_V && s->pipeline.virtual_stages > 0 &&
      s->pipeline.virtual_stages != t->virtual_stages)
    return snprintf(why, whysz, "takes %d chunks per stage, not pipeline.virtual_stages %lld",
                    t->virtual_stages, (long long)s->pipeline.virtual_stages), 1;
  return 0;
}

/* One schedule with v chunks per stage: built once, then run for every interval. */
static void search_schedule(auto_ctx *a, pt_auto_result *r, const pt_schedule_type *t, int v,
                            const int *ckpts, int n_ckpt, spec_errors *e) {
  char why[320] = "";
  pt_schedule s;
  int refused = t != &schedule_file_type && refuse_layout(a, t, v, why, sizeof why);
  if (!refused) refused = auto_build_schedule(a, t, v, &s, why, sizeof why) != 0;
  if (!refused) v = s.n_chunks / s.n_ranks;
  for (int k = 0; k < n_ckpt * (r->shard_auto ? 2 : 1) && !e->failed; k++) {
    int shard = r->shard_auto ? k % 2 : a->m->spec->pipeline.shard_optimizer;
    pt_auto_candidate *c = new_candidate(r, t, v, ckpts[r->shard_auto ? k / 2 : k], shard);
    if (refused) {
      snprintf(c->why, sizeof c->why, "%s", why);
      continue;
    }
    if (c->ckpt > 0 && schedule_check_checkpoint_order(&s, why, sizeof why) != 0) {
      snprintf(c->why, sizeof c->why, "its backward order cannot accumulate under checkpointing");
      continue;
    }
    auto_run_candidate(a, r, c, &s, e);
  }
  if (!refused) schedule_free(&s);
}

static int candidate_cmp(const void *x, const void *y) {
  const pt_auto_candidate *a = x, *b = y;
  int ga = a->why[0] ? 2 : !a->fits, gb = b->why[0] ? 2 : !b->fits;
  if (ga != gb) return ga < gb ? -1 : 1;
  if (ga == 0 && fabs(a->step_s - b->step_s) > 1e-9 * fmax(a->step_s, b->step_s))
    return a->step_s < b->step_s ? -1 : 1;
  if (ga == 0 && a->peak != b->peak) return a->peak < b->peak ? -1 : 1;
  if (ga == 1 && a->over != b->over) return a->over < b->over ? -1 : 1;
  return (a->order > b->order) - (a->order < b->order);
}

int auto_search_all(const pt_model *m, const pt_layer_times *t, int force_partition,
                    pt_auto_result *r, spec_errors *e) {
  const spec_pipeline *pl = &m->spec->pipeline;
  memset(r, 0, sizeof *r);
  r->n_stages = (int)pl->stages, r->micro_batches = (int)m->spec->train.micro_batches;
  r->schedule_auto = !strcmp(pl->schedule, "auto");
  r->partition_auto = force_partition || partition_open(pl);
  r->drop_stage_layers = r->partition_auto && pl->stage_layers;
  r->ckpt_auto = m->spec->train.activation_checkpoint_interval == SPEC_AUTO;
  r->offload_auto = offload_open(m->spec);
  r->shard_auto = pl->data_parallel > 1 && pl->shard_auto;
  snprintf(r->times_source, sizeof r->times_source, "%s", t->source);
  auto_ctx a = {.m = m, .t = t, .P = r->n_stages, .r = r};
  int ckpts[AUTO_MAX_CKPT], vs[AUTO_MAX_V];
  int n_ckpt = ckpt_choices(m, r->ckpt_auto, (int)m->spec->train.activation_checkpoint_interval,
                            ckpts);
  if (pl->schedule_file[0]) search_schedule(&a, r, &schedule_file_type, 0, ckpts, n_ckpt, e);
  for (int i = 0; schedule_types[i] && !pl->schedule_file[0] && !e->failed; i++) {
    const pt_schedule_type *ty = schedule_types[i];
    if (!r->schedule_auto && strcmp(ty->name, pl->schedule)) continue;
    int n_v = v_choices(ty, pl, r->schedule_auto, vs);
    for (int j = 0; j < n_v && !e->failed; j++) search_schedule(&a, r, ty, vs[j], ckpts, n_ckpt, e);
  }
  if (e->failed) return -1;
  qsort(r->c, (size_t)r->n, sizeof *r->c, candidate_cmp);
  for (int i = 0; i < r->n; i++) r->n_fit += r->c[i].fits && !r->c[i].why[0];
  return 0;
}

int auto_search(const pt_model *m, const pt_layer_times *t, int force_partition,
                pt_auto_result *r, spec_errors *e) {
  if (m->spec->pipeline.schedule_file[0] && !strcmp(m->spec->pipeline.schedule, "auto")) {
    spec_error(e, spec_find(m->spec->pipeline.node, "schedule_file"), 0, "pipeline.schedule: "
               "auto searches the registered schedules; drop pipeline.schedule_file");
    return -1;
  }
  if (auto_search_all(m, t, force_partition, r, e) != 0) return -1;
  if (r->n_fit > 0) return 0;
  auto_explain_nothing_fits(m, t, force_partition, r, e);
  return -1;
}

void auto_result_free(pt_auto_result *r) {
  for (int i = 0; i < r->n; i++)
    free(r->c[i].bounds), free(r->c[i].stage_bytes), free(r->c[i].offload);
  free(r->c);
  free(r->cap);
  memset(r, 0, sizeof *r);
}
