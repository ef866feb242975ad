/* pipe_train: trains a model described by a YAML layer spec.
 *   pipe_train SPEC [--sequential] [--set KEY=VALUE ...] [--metrics FILE] [--quiet]
 * Exit codes: 0 success, 2 bad input (spec, data, command line), 1 other failures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/spec.h"
#include "runtime/error.h"
#include "runtime/train.h"

#define MAX_OVERRIDES 256

typedef struct {
  const char *spec_path;
  const char *overrides[MAX_OVERRIDES];
  int n_overrides;
  int sequential, quiet;
  const char *metrics_path;
} cli_args;

static void usage(FILE *f) {
  fprintf(f,
          "usage: pipe_train SPEC.yaml [options]\n"
          "  --sequential        run every layer in this one process (same results as the\n"
          "                      pipelined run of the same spec)\n"
          "  --set KEY=VALUE     override a spec value, e.g. --set train.steps=50 (repeatable)\n"
          "  --metrics FILE      write one JSON object per step to FILE\n"
          "  --quiet             no per-step lines on stdout\n"
          "  --help, --version\n");
}

static const char *option_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) pt_fail_input("%s needs a value; see pipe_train --help", argv[*i]);
  return argv[++*i];
}

static void parse_args(int argc, char **argv, cli_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(s, "--version")) {
      printf("pipetrain 0.1.0\n");
      exit(0);
    } else if (!strcmp(s, "--sequential")) {
      a->sequential = 1;
    } else if (!strcmp(s, "--quiet")) {
      a->quiet = 1;
    } else if (!strcmp(s, "--metrics")) {
      a->metrics_path = option_value(argc, argv, &i);
    } else if (!strcmp(s, "--set")) {
      if (a->n_overrides == MAX_OVERRIDES) pt_fail_input("more than %d --set options", MAX_OVERRIDES);
      a->overrides[a->n_overrides++] = option_value(argc, argv, &i);
    } else if (s[0] == '-') {
      pt_fail_input("unknown option '%s'; see pipe_train --help", s);
    } else if (a->spec_path) {
      pt_fail_input("more than one spec file ('%s' and '%s'); pass exactly one", a->spec_path, s);
    } else {
      a->spec_path = s;
    }
  }
  if (!a->spec_path)
    pt_fail_input("no spec file given; try: pipe_train examples/default.yaml (or --help)");
}

/* Until the pipeline engine lands, one process runs every stage; say so instead of silently
 * ignoring the pipeline section. */
static void check_layout(const pt_spec *s, const cli_args *a) {
  int64_t procs = s->pipeline.stages * s->pipeline.data_parallel;
  if (procs > 1 && !a->sequential)
    pt_fail_input("%s: pipeline.stages (%lld) x pipeline.data_parallel (%lld) = %lld processes, "
                  "but this build runs one process; add --sequential (same results) or "
                  "--set pipeline.stages=1 --set pipeline.data_parallel=1",
                  s->path, (long long)s->pipeline.stages, (long long)s->pipeline.data_parallel,
                  (long long)procs);
}

static FILE *open_metrics(const char *path) {
  if (!path) return NULL;
  FILE *f = fopen(path, "w");
  if (!f) pt_fail_input("%s: cannot open the metrics file: %s", path, strerror(errno));
  return f;
}

int main(int argc, char **argv) {
  cli_args a;
  parse_args(argc, argv, &a);
  pt_spec spec;
  spec_errors e = {0};
  if (spec_load(a.spec_path, a.overrides, a.n_overrides, &spec, &e) != 0) pt_fail_input("%s", e.msg);
  check_layout(&spec, &a);
  pt_trainer t;
  char err[1024];
  if (trainer_init(&t, &spec, err, sizeof err) != 0) pt_fail_input("%s", err);
  FILE *metrics = open_metrics(a.metrics_path);
  if (!a.quiet)
    printf("pipetrain: %s: %d layers, %lld parameters, %lld steps of %lld sequences\n",
           spec.path, t.model.n_layers, (long long)model_param_count(&t.model),
           (long long)spec.train.steps,
           (long long)(spec.pipeline.data_parallel * spec.train.micro_batches *
                       spec.train.micro_batch_size));
  pt_train_output out = {.metrics = metrics, .log = a.quiet ? NULL : stdout,
                         .log_every = spec.log_every};
  trainer_run(&t, &out);
  if (metrics && fclose(metrics) != 0) pt_fatal("closing the metrics file: %s", strerror(errno));
  trainer_free(&t);
  spec_free(&spec);
  return 0;
}
