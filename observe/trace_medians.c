/* Median busy times per chunk and kind from a recorded trace (see trace_medians.h). */
#include "observe/trace_medians.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { KIND_OPT = TRACE_KINDS, KIND_WAIT };

typedef struct {
  int kind;     /* TRACE_F..TRACE_W, KIND_OPT, KIND_WAIT */
  int group;    /* the chunk of F/B/I/W, the stage of the others */
  int stage;
  int64_t step;
  double t0, t1, busy; /* microseconds */
} span_rec;

typedef struct {
  span_rec *v;
  int n, cap;
} span_list;

static void push(span_list *s, span_rec r) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->v = realloc(s->v, sizeof *s->v * (size_t)s->cap);
    if (!s->v) pt_fatal("out of memory reading a trace");
  }
  s->v[s->n++] = r;
}

/* What an event of replica 0 is: a compute kind, the optimizer, a wait, or -1 (not counted). */
static int kind_of(const cJSON *e) {
  int mb, code = trace_doc_compute(e, &mb);
  if (code >= 0) return code;
  if (!strcmp(trace_json_string(e, "cat"), "wait")) return KIND_WAIT;
  return strcmp(trace_json_string(e, "name"), "optimizer") ? -1 : KIND_OPT;
}

/* The chunk of a compute span: args.chunk, else its stage; -1 when the layout has no such chunk
 * on that stage. */
static int chunk_of(const cJSON *e, int stage, const pt_trace_layout *l) {
  double c;
  int chunk = trace_json_number(cJSON_GetObjectItemCaseSensitive(e, "args"), "chunk", &c)
                  ? (c == (int)c ? (int)c : -1) : stage;
  if (chunk < 0 || chunk >= l->n_chunks || l->chunk_stage[chunk] != stage) return -1;
  return chunk;
}

/* Replica 0's compute, optimizer and wait spans. */
static int collect(const pt_trace_doc *d, const pt_trace_layout *l, const char *path,
                   span_list *out, char *err, size_t errsz) {
  const cJSON *e;
  cJSON_ArrayForEach(e, d->events) {
    span_rec r = {.stage = trace_doc_stage(d, e)};
    double dur;
    if (r.stage < 0 || (r.kind = kind_of(e)) < 0 || !trace_doc_step(e, &r.step) ||
        !trace_json_number(e, "ts", &r.t0) || !trace_json_number(e, "dur", &dur))
      continue;
    r.t1 = r.t0 + dur, r.busy = dur;
    r.group = r.kind < TRACE_KINDS ? chunk_of(e, r.stage, l) : r.stage;
    if (r.group < 0 || r.stage >= l->n_stages)
      return pt_errorf(err, errsz, "%s: span '%s' of stage %d is on a chunk or stage the trace's "
                       "layout (%d stages, %d chunks) does not have; record a new trace with "
                       "pipe_train --trace", path, trace_json_string(e, "name"), r.stage,
                       l->n_stages, l->n_chunks);
    push(out, r);
  }
  return 0;
}

static int by_track_time(const void *pa, const void *pb) {
  const span_rec *a = pa, *b = pb;
  if (a->stage != b->stage) return a->stage < b->stage ? -1 : 1;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  return (a->kind == KIND_WAIT) - (b->kind == KIND_WAIT); /* an action before its waits */
}

/* Each span's busy time: its duration less the waits nested in it, which follow it in track
 * and time order. */
static void subtract_waits(span_list *s) {
  qsort(s->v, (size_t)s->n, sizeof *s->v, by_track_time);
  for (int i = 0; i < s->n; i++) {
    span_rec *r = &s->v[i];
    if (r->kind == KIND_WAIT) continue;
    for (int j = i + 1; j < s->n && s->v[j].stage == r->stage &&
                        s->v[j].t0 <= r->t1 + TRACE_NEST_SLACK_US; j++)
      if (s->v[j].kind == KIND_WAIT && s->v[j].t1 <= r->t1 + TRACE_NEST_SLACK_US)
        r->busy -= s->v[j].t1 - s->v[j].t0;
  }
}

static int by_step(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return (a > b) - (a < b);
}

/* The recorded steps with compute spans: their count (0: none) and the first. */
static int count_steps(const span_list *s, int64_t *first) {
  int64_t *steps = pt_calloc((size_t)s->n + 1, sizeof(int64_t));
  int n = 0, distinct = 0;
  for (int i = 0; i < s->n; i++)
    if (s->v[i].kind < TRACE_KINDS) steps[n++] = s->v[i].step;
  qsort(steps, (size_t)n, sizeof *steps, by_step);
  for (int i = 0; i < n; i++) distinct += i == 0 || steps[i] != steps[i - 1];
  *first = n ? steps[0] : 0;
  free(steps);
  return distinct;
}

static int by_group_busy(const void *pa, const void *pb) {
  const span_rec *a = pa, *b = pb;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  return (a->busy > b->busy) - (a->busy < b->busy);
}

/* The end of the run of spans of s->v[i]'s kind and group. */
static int run_end(const span_list *s, int i) {
  int j = i;
  while (j < s->n && s->v[j].kind == s->v[i].kind && s->v[j].group == s->v[i].group) j++;
  return j;
}

/* The median of each (kind, group) run of the spans left, sorted, in seconds. */
static void take_medians(span_list *s, pt_trace_medians *out) {
  qsort(s->v, (size_t)s->n, sizeof *s->v, by_group_busy);
  for (int i = 0, j; i < s->n; i = j) {
    j = run_end(s, i);
    int n = j - i;
    double med = (s->v[i + (n - 1) / 2].busy + s->v[i + n / 2].busy) / 2 / 1e6;
    if (s->v[i].kind < TRACE_KINDS) out->chunk[s->v[i].group * TRACE_KINDS + s->v[i].kind] = med;
    else out->opt[s->v[i].group] = med;
  }
}

int trace_medians_read(const pt_trace_doc *d, const pt_trace_layout *l, const char *path,
                       pt_trace_medians *out, char *err, size_t errsz) {
  span_list s = {0};
  int64_t first;
  memset(out, 0, sizeof *out);
  int rc = collect(d, l, path, &s, err, errsz), steps = rc ? 0 : count_steps(&s, &first), kept = 0;
  if (rc == 0 && steps == 0)
    rc = pt_errorf(err, errsz, "%s: the trace has no forward/backward spans (F<mb>, B<mb>, "
                   "I<mb>, W<mb>) on replica 0", path);
  if (rc != 0) {
    free(s.v);
    return -1;
  }
  subtract_waits(&s);
  for (int i = 0; i < s.n; i++) /* the first step warms up: left out when there are others */
    if (s.v[i].kind != KIND_WAIT && (steps == 1 || s.v[i].step != first)) s.v[kept++] = s.v[i];
  s.n = kept;
  out->chunk = pt_calloc((size_t)l->n_chunks * TRACE_KINDS, sizeof(double));
  out->opt = pt_calloc((size_t)l->n_stages, sizeof(double));
  for (int i = 0; i < l->n_chunks * TRACE_KINDS; i++) out->chunk[i] = -1;
  for (int i = 0; i < l->n_stages; i++) out->opt[i] = -1;
  out->n_steps = steps > 1 ? steps - 1 : 1;
  take_medians(&s, out);
  free(s.v);
  return 0;
}

void trace_medians_free(pt_trace_medians *t) {
  free(t->chunk), free(t->opt);
  memset(t, 0, sizeof *t);
}
