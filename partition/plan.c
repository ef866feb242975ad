#include "partition/plan.h"

#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "partition/solve.h"
#include "core/error.h"
#include "schedule/schedule.h"

double plan_layer_flops(const pt_model *m, int layer) {
  const pt_spec *s = m->spec;
  int T = m->input_tokens ? (int)s->seq_len : 1;
  pt_layer_cost c;
  layer_cost(&m->layers[layer], T, &c);
  double per_sample = c.fwd_flops + c.bwd_flops;
  if (s->train.activation_checkpoint_interval > 0) per_sample += c.fwd_flops; /* recompute */
  return per_sample * (double)(s->train.micro_batches * s->train.micro_batch_size);
}

static double layer_params(const pt_model *m, int layer) {
  double n = 0;
  for (int p = 0; p < m->layers[layer].n_params; p++) n += (double)m->layers[layer].params[p].numel;
  return n;
}

static void plan_warn(pt_plan *p, const char *fmt, ...) {
  if (p->n_warnings == PLAN_MAX_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->warnings[p->n_warnings++], sizeof p->warnings[0], fmt, ap);
  va_end(ap);
}

/* --- Explicit layouts --------------------------------------------------------------------- */

static int explicit_boundaries(pt_plan *p, spec_node *n, spec_errors *e) {
  if (n->kind != SPEC_SEQ || n->n_items != p->n_stages) {
    spec_error(e, n, 0, "pipeline.boundaries must list the first layer of each of the %d stages, "
               "e.g. [0, 3, 6, 9] for 4 stages", p->n_stages);
    return -1;
  }
  for (int s = 0; s < p->n_stages && !e->failed; s++) {
    spec_node *it = n->items[s];
    int64_t v = spec_node_int(it, 0, p->n_layers - 1, e);
    if (e->failed) return -1;
    if (s == 0 && v != 0)
      spec_error(e, it, 0, "pipeline.boundaries must start at layer 0 (got %lld)", (long long)v);
    else if (s > 0 && v <= p->bounds[s - 1])
      spec_error(e, it, 0, "pipeline.boundaries must increase: stage %d would start at layer %lld "
                 "but stage %d starts at %d, leaving a stage empty", s, (long long)v, s - 1,
                 p->bounds[s - 1]);
    p->bounds[s] = (int)v;
  }
  p->bounds[p->n_stages] = p->n_layers;
  snprintf(p->method, sizeof p->method, "explicit boundaries");
  return e->failed ? -1 : 0;
}

static int check_stage_list(pt_plan *p, spec_node *list, int s, int *owner, spec_errors *e) {
  if (list->kind != SPEC_SEQ || list->n_items == 0) {
    spec_error(e, list, 0, "pipeline.stage_layers[%d]: expected a non-empty list of layer "
               "indices (no stage may be empty)", s);
    return -1;
  }
  for (int i = 0; i < list->n_items; i++) {
    int64_t li = spec_node_int(list->items[i], 0, p->n_layers - 1, e);
    if (e->failed) return -1;
    if (owner[li] >= 0) {
      spec_error(e, list->items[i], 0, "layer %lld is listed twice (stages %d and %d); each layer "
                 "belongs to exactly one stage", (long long)li, owner[li], s);
      return -1;
    }
    int prev = i ? (int)spec_node_int(list->items[i - 1], 0, p->n_layers - 1, e) : -1;
    if (i > 0 && li != prev + 1) {
      spec_error(e, list->items[i], 0, "pipeline.stage_layers[%d] is not a contiguous ascending "
                 "range (layer %lld follows %d); a stage owns consecutive layers", s,
                 (long long)li, prev);
      return -1;
    }
    owner[li] = s;
  }
  return 0;
}

