/* schedule/schedule_svg.c: simulates a schedule with unit costs and draws it as SVG 1.1.
 * The look (sizes, colours, legend) is shared with scripts/trace_to_svg.py: keep them alike. */
#include "schedule/schedule_svg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* --- Simulation ------------------------------------------------------------------------------ */

typedef struct {
  const pt_schedule *s;
  int *pc;            /* [stage] next action */
  double *clock;      /* [stage] when the stage's previous action was done */
  double *sent_act;   /* [stage * M + mb] time of SEND_ACT, < 0: not yet */
  double *sent_grad;  /* [stage * M + mb] time of SEND_GRAD, < 0: not yet */
  pt_sched_box *boxes;
  int n, cap;
  char *err;
  size_t errsz;
} sim;

static int sim_fail(sim *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->err, x->errsz, fmt, ap);
  va_end(ap);
  return -1;
}

/* Runs a FORWARD/BACKWARD once `ready` (the neighbour's send time, or 0 without a neighbour)
 * is known: it starts when both the stage and its input are there. */
static int sim_compute(sim *x, int st, int mb, int backward, double ready) {
  if (ready < 0) return 0;
  if (x->n == x->cap)
    return sim_fail(x, "stage %d: more forward/backward actions than 2 x %d stages x %d "
                    "micro-batches", st, x->s->n_stages, x->s->n_micro);
  double t0 = x->clock[st] > ready ? x->clock[st] : ready;
  double t1 = t0 + (backward ? SCHED_BACKWARD_COST : SCHED_FORWARD_COST);
  x->boxes[x->n++] = (pt_sched_box){st, mb, backward, t0, t1};
  x->clock[st] = t1;
  return 1;
}

/* 1: done, 0: waits for a neighbour, -1: error. Receives, loads and reductions take no time. */
static int sim_action(sim *x, int st, const pt_action *a) {
  int P = x->s->n_stages, M = x->s->n_micro, mb = a->mb;
  int per_micro = a->kind != ACT_REDUCE_TIED && a->kind != ACT_REDUCE_DP &&
                  a->kind != ACT_OPTIMIZER;
  if (per_micro && (mb < 0 || mb >= M))
    return sim_fail(x, "stage %d: micro-batch %d out of range", st, mb);
  switch (a->kind) {
  case ACT_FORWARD:
    return sim_compute(x, st, mb, 0, st > 0 ? x->sent_act[(st - 1) * M + mb] : 0.0);
  case ACT_BACKWARD:
    return sim_compute(x, st, mb, 1, st < P - 1 ? x->sent_grad[(st + 1) * M + mb] : 0.0);
  case ACT_SEND_ACT:
    x->sent_act[st * M + mb] = x->clock[st];
    return 1;
  case ACT_SEND_GRAD:
    x->sent_grad[st * M + mb] = x->clock[st];
    return 1;
  default:
    return 1;
  }
}

/* Round-robin over the stages until none can move (the same sweep as schedule_validate). */
static int sim_sweep(sim *x) {
  const pt_schedule *s = x->s;
  for (int progress = 1; progress;) {
    progress = 0;
    for (int st = 0; st < s->n_stages; st++)
      while (x->pc[st] < s->n_acts[st]) {
        int r = sim_action(x, st, &s->acts[st][x->pc[st]]);
        if (r < 0) return -1;
        if (r == 0) break;
        x->pc[st]++;
        progress = 1;
      }
  }
  for (int st = 0; st < s->n_stages; st++)
    if (x->pc[st] < s->n_acts[st]) {
      const pt_action *a = &s->acts[st][x->pc[st]];
      return sim_fail(x, "stage %d waits forever at %s%d (action %d)", st,
                      schedule_action_code(a->kind), a->mb, x->pc[st]);
    }
  return 0;
}

