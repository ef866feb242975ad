#include "partition/plan.h"

#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "partition/solve.h"
#include "core/error.h"
#include "device/device.h"
#include "schedule/schedule.h"
#include "schedule/schedule_offload.h"

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

/* What an explicit list has one entry for: a stage, or with several per stage a chunk. */
static const char *unit(const pt_plan *p) { return p->virtual_stages > 1 ? "chunk" : "stage"; }

static int explicit_boundaries(pt_plan *p, spec_node *n, spec_errors *e) {
  if (n->kind != SPEC_SEQ || n->n_items != p->n_chunks) {
    spec_error(e, n, 0, "pipeline.boundaries must list the first layer of each of the %d %ss, "
               "e.g. [0, 3, 6, 9] for 4 %ss", p->n_chunks, unit(p), unit(p));
    return -1;
  }
  for (int s = 0; s < p->n_chunks && !e->failed; s++) {
    spec_node *it = n->items[s];
    int64_t v = spec_node_int(it, 0, p->n_layers - 1, e);
    if (e->failed) return -1;
    if (s == 0 && v != 0)
      spec_error(e, it, 0, "pipeline.boundaries must start at layer 0 (got %lld)", (long long)v);
    else if (s > 0 && v <= p->bounds[s - 1])
      spec_error(e, it, 0, "pipeline.boundaries must increase: %s %d would start at layer %lld "
                 "but %s %d starts at %d, leaving a %s empty", unit(p), s, (long long)v, unit(p),
                 s - 1, p->bounds[s - 1], unit(p));
    p->bounds[s] = (int)v;
  }
  p->bounds[p->n_chunks] = p->n_layers;
  snprintf(p->method, sizeof p->method, "explicit boundaries");
  return e->failed ? -1 : 0;
}

static int check_stage_list(pt_plan *p, spec_node *list, int s, int *owner, spec_errors *e) {
  if (list->kind != SPEC_SEQ || list->n_items == 0) {
    spec_error(e, list, 0, "pipeline.stage_layers[%d]: expected a non-empty list of layer "
               "indices (no %s may be empty)", s, unit(p));
    return -1;
  }
  for (int i = 0; i < list->n_items; i++) {
    int64_t li = spec_node_int(list->items[i], 0, p->n_layers - 1, e);
    if (e->failed) return -1;
    if (owner[li] >= 0) {
      spec_error(e, list->items[i], 0, "layer %lld is listed twice (%ss %d and %d); each layer "
                 "belongs to exactly one %s", (long long)li, unit(p), owner[li], s, unit(p));
      return -1;
    }
    int prev = i ? (int)spec_node_int(list->items[i - 1], 0, p->n_layers - 1, e) : -1;
    if (i > 0 && li != prev + 1) {
      spec_error(e, list->items[i], 0, "pipeline.stage_layers[%d] is not a contiguous ascending "
                 "range (layer %lld follows %d); a %s owns consecutive layers", s,
                 (long long)li, prev, unit(p));
      return -1;
    }
    owner[li] = s;
  }
  return 0;
}

static int explicit_stage_layers(pt_plan *p, spec_node *n, spec_errors *e) {
  if (n->kind != SPEC_SEQ || n->n_items != p->n_chunks) {
    spec_error(e, n, 0, "pipeline.stage_layers must have one list per %s (%d), e.g. "
               "[[0, 1, 2], [3, 4, 5]]", unit(p), p->n_chunks);
    return -1;
  }
  int *owner = pt_calloc((size_t)p->n_layers, sizeof(int));
  for (int i = 0; i < p->n_layers; i++) owner[i] = -1;
  int rc = 0;
  for (int s = 0; s < p->n_chunks && rc == 0; s++)
    rc = check_stage_list(p, n->items[s], s, owner, e);
  for (int i = 0; i < p->n_layers && rc == 0; i++) {
    if (owner[i] >= 0) continue;
    spec_error(e, n, 0, "pipeline.stage_layers leaves layer %d unassigned; list every layer "
               "0..%d exactly once", i, p->n_layers - 1);
    rc = -1;
  }
  for (int s = 0; s < p->n_chunks && rc == 0; s++) {
    p->bounds[s] = (int)spec_node_int(n->items[s]->items[0], 0, p->n_layers, e);
    if (s > 0 && p->bounds[s] < p->bounds[s - 1]) {
      spec_error(e, n->items[s], 0, "pipeline.stage_layers: %s %d comes before %s %d in the "
                 "layer order; %ss must follow the layers", unit(p), s, unit(p), s - 1, unit(p));
      rc = -1;
    }
  }
  p->bounds[p->n_chunks] = p->n_layers;
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
  int micro_batches, n_chunks;
  const int *chunk_in_flight; /* several chunks per stage: the schedule's, for this plan's count */
  const int *w_pending;       /* [chunk] for this plan's count: the solver asks many times */
} memory_ctx;

