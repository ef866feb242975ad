#include "runtime/metrics.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "runtime/error.h"

void metrics_write_json(FILE *f, const pt_step_metrics *s) {
  cJSON *o = cJSON_CreateObject();
  if (!o) pt_fatal("out of memory writing metrics");
  cJSON_AddNumberToObject(o, "step", (double)s->step);
  cJSON_AddNumberToObject(o, "loss", s->loss);
  cJSON_AddNumberToObject(o, "lr", s->lr);
  cJSON_AddNumberToObject(o, "grad_norm", s->grad_norm);
  cJSON_AddNumberToObject(o, "tokens_per_s", s->tokens_per_s);
  cJSON_AddNumberToObject(o, "step_ms", s->step_ms);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!text) pt_fatal("out of memory writing metrics");
  if (fprintf(f, "%s\n", text) < 0 || fflush(f) != 0) pt_fatal("cannot write the metrics file");
  free(text);
}

void metrics_print_line(FILE *f, const pt_step_metrics *s) {
  fprintf(f, "step %lld/%lld | loss %.4f | lr %.3e | grad_norm %.4f | %.0f tok/s | %.1f ms\n",
          (long long)s->step, (long long)s->steps, s->loss, s->lr, s->grad_norm, s->tokens_per_s,
          s->step_ms);
  fflush(f);
}