static int explicit_stage_layers(pt_plan *p, spec_node *n, spec_errors *e) {
  if (n->kind != SPEC_SEQ || n->n_items != p->n_stages) {
    spec_error(e, n, 0, "pipeline.stage_layers must have one list per stage (%d), e.g. "
               "[[0, 1, 2], [3, 4, 5]]", p->n_stages);
    return -1;
  }
  int *owner = pt_calloc((size_t)p->n_layers, sizeof(int));
  for (int i = 0; i < p->n_layers; i++) owner[i] = -1;
  int rc = 0;
  for (int s = 0; s < p->n_stages && rc == 0; s++) rc = check_stage_list(p, n->items[s], s, owner, e);
  for (int i = 0; i < p->n_layers && rc == 0; i++) {
    if (owner[i] >= 0) continue;
    spec_error(e, n, 0, "pipeline.stage_layers leaves layer %d unassigned; list every layer "
               "0..%d exactly once", i, p->n_layers - 1);
    rc = -1;
  }
  for (int s = 0; s < p->n_stages && rc == 0; s++) {
    p->bounds[s] = (int)spec_node_int(n->items[s]->items[0], 0, p->n_layers, e);
    if (s > 0 && p->bounds[s] < p->bounds[s - 1]) {
      spec_error(e, n->items[s], 0, "pipeline.stage_layers: stage %d comes before stage %d in the "
                 "layer order; stages must follow the layers", s, s - 1);
      rc = -1;
    }
  }
  p->bounds[p->n_stages] = p->n_layers;
  free(owner);
  snprintf(p->method, sizeof p->method, "explicit stage_layers");
  return rc;
}

/* --- Automatic methods -------------------------------------------------------------------- */

/* Micro-batches between their I and W at once on `stage` (one chunk per rank; 0 when the
 * backward is fused): the dout sets the engine keeps beside the slots (partition/memory.h). */
static int stage_w_pending(const pt_schedule_type *t, int stage, int n_stages, int n_micro) {
  int w = 0;
  if (!t->splits_backward || schedule_chunk_in_flight(t, stage, n_stages, 1, n_micro, &w) < 0)
    return 0;
  return w;
}

typedef struct {
  const pt_model *m;
  const pt_schedule_type *schedule;
  int micro_batches, n_stages;
  int *w_pending; /* [stage] for n_stages, built once: the solver asks many times */
} memory_ctx;

/* The solver needs memory that never grows as a range shrinks: give it the monotone bound (the
 * stash is a sum over the range, its own bound). It also tries other stage counts when no plan
 * fits, to say how many would. */
static double stage_memory_cb(void *ctx, int n_stages, int stage, int first, int last) {
  const memory_ctx *c = ctx;
  int k = c->schedule->in_flight(stage, n_stages, c->micro_batches);
  int w = n_stages == c->n_stages ? c->w_pending[stage]
                                  : stage_w_pending(c->schedule, stage, n_stages, c->micro_batches);
  return (double)(memory_bound_stage(c->m, n_stages, stage, first, last, k) +
                  memory_stash_bytes(c->m, first, last, w));
}

/* type:REGEX: weight 1 for each layer whose type matches, 0 for the others. */
static int type_weights(pt_plan *p, const pt_model *m, double *w, spec_errors *e) {
  const char *regex = m->spec->pipeline.partition_types;
  spec_node *at = spec_find(m->spec->pipeline.node, "partition");
  regex_t re;
  if (regcomp(&re, regex, REG_EXTENDED | REG_NOSUB | REG_ICASE) != 0) {
    spec_error(e, at, 0, "pipeline.partition: '%s' is not a valid extended regular expression",
               regex);
    return -1;
  }
  int matched = 0;
  for (int i = 0; i < p->n_layers; i++) {
    w[i] = regexec(&re, m->layers[i].type->name, 0, NULL, 0) == 0;
    matched += w[i] > 0;
  }
  regfree(&re);
  if (matched == 0) {
    spec_error(e, at, 0, "pipeline.partition '%s' matches no layer type", p->method);
    return -1;
  }
  if (matched < p->n_stages)
    plan_warn(p, "partition '%s' matches %d layers for %d stages: some stages get none",
              p->method, matched, p->n_stages);
  return 0;
}

