/* The schedule picture: the unit-cost simulation against the closed-form bubble and the
 * dependencies (every registered schedule: chunks, I and W), the SVG text (one F and one B box
 * per stage and micro-batch, labelled), and a
 * hand-written trace read back as the same picture's spans (replica 0, one step, nested waits). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "observe/trace_read.h"
#include "schedule/schedule_svg.h"
#include "test_util.h"

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *buf = calloc((size_t)n + 1, 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = '\0';
  fclose(f);
  return buf;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + strlen(needle), needle)) n++;
  return n;
}

/* The box of (stage, mb, backward), or NULL. */
static const pt_sched_box *find(const pt_sched_box *b, int n, int st, int mb,
                                pt_sched_box_kind kind) {
  for (int i = 0; i < n; i++)
    if (b[i].stage == st && b[i].mb == mb && b[i].kind == kind) return &b[i];
  return NULL;
}

/* What box x waits for: F on the previous stage, B on the next stage (the last stage's B: its
 * own F), or NULL for stage 0's forwards. */
static const pt_sched_box *dependency(const pt_sched_box *b, int n, int P, const pt_sched_box *x) {
  if (x->kind == SCHED_BOX_F)
    return x->stage > 0 ? find(b, n, x->stage - 1, x->mb, SCHED_BOX_F) : NULL;
  return x->stage < P - 1 ? find(b, n, x->stage + 1, x->mb, SCHED_BOX_B)
                          : find(b, n, x->stage, x->mb, SCHED_BOX_F);
}

/* Every box waits for its dependency, and a stage runs one box at a time. */
static int dependencies_hold(const pt_schedule *s, const pt_sched_box *b, int n) {
  for (int i = 0; i < n; i++) {
    const pt_sched_box *x = &b[i], *dep = dependency(b, n, s->n_ranks, x);
    if (dep && x->t0 < dep->t1) return 0;
    for (int j = 0; j < n; j++)
      if (j != i && b[j].stage == x->stage && b[j].t0 < x->t1 && x->t0 < b[j].t1) return 0;
  }
  return 1;
}

/* The box of (chunk, mb, kind) in a simulated schedule, or NULL. */
static const pt_sched_box *find_chunk(const pt_sched_box *b, int n, int chunk, int mb,
                                      pt_sched_box_kind kind) {
  for (int i = 0; i < n; i++)
    if (b[i].chunk == chunk && b[i].mb == mb && b[i].kind == kind) return &b[i];
  return NULL;
}

/* What box x of a schedule with C chunks waits for: the forward of the chunk before, the B or
 * I of the chunk after (the last chunk's: its own forward), a W its own I. */
static const pt_sched_box *chunk_dependency(const pt_sched_box *b, int n, int C,
                                            const pt_sched_box *x) {
  if (x->kind == SCHED_BOX_F) return x->chunk > 0 ? find_chunk(b, n, x->chunk - 1, x->mb, SCHED_BOX_F) : NULL;
  if (x->kind == SCHED_BOX_W) return find_chunk(b, n, x->chunk, x->mb, SCHED_BOX_I);
  if (x->chunk == C - 1) return find_chunk(b, n, x->chunk, x->mb, SCHED_BOX_F);
  const pt_sched_box *d = find_chunk(b, n, x->chunk + 1, x->mb, SCHED_BOX_B);
  return d ? d : find_chunk(b, n, x->chunk + 1, x->mb, SCHED_BOX_I);
}

/* s simulated: a box per compute action (counted in n_acts), each after what it waits for,
 * one at a time per rank, ending when schedule_time says the step does. */
