/* observe/report.h: pipe_report's page, a run's --metrics file drawn as one self-contained HTML
 * file: line charts as inline SVG (no script, no network), the plan as text, and one step's
 * schedule picture (schedule/schedule_svg.h's SVG, inlined).
 *
 * Each chart is <svg class="chart" data-title=...> holding one <polyline class="series"
 * data-name=... data-points=N> per curve, a point per record that has the value. */
#ifndef PT_REPORT_H
#define PT_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
  int n, cap, n_stages;     /* records; stages: the widest bubble/peak_memory_bytes array */
  double *step, *loss, *tokens_per_s, *step_ms, *eval_loss; /* [n]; eval_loss NaN where none */
  double *bubble, *peak_mib; /* [n * REPORT_MAX_STAGES], NaN where a record lacks the stage */
} pt_report_run;

#define REPORT_MAX_STAGES 64

/* Reads a --metrics file (one JSON object a line); 0, or -1 with a one-line err naming the file
 * and line. */
int report_read_metrics(const char *path, pt_report_run *r, char *err, size_t errsz);
void report_run_free(pt_report_run *r);
/* Writes the page: title, charts (loss and eval loss, tokens/s, step time, bubble and peak
 * memory per stage), then plan_text (or NULL) and schedule_svg (an SVG document, or NULL). */
void report_write_html(FILE *f, const char *title, const pt_report_run *r, const char *plan_text,
                       const char *schedule_svg);

#endif
