/* Reading one step of a Chrome trace back as picture spans (see trace_read.h). */
#include "observe/trace_read.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define NEST_SLACK_US 1e-3 /* rounding of ts and dur in the JSON: a wait may end a hair late */

typedef struct {
  int pid, stage;
} track;

typedef struct {
  const cJSON *events;
  track *tracks;
  int n_tracks;
  char *err;
  size_t errsz;
} reader;

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

static int number_of(const cJSON *obj, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(v)) return 0;
  *out = v->valuedouble;
  return 1;
}

static const char *string_of(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* The stage of replica 0's track pid, or -1. */
static int stage_of(const reader *r, const cJSON *e) {
  double pid;
  if (!number_of(e, "pid", &pid)) return -1;
  for (int i = 0; i < r->n_tracks; i++)
    if (r->tracks[i].pid == (int)pid) return r->tracks[i].stage;
  return -1;
}

static void add_track(reader *r, int pid, int stage) {
  for (int i = 0; i < r->n_tracks; i++)
    if (r->tracks[i].pid == pid) return;
  r->tracks = realloc(r->tracks, sizeof *r->tracks * (size_t)(r->n_tracks + 1));
  if (!r->tracks) pt_fatal("out of memory reading a trace");
  r->tracks[r->n_tracks++] = (track){pid, stage};
}

/* Replica 0's tracks from the "process_name" metadata; without any, pid = stage. Returns 1 when
 * the stages came from the pids. */
static int find_tracks(reader *r) {
  const cJSON *e;
  cJSON_ArrayForEach(e, r->events) {
    int rank, stage, replica;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    double pid;
    if (strcmp(string_of(e, "ph"), "M") || strcmp(string_of(e, "name"), "process_name") ||
        !number_of(e, "pid", &pid))
      continue;
    if (sscanf(string_of(args, "name"), "rank %d (stage %d, replica %d)", &rank, &stage,
               &replica) == 3 && replica == 0 && stage >= 0)
      add_track(r, (int)pid, stage);
  }
  if (r->n_tracks > 0) return 0;
  cJSON_ArrayForEach(e, r->events) {
    double pid;
    if (number_of(e, "pid", &pid) && pid >= 0 && pid == (int)pid) add_track(r, (int)pid, (int)pid);
  }
  return 1;
}

/* A complete event of replica 0: its stage, and kind F/B/I/W (with *mb) or WAIT; -1 for
 * others. */
static int span_of(const reader *r, const cJSON *e, pt_sched_box_kind *kind, int *mb) {
  static const char codes[] = "FBIW";
  static const pt_sched_box_kind kinds[] = {SCHED_BOX_F, SCHED_BOX_B, SCHED_BOX_I, SCHED_BOX_W};
  if (strcmp(string_of(e, "ph"), "X")) return -1;
  int stage = stage_of(r, e);
  if (stage < 0) return -1;
  const char *name = string_of(e, "name"), *code = name[0] ? strchr(codes, name[0]) : NULL;
  size_t digits = strspn(name + (name[0] != '\0'), "0123456789");
  if (code && digits > 0 && name[1 + digits] == '\0') {
    *kind = kinds[code - codes];
    *mb = atoi(name + 1);
    return stage;
  }
  if (!strcmp(string_of(e, "cat"), "wait")) {
    *kind = SCHED_BOX_WAIT;
    *mb = -1;
    return stage;
  }
  return -1;
}

static int step_of(const cJSON *e, int64_t *step) {
  double v;
  if (!number_of(cJSON_GetObjectItemCaseSensitive(e, "args"), "step", &v)) return 0;
  *step = (int64_t)v;
  return 1;
}

/* The step to draw: `wanted`, or the first with forward/backward spans when wanted is 0. */
static int pick_step(reader *r, int64_t wanted, int64_t *step) {
  int64_t first = INT64_MAX, s;
  int found = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, r->events) {
    pt_sched_box_kind kind;
    int mb;
    if (span_of(r, e, &kind, &mb) < 0 || kind == SCHED_BOX_WAIT || !step_of(e, &s)) continue;
    if (s < first) first = s;
    found |= s == wanted;
  }
  if (first == INT64_MAX)
    return pt_errorf(r->err, r->errsz, "the trace has no forward/backward spans (F<mb>, B<mb>, "
                     "I<mb>, W<mb>) on replica 0");
  if (wanted != 0 && !found)
    return pt_errorf(r->err, r->errsz, "step %lld is not in the trace (its first step is %lld; "
                     "--trace-steps chose which steps were recorded)", (long long)wanted,
                     (long long)first);
  *step = wanted ? wanted : first;
  return 0;
}

static int nested(const pt_sched_box *w, const pt_sched_box *b) {
  double slack = NEST_SLACK_US / 1e3;
  return w->stage == b->stage && b->kind != SCHED_BOX_WAIT && w->t0 >= b->t0 - slack &&
         w->t1 <= b->t1 + slack;
}

