/* schedule/schedule_svg.c: simulates a schedule with unit costs, and draws timed spans (simulated
 * or measured) as SVG 1.1. */
#include "schedule/schedule_svg.h"

#include <errno.h>
#include <math.h>
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

/* Runs a FORWARD/BACKWARD once `ready` (the neighbour's send time, or 0 without a neighbour)
 * is known: it starts when both the stage and its input are there. */
static int sim_compute(sim *x, int st, int mb, int backward, double ready) {
  if (ready < 0) return 0;
  if (x->n == x->cap)
    return pt_errorf(x->err, x->errsz, "stage %d: more forward/backward actions than 2 x %d "
                     "stages x %d micro-batches", st, x->s->n_stages, x->s->n_micro);
  double t0 = x->clock[st] > ready ? x->clock[st] : ready;
  double t1 = t0 + (backward ? SCHED_BACKWARD_COST : SCHED_FORWARD_COST);
  x->boxes[x->n++] = (pt_sched_box){st, mb, backward ? SCHED_BOX_B : SCHED_BOX_F, t0, t1};
  x->clock[st] = t1;
  return 1;
}

/* 1: done, 0: waits for a neighbour, -1: error. Receives, loads and reductions take no time. */
static int sim_action(sim *x, int st, const pt_action *a) {
  int P = x->s->n_stages, M = x->s->n_micro, mb = a->mb;
  int per_micro = a->kind != ACT_REDUCE_TIED && a->kind != ACT_REDUCE_DP &&
                  a->kind != ACT_OPTIMIZER;
  if (per_micro && (mb < 0 || mb >= M))
    return pt_errorf(x->err, x->errsz, "stage %d: micro-batch %d out of range", st, mb);
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
      return pt_errorf(x->err, x->errsz, "stage %d waits forever at %s%d (action %d)", st,
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

double sched_bubble(const pt_sched_box *boxes, int n, int n_stages, double t0, double t1) {
  double busy = 0.0;
  for (int i = 0; i < n; i++)
    busy += (boxes[i].kind == SCHED_BOX_WAIT ? -1.0 : 1.0) * (boxes[i].t1 - boxes[i].t0);
  return t1 > t0 && n_stages > 0 ? 1.0 - busy / (n_stages * (t1 - t0)) : 0.0;
}

/* --- Drawing --------------------------------------------------------------------------------- */

/* Layout in pixels. */
enum { LEFT = 80, RIGHT = 24, TOP = 64, ROW_H = 26, ROW_GAP = 6, AXIS_H = 44 };
#define PLOT_W 900.0 /* the width the window aims at */
#define LABEL_MIN_W 12.0 /* narrower boxes carry their micro-batch in the tooltip only */
static const char *const COLOUR_F = "#6baed6", *const COLOUR_B = "#fd8d3c";

typedef struct {
  FILE *f;
  const pt_sched_picture *p;
  double span, unit; /* window length, pixels per time unit */
  int width, height;
} canvas;

static double row_y(int stage) { return TOP + stage * (ROW_H + ROW_GAP); }
static double time_x(const canvas *c, double t) { return LEFT + (t - c->p->t0) * c->unit; }

/* Titles carry names from specs and traces: escape them like any text node. */
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
  fprintf(c->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
          "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
          c->width, c->height, c->width, c->height);
  fprintf(c->f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
  fputs("<text x=\"12\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", c->f);
  put_escaped(c->f, c->p->title);
  fputs("</text>\n", c->f);
  /* legend: plain swatches (no class) so only the step's boxes carry class F or B */
  fprintf(c->f, "<g font-size=\"12\">\n"
          "<rect x=\"12\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333333\"/>"
          "<text x=\"31\" y=\"45\">forward</text>\n"
          "<rect x=\"96\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333333\"/>"
          "<text x=\"115\" y=\"45\">backward</text>\n"
          "<text x=\"190\" y=\"45\" fill=\"#555555\">", COLOUR_F, COLOUR_B);
  put_escaped(c->f, c->p->legend);
  fputs("</text>\n</g>\n", c->f);
}

/* Time box b spent in the waits drawn inside it. */
static double waited(const pt_sched_picture *p, const pt_sched_box *b) {
  double w = 0.0;
  for (int i = 0; i < p->n; i++) {
    const pt_sched_box *x = &p->boxes[i];
    if (x->kind == SCHED_BOX_WAIT && x->stage == b->stage && x->t0 >= b->t0 && x->t1 <= b->t1)
      w += x->t1 - x->t0;
  }
  return w;
}

static double box_width(const canvas *c, const pt_sched_box *b) {
  double w = (b->t1 - b->t0) * c->unit;
  return w < 0.1 ? 0.1 : w; /* an instant still shows */
}

static void draw_box(const canvas *c, const pt_sched_box *b) {
  double x = time_x(c, b->t0), y = row_y(b->stage), wait = waited(c->p, b);
  const char *cls = b->kind == SCHED_BOX_B ? "B" : "F";
  fprintf(c->f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
          "fill=\"%s\" stroke=\"#333333\" stroke-width=\"0.5\"><title>stage %d %s%d: %g to %g",
          cls, x, y, box_width(c, b), ROW_H, b->kind == SCHED_BOX_B ? COLOUR_B : COLOUR_F,
          b->stage, cls, b->mb, b->t0 - c->p->t0, b->t1 - c->p->t0);
  if (wait > 0) fprintf(c->f, ", %g of it waiting", wait);
  fputs("</title></rect>\n", c->f);
}

static void draw_wait(const canvas *c, const pt_sched_box *b) {
  double w = (b->t1 - b->t0) * c->unit;
  if (w < 0.1) return; /* too thin to see */
  fprintf(c->f, "<rect class=\"wait\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
          "fill=\"#ffffff\" fill-opacity=\"0.75\"/>\n", time_x(c, b->t0), row_y(b->stage), w,
          ROW_H);
}

static void draw_label(const canvas *c, const pt_sched_box *b) {
  double w = box_width(c, b);
  if (w < LABEL_MIN_W) return;
  fprintf(c->f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%d</text>\n",
          time_x(c, b->t0) + w / 2, row_y(b->stage) + ROW_H / 2.0 + 4, b->mb);
}

/* One group per stage (id stage-S): its label, its row outline, its boxes, the waits over them,
 * then the micro-batch numbers over both. */
static void draw_rows(const canvas *c) {
  const pt_sched_picture *p = c->p;
  for (int st = 0; st < p->n_stages; st++) {
    double y = row_y(st);
    fprintf(c->f, "<g id=\"stage-%d\">\n<text x=\"12\" y=\"%.1f\" font-size=\"12\">stage %d"
            "</text>\n", st, y + ROW_H / 2.0 + 4, st);
    fprintf(c->f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" "
            "stroke=\"#cccccc\"/>\n", LEFT, y, c->span * c->unit, ROW_H);
    for (int pass = 0; pass < 3; pass++)
      for (int i = 0; i < p->n; i++) {
        const pt_sched_box *b = &p->boxes[i];
        if (b->stage != st || (pass == 1) != (b->kind == SCHED_BOX_WAIT)) continue;
        if (pass == 0) draw_box(c, b);
        else if (pass == 1) draw_wait(c, b);
        else draw_label(c, b);
      }
    fputs("</g>\n", c->f);
  }
}

/* A tick step of 1, 2 or 5 times a power of ten giving at most about 20 ticks. */
static double tick_step(double span) {
  static const double mult[3] = {1.0, 2.0, 5.0};
  double p = span > 0 ? pow(10.0, floor(log10(span / 20.0))) : 1.0;
  for (;; p *= 10.0)
    for (int i = 0; i < 3; i++)
      if (span / (mult[i] * p) <= 20.0) return mult[i] * p;
}

static void draw_axis(const canvas *c) {
  double y = row_y(c->p->n_stages) + 2, step = tick_step(c->span);
  fprintf(c->f, "<g font-size=\"11\" fill=\"#555555\">\n<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" "
          "y2=\"%.1f\" stroke=\"#555555\"/>\n", LEFT, y, LEFT + c->span * c->unit, y);
  for (int i = 0; i * step <= c->span + 1e-9; i++) {
    double x = LEFT + i * step * c->unit;
    fprintf(c->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555555\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
            x, y, x, y + 4, x, y + 16, i * step);
  }
  fprintf(c->f, "<text x=\"%d\" y=\"%.1f\">", LEFT, y + 32);
  put_escaped(c->f, c->p->axis);
  fputs("</text>\n</g>\n", c->f);
}

int sched_write_svg(const pt_sched_picture *pic, const char *path, char *err, size_t errsz) {
  canvas c = {.p = pic, .span = pic->t1 > pic->t0 ? pic->t1 - pic->t0 : 0.0};
  c.unit = c.span > 0 ? PLOT_W / c.span : pic->max_px;
  c.unit = c.unit < pic->min_px ? pic->min_px : c.unit > pic->max_px ? pic->max_px : c.unit;
  c.width = LEFT + (int)(c.span * c.unit + 0.5) + RIGHT;
  c.height = (int)row_y(pic->n_stages) + AXIS_H;
  c.f = fopen(path, "w");
  if (!c.f) {
    snprintf(err, errsz, "%s: cannot open for writing: %s", path, strerror(errno));
    return -1;
  }
  draw_header(&c);
  draw_rows(&c);
  draw_axis(&c);
  fputs("</svg>\n", c.f);
  int bad = ferror(c.f);
  if (fclose(c.f) != 0) bad = 1;
  if (bad) snprintf(err, errsz, "%s: write failed: %s", path, strerror(errno));
  return bad ? -1 : 0;
}

int schedule_write_svg(const pt_schedule *s, const char *path, char *err, size_t errsz) {
  pt_sched_box *boxes = pt_calloc(2 * (size_t)s->n_stages * (size_t)s->n_micro + 1, sizeof *boxes);
  double span = 0.0;
  int n = schedule_simulate(s, boxes, &span, err, errsz);
  if (n < 0) {
    free(boxes);
    return -1;
  }
  char title[160], legend[160];
  snprintf(title, sizeof title, "%s: P = %d stages, M = %d micro-batches, simulated bubble %.1f%%",
           s->type->name, s->n_stages, s->n_micro,
           100.0 * sched_bubble(boxes, n, s->n_stages, 0.0, span));
  snprintf(legend, sizeof legend, "blank: idle; number: micro-batch; unit costs: forward %g, "
           "backward %g, communication 0", SCHED_FORWARD_COST, SCHED_BACKWARD_COST);
  /* 18 to 40 pixels per unit: wide enough for a two-digit label in a forward box */
  pt_sched_picture pic = {.title = title, .legend = legend, .axis = "time (forward = 1)",
                          .n_stages = s->n_stages, .boxes = boxes, .n = n, .t0 = 0.0, .t1 = span,
                          .min_px = 18.0, .max_px = 40.0};
  int rc = sched_write_svg(&pic, path, err, errsz);
  free(boxes);
  return rc;
}
