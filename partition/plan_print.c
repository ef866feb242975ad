#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "partition/plan.h"
#include "core/error.h"

/* "transformer_block x6, layernorm" for a stage's layers: runs of one type folded. */
static void stage_types(const pt_plan *p, const pt_model *m, int s, char *out, size_t outsz) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = p->bounds[s]; i < p->bounds[s + 1] && used < outsz;) {
    const char *t = m->layers[i].type->name;
    int run = 1;
    while (i + run < p->bounds[s + 1] && !strcmp(m->layers[i + run].type->name, t)) run++;
    used += (size_t)snprintf(out + used, outsz - used, run > 1 ? "%s%s x%d" : "%s%s", used ? ", " : "",
                             t, run);
    i += run;
  }
}

static void stage_ranks(const pt_plan *p, int s, char *out, size_t outsz, int devices) {
  size_t used = 0;
  out[0] = '\0';
  for (int r = 0; r < p->data_parallel && used < outsz; r++) {
    int rank = plan_rank(p, r, s);
    int v = devices ? plan_device(p, rank, rank) : rank;
    used += (size_t)snprintf(out + used, outsz - used, "%s%d", r ? "," : "", v);
  }
}

static double imbalance(const pt_plan *p) {
  double mean = 0, worst = 0;
  for (int s = 0; s < p->n_stages; s++) {
    mean += p->flops[s] / p->n_stages;
    if (p->flops[s] > worst) worst = p->flops[s];
  }
  return mean > 0 ? worst / mean : 1.0;
}

void plan_print(FILE *f, const pt_plan *p, const pt_model *m, double gflops) {
  const pt_spec *s = m->spec;
  fprintf(f, "plan for %s: %d layers on %d stages x %d replicas = %d ranks (partition: %s, "
          "schedule: %s, %d micro-batches)\n", s->path, p->n_layers, p->n_stages, p->data_parallel,
          p->n_stages * p->data_parallel, p->method, p->schedule->name, p->micro_batches);
  fprintf(f, "%-5s %-8s %-8s %-9s %12s %10s %10s %10s %10s %10s %10s %10s %9s  %s\n", "stage",
          "ranks", "devices", "layers", "params", "memory", "weights", "grads", "optim",
          "activ", "work", "cap", "est.ms", "types");
  for (int st = 0; st < p->n_stages; st++) {
    const pt_stage_memory *mm = &p->mem[st];
    char ranks[64], devs[64], types[256], layers[32], sz[7][32];
    stage_ranks(p, st, ranks, sizeof ranks, 0);
    stage_ranks(p, st, devs, sizeof devs, 1);
    stage_types(p, m, st, types, sizeof types);
    snprintf(layers, sizeof layers, "%d-%d", p->bounds[st], p->bounds[st + 1] - 1);
    int64_t parts[7] = {mm->total, mm->params, mm->grads, mm->optimizer, mm->activations,
                        mm->workspace, p->cap ? (int64_t)p->cap[st] : 0};
    for (int i = 0; i < 7; i++) memory_format_size(parts[i], sz[i], sizeof sz[i]);
    if (!p->cap || p->cap[st] <= 0) snprintf(sz[6], sizeof sz[6], "-");
    fprintf(f, "%-5d %-8s %-8s %-9s %12.0f %10s %10s %10s %10s %10s %10s %10s %9.1f  %s\n", st,
            ranks, devs, layers, p->weight[st], sz[0], sz[1], sz[2], sz[3], sz[4], sz[5], sz[6],
            gflops > 0 ? p->flops[st] / (gflops * 1e6) : 0.0, types);
  }
  fprintf(f, "imbalance (slowest / mean stage time): %.3f; activations held for %s micro-batches "
          "in flight per stage (%s)\n", imbalance(p),
          p->schedule->in_flight_doc, p->schedule->name);
  if (gflops > 0)
    fprintf(f, "est.ms: forward + backward FLOPs of one step at the measured %.1f GFLOP/s\n",
            gflops);
  for (int i = 0; i < p->n_warnings; i++) fprintf(f, "warning: %s\n", p->warnings[i]);
}

