/* The schedule picture: the unit-cost simulation against the closed-form bubble and the
 * dependencies, and the SVG text (one F and one B box per stage and micro-batch, labelled). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
static const pt_sched_box *find(const pt_sched_box *b, int n, int st, int mb, int bwd) {
  for (int i = 0; i < n; i++)
    if (b[i].stage == st && b[i].mb == mb && b[i].backward == bwd) return &b[i];
  return NULL;
}

/* What box x waits for: F on the previous stage, B on the next stage (the last stage's B: its
 * own F), or NULL for stage 0's forwards. */
static const pt_sched_box *dependency(const pt_sched_box *b, int n, int P, const pt_sched_box *x) {
  if (!x->backward) return x->stage > 0 ? find(b, n, x->stage - 1, x->mb, 0) : NULL;
  return x->stage < P - 1 ? find(b, n, x->stage + 1, x->mb, 1) : find(b, n, x->stage, x->mb, 0);
}

/* Every box waits for its dependency, and a stage runs one box at a time. */
static int dependencies_hold(const pt_schedule *s, const pt_sched_box *b, int n) {
  for (int i = 0; i < n; i++) {
    const pt_sched_box *x = &b[i], *dep = dependency(b, n, s->n_stages, x);
    if (dep && x->t0 < dep->t1) return 0;
    for (int j = 0; j < n; j++)
      if (j != i && b[j].stage == x->stage && b[j].t0 < x->t1 && x->t0 < b[j].t1) return 0;
  }
  return 1;
}

/* Unit costs give both schedules the span 3 (M + P - 1) and the bubble (P - 1) / (M + P - 1). */
static void test_simulation(void) {
  const char *names[2] = {"1f1b", "gpipe"};
  for (int k = 0; k < 2; k++)
    for (int P = 1; P <= 8; P++)
      for (int M = 1; M <= 12; M++) {
        pt_schedule s;
        schedule_build(&s, names[k], P, M);
        pt_sched_box *b = calloc(2 * (size_t)P * M, sizeof *b);
        double span = 0.0;
        char err[256] = "";
        int n = schedule_simulate(&s, b, &span, err, sizeof err);
        double want = (double)(P - 1) / (M + P - 1);
        double got = schedule_sim_bubble(&s, b, n, span);
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

static void check_svg_text(const char *path, const char *name, int P, int M) {
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
  char title[160];
  snprintf(title, sizeof title, "%s: P = %d stages, M = %d micro-batches, simulated bubble %.1f%%",
           name, P, M, 100.0 * (P - 1) / (M + P - 1));
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

/* Writes DIR/pipetrain_svg_NAME.svg (kept for tests/svg_check.py), or a temporary file in /tmp
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
    check_svg_text(path, names[k], 4, 8);
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

/* test_svg [DIR]: with DIR, the P = 4, M = 8 pictures of both schedules stay there. */
int main(int argc, char **argv) {
  test_simulation();
  test_pictures(argc > 1 ? argv[1] : NULL);
  test_errors();
  return test_summary("svg");
}
