/* pipe_trace: draws one step of a recorded run, without MPI or the spec.
 *   pipe_trace TRACE.json OUT.svg [--step N] [--label TEXT]
 *       TRACE.json from `pipe_train ... --trace TRACE.json`; the picture of step N (default:
 *       the first recorded) as `pipe_train SPEC --print-schedule --svg` draws a simulated
 *       schedule, boxes at their measured start and length (observe/trace_read.h). The title
 *       starts with --label, or else with the trace's schedule.
 * Exit codes: 0 success, 2 bad input (usage, unreadable trace, no such step), 1 the picture
 * could not be written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "observe/trace_read.h"

#define USAGE "usage: pipe_trace TRACE.json OUT.svg [--step N] [--label TEXT]"

typedef struct {
  const char *trace, *out, *label;
  long long step; /* 0: the first recorded */
} trace_args;

static void parse(int argc, char **argv, trace_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    int has_value = i + 1 < argc;
    if (!strcmp(s, "--step") && has_value) {
      char *end;
      a->step = strtoll(argv[++i], &end, 10);
      if (*end || end == argv[i] || a->step < 1)
        pt_fail_input("--step '%s': expected a step number >= 1", argv[i]);
    } else if (!strcmp(s, "--label") && has_value) {
      a->label = argv[++i];
    } else if (s[0] == '-') {
      pt_fail_input("unknown or incomplete option '%s'; " USAGE, s);
    } else if (!a->trace) {
      a->trace = s;
    } else if (!a->out) {
      a->out = s;
    } else {
      pt_fail_input("unexpected argument '%s'; " USAGE, s);
    }
  }
  if (!a->out) pt_fail_input(USAGE);
}

int main(int argc, char **argv) {
  trace_args a;
  parse(argc, argv, &a);
  pt_trace_step t;
  char err[1024], title[512];
  if (trace_read_step(a.trace, a.step, &t, err, sizeof err) != 0) pt_fail_input("%s", err);
  if (t.stages_from_pids)
    pt_warn("%s: no 'rank R (stage S, replica D)' track names; taking each pid as a stage",
            a.trace);
  if (trace_step_write_svg(&t, a.label, a.out, title, sizeof title, err, sizeof err) != 0)
    pt_fatal("%s", err);
  int boxes = 0;
  for (int i = 0; i < t.n; i++) boxes += t.boxes[i].kind != SCHED_BOX_WAIT;
  printf("%s: %s (%d boxes, window %.3f ms)\n", a.out, title, boxes, t.t1 - t.t0);
  trace_step_free(&t);
  return 0;
}
