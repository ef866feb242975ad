/* Opening a recorded trace: the file, its JSON, replica 0's tracks (see trace_doc.h). */
#include "observe/trace_doc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static char *read_file(const char *path, char *err, size_t errsz) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errsz, "%s: cannot read the trace: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = pt_calloc(cap + 1, 1);
  for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      buf = realloc(buf, 2 * cap + 1);
      if (!buf) pt_fatal("out of memory reading %s", path);
      cap *= 2;
    }
  }
  buf[n] = '\0';
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, errsz, "%s: cannot read the trace: read error", path);
    free(buf);
    return NULL;
  }
  return buf;
}

int trace_json_number(const cJSON *obj, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(v)) return 0;
  *out = v->valuedouble;
  return 1;
}

const char *trace_json_string(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

static void add_track(pt_trace_doc *d, int pid, int stage) {
  for (int i = 0; i < d->n_tracks; i++)
    if (d->tracks[i].pid == pid) return;
  d->tracks = realloc(d->tracks, sizeof *d->tracks * (size_t)(d->n_tracks + 1));
  if (!d->tracks) pt_fatal("out of memory reading a trace");
  d->tracks[d->n_tracks++] = (pt_trace_track){pid, stage, 0};
}

/* The tracks with a "gpu" thread (tid 2) named by a "thread_name" metadata event. */
static void find_device_threads(pt_trace_doc *d) {
  const cJSON *e;
  cJSON_ArrayForEach(e, d->events) {
    double pid, tid;
    if (strcmp(trace_json_string(e, "ph"), "M") ||
        strcmp(trace_json_string(e, "name"), "thread_name") || !trace_json_number(e, "pid", &pid) ||
        !trace_json_number(e, "tid", &tid) || tid != 2 ||
        strcmp(trace_json_string(cJSON_GetObjectItemCaseSensitive(e, "args"), "name"), "gpu"))
      continue;
    for (int i = 0; i < d->n_tracks; i++)
      if (d->tracks[i].pid == (int)pid) d->tracks[i].device = 1;
  }
}

/* Replica 0's tracks from the "process_name" metadata; without any, pid = stage. */
static void find_tracks(pt_trace_doc *d) {
  const cJSON *e;
  cJSON_ArrayForEach(e, d->events) {
    int rank, stage, replica;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    double pid;
    if (strcmp(trace_json_string(e, "ph"), "M") ||
        strcmp(trace_json_string(e, "name"), "process_name") || !trace_json_number(e, "pid", &pid))
      continue;
    if (sscanf(trace_json_string(args, "name"), "rank %d (stage %d, replica %d)", &rank, &stage,
               &replica) == 3 && replica == 0 && stage >= 0)
      add_track(d, (int)pid, stage);
  }
  if (d->n_tracks > 0) return;
  d->stages_from_pids = 1;
  cJSON_ArrayForEach(e, d->events) {
    double pid;
    if (trace_json_number(e, "pid", &pid) && pid >= 0 && pid == (int)pid)
      add_track(d, (int)pid, (int)pid);
  }
}

int trace_doc_open(pt_trace_doc *d, const char *path, char *err, size_t errsz) {
  memset(d, 0, sizeof *d);
  char *text = read_file(path, err, errsz);
  if (!text) return -1;
  d->root = cJSON_Parse(text);
  free(text);
  /* Chrome accepts both {"traceEvents": [...]} and a bare array of events */
  d->events = cJSON_IsArray(d->root) ? d->root
                                     : cJSON_GetObjectItemCaseSensitive(d->root, "traceEvents");
  if (!cJSON_IsArray(d->events)) {
    trace_doc_close(d);
    return pt_errorf(err, errsz, "%s: not a Chrome trace (JSON with a traceEvents array); give "
                     "a file that pipe_train --trace wrote", path);
  }
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(d->root, "metadata");
  d->meta = cJSON_IsObject(meta) ? meta : NULL;
  find_tracks(d);
  find_device_threads(d);
  return 0;
}

void trace_doc_close(pt_trace_doc *d) {
  cJSON_Delete(d->root);
  free(d->tracks);
  memset(d, 0, sizeof *d);
}

int trace_doc_stage(const pt_trace_doc *d, const cJSON *e) {
  double pid, tid = 0;
  if (strcmp(trace_json_string(e, "ph"), "X") || !trace_json_number(e, "pid", &pid)) return -1;
  trace_json_number(e, "tid", &tid);
  for (int i = 0; i < d->n_tracks; i++)
    if (d->tracks[i].pid == (int)pid) /* a device track: its events of tid 2 alone */
      return d->tracks[i].device == (tid == 2) ? d->tracks[i].stage : -1;
  return -1;
}

int trace_doc_compute(const cJSON *e, int *mb) {
  static const char codes[] = "FBIW";
  const char *name = trace_json_string(e, "name"), *code = name[0] ? strchr(codes, name[0]) : NULL;
  size_t digits = strspn(name + (name[0] != '\0'), "0123456789");
  if (!code || digits == 0 || name[1 + digits] != '\0') return -1;
  *mb = atoi(name + 1);
  return (int)(code - codes);
}

int trace_doc_step(const cJSON *e, int64_t *step) {
  double v;
  if (!trace_json_number(cJSON_GetObjectItemCaseSensitive(e, "args"), "step", &v)) return 0;
  *step = (int64_t)v;
  return 1;
}
