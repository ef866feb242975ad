/* partition/auto_print.c: the planner's choice and runners-up, as text and JSON, and the --set
 * values that pin it (partition/auto.h). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "partition/auto_private.h"
#include "partition/memory.h"

static void bounds_text(const pt_auto_candidate *c, int C, char *out, size_t outsz) {
  size_t used = (size_t)snprintf(out, outsz, "[");
  for (int i = 0; i < C && used < outsz; i++)
    used += (size_t)snprintf(out + used, outsz - used, "%s%d", i ? ", " : "", c->bounds[i]);
  if (used < outsz) snprintf(out + used, outsz - used, "]");
}

/* One stage's pipeline.offload: the planner's share where searched, else the spec's. */
static size_t offload_item(const pt_auto_candidate *c, const pt_offload_choice *o, int st,
                           char *out, size_t outsz) {
  const double *f = o[st].fraction;
  if (o[st].searched) return (size_t)snprintf(out, outsz, "%g", c->offload[st]);
  if (f[0] == f[1]) return (size_t)snprintf(out, outsz, "%g", f[0]);
  return (size_t)snprintf(out, outsz, "{outputs: %g, saved: %g}", f[0], f[1]);
}

/* "pipeline.offload=[0.5, 0, 0, 0]" */
static void offload_override(const pt_auto_result *r, const pt_spec *s, char *out, size_t outsz) {
  pt_offload_choice *o = pt_calloc((size_t)r->n_stages, sizeof *o);
  int is_auto = 0;
  spec_errors e = {0};
  offload_parse(s, r->n_stages, o, &is_auto, &e);
  size_t used = (size_t)snprintf(out, outsz, "pipeline.offload=[");
  for (int st = 0; st < r->n_stages && used < outsz; st++) {
    if (st) used += (size_t)snprintf(out + used, outsz - used, ", ");
    if (used < outsz) used += offload_item(&r->c[0], o, st, out + used, outsz - used);
  }
  if (used < outsz) snprintf(out + used, outsz - used, "]");
  free(o);
}

int auto_overrides(const pt_auto_result *r, const pt_spec *s, char (*out)[AUTO_OVERRIDE_MAX],
                   int max) {
  const pt_auto_candidate *c = &r->c[0];
  int n = 0;
  if (r->schedule_auto && n < max)
    snprintf(out[n++], AUTO_OVERRIDE_MAX, "pipeline.schedule=%s", c->schedule->name);
  if (r->schedule_auto && c->schedule->virtual_stages == SCHEDULE_ANY_V && n < max)
    snprintf(out[n++], AUTO_OVERRIDE_MAX, "pipeline.virtual_stages=%d", c->v);
  if (r->drop_stage_layers && n < max)
    snprintf(out[n++], AUTO_OVERRIDE_MAX, "pipeline.stage_layers=");
  if (r->partition_auto && n < max) {
    char b[AUTO_OVERRIDE_MAX - 32];
    bounds_text(c, r->n_stages * c->v, b, sizeof b);
    snprintf(out[n++], AUTO_OVERRIDE_MAX, "pipeline.boundaries=%s", b);
  }
  if (r->ckpt_auto && n < max)
    snprintf(out[n++], AUTO_OVERRIDE_MAX, "train.activation_checkpoint_interval=%d", c->ckpt);
  if (r->offload_auto && n < max) offload_override(r, s, out[n++], AUTO_OVERRIDE_MAX);
  if (r->shard_auto && n < max)
    snprintf(out[n++], AUTO_OVERRIDE_MAX, "pipeline.shard_optimizer=%s", c->shard ? "true" : "false");
  return n;
}

/* "1.2 GiB/2.0 GiB" per stage, or the bytes alone without a cap. */
static void memory_text(const pt_auto_result *r, const pt_auto_candidate *c, char *out,
                        size_t outsz) {
  size_t used = 0;
  out[0] = '\0';
  for (int s = 0; s < r->n_stages && used < outsz; s++) {
    char b[32], cap[32] = "";
    memory_format_size(c->stage_bytes[s], b, sizeof b);
    if (r->cap && r->cap[s] > 0) {
      cap[0] = '/';
      memory_format_size((int64_t)r->cap[s], cap + 1, sizeof cap - 1);
    }
    used += (size_t)snprintf(out + used, outsz - used, "%s%s%s", s ? "  " : "", b, cap);
  }
}

/* The searched shares per stage, "0.5,0,0,0" ("-" where none was searched), and the sharding
 * when searched. */
static void choice_text(const pt_auto_result *r, const pt_auto_candidate *c, char *out,
                        size_t outsz) {
  size_t used = 0;
  out[0] = '\0';
  for (int s = 0; r->offload_auto && s < r->n_stages && used < outsz; s++)
    used += (size_t)snprintf(out + used, outsz - used, "%s%g", s ? "," : "", c->offload[s]);
  if (r->shard_auto && used < outsz)
    snprintf(out + used, outsz - used, "%s%s", used ? " " : "", c->shard ? "sharded" : "unsharded");
  if (!out[0]) snprintf(out, outsz, "-");
}

