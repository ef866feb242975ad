#include "observe/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

#define W 640.0
#define H 260.0
#define PAD_L 70.0
#define PAD_R 130.0
#define PAD_T 30.0
#define PAD_B 40.0

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static double *grow(double *a, int cap) {
  double *n = realloc(a, (size_t)cap * sizeof *a);
  if (!n) pt_fatal("out of memory reading the metrics");
  return n;
}

static double number(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void add_record(pt_report_run *r, const cJSON *o) {
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 256;
    double **cols[] = {&r->step, &r->loss, &r->tokens_per_s, &r->step_ms, &r->eval_loss};
    for (int i = 0; i < 5; i++) *cols[i] = grow(*cols[i], r->cap);
    r->bubble = grow(r->bubble, r->cap * REPORT_MAX_STAGES);
    r->peak_mib = grow(r->peak_mib, r->cap * REPORT_MAX_STAGES);
  }
  int i = r->n++;
  r->step[i] = number(o, "step"), r->loss[i] = number(o, "loss");
  r->tokens_per_s[i] = number(o, "tokens_per_s"), r->step_ms[i] = number(o, "step_ms");
  r->eval_loss[i] = number(o, "eval_loss");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "bubble");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "peak_memory_bytes");
  for (int s = 0; s < REPORT_MAX_STAGES; s++) {
    const cJSON *bs = cJSON_GetArrayItem(b, s), *ms = cJSON_GetArrayItem(m, s);
    r->bubble[i * REPORT_MAX_STAGES + s] = cJSON_IsNumber(bs) ? bs->valuedouble : NAN;
    r->peak_mib[i * REPORT_MAX_STAGES + s] = cJSON_IsNumber(ms) ? ms->valuedouble / 1048576.0 : NAN;
    if ((bs || ms) && s + 1 > r->n_stages) r->n_stages = s + 1;
  }
}

int report_read_metrics(const char *path, pt_report_run *r, char *err, size_t errsz) {
  memset(r, 0, sizeof *r);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(err, errsz, "%s: is a directory; give the file pipe_train --metrics wrote", path);
    return -1;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errsz, "%s: cannot open the metrics file: %s", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  int lineno = 0, rc = 0;
  while (getline(&line, &cap, f) > 0) {
    lineno++;
    if (strspn(line, " \t\r\n") == strlen(line)) continue;
    cJSON *o = cJSON_Parse(line);
    if (!cJSON_IsObject(o) || isnan(number(o, "step")) || isnan(number(o, "loss"))) {
      snprintf(err, errsz, "%s:%d: not a pipe_train --metrics record (a JSON object with step "
               "and loss)", path, lineno);
      cJSON_Delete(o);
      rc = -1;
      break;
    }
    add_record(r, o);
    cJSON_Delete(o);
  }
  free(line);
  fclose(f);
  if (rc == 0 && r->n == 0)
    snprintf(err, errsz, "%s: no records (an empty file; pipe_train --metrics writes one line a "
             "step)", path), rc = -1;
  return rc;
}

void report_run_free(pt_report_run *r) {
  double *all[] = {r->step, r->loss, r->tokens_per_s, r->step_ms, r->eval_loss, r->bubble,
                   r->peak_mib};
  for (int i = 0; i < 7; i++) free(all[i]);
  memset(r, 0, sizeof *r);
}

static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else if (*s == '"') fputs("&quot;", f);
    else fputc(*s, f);
  }
}

/* One curve: y[i * stride] against the run's steps, NaN points left out. */
typedef struct {
  char name[48];
  const double *y;
  int stride;
} series;

static void range(const pt_report_run *r, const series *s, int ns, double *lo, double *hi) {
  *lo = INFINITY, *hi = -INFINITY;
  for (int k = 0; k < ns; k++)
    for (int i = 0; i < r->n; i++) {
      double v = s[k].y[i * s[k].stride];
      if (!isnan(v)) *lo = fmin(*lo, v), *hi = fmax(*hi, v);
    }
  if (!(*lo <= *hi)) *lo = 0, *hi = 1;
  if (*hi - *lo < 1e-12 * fmax(1.0, fabs(*hi))) *lo -= 0.5, *hi += 0.5;
}