static void check_boxes(const pt_schedule *s, const int *n_acts) {
  pt_sched_box *b = calloc(3 * (size_t)s->n_chunks * s->n_micro, sizeof *b);
  double span = 0.0, step = 0.0;
  char err[256] = "";
  int n = schedule_simulate(s, b, &span, err, sizeof err), ok = n >= 0;
  for (int i = 0; ok && i < n; i++) {
    const pt_sched_box *x = &b[i], *dep = chunk_dependency(b, n, s->n_chunks, x);
    ok = (dep || (x->kind == SCHED_BOX_F && x->chunk == 0)) && (!dep || x->t0 >= dep->t1);
    for (int j = 0; ok && j < n; j++)
      ok = j == i || b[j].stage != x->stage || b[j].t1 <= x->t0 || x->t1 <= b[j].t0;
  }
  schedule_time(s, &schedule_unit_costs, 1, &step, NULL, NULL, 0);
  int computes = n_acts[ACT_FORWARD] + n_acts[ACT_BACKWARD] + n_acts[ACT_BACKWARD_INPUT] +
                 n_acts[ACT_BACKWARD_WEIGHT];
  CHECK(ok && n == computes && span == step, "%s: %d boxes for %d actions, span %g, step %g (%s)",
        s->name, n, computes, span, step, err);
  free(b);
}

/* s's picture at path: a box of class F, B, I, W per such action, its title, I and W in the
 * legend when it splits, its later chunks lighter. */
static void check_picture(const pt_schedule *s, const int *n_acts, const char *path) {
  char err[256] = "", want[128];
  CHECK(schedule_write_svg(s, path, err, sizeof err) == 0, "%s: %s", path, err);
  char *svg = read_all(path);
  static const char *const cls[4] = {"class=\"F\"", "class=\"B\"", "class=\"I\"", "class=\"W\""};
  int want_n[4] = {n_acts[ACT_FORWARD], n_acts[ACT_BACKWARD], n_acts[ACT_BACKWARD_INPUT],
                   n_acts[ACT_BACKWARD_WEIGHT]};
  for (int c = 0; svg && c < 4; c++)
    CHECK(count_of(svg, cls[c]) == want_n[c], "%s: %d boxes of %s, want %d", path,
          count_of(svg, cls[c]), cls[c], want_n[c]);
  snprintf(want, sizeof want, "%s: P = 4 ", s->name);
  CHECK(svg && strstr(svg, want) && (!s->type->splits_backward || strstr(svg, "weight grad (W)")) &&
            (s->n_chunks == s->n_ranks || strstr(svg, "fill-opacity=\"0.50\"")),
        "%s: title, legend or the later chunks' shade missing", path);
  free(svg);
}

/* Every registered schedule, P = 4, M = 8 (2 chunks per rank where it takes any): its boxes and
 * its picture. With dir, the pictures stay there as pipetrain_svg_all_NAME.svg. */
static void test_all_schedules(const char *dir) {
  for (int k = 0; schedule_types[k]; k++) {
    const pt_schedule_type *t = schedule_types[k];
    pt_schedule s;
    char err[256] = "", path[4200];
    int v = t->virtual_stages == SCHEDULE_ANY_V ? 2 : t->virtual_stages, n_acts[ACT_KINDS] = {0};
    CHECK(schedule_build_v(&s, t, 4, v, 8, err, sizeof err) == 0, "%s: %s", t->name, err);
    for (int r = 0; r < s.n_ranks; r++)
      for (int i = 0; i < s.n_acts[r]; i++) n_acts[s.acts[r][i].kind]++;
    check_boxes(&s, n_acts);
    if (dir) snprintf(path, sizeof path, "%s/pipetrain_svg_all_%s.svg", dir, t->name);
    else snprintf(path, sizeof path, "/tmp/pipetrain_svg_all_%ld_%s.svg", (long)getpid(), t->name);
    check_picture(&s, n_acts, path);
    schedule_free(&s);
    if (!dir) remove(path);
  }
}

