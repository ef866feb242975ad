#include "observe/metrics.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"

int metrics_write_json(FILE *f, const pt_step_metrics *s) {
  cJSON *o = cJSON_CreateObject();
  if (!o) pt_fatal("out of memory writing metrics");
  cJSON_AddNumberToObject(o, "step", (double)s->step);
  cJSON_AddNumberToObject(o, "loss", s->loss);
  cJSON_AddNumberToObject(o, "lr", s->lr);
  cJSON_AddNumberToObject(o, "grad_norm", s->grad_norm);
  cJSON_AddNumberToObject(o, "tokens_per_s", s->tokens_per_s);
  cJSON_AddNumberToObject(o, "step_ms", s->step_ms);
  if (s->n_stages > 0) {
    cJSON *b = cJSON_AddArrayToObject(o, "bubble"), *m = cJSON_AddArrayToObject(o, "peak_memory_bytes");
    for (int i = 0; i < s->n_stages; i++) {
      cJSON_AddItemToArray(b, cJSON_CreateNumber(s->bubble[i]));
      cJSON_AddItemToArray(m, cJSON_CreateNumber(s->peak_bytes[i]));
    }
    cJSON_AddNumberToObject(o, "bubble_mean", s->bubble_mean);
    if (s->gpu_bytes) {
      cJSON *g = cJSON_AddArrayToObject(o, "gpu_memory_bytes");
      for (int i = 0; i < s->n_stages; i++)
        cJSON_AddItemToArray(g, cJSON_CreateNumber(s->gpu_bytes[i]));
    }
  }
  if (s->mfu >= 0) cJSON_AddNumberToObject(o, "mfu", s->mfu);
  cJSON_AddNumberToObject(o, "skipped_steps", (double)s->skipped_steps);
  if (s->seq_len > 0) cJSON_AddNumberToObject(o, "seq_len", (double)s->seq_len);
  if (s->has_eval) cJSON_AddNumberToObject(o, "eval_loss", s->eval_loss);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!text) pt_fatal("out of memory writing metrics");
  int rc = fprintf(f, "%s\n", text) < 0 || fflush(f) != 0 ? -1 : 0;
  free(text);
  return rc;
}

void metrics_print_line(FILE *f, const pt_step_metrics *s) {
  fprintf(f, "step %lld/%lld | loss %.4f | lr %.3e | grad_norm %.4f | %.0f tok/s | %.1f ms\n",
          (long long)s->step, (long long)s->steps, s->loss, s->lr, s->grad_norm, s->tokens_per_s,
          s->step_ms);
  if (s->has_eval) fprintf(f, "step %lld/%lld | eval_loss %.4f\n", (long long)s->step,
                           (long long)s->steps, s->eval_loss);
  fflush(f);
}

void metrics_print_progress(FILE *f, const pt_step_metrics *s, int64_t every, double eta_s) {
  int last = s->step == s->steps;
  if (!isatty(fileno(f))) {
    if (s->step % (every > 0 ? every : 1) == 0 || s->step == 1 || last || s->has_eval)
      metrics_print_line(f, s);
    return;
  }
  char bar[21];
  int filled = s->steps > 0 ? (int)(20 * s->step / s->steps) : 20;
  for (int i = 0; i < 20; i++) bar[i] = i < filled ? '=' : ' ';
  bar[20] = '\0';
  fprintf(f, "\rstep %lld/%lld [%s] loss %.4f | %.0f tok/s | ETA %dm%02ds   ", (long long)s->step,
          (long long)s->steps, bar, s->loss, s->tokens_per_s, (int)(eta_s / 60), (int)eta_s % 60);
  if (s->has_eval) fprintf(f, "\nstep %lld/%lld | eval_loss %.4f", (long long)s->step,
                           (long long)s->steps, s->eval_loss);
  if (last || s->has_eval) fputc('\n', f);
  fflush(f);
}