static void draw_frame(FILE *f, const char *title, double x0, double x1, double lo, double hi) {
  fprintf(f, "<svg class=\"chart\" data-title=\"");
  put_escaped(f, title);
  fprintf(f, "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
          "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"11\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n", W, H, W, H);
  fprintf(f, "<text x=\"%g\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", PAD_L);
  put_escaped(f, title);
  fprintf(f, "</text>\n<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
          "stroke=\"#888\"/>\n", PAD_L, PAD_T, W - PAD_L - PAD_R, H - PAD_T - PAD_B);
  for (int t = 0; t <= 4; t++) { /* five labels up the y axis, the ends of x */
    double v = lo + (hi - lo) * t / 4, y = H - PAD_B - (H - PAD_T - PAD_B) * t / 4;
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.4g</text>\n", PAD_L - 4, y + 4, v);
  }
  fprintf(f, "<text x=\"%g\" y=\"%g\">%.0f</text><text x=\"%g\" y=\"%g\" text-anchor=\"end\">"
          "%.0f</text><text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n", PAD_L,
          H - PAD_B + 14, x0, W - PAD_R, H - PAD_B + 14, x1, (PAD_L + W - PAD_R) / 2, H - 8);
}

static void chart(FILE *f, const char *title, const pt_report_run *r, const series *s, int ns) {
  double lo, hi, x0 = r->step[0], x1 = r->step[r->n - 1];
  range(r, s, ns, &lo, &hi);
  if (x1 <= x0) x1 = x0 + 1;
  draw_frame(f, title, x0, x1, lo, hi);
  for (int k = 0; k < ns; k++) {
    int pts = 0;
    for (int i = 0; i < r->n; i++) pts += !isnan(s[k].y[i * s[k].stride]);
    const char *color = colors[k % 8];
    fprintf(f, "<polyline class=\"series\" data-name=\"%s\" data-points=\"%d\" fill=\"none\" "
            "stroke=\"%s\" stroke-width=\"1.5\" points=\"", s[k].name, pts, color);
    for (int i = 0; i < r->n; i++) {
      double v = s[k].y[i * s[k].stride];
      if (isnan(v)) continue;
      double x = PAD_L + (W - PAD_L - PAD_R) * (r->step[i] - x0) / (x1 - x0);
      double y = H - PAD_B - (H - PAD_T - PAD_B) * (v - lo) / (hi - lo);
      fprintf(f, "%.1f,%.1f ", x, y);
    }
    fprintf(f, "\"/>\n<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n", W - PAD_R + 8,
            PAD_T + 12 + 14 * k, color, s[k].name);
  }
  fputs("</svg>\n", f);
}

static void stage_chart(FILE *f, const char *title, const char *what, const pt_report_run *r,
                        const double *y) {
  series s[REPORT_MAX_STAGES];
  for (int k = 0; k < r->n_stages; k++) {
    snprintf(s[k].name, sizeof s[k].name, "%s stage %d", what, k);
    s[k].y = y + k, s[k].stride = REPORT_MAX_STAGES;
  }
  chart(f, title, r, s, r->n_stages);
}

void report_write_html(FILE *f, const char *title, const pt_report_run *r, const char *plan_text,
                       const char *schedule_svg) {
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", f);
  put_escaped(f, title);
  fputs("</title>\n<style>body{font-family:sans-serif;margin:20px;background:#fff}"
        "svg.chart{margin:6px;border:1px solid #ddd}pre{background:#f6f6f6;padding:8px;overflow-x:auto}"
        "</style></head>\n<body>\n<h1>", f);
  put_escaped(f, title);
  fprintf(f, "</h1>\n<p>%d steps (%.0f to %.0f)</p>\n<div class=\"charts\">\n", r->n, r->step[0],
          r->step[r->n - 1]);
  series loss[2] = {{"loss", r->loss, 1}, {"eval loss", r->eval_loss, 1}};
  int has_eval = 0;
  for (int i = 0; i < r->n; i++) has_eval |= !isnan(r->eval_loss[i]);
  chart(f, "loss", r, loss, has_eval ? 2 : 1);
  series tps = {"tokens/s", r->tokens_per_s, 1}, ms = {"step ms", r->step_ms, 1};
  chart(f, "tokens/s", r, &tps, 1);
  chart(f, "step time (ms)", r, &ms, 1);
  if (r->n_stages > 0) {
    stage_chart(f, "bubble per stage (fraction of the step)", "bubble", r, r->bubble);
    stage_chart(f, "peak memory per stage (MiB)", "MiB", r, r->peak_mib);
  }
  fputs("</div>\n", f);
  if (plan_text) {
    fputs("<h2>plan</h2>\n<pre class=\"plan\">", f);
    put_escaped(f, plan_text);
    fputs("</pre>\n", f);
  }
  if (schedule_svg) {
    const char *svg = strstr(schedule_svg, "<svg"); /* inline: no XML prolog */
    fprintf(f, "<h2>one step's schedule</h2>\n<div class=\"schedule\">\n%s</div>\n",
            svg ? svg : "");
  }
  fputs("</body></html>\n", f);
}