/* The solver needs memory that never grows as a range shrinks: give it the monotone bound (the
 * stash is a sum over the range, its own bound). With one chunk per stage it also tries other
 * stage counts when no plan fits, to say how many would, and the registry's in-flight count
 * serves any count; with several, only this plan's chunk count is asked. */
static double stage_memory_cb(void *ctx, int n_stages, int stage, int first, int last) {
  const memory_ctx *c = ctx;
  int k = c->chunk_in_flight ? c->chunk_in_flight[stage]
                             : c->schedule->in_flight(stage, n_stages, c->micro_batches);
  int w = n_stages == c->n_chunks ? c->w_pending[stage]
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
  if (matched < p->n_chunks)
    plan_warn(p, "partition '%s' matches %d layers for %d %ss: some %ss get none", p->method,
              matched, p->n_chunks, unit(p), unit(p));
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

/* "stage 3" or, with several chunks per stage, "chunk 5 (stage 2, half its cap)". */
static void chunk_name(const pt_plan *p, int c, char *out, size_t outsz) {
  if (p->virtual_stages == 1) snprintf(out, outsz, "stage %d", c);
  else snprintf(out, outsz, "chunk %d (on stage %d, which gives each of its %d chunks 1/%d of "
                "its cap)", c, p->chunk_stage[c], p->virtual_stages, p->virtual_stages);
}

static void explain_failure(const pt_plan *p, const pt_model *m, const part_failure *f,
                            spec_errors *e) {
  spec_node *at = p->cap && m->spec->pipeline.max_memory ? m->spec->pipeline.max_memory
                                                         : m->spec->pipeline.node;
  char need[32], cap[32], who[160];
  memory_format_size((int64_t)f->need, need, sizeof need);
  memory_format_size((int64_t)f->cap, cap, sizeof cap);
  char more[160] = "", fit[160];
  if (f->fit_stages > 0)
    snprintf(more, sizeof more, "; %d stages would fit the whole model", f->fit_stages);
  if (f->fit_prefix > 0)
    snprintf(fit, sizeof fit, "the first %d of %d layers fit in %d %ss", f->fit_prefix,
             p->n_layers, p->n_chunks, unit(p));
  else
    snprintf(fit, sizeof fit, "not even the first %d layers fit one per %s", p->n_chunks, unit(p));
  if (f->stage >= 0) chunk_name(p, f->stage, who, sizeof who);
  if (f->stage >= 0)
    spec_error(e, at, 0, "no plan fits pipeline.max_memory: %s cannot hold even one layer "
               "(the lightest, layer %d, %s, needs %s against its cap of %s); %s%s", who,
               f->layer, m->layers[f->layer].type->name, need, cap, fit, more);
  else
    spec_error(e, at, 0, "no plan fits pipeline.max_memory: %s%s; raise the caps, add stages, "
               "use fewer micro-batches in flight or turn on activation checkpointing", fit, more);
}

/* The cap each chunk is solved against: its stage's, shared evenly by the stage's chunks. */
static double *chunk_caps(const pt_plan *p) {
  if (!p->cap || p->virtual_stages == 1) return p->cap;
  double *cap = pt_calloc((size_t)p->n_chunks, sizeof(double));
  for (int c = 0; c < p->n_chunks; c++) cap[c] = p->cap[p->chunk_stage[c]] / p->virtual_stages;
  return cap;
}

static int automatic(pt_plan *p, const pt_model *m, spec_errors *e) {
  double *time = pt_calloc((size_t)p->n_layers, sizeof(double));
  double *w = pt_calloc((size_t)p->n_layers, sizeof(double));
  for (int i = 0; i < p->n_layers; i++) time[i] = plan_layer_flops(m, i);
  int rc = method_weights(p, m, time, w, e);
  if (rc == 0) {
    int several = p->virtual_stages > 1;
    memory_ctx ctx = {m, p->schedule, p->micro_batches, p->n_chunks,
                      several ? p->chunk_in_flight : NULL, p->chunk_w_pending};
    /* other stage counts are tried only with one chunk per stage (see stage_memory_cb) */
    int uniform_cap = !several && m->spec->pipeline.max_memory &&
                      m->spec->pipeline.max_memory->kind == SPEC_SCALAR;
    /* balanced weighs by time already: passing w itself tells the solver to skip its time pass */
    const double *by_time = m->spec->pipeline.partition == SPEC_PARTITION_BALANCED ? w : time;
    double *cap = chunk_caps(p);
    part_problem prob = {.n_layers = p->n_layers, .n_stages = p->n_chunks, .weight = w,
                         .time = by_time,
                         .stage_memory = p->cap ? stage_memory_cb : NULL, .ctx = &ctx,
                         .cap = cap, .cap_uniform = uniform_cap};
    part_failure why;
    rc = part_solve(&prob, p->bounds, NULL, NULL, &why);
    if (rc == -2) explain_failure(p, m, &why, e);
    else if (rc != 0 && !e->failed) /* weights the solver refuses: sizes beyond reason */
      spec_error(e, m->spec->pipeline.node, 0, "no partition of %d layers into %d %ss: the "
                 "layer costs are not finite numbers (the sizes are too large)", p->n_layers,
                 p->n_chunks, unit(p));
    if (cap != p->cap) free(cap);
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

/* Ids may repeat only under comm.backend: mpi: NCCL refuses two ranks on one device, while the
 * staged transport copies through host memory, which is how a one-GPU machine runs a pipeline. */
static int parse_devices(pt_plan *p, spec_node *n, int may_share, spec_errors *e) {
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
    for (int j = 0; j < i && !e->failed && !may_share; j++)
      if (p->devices[j] == d)
        spec_error(e, n->items[i], 0, "pipeline.devices: device %lld is given twice (entries %d "
                   "and %d); each rank of a node needs its own device under NCCL (set "
                   "comm.backend: mpi to let ranks share one)", (long long)d, j, i);
    p->devices[i] = (int)d;
  }
  for (int r = n->n_items; r < ranks && !e->failed; r++)
    p->devices[r] = p->devices[r % p->n_stages]; /* per-stage list: replicas on other nodes */
  return e->failed ? -1 : 0;
}

static int parse_offload(pt_plan *p, const pt_model *m, spec_errors *e) {
  int is_auto = 0;
  p->offload = pt_calloc((size_t)p->n_stages, sizeof *p->offload);
  if (offload_parse(m->spec, p->n_stages, p->offload, &is_auto, e) != 0) return -1;
  spec_device kind = device_resolve(m->spec->pipeline.device);
  if (is_auto && !device_kind_offloads(kind))
    plan_warn(p, "pipeline.offload: auto offloads nothing on the %s (its device memory is the "
              "host's)", spec_device_names[kind]);
  else if (is_auto) /* the planner pins its choice first (partition/auto.h); this is a plan alone */
    plan_warn(p, "pipeline.offload: auto is the planner's choice; this plan offloads nothing "
              "where it says auto");
  return 0;
}

/* --- Result ------------------------------------------------------------------------------- */

/* pipeline.offload: each chunk's pooled kinds hold the frames and host buffers the schedule's
 * action list needs (schedule/schedule_offload.h) instead of a buffer per slot. s: the
 * schedule, or NULL to build the spec's. */
static void plan_offload(pt_plan *p, const pt_model *m, const pt_schedule *s) {
  pt_schedule built;
  char err[512];
  if (!offload_any(p->offload, p->n_stages)) return;
  if (!s && schedule_build_spec(&built, m->spec, err, sizeof err) != 0) return; /* reported */
  const pt_schedule *sc = s ? s : &built;
  char idle[160] = "";
  int n_idle = 0;
  for (int c = 0; c < p->n_chunks; c++)
    for (int k = 0; k < OFFLOAD_KINDS; k++) {
      double f = p->offload[p->chunk_stage[c]].fraction[k];
      if (f <= 0) continue;
      pt_offload_sim o;
      schedule_offload_sim(sc, c, f, &o);
      memory_add_offload(m, p->bounds[c], p->bounds[c + 1], k, o.frames, o.hosts,
                         &p->chunk_mem[c]);
      if (o.frames >= p->chunk_in_flight[c] && n_idle < (int)sizeof idle - 8)
        n_idle += snprintf(idle + n_idle, sizeof idle - (size_t)n_idle, "%s%d %s",
                           n_idle ? ", " : "", c, k == OFFLOAD_OUTPUTS ? "outputs" : "saved");
      schedule_offload_free(&o);
    }
  if (!s) schedule_free(&built);
  if (n_idle)
    plan_warn(p, "pipeline.offload saves no device memory on chunk %s: the micro-batches kept, a "
              "forward's frame and a prefetch's fill the slots (a chunk holding 2 micro-batches "
              "or fewer cannot save; a larger fraction may)", idle);
}

/* Each chunk alone, then each stage: its chunks' memory together (a chunk whose predecessor is
 * on the same stage takes its input gradient from there), time and parameters added, and the
 * stage's comm part where it uses NCCL. */
static void plan_measure(pt_plan *p, const pt_model *m, const pt_schedule *sched) {
  for (int c = 0; c < p->n_chunks; c++) {
    int a = p->bounds[c], b = p->bounds[c + 1];
    memory_estimate_stage(m, a, b, p->chunk_in_flight[c], &p->chunk_mem[c]);
    memory_add_stash(m, a, b, p->chunk_w_pending[c], &p->chunk_mem[c]);
    for (int i = a; i < b; i++) {
      p->chunk_flops[c] += plan_layer_flops(m, i);
      p->chunk_weight[c] += layer_params(m, i);
    }
  }
  plan_offload(p, m, sched);
  int v = p->virtual_stages, *chunks = pt_calloc((size_t)v, sizeof(int));
  int *local_prev = pt_calloc((size_t)v, sizeof(int));
  pt_stage_memory *mem = pt_calloc((size_t)v, sizeof(pt_stage_memory));
  pt_range *ranges = pt_calloc((size_t)v, sizeof(pt_range));
  for (int s = 0; s < p->n_stages; s++) {
    int n = plan_stage_chunks(p, s, chunks);
    plan_stage_ranges(p, s, ranges);
    for (int i = 0; i < n; i++) {
      int c = chunks[i];
      mem[i] = p->chunk_mem[c];
      local_prev[i] = c > 0 && p->chunk_stage[c - 1] == s;
      p->flops[s] += p->chunk_flops[c];
      p->weight[s] += p->chunk_weight[c];
    }
    memory_estimate_rank(m, ranges, mem, local_prev, n, &p->mem[s]);
  }
  free(chunks), free(local_prev), free(mem), free(ranges);
  plan_add_comm(p, m);
}

static void plan_check_balance(pt_plan *p, const pt_model *m) {
  double mean = 0, worst = 0;
  int slow = 0;
  for (int s = 0; s < p->n_stages; s++) {
    mean += p->flops[s] / p->n_stages;
    if (p->flops[s] > worst) worst = p->flops[s], slow = s;
  }
  if (p->n_stages > 1 && worst > 1.25 * mean && p->virtual_stages == 1)
    plan_warn(p, "stage %d is %.2fx the mean stage time (layers %d-%d); partition: balanced "
              "minimises the slowest stage", slow, worst / mean, p->bounds[slow],
              p->bounds[slow + 1] - 1);
  else if (p->n_stages > 1 && worst > 1.25 * mean)
    plan_warn(p, "stage %d is %.2fx the mean stage time (its %d chunks together); partition: "
              "balanced minimises the slowest chunk", slow, worst / mean, p->virtual_stages);
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

/* One chunk per stage: chunk c is stage c, in flight as the registry says. */
static void one_chunk_per_stage(pt_plan *p) {
  for (int c = 0; c < p->n_chunks; c++) {
    p->chunk_stage[c] = c;
    p->chunk_in_flight[c] = p->schedule->in_flight(c, p->n_stages, p->micro_batches);
    p->chunk_w_pending[c] = stage_w_pending(p->schedule, c, p->n_stages, p->micro_batches);
  }
}

static void alloc_chunk_maps(pt_plan *p) {
  p->chunk_stage = pt_calloc((size_t)p->n_chunks, sizeof(int));
  p->chunk_in_flight = pt_calloc((size_t)p->n_chunks, sizeof(int));
  p->chunk_w_pending = pt_calloc((size_t)p->n_chunks, sizeof(int));
}

/* Several chunks per stage, or a schedule file: the placement and each chunk's slots come from
 * the schedule itself, built for this layout. */
static int chunks_from_schedule(pt_plan *p, const pt_model *m, spec_errors *e) {
  pt_schedule s;
  char err[512];
  const spec_pipeline *pl = &m->spec->pipeline;
  if (schedule_build_spec(&s, m->spec, err, sizeof err) != 0) {
    spec_node *at = spec_find(pl->node, pl->schedule_file[0] ? "schedule_file" : "schedule");
    spec_error(e, at ? at : pl->node, 0, "%s", err);
    return -1;
  }
  p->virtual_stages = s.n_chunks / s.n_ranks;
  p->n_chunks = s.n_chunks;
  alloc_chunk_maps(p);
  memcpy(p->chunk_stage, s.chunk_rank, sizeof(int) * (size_t)p->n_chunks);
  memcpy(p->chunk_in_flight, s.n_slots, sizeof(int) * (size_t)p->n_chunks);
  memcpy(p->chunk_w_pending, s.n_w_pending, sizeof(int) * (size_t)p->n_chunks);
  schedule_free(&s);
  return 0;
}

static int plan_chunks(pt_plan *p, const pt_model *m, spec_errors *e) {
  const spec_pipeline *pl = &m->spec->pipeline;
  if (pl->schedule_file[0] || schedule_virtual_stages(p->schedule, pl) > 1)
    return chunks_from_schedule(p, m, e);
  p->virtual_stages = 1;
  p->n_chunks = p->n_stages;
  alloc_chunk_maps(p);
  one_chunk_per_stage(p);
  return 0;
}

static int check_chunk_count(const pt_plan *p, const spec_pipeline *pl, spec_errors *e) {
  if (p->n_chunks <= p->n_layers) return 0;
  if (p->virtual_stages == 1)
    spec_error(e, spec_find(pl->node, "stages"), 0, "pipeline.stages (%d) is more than the %d "
               "layers; every stage needs at least one layer, so use at most %d stages",
               p->n_stages, p->n_layers, p->n_layers);
  else
    spec_error(e, spec_find(pl->node, "stages"), 0, "pipeline.stages (%d) x %d chunks per stage "
               "= %d chunks is more than the %d layers; every chunk needs at least one layer",
               p->n_stages, p->virtual_stages, p->n_chunks, p->n_layers);
  return -1;
}

static void plan_alloc(pt_plan *p) {
  p->bounds = pt_calloc((size_t)p->n_chunks + 1, sizeof(int));
  p->mem = pt_calloc((size_t)p->n_stages, sizeof(pt_stage_memory));
  p->flops = pt_calloc((size_t)p->n_stages, sizeof(double));
  p->weight = pt_calloc((size_t)p->n_stages, sizeof(double));
  p->chunk_mem = pt_calloc((size_t)p->n_chunks, sizeof(pt_stage_memory));
  p->chunk_flops = pt_calloc((size_t)p->n_chunks, sizeof(double));
  p->chunk_weight = pt_calloc((size_t)p->n_chunks, sizeof(double));
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
  if (plan_chunks(p, m, e) != 0 || check_chunk_count(p, pl, e) != 0) {
    plan_free(p);
    return -1;
  }
  plan_alloc(p);
  int rc = parse_caps(p, pl->max_memory, e);
  if (rc == 0) rc = parse_devices(p, pl->devices, m->spec->comm_backend == SPEC_COMM_MPI, e);
  if (rc == 0) rc = parse_offload(p, m, e);
  if (rc == 0 && pl->boundaries && pl->stage_layers) {
    spec_error(e, pl->stage_layers, 0, "give pipeline.boundaries or pipeline.stage_layers, not both");
    rc = -1;
  }
  if (rc == 0) {
    if (pl->boundaries) rc = explicit_boundaries(p, pl->boundaries, e);
    else if (pl->stage_layers) rc = explicit_stage_layers(p, pl->stage_layers, e);
    else rc = automatic(p, m, e);
    if (pl->boundaries && rc == 0 && pl->partition == SPEC_PARTITION_AUTO)
      snprintf(p->method, sizeof p->method, "auto"); /* the planner's split, pinned */
  }
  if (rc == 0) plan_measure(p, m, NULL);
  if (rc == 0) rc = check_fits(p, m, e);
  if (rc == 0) plan_check_balance(p, m);
  if (rc != 0) plan_free(p);
  return rc;
}

int plan_build_layout(pt_plan *p, const pt_model *m, const pt_schedule *s, const int *bounds,
                      spec_errors *e) {
  const spec_pipeline *pl = &m->spec->pipeline;
  memset(p, 0, sizeof *p);
  p->n_stages = s->n_ranks;
  p->data_parallel = pl->data_parallel > 0 ? (int)pl->data_parallel : 1;
  p->micro_batches = s->n_micro;
  p->n_layers = m->n_layers;
  p->schedule = s->type ? s->type : &schedule_file_type;
  p->n_chunks = s->n_chunks;
  p->virtual_stages = s->n_chunks / s->n_ranks;
  alloc_chunk_maps(p);
  memcpy(p->chunk_stage, s->chunk_rank, sizeof(int) * (size_t)p->n_chunks);
  memcpy(p->chunk_in_flight, s->n_slots, sizeof(int) * (size_t)p->n_chunks);
  memcpy(p->chunk_w_pending, s->n_w_pending, sizeof(int) * (size_t)p->n_chunks);
  plan_alloc(p);
  memcpy(p->bounds, bounds, sizeof(int) * ((size_t)p->n_chunks + 1));
  snprintf(p->method, sizeof p->method, "auto");
  int rc = parse_caps(p, pl->max_memory, e);
  if (rc == 0) rc = parse_devices(p, pl->devices, m->spec->comm_backend == SPEC_COMM_MPI, e);
  if (rc == 0) rc = parse_offload(p, m, e);
  if (rc == 0) plan_measure(p, m, s);
  if (rc != 0) plan_free(p);
  return rc;
}

int plan_over_cap(const pt_plan *p, int64_t *over) {
  int worst = -1;
  double most = 0;
  *over = 0;
  for (int s = 0; p->cap && s < p->n_stages; s++) {
    double excess = p->cap[s] > 0 ? (double)p->mem[s].total - p->cap[s] : 0;
    if (excess <= 0) continue;
    *over += (int64_t)excess;
    if (excess > most) most = excess, worst = s;
  }
  return worst;
}

void plan_free(pt_plan *p) {
  free(p->bounds);
  free(p->chunk_stage);
  free(p->chunk_in_flight);
  free(p->chunk_w_pending);
  free(p->chunk_mem);
  free(p->chunk_flops);
  free(p->chunk_weight);
  free(p->devices);
  free(p->cap);
  free(p->offload);
  free(p->mem);
  free(p->flops);
  free(p->weight);
  memset(p, 0, sizeof *p);
}