int schedule_simulate(const pt_schedule *s, pt_sched_box *boxes, double *span, char *err,
                      size_t errsz) {
  size_t cells = (size_t)s->n_stages * (size_t)s->n_micro;
  sim x = {.s = s, .boxes = boxes, .cap = 2 * (int)cells, .err = err, .errsz = errsz};
  x.pc = pt_calloc((size_t)s->n_stages, sizeof(int));
  x.clock = pt_calloc((size_t)s->n_stages, sizeof(double));
  x.sent_act = pt_calloc(cells + 1, sizeof(double));
  x.sent_grad = pt_calloc(cells + 1, sizeof(double));
  for (size_t i = 0; i < cells; i++) x.sent_act[i] = x.sent_grad[i] = -1.0;
  int rc = sim_sweep(&x);
  *span = 0.0;
  for (int i = 0; i < x.n; i++)
    if (boxes[i].t1 > *span) *span = boxes[i].t1;
  free(x.pc);
  free(x.clock);
  free(x.sent_act);
  free(x.sent_grad);
  return rc < 0 ? -1 : x.n;
}

double schedule_sim_bubble(const pt_schedule *s, const pt_sched_box *boxes, int n, double span) {
  double busy = 0.0;
  for (int i = 0; i < n; i++) busy += boxes[i].t1 - boxes[i].t0;
  return span > 0 ? 1.0 - busy / (s->n_stages * span) : 0.0;
}

/* --- Drawing --------------------------------------------------------------------------------- */

/* Layout in pixels; scripts/trace_to_svg.py uses the same numbers. */
enum { LEFT = 80, RIGHT = 24, TOP = 64, ROW_H = 26, ROW_GAP = 6, AXIS_H = 44 };
static const char *const COLOUR_F = "#6baed6", *const COLOUR_B = "#fd8d3c";

typedef struct {
  FILE *f;
  const pt_schedule *s;
  const pt_sched_box *boxes;
  int n;
  double span, unit; /* pixels per time unit */
  int width, height;
} canvas;

static double row_y(int stage) { return TOP + stage * (ROW_H + ROW_GAP); }
static double time_x(const canvas *c, double t) { return LEFT + t * c->unit; }

/* Escape the schedule name like any text node: the registry does not restrict names. */
static void put_escaped(FILE *f, const char *text) {
  for (const char *p = text; *p; p++) {
    if (*p == '<') fputs("&lt;", f);
    else if (*p == '>') fputs("&gt;", f);
    else if (*p == '&') fputs("&amp;", f);
    else if (*p == '"') fputs("&quot;", f);
    else fputc(*p, f);
  }
}

