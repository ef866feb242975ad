/* schedule/schedule_svg.c: draws timed spans (simulated, schedule_sim.h, or measured) as
 * SVG 1.1. */
#include "schedule/schedule_svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* --- Drawing --------------------------------------------------------------------------------- */

/* Layout in pixels. */
enum { LEFT = 80, RIGHT = 24, TOP = 64, ROW_H = 26, ROW_GAP = 6, AXIS_H = 44 };
#define PLOT_W 900.0 /* the width the window aims at */
#define LABEL_MIN_W 12.0 /* narrower boxes carry their micro-batch in the tooltip only */
/* F, B, wait (unused), I, W: indexed by pt_sched_box_kind */
static const char *const COLOUR[] = {"#6baed6", "#fd8d3c", "#ffffff", "#de2d26", "#74c476"};
static const char *const CLASS[] = {"F", "B", "wait", "I", "W"};

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

static int has_split(const pt_sched_picture *p) {
  for (int i = 0; i < p->n; i++)
    if (p->boxes[i].kind == SCHED_BOX_I || p->boxes[i].kind == SCHED_BOX_W) return 1;
  return 0;
}

static void draw_header(const canvas *c) {
  fprintf(c->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
          "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
          c->width, c->height, c->width, c->height);
  fprintf(c->f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
  fputs("<text x=\"12\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", c->f);
  put_escaped(c->f, c->p->title);
  fputs("</text>\n", c->f);
  /* legend: plain swatches (no class) so only the step's boxes carry class F, B, I or W */
  fprintf(c->f, "<g font-size=\"12\">\n"
          "<rect x=\"12\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333333\"/>"
          "<text x=\"31\" y=\"45\">forward</text>\n"
          "<rect x=\"96\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#333333\"/>"
          "<text x=\"115\" y=\"45\">backward</text>\n", COLOUR[SCHED_BOX_F], COLOUR[SCHED_BOX_B]);
  int x = 190;
  if (has_split(c->p)) {
    fprintf(c->f, "<rect x=\"190\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" "
            "stroke=\"#333333\"/><text x=\"209\" y=\"45\">input grad (I)</text>\n"
            "<rect x=\"306\" y=\"34\" width=\"14\" height=\"14\" fill=\"%s\" "
            "stroke=\"#333333\"/><text x=\"325\" y=\"45\">weight grad (W)</text>\n",
            COLOUR[SCHED_BOX_I], COLOUR[SCHED_BOX_W]);
    x = 434;
  }
  fprintf(c->f, "<text x=\"%d\" y=\"45\" fill=\"#555555\">", x);
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

/* A rank's later chunks are lighter (chunk / P is the local index in both placements). */
static double chunk_opacity(const pt_sched_picture *p, const pt_sched_box *b) {
  int v = p->chunks_per_rank;
  return v > 1 ? 1.0 - 0.5 * (b->chunk / p->n_stages) / (v - 1) : 1.0;
}

static void draw_box(const canvas *c, const pt_sched_box *b) {
  double x = time_x(c, b->t0), y = row_y(b->stage), wait = waited(c->p, b);
  const char *cls = CLASS[b->kind];
  fprintf(c->f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
          "fill=\"%s\" ", cls, x, y, box_width(c, b), ROW_H, COLOUR[b->kind]);
  if (c->p->chunks_per_rank > 1)
    fprintf(c->f, "fill-opacity=\"%.2f\" stroke=\"#333333\" stroke-width=\"0.5\"><title>rank %d "
            "chunk %d %s%d", chunk_opacity(c->p, b), b->stage, b->chunk, cls, b->mb);
  else
    fprintf(c->f, "stroke=\"#333333\" stroke-width=\"0.5\"><title>stage %d %s%d", b->stage, cls,
            b->mb);
  fprintf(c->f, ": %g to %g", b->t0 - c->p->t0, b->t1 - c->p->t0);
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
    fprintf(c->f, "<g id=\"stage-%d\">\n<text x=\"12\" y=\"%.1f\" font-size=\"12\">%s %d"
            "</text>\n", st, y + ROW_H / 2.0 + 4, p->chunks_per_rank > 1 ? "rank" : "stage", st);
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
  pt_sched_box *boxes = pt_calloc(3 * (size_t)s->n_chunks * (size_t)s->n_micro + 1, sizeof *boxes);
  double span = 0.0;
  int n = schedule_simulate(s, boxes, &span, err, errsz), v = s->n_chunks / s->n_ranks;
  if (n < 0) {
    free(boxes);
    return -1;
  }
  char title[320], legend[200], chunks[64] = "";
  if (v > 1) snprintf(chunks, sizeof chunks, ", %d chunks per rank", v);
  snprintf(title, sizeof title, "%s: P = %d %s%s, M = %d micro-batches, simulated bubble %.1f%%",
           s->name, s->n_ranks, v > 1 ? "ranks" : "stages", chunks, s->n_micro,
           100.0 * sched_bubble(boxes, n, s->n_ranks, 0.0, span));
  int split = 0;
  for (int i = 0; i < n; i++) split |= boxes[i].kind == SCHED_BOX_I;
  if (v > 1 || split)
    snprintf(legend, sizeof legend, "number: micro-batch; %scosts F, I, W %g, B %g",
             v > 1 ? "lighter: later chunk; " : "", SCHED_FORWARD_COST, SCHED_BACKWARD_COST);
  else
    snprintf(legend, sizeof legend, "blank: idle; number: micro-batch; unit costs: forward %g, "
             "backward %g, communication 0", SCHED_FORWARD_COST, SCHED_BACKWARD_COST);
  /* 18 to 40 pixels per unit: wide enough for a two-digit label in a forward box */
  pt_sched_picture pic = {.title = title, .legend = legend, .axis = "time (forward = 1)",
                          .n_stages = s->n_ranks, .chunks_per_rank = v, .boxes = boxes, .n = n,
                          .t0 = 0.0, .t1 = span, .min_px = 18.0, .max_px = 40.0};
  int rc = sched_write_svg(&pic, path, err, errsz);
  free(boxes);
  return rc;
}