/* Fills w[] with the method's per-layer measure; returns 0 or -1 (a bad regex). */
static int method_weights(pt_plan *p, const pt_model *m, const double *time, double *w,
                          spec_errors *e) {
  const spec_pipeline *pl = &m->spec->pipeline;
  int type = pl->partition == SPEC_PARTITION_TYPE;
  snprintf(p->method, sizeof p->method, "%s%s", spec_partition_names[pl->partition],
           type ? pl->partition_types : "");
  if (type) return type_weights(p, m, w, e);
  for (int i = 0; i < p->n_layers; i++)
    w[i] = pl->partition == SPEC_PARTITION_UNIFORM      ? 1.0
           : pl->partition == SPEC_PARTITION_PARAMETERS ? layer_params(m, i)
                                                        : time[i];
  return 0;
}

static void explain_failure(const pt_plan *p, const pt_model *m, const part_failure *f,
                            spec_errors *e) {
  spec_node *at = p->cap && m->spec->pipeline.max_memory ? m->spec->pipeline.max_memory
                                                         : m->spec->pipeline.node;
  char need[32], cap[32];
  memory_format_size((int64_t)f->need, need, sizeof need);
  memory_format_size((int64_t)f->cap, cap, sizeof cap);
  char more[160] = "", fit[160];
  if (f->fit_stages > 0)
    snprintf(more, sizeof more, "; %d stages would fit the whole model", f->fit_stages);
  if (f->fit_prefix > 0)
    snprintf(fit, sizeof fit, "the first %d of %d layers fit in %d stages", f->fit_prefix,
             p->n_layers, p->n_stages);
  else
    snprintf(fit, sizeof fit, "not even the first %d layers fit one per stage", p->n_stages);
  if (f->stage >= 0)
    spec_error(e, at, 0, "no plan fits pipeline.max_memory: stage %d cannot hold even one layer "
               "(the lightest, layer %d, %s, needs %s against its cap of %s); %s%s", f->stage,
               f->layer, m->layers[f->layer].type->name, need, cap, fit, more);
  else
    spec_error(e, at, 0, "no plan fits pipeline.max_memory: %s%s; raise the caps, add stages, "
               "use fewer micro-batches in flight or turn on activation checkpointing", fit, more);
}

static int automatic(pt_plan *p, const pt_model *m, spec_errors *e) {
  double *time = pt_calloc((size_t)p->n_layers, sizeof(double));
  double *w = pt_calloc((size_t)p->n_layers, sizeof(double));
  for (int i = 0; i < p->n_layers; i++) time[i] = plan_layer_flops(m, i);
  int rc = method_weights(p, m, time, w, e);
  if (rc == 0) {
    memory_ctx ctx = {m, p->schedule, p->micro_batches, p->n_stages,
                      pt_calloc((size_t)p->n_stages, sizeof(int))};
    for (int s = 0; s < p->n_stages; s++)
      ctx.w_pending[s] = stage_w_pending(p->schedule, s, p->n_stages, p->micro_batches);
    int uniform_cap = m->spec->pipeline.max_memory && m->spec->pipeline.max_memory->kind == SPEC_SCALAR;
    /* balanced weighs by time already: passing w itself tells the solver to skip its time pass */
    const double *by_time = m->spec->pipeline.partition == SPEC_PARTITION_BALANCED ? w : time;
    part_problem prob = {.n_layers = p->n_layers, .n_stages = p->n_stages, .weight = w,
                         .time = by_time,
                         .stage_memory = p->cap ? stage_memory_cb : NULL, .ctx = &ctx,
                         .cap = p->cap, .cap_uniform = uniform_cap};
    part_failure why;
    rc = part_solve(&prob, p->bounds, NULL, NULL, &why);
    free(ctx.w_pending);
    if (rc == -2) explain_failure(p, m, &why, e);
    else if (rc != 0 && !e->failed) /* weights the solver refuses: sizes beyond reason */
      spec_error(e, m->spec->pipeline.node, 0, "no partition of %d layers into %d stages: the "
                 "layer costs are not finite numbers (the sizes are too large)", p->n_layers,
                 p->n_stages);
  }
  free(time);
  free(w);
  return rc == 0 ? 0 : -1;
}

