/* pipe_report: a run's curves as one self-contained HTML page, without MPI, a server or the spec.
 *   pipe_report METRICS.jsonl [--trace TRACE.json] [--plan PLAN.txt] [--title TEXT] OUT.html
 *       METRICS.jsonl from `pipe_train ... --metrics`; TRACE.json from `--trace` (its first
 *       recorded step, drawn as pipe_trace draws it: pick it with --trace-steps); PLAN.txt the
 *       output of `pipe_train SPEC --plan`. The page is observe/report.h's: inline SVG, no scripts.
 * Exit codes: 0 success, 2 bad input (usage, unreadable metrics, trace or plan, an OUT.html that
 * cannot be created), 1 the page could not be written out (a full disk). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "observe/report.h"
#include "observe/trace_read.h"

#define USAGE "usage: pipe_report METRICS.jsonl [--trace TRACE.json] [--plan PLAN.txt] " \
              "[--title TEXT] OUT.html"

typedef struct {
  const char *metrics, *out, *trace, *plan, *title;
} report_args;

static void parse(int argc, char **argv, report_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    int has_value = i + 1 < argc;
    if (!strcmp(s, "--trace") && has_value) {
      a->trace = argv[++i];
    } else if (!strcmp(s, "--plan") && has_value) {
      a->plan = argv[++i];
    } else if (!strcmp(s, "--title") && has_value) {
      a->title = argv[++i];
    } else if (s[0] == '-') {
      pt_fail_input("unknown or incomplete option '%s'; " USAGE, s);
    } else if (!a->metrics) {
      a->metrics = s;
    } else if (!a->out) {
      a->out = s;
    } else {
      pt_fail_input("unexpected argument '%s'; " USAGE, s);
    }
  }
  if (!a->out) pt_fail_input(USAGE);
}

/* A whole file as a string (NULL if it cannot be read). */
static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  char chunk[65536];
  size_t n;
  while (m && (n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, m);
  if (m) fclose(m);
  fclose(f);
  return buf;
}

/* The trace's step through the renderer pipe_trace uses, which writes a file: drawn to a
 * temporary one and read back to be inlined. */
static char *schedule_svg(const report_args *a) {
  pt_trace_step t;
  char err[1024], title[512], tmp[] = "/tmp/pipe_report_XXXXXX";
  if (trace_read_step(a->trace, 0, &t, err, sizeof err) != 0) pt_fail_input("%s", err);
  int fd = mkstemp(tmp);
  if (fd < 0) pt_fatal("cannot create a temporary file for the schedule picture");
  close(fd);
  int rc = trace_step_write_svg(&t, NULL, tmp, title, sizeof title, err, sizeof err);
  trace_step_free(&t);
  char *svg = rc == 0 ? read_all(tmp) : NULL;
  remove(tmp);
  if (!svg) pt_fatal("the schedule picture: %s", rc ? err : "cannot read it back");
  return svg;
}

int main(int argc, char **argv) {
  report_args a;
  parse(argc, argv, &a);
  pt_report_run r;
  char err[1024];
  /* where the page cannot go is the command line's mistake (exit 2), found before any reading;
   * a write that fails after (a full disk) is not */
  if (checkpoint_check_writable(a.out, 1, "OUT.html", err, sizeof err) != 0)
    pt_fail_input("%s", err);
  if (report_read_metrics(a.metrics, &r, err, sizeof err) != 0) pt_fail_input("%s", err);
  char *plan = NULL, *svg = a.trace ? schedule_svg(&a) : NULL;
  if (a.plan && !(plan = read_all(a.plan)))
    pt_fail_input("%s: cannot read the plan: %s", a.plan, strerror(errno));
  FILE *f = fopen(a.out, "w");
  if (!f) pt_fail_input("%s: cannot write the page there: %s", a.out, strerror(errno));
  report_write_html(f, a.title ? a.title : a.metrics, &r, plan, svg);
  if (fclose(f) != 0) pt_fatal("%s: cannot write the page: %s", a.out, strerror(errno));
  printf("%s: %d step%s, %d stage%s%s%s\n", a.out, r.n, r.n == 1 ? "" : "s", r.n_stages,
         r.n_stages == 1 ? "" : "s", plan ? ", plan" : "", svg ? ", one step's schedule" : "");
  free(plan);
  free(svg);
  report_run_free(&r);
  return 0;
}
