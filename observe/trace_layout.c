/* The layout a trace was recorded under: written into its metadata, read back, checked against
 * a model (see trace_layout.h). */
#include "observe/trace_layout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static uint64_t fnv_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Little-endian whatever the host: the same model hashes the same on every machine. */
static uint64_t fnv_int(uint64_t h, int64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
  return fnv_bytes(h, b, sizeof b);
}

uint64_t trace_model_hash(const pt_model *m) {
  uint64_t h = 14695981039346656037ull;
  for (int l = 0; l < m->n_layers; l++) {
    const pt_layer *L = &m->layers[l];
    h = fnv_bytes(h, L->type->name, strlen(L->type->name) + 1);
    h = fnv_int(fnv_int(fnv_int(h, L->in_dim), L->out_dim), L->n_params);
    for (int p = 0; p < L->n_params; p++) {
      h = fnv_int(h, L->params[p].ndim);
      for (int d = 0; d < L->params[p].ndim; d++) h = fnv_int(h, L->params[p].shape[d]);
    }
  }
  return h;
}

static void add_ints(cJSON *meta, const char *key, const int *v, int n) {
  cJSON *a = cJSON_AddArrayToObject(meta, key);
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
}

void trace_layout_to_json(cJSON *meta, const pt_plan *plan, const pt_model *m) {
  const spec_train *t = &m->spec->train;
  char hash[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, trace_model_hash(m));
  cJSON_AddNumberToObject(meta, "n_layers", m->n_layers);
  add_ints(meta, "bounds", plan->bounds, plan->n_chunks + 1);
  add_ints(meta, "chunk_stage", plan->chunk_stage, plan->n_chunks);
  cJSON_AddNumberToObject(meta, "virtual_stages", plan->virtual_stages);
  cJSON_AddNumberToObject(meta, "micro_batch_size", (double)t->micro_batch_size);
  cJSON_AddNumberToObject(meta, "seq_len", (double)m->spec->seq_len);
  cJSON_AddNumberToObject(meta, "activation_checkpoint_interval",
                          (double)t->activation_checkpoint_interval);
  cJSON_AddStringToObject(meta, "model_hash", hash);
}

/* meta[key] as an integer >= 0: 1, else 0. */
static int int_of(const cJSON *meta, const char *key, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e15 ||
      v->valuedouble != (double)(int64_t)v->valuedouble)
    return 0;
  *out = (int64_t)v->valuedouble;
  return 1;
}

/* meta[key] as n integers in [lo, hi] (allocated), or NULL. */
static int *ints_of(const cJSON *meta, const char *key, int n, int lo, int hi) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(meta, key), *v;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return NULL;
  int *out = pt_calloc((size_t)n + 1, sizeof(int)), i = 0;
  cJSON_ArrayForEach(v, a) {
    if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi ||
        v->valuedouble != (int)v->valuedouble) {
      free(out);
      return NULL;
    }
    out[i++] = (int)v->valuedouble;
  }
  return out;
}

/* The scalar keys; 0 when one is missing (an older trace). */
static int read_scalars(const cJSON *meta, pt_trace_layout *l) {
  int64_t v[4];
  const char *hash = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "model_hash"));
  char *end = NULL;
  if (!int_of(meta, "n_layers", &v[0]) || !int_of(meta, "stages", &v[1]) ||
      !int_of(meta, "virtual_stages", &v[2]) || !int_of(meta, "micro_batches", &v[3]) ||
      !int_of(meta, "micro_batch_size", &l->micro_batch_size) ||
      !int_of(meta, "seq_len", &l->seq_len) ||
      !int_of(meta, "activation_checkpoint_interval", &l->checkpoint_interval) || !hash)
    return 0;
  l->model_hash = strtoull(hash, &end, 16);
  if (strlen(hash) != 16 || *end) return 0;
  for (int i = 0; i < 4; i++)
    if (v[i] > 1 << 20) return 0; /* no layout has a million of anything */
  if (v[1] * v[2] > 1 << 20) return 0;
  l->n_layers = (int)v[0], l->n_stages = (int)v[1], l->virtual_stages = (int)v[2];
  l->micro_batches = (int)v[3];
  l->n_chunks = l->n_stages * l->virtual_stages;
  return 1;
}

static int bounds_ascend(const pt_trace_layout *l) {
  if (l->bounds[0] != 0 || l->bounds[l->n_chunks] != l->n_layers) return 0;
  for (int c = 0; c < l->n_chunks; c++)
    if (l->bounds[c + 1] <= l->bounds[c]) return 0;
  return 1;
}

int trace_layout_read(const cJSON *meta, const char *path, pt_trace_layout *out, char *err,
                      size_t errsz) {
  memset(out, 0, sizeof *out);
  if (!meta || !cJSON_GetObjectItemCaseSensitive(meta, "bounds"))
    return pt_errorf(err, errsz, "%s: the trace has no layout metadata (bounds, model_hash): it "
                     "was recorded by an older pipetrain; record a new trace with pipe_train "
                     "--trace", path);
  int ok = read_scalars(meta, out) && out->n_chunks > 0;
  if (ok) {
    out->bounds = ints_of(meta, "bounds", out->n_chunks + 1, 0, out->n_layers);
    out->chunk_stage = ints_of(meta, "chunk_stage", out->n_chunks, 0, out->n_stages - 1);
    ok = out->bounds && out->chunk_stage && bounds_ascend(out);
  }
  if (ok) return 0;
  trace_layout_free(out);
  return pt_errorf(err, errsz, "%s: the trace's layout metadata is damaged (n_layers, stages, "
                   "virtual_stages, bounds, chunk_stage, model_hash disagree or are missing); "
                   "record a new trace with pipe_train --trace", path);
}

int trace_layout_check(const pt_trace_layout *l, const pt_model *m, const char *path, char *err,
                       size_t errsz) {
  const pt_spec *s = m->spec;
  uint64_t mine = trace_model_hash(m);
  if (l->n_layers != m->n_layers || l->model_hash != mine)
    return pt_errorf(err, errsz, "the trace %s was recorded for another model (%d layers, model "
                     "hash %016" PRIx64 "; this spec's model has %d layers, hash %016" PRIx64
                     "); record one with this spec", path, l->n_layers, l->model_hash,
                     m->n_layers, mine);
  if (l->micro_batch_size != s->train.micro_batch_size)
    return pt_errorf(err, errsz, "the trace %s was recorded with train.micro_batch_size %lld, "
                     "this spec has %lld: times scale with it; record one with this spec", path,
                     (long long)l->micro_batch_size, (long long)s->train.micro_batch_size);
  if (l->seq_len != s->seq_len)
    return pt_errorf(err, errsz, "the trace %s was recorded with model.seq_len %lld, this spec "
                     "has %lld: times scale with it; record one with this spec", path,
                     (long long)l->seq_len, (long long)s->seq_len);
  return 0;
}

void trace_layout_free(pt_trace_layout *l) {
  free(l->bounds), free(l->chunk_stage);
  memset(l, 0, sizeof *l);
}