/* --- Caps and devices --------------------------------------------------------------------- */

static double parse_cap(spec_node *n, spec_errors *e) {
  if (n->kind != SPEC_SCALAR) {
    spec_error(e, n, 0, "pipeline.max_memory: expected a size like 24GiB, 512MiB or 16GB");
    return 0;
  }
  int64_t b = memory_parse_size(n->value);
  if (b <= 0)
    spec_error(e, n, 0, "pipeline.max_memory: '%s' is not a size; write e.g. 24GiB, 512MiB, "
               "16GB or a byte count", n->value);
  return (double)b;
}

static int parse_caps(pt_plan *p, spec_node *n, spec_errors *e) {
  if (!n) return 0;
  p->cap = pt_calloc((size_t)p->n_stages, sizeof(double));
  if (n->kind == SPEC_SEQ && n->n_items != p->n_stages && n->n_items != 1) {
    spec_error(e, n, 0, "pipeline.max_memory lists %d sizes for %d stages; give one per stage or "
               "one for all", n->n_items, p->n_stages);
    return -1;
  }
  for (int s = 0; s < p->n_stages && !e->failed; s++) {
    spec_node *it = n->kind == SPEC_SEQ ? n->items[n->n_items == 1 ? 0 : s] : n;
    p->cap[s] = parse_cap(it, e);
  }
  return e->failed ? -1 : 0;
}

static int parse_devices(pt_plan *p, spec_node *n, spec_errors *e) {
  int ranks = p->n_stages * p->data_parallel;
  p->devices = pt_calloc((size_t)ranks, sizeof(int));
  for (int r = 0; r < ranks; r++) p->devices[r] = -1;
  if (!n) return 0;
  if (n->kind != SPEC_SEQ || (n->n_items != p->n_stages && n->n_items != ranks)) {
    spec_error(e, n, 0, "pipeline.devices: expected a list of %d device ids (one per stage) or %d "
               "(one per rank), in any order, e.g. [2, 3, 0, 1]", p->n_stages, ranks);
    return -1;
  }
  for (int i = 0; i < n->n_items && !e->failed; i++) {
    int64_t d = spec_node_int(n->items[i], 0, 1 << 20, e);
    for (int j = 0; j < i && !e->failed; j++)
      if (p->devices[j] == d)
        spec_error(e, n->items[i], 0, "pipeline.devices: device %lld is given twice (entries %d "
                   "and %d); each rank of a node needs its own device", (long long)d, j, i);
    p->devices[i] = (int)d;
  }
  for (int r = n->n_items; r < ranks && !e->failed; r++)
    p->devices[r] = p->devices[r % p->n_stages]; /* per-stage list: replicas on other nodes */
  return e->failed ? -1 : 0;
}

/* --- Result ------------------------------------------------------------------------------- */

static void plan_measure(pt_plan *p, const pt_model *m) {
  for (int s = 0; s < p->n_stages; s++) {
    int a = p->bounds[s], b = p->bounds[s + 1];
    int k = p->schedule->in_flight(s, p->n_stages, p->micro_batches);
    memory_estimate_stage(m, a, b, k, &p->mem[s]);
    memory_add_stash(m, a, b, stage_w_pending(p->schedule, s, p->n_stages, p->micro_batches),
                     &p->mem[s]);
    for (int i = a; i < b; i++) {
      p->flops[s] += plan_layer_flops(m, i);
      p->weight[s] += layer_params(m, i);
    }
  }
}