/* Unit costs give both schedules the span 3 (M + P - 1) and the bubble (P - 1) / (M + P - 1). */
static void test_simulation(void) {
  const char *names[2] = {"1f1b", "gpipe"};
  for (int k = 0; k < 2; k++)
    for (int P = 1; P <= 8; P++)
      for (int M = 1; M <= 12; M++) {
        pt_schedule s;
        schedule_build(&s, names[k], P, M);
        pt_sched_box *b = calloc(3 * (size_t)P * M, sizeof *b);
        double span = 0.0;
        char err[256] = "";
        int n = schedule_simulate(&s, b, &span, err, sizeof err);
        double want = (double)(P - 1) / (M + P - 1);
        double got = sched_bubble(b, n, P, 0.0, span);
        CHECK(n == 2 * P * M, "%s P=%d M=%d: %d boxes (%s)", names[k], P, M, n, err);
        CHECK(span == 3.0 * (M + P - 1) && fabs(got - want) < 1e-12,
              "%s P=%d M=%d: span %g bubble %g, want %d and %g", names[k], P, M, span, got,
              3 * (M + P - 1), want);
        CHECK(dependencies_hold(&s, b, n), "%s P=%d M=%d: a box starts too early", names[k], P, M);
        free(b);
        schedule_free(&s);
      }
}

/* The text of stage st's group: from <g id="stage-st"> to its </g>. */
static char *stage_group(const char *svg, int st) {
  char open[32];
  snprintf(open, sizeof open, "<g id=\"stage-%d\">", st);
  const char *a = strstr(svg, open), *e = a ? strstr(a, "</g>") : NULL;
  if (!e) return NULL;
  char *g = calloc((size_t)(e - a) + 1, 1);
  memcpy(g, a, (size_t)(e - a));
  return g;
}

/* The picture at path: SVG, P x M F and B boxes, the title, every stage's micro-batches labelled
 * twice (F and B). */
static void check_svg_text(const char *path, const char *title, int P, int M) {
  char *svg = read_all(path);
  CHECK(svg != NULL, "%s: not written", path);
  if (!svg) return;
  size_t len = strlen(svg);
  while (len && (svg[len - 1] == '\n' || svg[len - 1] == ' ')) svg[--len] = '\0';
  CHECK(strncmp(svg, "<svg", 4) == 0, "%s: does not start with <svg", path);
  CHECK(len >= 6 && strcmp(svg + len - 6, "</svg>") == 0, "%s: does not end with </svg>", path);
  CHECK(count_of(svg, "class=\"F\"") == P * M && count_of(svg, "class=\"B\"") == P * M,
        "%s: %d F and %d B boxes, want %d each", path, count_of(svg, "class=\"F\""),
        count_of(svg, "class=\"B\""), P * M);
  CHECK(strstr(svg, title) != NULL, "%s: no title '%s'", path, title);
  for (int st = 0; st < P; st++) {
    char *g = stage_group(svg, st);
    CHECK(g != NULL, "%s: no group for stage %d", path, st);
    for (int mb = 0; g && mb < M; mb++) {
      char label[32];
      snprintf(label, sizeof label, ">%d</text>", mb);
      CHECK(count_of(g, label) == 2, "%s: stage %d: micro-batch %d labelled %d times, want 2 (F, B)",
            path, st, mb, count_of(g, label));
    }
    free(g);
  }
  free(svg);
}

/* Writes DIR/pipetrain_svg_NAME.svg (kept for tests/observe/svg_check.py), or a temporary file in /tmp
 * (removed) when dir is NULL. */
static void test_pictures(const char *dir) {
  const char *names[2] = {"1f1b", "gpipe"};
  for (int k = 0; k < 2; k++) {
    pt_schedule s;
    char path[4200], err[256] = "";
    if (dir) snprintf(path, sizeof path, "%s/pipetrain_svg_%s.svg", dir, names[k]);
    else snprintf(path, sizeof path, "/tmp/pipetrain_svg_%ld_%s.svg", (long)getpid(), names[k]);
    schedule_build(&s, names[k], 4, 8);
    CHECK(schedule_write_svg(&s, path, err, sizeof err) == 0, "%s: %s", path, err);
    char title[160];
    snprintf(title, sizeof title, "%s: P = 4 stages, M = 8 micro-batches, simulated bubble "
             "%.1f%%", names[k], 100.0 * 3 / 11);
    check_svg_text(path, title, 4, 8);
    schedule_free(&s);
    if (dir) printf("wrote %s\n", path);
    else remove(path);
  }
}

