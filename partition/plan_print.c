#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "partition/plan.h"
#include "core/error.h"
#include "kernels/cpu/blas_kernel.h"

/* "transformer_block x6, layernorm" for a chunk's layers: runs of one type folded. */
static void chunk_types(const pt_plan *p, const pt_model *m, int c, char *out, size_t outsz) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = p->bounds[c]; i < p->bounds[c + 1] && used < outsz;) {
    const char *t = m->layers[i].type->name;
    int run = 1;
    while (i + run < p->bounds[c + 1] && !strcmp(m->layers[i + run].type->name, t)) run++;
    used += (size_t)snprintf(out + used, outsz - used, run > 1 ? "%s%s x%d" : "%s%s", used ? ", " : "",
                             t, run);
    i += run;
  }
}

/* A stage's chunks' types, " | " between chunks; or its chunk numbers, "," between them. */
static void stage_list(const pt_plan *p, const pt_model *m, int s, int types, char *out,
                       size_t outsz) {
  int chunks[64], n = plan_stage_chunks(p, s, chunks);
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used < outsz; i++) {
    char one[256];
    if (types) chunk_types(p, m, chunks[i], one, sizeof one);
    else snprintf(one, sizeof one, "%d", chunks[i]);
    used += (size_t)snprintf(out + used, outsz - used, "%s%s", i ? (types ? " | " : ",") : "", one);
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

static void print_header(FILE *f, const pt_plan *p, const pt_model *m) {
  const pt_spec *s = m->spec;
  char chunks[96] = "";
  if (p->virtual_stages > 1)
    snprintf(chunks, sizeof chunks, " in %d chunks (%d per stage)", p->n_chunks, p->virtual_stages);
  char shard[64] = ""; /* the optim column is then one replica's range */
  if (s->pipeline.shard_optimizer && p->data_parallel > 1)
    snprintf(shard, sizeof shard, ", optimizer sharded over %d replicas", p->data_parallel);
  fprintf(f, "plan for %s: %d layers%s on %d stages x %d replicas = %d ranks (partition: %s, "
          "schedule: %s, %d micro-batches%s)\n", s->path, p->n_layers, chunks, p->n_stages,
          p->data_parallel, p->n_stages * p->data_parallel, p->method, p->schedule->name,
          p->micro_batches, shard);
}

static void print_stage(FILE *f, const pt_plan *p, const pt_model *m, int st, double gflops) {
  const pt_stage_memory *mm = &p->mem[st];
  char ranks[64], devs[64], types[512], layers[64], sz[8][32];
  stage_ranks(p, st, ranks, sizeof ranks, 0);
  stage_ranks(p, st, devs, sizeof devs, 1);
  stage_list(p, m, st, 1, types, sizeof types);
  if (p->virtual_stages == 1)
    snprintf(layers, sizeof layers, "%d-%d", p->bounds[st], p->bounds[st + 1] - 1);
  else
    stage_list(p, m, st, 0, layers, sizeof layers);
  int64_t parts[8] = {mm->total, mm->params, mm->grads, mm->optimizer, mm->activations,
                      mm->activations_host, mm->workspace, p->cap ? (int64_t)p->cap[st] : 0};
  for (int i = 0; i < 8; i++) memory_format_size(parts[i], sz[i], sizeof sz[i]);
  if (!p->cap || p->cap[st] <= 0) snprintf(sz[7], sizeof sz[7], "-");
  fprintf(f, "%-5d %-8s %-8s %-9s %12.0f %10s %10s %10s %10s %10s %10s %10s %10s %9.1f  %s\n",
          st, ranks, devs, layers, p->weight[st], sz[0], sz[1], sz[2], sz[3], sz[4], sz[5], sz[6],
          sz[7], gflops > 0 ? p->flops[st] / (gflops * 1e6) : 0.0, types);
}

/* Several chunks per stage: what each chunk holds, alone. */
static void print_chunks(FILE *f, const pt_plan *p, const pt_model *m, double gflops) {
  fprintf(f, "%-5s %-5s %-9s %12s %9s %10s %10s %9s  %s\n", "chunk", "stage", "layers", "params",
          "in-flight", "activ", "work", "est.ms", "types");
  for (int c = 0; c < p->n_chunks; c++) {
    char layers[32], types[256], act[32], work[32];
    snprintf(layers, sizeof layers, "%d-%d", p->bounds[c], p->bounds[c + 1] - 1);
    chunk_types(p, m, c, types, sizeof types);
    memory_format_size(p->chunk_mem[c].activations, act, sizeof act);
    memory_format_size(p->chunk_mem[c].workspace, work, sizeof work);
    fprintf(f, "%-5d %-5d %-9s %12.0f %9d %10s %10s %9.1f  %s\n", c, p->chunk_stage[c], layers,
            p->chunk_weight[c], p->chunk_in_flight[c], act, work,
            gflops > 0 ? p->chunk_flops[c] / (gflops * 1e6) : 0.0, types);
  }
}

/* Where device buffers go over NCCL: each stage's comm part, which its memory column includes. */
static void print_comm(FILE *f, const pt_plan *p) {
  int64_t any = 0;
  for (int s = 0; s < p->n_stages; s++) any |= p->mem[s].comm;
  if (!any) return;
  char peer[32];
  memory_format_size(memory_nccl_peer_bytes() / (2 * MEMORY_NCCL_CHANNELS), peer, sizeof peer);
  fprintf(f, "comm (in memory; comm.backend nccl): the device chain sums' scratch and NCCL's "
          "buffers, %s (NCCL_BUFFSIZE) x %d channels x send and receive per peer:",
          peer, MEMORY_NCCL_CHANNELS);
  for (int s = 0; s < p->n_stages; s++) {
    char c[32];
    memory_format_size(p->mem[s].comm, c, sizeof c);
    fprintf(f, "%s stage %d %s (%d peer%s)", s ? "," : "", s, c, p->mem[s].comm_peers,
            p->mem[s].comm_peers == 1 ? "" : "s");
  }
  fputc('\n', f);
}

/* pipeline.offload: what each offloading stage keeps in host memory, beside its activ column
 * (what stays on the device). */
static void print_offload(FILE *f, const pt_plan *p) {
  int any = 0;
  for (int s = 0; s < p->n_stages; s++) {
    if (!p->mem[s].activations_host) continue;
    char h[32];
    memory_format_size(p->mem[s].activations_host, h, sizeof h);
    fprintf(f, "%s stage %d %s (outputs %.2f, saved %.2f)", any ? "," : "offload (host memory, "
            "not in memory; pipeline.offload):", s, h, p->offload[s].fraction[0],
            p->offload[s].fraction[1]);
    any = 1;
  }
  if (any) fputc('\n', f);
}

/* The settings the spec changed (layer_settings_describe), runs of alike layers folded:
 * "settings: 1-4 llama_block kv_heads 2, ffn_dim 344; 5 linear bias false". */
static void print_settings(FILE *f, const pt_model *m) {
  int any = 0;
  for (int i = 0; i < m->n_layers;) {
    char d[512], next[512];
    layer_settings_describe(&m->layers[i], d, sizeof d);
    int run = 1;
    while (i + run < m->n_layers && m->layers[i + run].type == m->layers[i].type &&
           !strcmp(layer_settings_describe(&m->layers[i + run], next, sizeof next), d))
      run++;
    if (d[0]) {
      fprintf(f, "%s%d", any ? "; " : "settings: ", i);
      if (run > 1) fprintf(f, "-%d", i + run - 1);
      fprintf(f, " %s %s", m->layers[i].type->name, d);
      any = 1;
    }
    i += run;
  }
  if (any) fputc('\n', f);
}

/* train.seq_len_schedule: buffers, memory and times above are at model.seq_len, the most any
 * step uses; say so with the range the steps go through. */
static void print_seq_schedule(FILE *f, const pt_model *m) {
  const pt_spec *s = m->spec;
  if (s->train.seq_start <= 0) return;
  fprintf(f, "seq_len_schedule: %lld to %lld tokens per sequence over %lld steps (multiple of "
          "%lld); memory and est.ms are at the longest, model.seq_len %lld\n",
          (long long)spec_seq_len_at(s, 0), (long long)s->seq_len, (long long)s->train.seq_warmup,
          (long long)s->train.seq_multiple, (long long)s->seq_len);
}

void plan_print(FILE *f, const pt_plan *p, const pt_model *m, double gflops) {
  print_header(f, p, m);
  fprintf(f, "%-5s %-8s %-8s %-9s %12s %10s %10s %10s %10s %10s %10s %10s %10s %9s  %s\n",
          "stage", "ranks", "devices", p->virtual_stages > 1 ? "chunks" : "layers", "params",
          "memory", "weights", "grads", "optim", "activ", "host", "work", "cap", "est.ms", "types");
  for (int st = 0; st < p->n_stages; st++) print_stage(f, p, m, st, gflops);
  if (p->virtual_stages > 1) print_chunks(f, p, m, gflops);
  print_comm(f, p);
  print_offload(f, p);
  print_settings(f, m);
  fprintf(f, "imbalance (slowest / mean stage time): %.3f; activations held for %s micro-batches "
          "in flight per stage (%s)\n", imbalance(p),
          p->schedule->in_flight_doc, p->schedule->name);
  if (gflops > 0) {
    char kernel[160];
    blas_kernel_describe(kernel, sizeof kernel);
    fprintf(f, "est.ms: forward + backward FLOPs of one step at the measured %.1f GFLOP/s of the "
            "%s\n", gflops, kernel);
  }
  print_seq_schedule(f, m);
  for (int i = 0; i < p->n_warnings; i++) fprintf(f, "warning: %s\n", p->warnings[i]);
}

static cJSON *memory_json(const pt_stage_memory *mm) {
  cJSON *mem = cJSON_CreateObject();
  cJSON_AddNumberToObject(mem, "total", (double)mm->total);
  cJSON_AddNumberToObject(mem, "params", (double)mm->params);
  cJSON_AddNumberToObject(mem, "grads", (double)mm->grads);
  cJSON_AddNumberToObject(mem, "optimizer", (double)mm->optimizer);
  cJSON_AddNumberToObject(mem, "weight_copy", (double)mm->weight_copy);
  cJSON_AddNumberToObject(mem, "activations", (double)mm->activations);
  cJSON_AddNumberToObject(mem, "activations_host", (double)mm->activations_host);
  cJSON_AddNumberToObject(mem, "workspace", (double)mm->workspace);
  cJSON_AddNumberToObject(mem, "comm", (double)mm->comm);
  return mem;
}

/* Its layers: first and last with one chunk per stage, else its chunks' numbers. */
static void stage_layers_json(cJSON *o, cJSON *types, const pt_plan *p, const pt_model *m,
                              int st) {
  int chunks[64], n = plan_stage_chunks(p, st, chunks);
  if (p->virtual_stages == 1) {
    cJSON_AddNumberToObject(o, "first_layer", p->bounds[st]);
    cJSON_AddNumberToObject(o, "last_layer", p->bounds[st + 1] - 1);
  } else {
    cJSON *list = cJSON_AddArrayToObject(o, "chunks");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(list, cJSON_CreateNumber(chunks[i]));
  }
  for (int i = 0; i < n; i++)
    for (int li = p->bounds[chunks[i]]; li < p->bounds[chunks[i] + 1]; li++)
      cJSON_AddItemToArray(types, cJSON_CreateString(m->layers[li].type->name));
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
  stage_layers_json(o, types, p, m, st);
  cJSON_AddNumberToObject(o, "parameters", p->weight[st]);
  cJSON_AddItemToObject(o, "memory_bytes", memory_json(mm));
  cJSON_AddNumberToObject(o, "in_flight", mm->in_flight);
  if (p->cap && p->cap[st] > 0) cJSON_AddNumberToObject(o, "cap_bytes", p->cap[st]);
  else cJSON_AddNullToObject(o, "cap_bytes");
  cJSON_AddNumberToObject(o, "flops_per_step", p->flops[st]);
  if (gflops > 0) cJSON_AddNumberToObject(o, "est_ms", p->flops[st] / (gflops * 1e6));
  return o;
}

static cJSON *chunk_json(const pt_plan *p, const pt_model *m, int c, double gflops) {
  cJSON *o = cJSON_CreateObject(), *types = cJSON_AddArrayToObject(o, "types");
  cJSON_AddNumberToObject(o, "chunk", c);
  cJSON_AddNumberToObject(o, "stage", p->chunk_stage[c]);
  cJSON_AddNumberToObject(o, "first_layer", p->bounds[c]);
  cJSON_AddNumberToObject(o, "last_layer", p->bounds[c + 1] - 1);
  for (int li = p->bounds[c]; li < p->bounds[c + 1]; li++)
    cJSON_AddItemToArray(types, cJSON_CreateString(m->layers[li].type->name));
  cJSON_AddNumberToObject(o, "parameters", p->chunk_weight[c]);
  cJSON_AddItemToObject(o, "memory_bytes", memory_json(&p->chunk_mem[c]));
  cJSON_AddNumberToObject(o, "in_flight", p->chunk_in_flight[c]);
  cJSON_AddNumberToObject(o, "flops_per_step", p->chunk_flops[c]);
  if (gflops > 0) cJSON_AddNumberToObject(o, "est_ms", p->chunk_flops[c] / (gflops * 1e6));
  return o;
}

cJSON *plan_json(const pt_plan *p, const pt_model *m, double gflops) {
  cJSON *o = cJSON_CreateObject();
  if (!o) pt_fatal("out of memory printing the plan");
  cJSON_AddStringToObject(o, "spec", m->spec->path);
  cJSON_AddNumberToObject(o, "layers", p->n_layers);
  cJSON_AddNumberToObject(o, "stages", p->n_stages);
  if (p->virtual_stages > 1) {
    cJSON_AddNumberToObject(o, "virtual_stages", p->virtual_stages);
    cJSON_AddNumberToObject(o, "chunks", p->n_chunks);
  }
  cJSON_AddNumberToObject(o, "data_parallel", p->data_parallel);
  cJSON_AddBoolToObject(o, "shard_optimizer",
                        m->spec->pipeline.shard_optimizer && p->data_parallel > 1);
  cJSON_AddStringToObject(o, "partition", p->method);
  cJSON_AddStringToObject(o, "schedule", p->schedule->name);
  cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
  cJSON_AddNumberToObject(o, "imbalance", imbalance(p));
  cJSON *stages = cJSON_AddArrayToObject(o, "stage_plan");
  for (int st = 0; st < p->n_stages; st++) cJSON_AddItemToArray(stages, stage_json(p, m, st, gflops));
  if (p->virtual_stages > 1) {
    cJSON *chunks = cJSON_AddArrayToObject(o, "chunk_plan");
    for (int c = 0; c < p->n_chunks; c++) cJSON_AddItemToArray(chunks, chunk_json(p, m, c, gflops));
  }
  if (gflops > 0) { /* the kernel that measured the rate */
    cJSON_AddStringToObject(o, "blas_kernel", blas_kernel_name());
    if (blas_kernel_corrected_from())
      cJSON_AddStringToObject(o, "blas_kernel_corrected_from", blas_kernel_corrected_from());
  }
  cJSON *warn = cJSON_AddArrayToObject(o, "warnings");
  for (int i = 0; i < p->n_warnings; i++) cJSON_AddItemToArray(warn, cJSON_CreateString(p->warnings[i]));
  return o;
}

void plan_print_json(FILE *f, const pt_plan *p, const pt_model *m, double gflops) {
  cJSON *o = plan_json(p, m, gflops);
  char *text = cJSON_Print(o);
  if (!text) pt_fatal("out of memory printing the plan");
  fprintf(f, "%s\n", text);
  free(text);
  cJSON_Delete(o);
}