static void print_candidate(FILE *f, const pt_auto_result *r, int i) {
  const pt_auto_candidate *c = &r->c[i];
  char mem[512], b[512], off[256];
  memory_text(r, c, mem, sizeof mem);
  bounds_text(c, r->n_stages * c->v, b, sizeof b);
  choice_text(r, c, off, sizeof off);
  fprintf(f, "%s%-3d %-17s %6d %5d %10.2f %6.1f%%  %-26s %-14s %s%s\n",
          i == 0 && c->fits ? "*" : " ", i + 1, c->schedule->name, c->v, c->ckpt, 1e3 * c->step_s,
          100 * c->bubble, b, off, mem, c->fits ? "" : "  over a cap");
}

/* One line per distinct reason among the candidates that did not run. */
static void print_ruled_out(FILE *f, const pt_auto_result *r) {
  for (int i = 0; i < r->n; i++) {
    const pt_auto_candidate *c = &r->c[i];
    int seen = !c->why[0];
    for (int j = 0; j < i && !seen; j++)
      seen = r->c[j].schedule == c->schedule && r->c[j].v == c->v && !strcmp(r->c[j].why, c->why);
    if (!seen) fprintf(f, "  ruled out: %s with %d chunk%s per stage: %s\n", c->schedule->name,
                       c->v, c->v == 1 ? "" : "s", c->why);
  }
}

void auto_print(FILE *f, const pt_auto_result *r, int top) {
  const char *what[5] = {r->schedule_auto ? "schedule x chunks per stage" : NULL,
                        r->partition_auto ? "stage boundaries" : NULL,
                        r->ckpt_auto ? "checkpoint interval" : NULL,
                        r->offload_auto ? "offload per stage" : NULL,
                        r->shard_auto ? "optimizer sharding" : NULL};
  fprintf(f, "planner: searched");
  for (int i = 0, n = 0; i < 5; i++)
    if (what[i]) fprintf(f, "%s %s", n++ ? " x" : "", what[i]);
  fprintf(f, "; %d layouts simulated with layer times %s\n", r->evaluations, r->times_source);
  fprintf(f, " %-3s %-17s %6s %5s %10s %7s  %-26s %-14s %s\n", "#", "schedule", "chunks", "ckpt",
          "step ms", "bubble", "boundaries", "offload", "memory per stage (/cap)");
  int shown = 0, over = 0, out = 0;
  for (int i = 0; i < r->n; i++) {
    if (r->c[i].why[0]) out++;
    else if (!r->c[i].fits) over++;
    if (!r->c[i].why[0] && shown < top && (r->c[i].fits || shown == 0)) print_candidate(f, r, i), shown++;
  }
  if (over) fprintf(f, "  %d more layouts exceed a stage's cap\n", over);
  if (out) print_ruled_out(f, r);
}

static cJSON *candidate_json(const pt_auto_result *r, const pt_auto_candidate *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "schedule", c->schedule->name);
  cJSON_AddNumberToObject(o, "virtual_stages", c->v);
  cJSON_AddNumberToObject(o, "checkpoint_interval", c->ckpt);
  if (c->why[0]) {
    cJSON_AddStringToObject(o, "ruled_out", c->why);
    return o;
  }
  cJSON_AddNumberToObject(o, "step_ms", 1e3 * c->step_s);
  cJSON_AddNumberToObject(o, "bubble", c->bubble);
  cJSON_AddBoolToObject(o, "fits", c->fits);
  cJSON_AddNumberToObject(o, "copy_ms", 1e3 * c->copy_s);
  cJSON_AddBoolToObject(o, "shard_optimizer", c->shard);
  cJSON *off = cJSON_AddArrayToObject(o, "offload");
  for (int s = 0; s < r->n_stages; s++) cJSON_AddItemToArray(off, cJSON_CreateNumber(c->offload[s]));
  cJSON *b = cJSON_AddArrayToObject(o, "boundaries"), *m = cJSON_AddArrayToObject(o, "stage_bytes");
  for (int i = 0; i < r->n_stages * c->v; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber(c->bounds[i]));
  for (int s = 0; s < r->n_stages; s++) cJSON_AddItemToArray(m, cJSON_CreateNumber((double)c->stage_bytes[s]));
  return o;
}

cJSON *auto_json(const pt_auto_result *r) {
  cJSON *o = cJSON_CreateObject();
  if (!o) pt_fatal("out of memory printing the plan");
  cJSON_AddStringToObject(o, "times", r->times_source);
  cJSON_AddNumberToObject(o, "evaluations", r->evaluations);
  cJSON_AddBoolToObject(o, "schedule_searched", r->schedule_auto);
  cJSON_AddBoolToObject(o, "partition_searched", r->partition_auto);
  cJSON_AddBoolToObject(o, "checkpoint_searched", r->ckpt_auto);
  cJSON_AddBoolToObject(o, "offload_searched", r->offload_auto);
  cJSON_AddBoolToObject(o, "shard_searched", r->shard_auto);
  cJSON *caps = cJSON_AddArrayToObject(o, "cap_bytes");
  for (int s = 0; s < r->n_stages; s++)
    cJSON_AddItemToArray(caps, r->cap && r->cap[s] > 0 ? cJSON_CreateNumber(r->cap[s]) : cJSON_CreateNull());
  cJSON *list = cJSON_AddArrayToObject(o, "candidates");
  for (int i = 0; i < r->n; i++) cJSON_AddItemToArray(list, candidate_json(r, &r->c[i]));
  return o;
}