static void test_errors(void) {
  pt_schedule s;
  char err[256] = "";
  schedule_build(&s, "1f1b", 2, 3);
  CHECK(schedule_write_svg(&s, "/nonexistent-dir/x.svg", err, sizeof err) == -1 &&
        strstr(err, "cannot open"), "unwritable path: '%s'", err);
  for (int i = 0; i < s.n_acts[0]; i++) /* stage 0 never sends micro-batch 1 */
    if (s.acts[0][i].kind == ACT_SEND_ACT && s.acts[0][i].mb == 1) s.acts[0][i].kind = ACT_LOAD;
  err[0] = '\0';
  CHECK(schedule_write_svg(&s, "/nonexistent-dir/never.svg", err, sizeof err) == -1 &&
        strstr(err, "waits forever"), "missing send: '%s'", err);
  schedule_free(&s);
}

/* A trace of 2 stages x 2 micro-batches (replica 0: pids 0 and 1), step 5, times in us. Left
 * out of the picture: replica 1's track (pid 2), a receive, a wait outside any F/B (the
 * optimizer's), step 6. Stage 0 computes 600 - 50 (the wait in B0) us, stage 1 400 us, in a
 * window of 700 us: bubble 1 - 950 / 1400. */
static const char TRACE[] =
    "{\"traceEvents\": ["
    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"rank 0 (stage 0, replica 0)\"}},"
    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"rank 1 (stage 1, replica 0)\"}},"
    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"rank 2 (stage 0, replica 1)\"}},"
    "{\"name\":\"F0\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":0,\"dur\":100,\"pid\":0,\"args\":{\"mb\":0,\"step\":5}},"
    "{\"name\":\"F1\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":100,\"dur\":100,\"pid\":0,\"args\":{\"mb\":1,\"step\":5}},"
    "{\"name\":\"B0\",\"cat\":\"backward\",\"ph\":\"X\",\"ts\":300,\"dur\":200,\"pid\":0,\"args\":{\"mb\":0,\"step\":5}},"
    "{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"ts\":300,\"dur\":50,\"pid\":0,\"args\":{\"step\":5}},"
    "{\"name\":\"B1\",\"cat\":\"backward\",\"ph\":\"X\",\"ts\":500,\"dur\":200,\"pid\":0,\"args\":{\"mb\":1,\"step\":5}},"
    "{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\",\"ts\":710,\"dur\":40,\"pid\":0,\"args\":{\"step\":5}},"
    "{\"name\":\"recv act0\",\"cat\":\"receive\",\"ph\":\"X\",\"ts\":90,\"dur\":1,\"pid\":1,\"args\":{\"mb\":0,\"step\":5}},"
    "{\"name\":\"F0\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":100,\"dur\":100,\"pid\":1,\"args\":{\"mb\":0,\"step\":5}},"
    "{\"name\":\"B0\",\"cat\":\"backward\",\"ph\":\"X\",\"ts\":200,\"dur\":100,\"pid\":1,\"args\":{\"mb\":0,\"step\":5}},"
    "{\"name\":\"F1\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":300,\"dur\":100,\"pid\":1,\"args\":{\"mb\":1,\"step\":5}},"
    "{\"name\":\"B1\",\"cat\":\"backward\",\"ph\":\"X\",\"ts\":400,\"dur\":100,\"pid\":1,\"args\":{\"mb\":1,\"step\":5}},"
    "{\"name\":\"F0\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":0,\"dur\":900,\"pid\":2,\"args\":{\"mb\":0,\"step\":5}},"
    "{\"name\":\"F0\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":1000,\"dur\":100,\"pid\":0,\"args\":{\"mb\":0,\"step\":6}}"
    "], \"metadata\": {\"schedule\": \"1f1b\", \"stages\": 2, \"micro_batches\": 2}}";

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "%s: cannot write", path);
}