static void draw_header(const canvas *c) {
  const pt_schedule *s = c->s;
  double bubble = schedule_sim_bubble(s, c->boxes, c->n, c->span);
  fprintf(c->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
          "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
          c->width, c->height, c->width, c->height);
  fprintf(c->f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
  fputs("<text x=\"12\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", c->f);
  put_escaped(c->f, s->type->name);
  fprintf(c->f, ": P = %d stages, M = %d micro-batches, simulated bubble %.1f%%</text>\n",
          s->n_stages, s->n_micro, 100.0 * bubble);
  /* legend: plain swatches (no class) so only the step's boxes carry class F or B */
  fprintf(c->f, "<g font-size=\"12\">\n"
          "<rect x=\"12\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333333\"/>"
          "<text x=\"31\" y=\"45\">forward</text>\n"
          "<rect x=\"96\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333333\"/>"
          "<text x=\"115\" y=\"45\">backward</text>\n"
          "<text x=\"190\" y=\"45\" fill=\"#555555\">blank: idle; number: micro-batch; unit "
          "costs: forward %g, backward %g, communication 0</text>\n</g>\n",
          COLOUR_F, COLOUR_B, SCHED_FORWARD_COST, SCHED_BACKWARD_COST);
}

static void draw_box(const canvas *c, const pt_sched_box *b) {
  double x = time_x(c, b->t0), w = (b->t1 - b->t0) * c->unit, y = row_y(b->stage);
  const char *cls = b->backward ? "B" : "F";
  fprintf(c->f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
          "fill=\"%s\" stroke=\"#333333\" stroke-width=\"0.5\"><title>stage %d %s%d: %g to %g"
          "</title></rect>\n", cls, x, y, w, ROW_H, b->backward ? COLOUR_B : COLOUR_F,
          b->stage, cls, b->mb, b->t0, b->t1);
  fprintf(c->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%d</text>\n",
          x + w / 2, y + ROW_H / 2.0 + 4, b->mb);
}

/* One group per stage (id stage-S): its label, its row outline, its boxes. */
static void draw_rows(const canvas *c) {
  for (int st = 0; st < c->s->n_stages; st++) {
    double y = row_y(st);
    fprintf(c->f, "<g id=\"stage-%d\">\n<text x=\"12\" y=\"%.1f\" font-size=\"12\">stage %d"
            "</text>\n", st, y + ROW_H / 2.0 + 4, st);
    fprintf(c->f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" "
            "stroke=\"#cccccc\"/>\n", LEFT, y, c->span * c->unit, ROW_H);
    for (int i = 0; i < c->n; i++)
      if (c->boxes[i].stage == st) draw_box(c, &c->boxes[i]);
    fputs("</g>\n", c->f);
  }
}

/* A tick step of 1, 2 or 5 times a power of ten giving at most about 20 ticks. */
static double tick_step(double span) {
  static const double mult[3] = {1.0, 2.0, 5.0};
  for (double p = 1.0;; p *= 10.0)
    for (int i = 0; i < 3; i++)
      if (span / (mult[i] * p) <= 20.0) return mult[i] * p;
}

static void draw_axis(const canvas *c) {
  double y = row_y(c->s->n_stages) + 2, step = tick_step(c->span);
  fprintf(c->f, "<g font-size=\"11\" fill=\"#555555\">\n<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" "
          "y2=\"%.1f\" stroke=\"#555555\"/>\n", LEFT, y, time_x(c, c->span), y);
  for (double t = 0; t <= c->span + 1e-9; t += step)
    fprintf(c->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555555\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
            time_x(c, t), y, time_x(c, t), y + 4, time_x(c, t), y + 16, t);
  fprintf(c->f, "<text x=\"%d\" y=\"%.1f\">time (forward = 1)</text>\n</g>\n", LEFT, y + 32);
}

int schedule_write_svg(const pt_schedule *s, const char *path, char *err, size_t errsz) {
  pt_sched_box *boxes = pt_calloc(2 * (size_t)s->n_stages * (size_t)s->n_micro + 1, sizeof *boxes);
  canvas c = {.s = s, .boxes = boxes};
  c.n = schedule_simulate(s, boxes, &c.span, err, errsz);
  if (c.n < 0) {
    free(boxes);
    return -1;
  }
  /* wide enough for a two-digit label in a forward box, but no wider than needed */
  c.unit = c.span > 0 ? 900.0 / c.span : 40.0;
  c.unit = c.unit < 18.0 ? 18.0 : c.unit > 40.0 ? 40.0 : c.unit;
  c.width = LEFT + (int)(c.span * c.unit + 0.5) + RIGHT;
  c.height = (int)row_y(s->n_stages) + AXIS_H;
  c.f = fopen(path, "w");
  if (!c.f) {
    snprintf(err, errsz, "%s: cannot open for writing: %s", path, strerror(errno));
    free(boxes);
    return -1;
  }
  draw_header(&c);
  draw_rows(&c);
  draw_axis(&c);
  fputs("</svg>\n", c.f);
  int bad = ferror(c.f);
  if (fclose(c.f) != 0) bad = 1;
  if (bad) snprintf(err, errsz, "%s: write failed: %s", path, strerror(errno));
  free(boxes);
  return bad ? -1 : 0;
}