static cJSON *stage_json(const pt_plan *p, const pt_model *m, int st, double gflops) {
  const pt_stage_memory *mm = &p->mem[st];
  cJSON *o = cJSON_CreateObject(), *ranks = cJSON_AddArrayToObject(o, "ranks");
  cJSON *devs = cJSON_AddArrayToObject(o, "devices"), *types = cJSON_AddArrayToObject(o, "types");
  cJSON_AddNumberToObject(o, "stage", st);
  for (int r = 0; r < p->data_parallel; r++) {
    int rank = plan_rank(p, r, st);
    cJSON_AddItemToArray(ranks, cJSON_CreateNumber(rank));
    cJSON_AddItemToArray(devs, cJSON_CreateNumber(plan_device(p, rank, rank)));
  }
  cJSON_AddNumberToObject(o, "first_layer", p->bounds[st]);
  cJSON_AddNumberToObject(o, "last_layer", p->bounds[st + 1] - 1);
  for (int i = p->bounds[st]; i < p->bounds[st + 1]; i++)
    cJSON_AddItemToArray(types, cJSON_CreateString(m->layers[i].type->name));
  cJSON_AddNumberToObject(o, "parameters", p->weight[st]);
  cJSON *mem = cJSON_AddObjectToObject(o, "memory_bytes");
  cJSON_AddNumberToObject(mem, "total", (double)mm->total);
  cJSON_AddNumberToObject(mem, "params", (double)mm->params);
  cJSON_AddNumberToObject(mem, "grads", (double)mm->grads);
  cJSON_AddNumberToObject(mem, "optimizer", (double)mm->optimizer);
  cJSON_AddNumberToObject(mem, "activations", (double)mm->activations);
  cJSON_AddNumberToObject(mem, "workspace", (double)mm->workspace);
  cJSON_AddNumberToObject(o, "in_flight", mm->in_flight);
  if (p->cap && p->cap[st] > 0) cJSON_AddNumberToObject(o, "cap_bytes", p->cap[st]);
  else cJSON_AddNullToObject(o, "cap_bytes");
  cJSON_AddNumberToObject(o, "flops_per_step", p->flops[st]);
  if (gflops > 0) cJSON_AddNumberToObject(o, "est_ms", p->flops[st] / (gflops * 1e6));
  return o;
}

void plan_print_json(FILE *f, const pt_plan *p, const pt_model *m, double gflops) {
  cJSON *o = cJSON_CreateObject();
  if (!o) pt_fatal("out of memory printing the plan");
  cJSON_AddStringToObject(o, "spec", m->spec->path);
  cJSON_AddNumberToObject(o, "layers", p->n_layers);
  cJSON_AddNumberToObject(o, "stages", p->n_stages);
  cJSON_AddNumberToObject(o, "data_parallel", p->data_parallel);
  cJSON_AddStringToObject(o, "partition", p->method);
  cJSON_AddStringToObject(o, "schedule", p->schedule->name);
  cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
  cJSON_AddNumberToObject(o, "imbalance", imbalance(p));
  cJSON *stages = cJSON_AddArrayToObject(o, "stage_plan"), *warn = cJSON_AddArrayToObject(o, "warnings");
  for (int st = 0; st < p->n_stages; st++) cJSON_AddItemToArray(stages, stage_json(p, m, st, gflops));
  for (int i = 0; i < p->n_warnings; i++) cJSON_AddItemToArray(warn, cJSON_CreateString(p->warnings[i]));
  char *text = cJSON_Print(o);
  if (!text) pt_fatal("out of memory printing the plan");
  fprintf(f, "%s\n", text);
  free(text);
  cJSON_Delete(o);
}