static void test_trace(const char *dir) {
  char json[4200], svg[4200], err[1024] = "", title[512] = "";
  snprintf(json, sizeof json, "%s/pipetrain_svg_trace_%ld.json", dir ? dir : "/tmp", (long)getpid());
  snprintf(svg, sizeof svg, "%s/pipetrain_svg_trace.svg", dir ? dir : "/tmp");
  write_text(json, TRACE);
  pt_trace_step t;
  CHECK(trace_read_step(json, 0, &t, err, sizeof err) == 0, "%s", err);
  int waits = 0;
  for (int i = 0; i < t.n; i++) waits += t.boxes[i].kind == SCHED_BOX_WAIT;
  CHECK(t.step == 5 && t.n_stages == 2 && t.n_micro == 2 && t.n == 9 && waits == 1 &&
        !t.stages_from_pids && !strcmp(t.schedule, "1f1b"),
        "step %lld, %d stages, %d micro-batches, %d spans (%d waits), schedule '%s'; want 5, 2, "
        "2, 9 (1), 1f1b", (long long)t.step, t.n_stages, t.n_micro, t.n, waits, t.schedule);
  const pt_sched_box *b0 = find(t.boxes, t.n, 0, 0, SCHED_BOX_B);
  CHECK(b0 && b0->t0 == 0.3 && b0->t1 == 0.5 && t.t0 == 0.0 && t.t1 == 0.7,
        "times in ms: B0 on stage 0 at %g..%g, window %g..%g", b0 ? b0->t0 : -1, b0 ? b0->t1 : -1,
        t.t0, t.t1);
  double bubble = sched_bubble(t.boxes, t.n, t.n_stages, t.t0, t.t1);
  CHECK(fabs(bubble - (1.0 - 950.0 / 1400.0)) < 1e-12, "measured bubble %g", bubble);
  CHECK(trace_step_write_svg(&t, NULL, svg, title, sizeof title, err, sizeof err) == 0, "%s", err);
  check_svg_text(svg, "1f1b, step 5: P = 2 stages, M = 2 micro-batches, measured bubble 32.1%", 2, 2);
  char *text = read_all(svg);
  CHECK(text && count_of(text, "class=\"wait\"") == 1, "%s: want one pale wait", svg);
  free(text);
  trace_step_free(&t);
  if (dir) printf("wrote %s\n", svg);
  else remove(svg);

  CHECK(trace_read_step(json, 6, &t, err, sizeof err) == 0 && t.n == 1 && t.n_micro == 1,
        "step 6: %d spans (%s)", t.n, err);
  trace_step_free(&t);
  CHECK(trace_read_step(json, 9, &t, err, sizeof err) == -1 && strstr(err, "step 9 is not in"),
        "step 9: '%s'", err);
  write_text(json, "[{\"name\":\"B3\",\"ph\":\"X\",\"ts\":5,\"dur\":1,\"pid\":1,\"args\":{\"step\":2}}]");
  CHECK(trace_read_step(json, 0, &t, err, sizeof err) == 0 && t.stages_from_pids &&
        t.n_stages == 2 && t.n == 1 && t.boxes[0].stage == 1, "no track names: pid = stage");
  trace_step_free(&t);
  write_text(json, "{\"traceEvents\": [{\"name\":\"optimizer\",\"ph\":\"X\",\"pid\":0}]}");
  CHECK(trace_read_step(json, 0, &t, err, sizeof err) == -1 && strstr(err, "no forward/backward"),
        "no F/B spans: '%s'", err);
  write_text(json, "{\"events\": 3}");
  CHECK(trace_read_step(json, 0, &t, err, sizeof err) == -1 && strstr(err, "not a Chrome trace"),
        "not a trace: '%s'", err);
  remove(json);
  CHECK(trace_read_step(json, 0, &t, err, sizeof err) == -1 && strstr(err, "cannot read"),
        "missing file: '%s'", err);
}

/* test_svg [DIR]: with DIR, the P = 4, M = 8 pictures of both schedules and the hand-written
 * trace's stay there. */
int main(int argc, char **argv) {
  test_simulation();
  test_all_schedules(argc > 1 ? argv[1] : NULL);
  test_pictures(argc > 1 ? argv[1] : NULL);
  test_errors();
  test_trace(argc > 1 ? argv[1] : NULL);
  return test_summary("svg");
}