static void plan_check_balance(pt_plan *p, const pt_model *m) {
  double mean = 0, worst = 0;
  int slow = 0;
  for (int s = 0; s < p->n_stages; s++) {
    mean += p->flops[s] / p->n_stages;
    if (p->flops[s] > worst) worst = p->flops[s], slow = s;
  }
  if (p->n_stages > 1 && worst > 1.25 * mean)
    plan_warn(p, "stage %d is %.2fx the mean stage time (layers %d-%d); partition: balanced "
              "minimises the slowest stage", slow, worst / mean, p->bounds[slow],
              p->bounds[slow + 1] - 1);
  for (int s = 0; p->cap && s < p->n_stages; s++) {
    if (p->cap[s] <= 0 || (double)p->mem[s].total >= 0.1 * p->cap[s]) continue;
    char used[32], cap[32];
    memory_format_size(p->mem[s].total, used, sizeof used);
    memory_format_size((int64_t)p->cap[s], cap, sizeof cap);
    plan_warn(p, "stage %d uses %s of its %s cap (%.0f%%): the cap is nearly unused", s, used, cap,
              100.0 * (double)p->mem[s].total / p->cap[s]);
  }
  (void)m;
}

static int check_fits(const pt_plan *p, const pt_model *m, spec_errors *e) {
  for (int s = 0; p->cap && s < p->n_stages; s++) {
    if (p->cap[s] <= 0 || (double)p->mem[s].total <= p->cap[s]) continue;
    char need[32], cap[32];
    memory_format_size(p->mem[s].total, need, sizeof need);
    memory_format_size((int64_t)p->cap[s], cap, sizeof cap);
    spec_error(e, m->spec->pipeline.max_memory, 0, "the %s layout puts %s on stage %d, over its "
               "%s cap; move layers or raise the cap", p->method, need, s, cap);
    return -1;
  }
  return 0;
}

int plan_build(pt_plan *p, const pt_model *m, spec_errors *e) {
  const spec_pipeline *pl = &m->spec->pipeline;
  memset(p, 0, sizeof *p);
  p->n_stages = (int)pl->stages;
  p->data_parallel = (int)pl->data_parallel;
  p->micro_batches = (int)m->spec->train.micro_batches;
  p->n_layers = m->n_layers;
  p->schedule = schedule_from_spec(pl, e);
  if (!p->schedule) return -1;
  if (p->n_stages > p->n_layers) {
    spec_error(e, spec_find(pl->node, "stages"), 0, "pipeline.stages (%d) is more than the %d "
               "layers; every stage needs at least one layer, so use at most %d stages",
               p->n_stages, p->n_layers, p->n_layers);
    return -1;
  }
  p->bounds = pt_calloc((size_t)p->n_stages + 1, sizeof(int));
  p->mem = pt_calloc((size_t)p->n_stages, sizeof(pt_stage_memory));
  p->flops = pt_calloc((size_t)p->n_stages, sizeof(double));
  p->weight = pt_calloc((size_t)p->n_stages, sizeof(double));
  int rc = parse_caps(p, pl->max_memory, e);
  if (rc == 0) rc = parse_devices(p, pl->devices, e);
  if (rc == 0 && pl->boundaries && pl->stage_layers) {
    spec_error(e, pl->stage_layers, 0, "give pipeline.boundaries or pipeline.stage_layers, not both");
    rc = -1;
  }
  if (rc == 0) {
    if (pl->boundaries) rc = explicit_boundaries(p, pl->boundaries, e);
    else if (pl->stage_layers) rc = explicit_stage_layers(p, pl->stage_layers, e);
    else rc = automatic(p, m, e);
  }
  if (rc == 0) plan_measure(p, m);
  if (rc == 0) rc = check_fits(p, m, e);
  if (rc == 0) plan_check_balance(p, m);
  if (rc != 0) plan_free(p);
  return rc;
}

void plan_free(pt_plan *p) {
  free(p->bounds);
  free(p->devices);
  free(p->cap);
  free(p->mem);
  free(p->flops);
  free(p->weight);
  memset(p, 0, sizeof *p);
}
