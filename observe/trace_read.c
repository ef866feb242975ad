/* Reading one step of a Chrome trace back as picture spans (see trace_read.h). */
#include "observe/trace_read.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "observe/trace_doc.h"

typedef struct {
  const pt_trace_doc *doc;
  char *err;
  size_t errsz;
} reader;

/* A complete event of replica 0: its stage, and kind F/B/I/W (with *mb) or WAIT; -1 for
 * others. */
static int span_of(const reader *r, const cJSON *e, pt_sched_box_kind *kind, int *mb) {
  static const pt_sched_box_kind kinds[] = {SCHED_BOX_F, SCHED_BOX_B, SCHED_BOX_I, SCHED_BOX_W};
  int stage = trace_doc_stage(r->doc, e), code = stage < 0 ? -1 : trace_doc_compute(e, mb);
  if (stage < 0) return -1;
  if (code >= 0) {
    *kind = kinds[code];
    return stage;
  }
  if (!strcmp(trace_json_string(e, "cat"), "wait")) {
    *kind = SCHED_BOX_WAIT;
    *mb = -1;
    return stage;
  }
  return -1;
}

/* The step to draw: `wanted`, or the first with forward/backward spans when wanted is 0. */
static int pick_step(reader *r, int64_t wanted, int64_t *step) {
  int64_t first = INT64_MAX, s;
  int found = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, r->doc->events) {
    pt_sched_box_kind kind;
    int mb;
    if (span_of(r, e, &kind, &mb) < 0 || kind == SCHED_BOX_WAIT || !trace_doc_step(e, &s)) continue;
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
  double slack = TRACE_NEST_SLACK_US / 1e3;
  return w->stage == b->stage && b->kind != SCHED_BOX_WAIT && w->t0 >= b->t0 - slack &&
         w->t1 <= b->t1 + slack;
}

/* The step's boxes, then only the waits that lie inside one of them. */
static void collect(reader *r, pt_trace_step *t) {
  int cap = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, r->doc->events) {
    pt_sched_box b = {.chunk = 0}; /* a trace names no chunks */
    int64_t s;
    double ts, dur;
    b.stage = span_of(r, e, &b.kind, &b.mb);
    if (b.stage < 0 || !trace_doc_step(e, &s) || s != t->step ||
        !trace_json_number(e, "ts", &ts))
      continue;
    if (!trace_json_number(e, "dur", &dur)) dur = 0.0;
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
  for (int i = 0; i < r->doc->n_tracks; i++)
    if (r->doc->tracks[i].stage + 1 > t->n_stages) t->n_stages = r->doc->tracks[i].stage + 1;
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
  pt_trace_doc doc;
  if (trace_doc_open(&doc, path, err, errsz) != 0) return -1;
  reader r = {.doc = &doc, .err = err, .errsz = errsz};
  out->stages_from_pids = doc.stages_from_pids;
  snprintf(out->schedule, sizeof out->schedule, "%s", trace_json_string(doc.meta, "schedule"));
  int rc = pick_step(&r, step, &out->step);
  if (rc == 0) {
    collect(&r, out);
    measure(&r, out);
  } else {
    char why[512];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, errsz, "%s: %s", path, why);
    trace_step_free(out);
  }
  trace_doc_close(&doc);
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