/* The step's boxes, then only the waits that lie inside one of them. */
static void collect(reader *r, pt_trace_step *t) {
  int cap = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, r->events) {
    pt_sched_box b = {.chunk = 0}; /* a trace names no chunks */
    int64_t s;
    double ts, dur;
    b.stage = span_of(r, e, &b.kind, &b.mb);
    if (b.stage < 0 || !step_of(e, &s) || s != t->step || !number_of(e, "ts", &ts)) continue;
    if (!number_of(e, "dur", &dur)) dur = 0.0;
    b.t0 = ts / 1e3, b.t1 = (ts + dur) / 1e3;
    if (t->n == cap) {
      cap = cap ? 2 * cap : 256;
      t->boxes = realloc(t->boxes, sizeof *t->boxes * (size_t)cap);
      if (!t->boxes) pt_fatal("out of memory reading a trace");
    }
    t->boxes[t->n++] = b;
  }
  int kept = 0;
  for (int i = 0; i < t->n; i++) {
    const pt_sched_box *b = &t->boxes[i];
    int keep = b->kind != SCHED_BOX_WAIT;
    for (int j = 0; !keep && j < t->n; j++) keep = nested(b, &t->boxes[j]);
    if (keep) t->boxes[kept++] = *b;
  }
  t->n = kept;
}

/* Stages, micro-batches (stage 0's) and the window of the step's boxes. */
static void measure(const reader *r, pt_trace_step *t) {
  unsigned char *seen = NULL;
  int max_mb = -1;
  t->t0 = 1e300, t->t1 = -1e300;
  for (int i = 0; i < r->n_tracks; i++)
    if (r->tracks[i].stage + 1 > t->n_stages) t->n_stages = r->tracks[i].stage + 1;
  for (int i = 0; i < t->n; i++) {
    const pt_sched_box *b = &t->boxes[i];
    if (b->kind == SCHED_BOX_WAIT) continue;
    if (b->t0 < t->t0) t->t0 = b->t0;
    if (b->t1 > t->t1) t->t1 = b->t1;
    if (b->mb > max_mb) max_mb = b->mb;
  }
  seen = pt_calloc((size_t)max_mb + 1, 1);
  for (int i = 0; i < t->n; i++)
    if (t->boxes[i].kind != SCHED_BOX_WAIT && t->boxes[i].stage == 0 && !seen[t->boxes[i].mb])
      seen[t->boxes[i].mb] = 1, t->n_micro++;
  free(seen);
}

int trace_read_step(const char *path, int64_t step, pt_trace_step *out, char *err, size_t errsz) {
  memset(out, 0, sizeof *out);
  char *text = read_file(path, err, errsz);
  if (!text) return -1;
  cJSON *doc = cJSON_Parse(text);
  free(text);
  reader r = {.err = err, .errsz = errsz};
  int rc = 0;
  /* Chrome accepts both {"traceEvents": [...]} and a bare array of events */
  r.events = cJSON_IsArray(doc) ? doc : cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
  if (!cJSON_IsArray(r.events)) {
    rc = pt_errorf(err, errsz, "%s: not a Chrome trace (JSON with a traceEvents array)",
                   path);
  } else {
    out->stages_from_pids = find_tracks(&r);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
    snprintf(out->schedule, sizeof out->schedule, "%s", string_of(meta, "schedule"));
    rc = pick_step(&r, step, &out->step);
    if (rc == 0) {
      collect(&r, out);
      measure(&r, out);
    } else {
      char why[512];
      snprintf(why, sizeof why, "%s", err);
      snprintf(err, errsz, "%s: %s", path, why);
    }
  }
  free(r.tracks);
  cJSON_Delete(doc);
  if (rc != 0) trace_step_free(out);
  return rc;
}

void trace_step_free(pt_trace_step *t) {
  free(t->boxes);
  t->boxes = NULL;
  t->n = 0;
}

int trace_step_write_svg(const pt_trace_step *t, const char *label, const char *path,
                         char *title, size_t titlesz, char *err, size_t errsz) {
  char text[512];
  if (!label) label = t->schedule;
  snprintf(text, sizeof text, "%s%sstep %lld: P = %d stages, M = %d micro-batches, measured "
           "bubble %.1f%%", label, label[0] ? ", " : "", (long long)t->step, t->n_stages,
           t->n_micro, 100.0 * sched_bubble(t->boxes, t->n, t->n_stages, t->t0, t->t1));
  if (title) snprintf(title, titlesz, "%s", text);
  pt_sched_picture pic = {
      .title = text, .axis = "time (ms)", .n_stages = t->n_stages, .boxes = t->boxes, .n = t->n,
      .t0 = t->t0, .t1 = t->t1, .min_px = 0.0, .max_px = 1e12,
      .legend = "blank: idle; pale: waiting for a neighbour inside F/B/I; number: micro-batch; "
                "measured times"};
  return sched_write_svg(&pic, path, err, errsz);
}
