/* Per-layer times from a recorded trace (observe/trace_times.h), against medians computed from
 * the JSON on their own (tests/pipeline/trace_medians.py):
 *   test_trace_times check SPEC TRACE EXPECTED [KEY=VALUE ...]
 *       every f and i positive, w exactly 0 on layers without parameters, and per chunk the
 *       layers' times adding up to EXPECTED's medians (1e-6 relative) by the rules of
 *       trace_times.h: f to F; i + w to B (less F under checkpointing, at least 1% kept) or to
 *       I + W; w alone to W where a split chunk has parameters; per stage opt to OPT.
 *   test_trace_times refuse SPEC TRACE TEXT [KEY=VALUE ...]
 *       trace_read_times fails with a message naming TRACE and containing TEXT.
 * KEY=VALUE: --set overrides of SPEC. Exits non-zero on any failed check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "observe/trace_times.h"
#include "test_util.h"

#define MAX_CHUNKS 64

typedef struct {
  int steps, micro_batches, checkpointing, n_chunks;
  int bounds[MAX_CHUNKS + 1], chunk_stage[MAX_CHUNKS];
  double kind[MAX_CHUNKS][4]; /* F, B, I, W; -1: none */
  double opt[MAX_CHUNKS];     /* per stage; -1: none */
} expected;

static void load_model(const char *spec_path, char **sets, int n_sets, pt_spec *s, pt_model *m) {
  spec_errors e = {0};
  if (spec_load(spec_path, (const char *const *)sets, n_sets, s, &e) != 0) pt_fatal("%s", e.msg);
  if (model_configure(m, s, &e) != 0) pt_fatal("%s", e.msg);
}

static int ints_after(const char *line, const char *key, int *v, int max) {
  size_t k = strlen(key);
  if (strncmp(line, key, k) || line[k] != ' ') return -1;
  int n = 0, used;
  for (const char *p = line + k; n < max && sscanf(p, "%d%n", &v[n], &used) == 1; p += used) n++;
  return n;
}

static void read_expected(const char *path, expected *x) {
  FILE *f = fopen(path, "r");
  char line[512], kind[8];
  int idx;
  double v;
  if (!f) pt_fatal("cannot open %s", path);
  memset(x, 0, sizeof *x);
  for (int i = 0; i < MAX_CHUNKS; i++) x->opt[i] = x->kind[i][0] = x->kind[i][1] = -1;
  for (int i = 0; i < MAX_CHUNKS; i++) x->kind[i][2] = x->kind[i][3] = -1;
  while (fgets(line, sizeof line, f)) {
    int n = ints_after(line, "bounds", x->bounds, MAX_CHUNKS + 1);
    if (n > 0) x->n_chunks = n - 1;
    ints_after(line, "chunk_stage", x->chunk_stage, MAX_CHUNKS);
    sscanf(line, "steps %d", &x->steps);
    sscanf(line, "micro_batches %d", &x->micro_batches);
    sscanf(line, "checkpointing %d", &x->checkpointing);
    if (sscanf(line, "%7s %d %lf", kind, &idx, &v) != 3 || idx < 0 || idx >= MAX_CHUNKS) continue;
    const char *at = strchr("FBIW", kind[0]);
    if (!strcmp(kind, "OPT")) x->opt[idx] = v;
    else if (at && kind[1] == '\0') x->kind[idx][at - "FBIW"] = v;
  }
  fclose(f);
  if (x->n_chunks < 1) pt_fatal("%s: no bounds line", path);
}

static int close_to(double got, double want) {
  return fabs(got - want) <= 1e-6 * fabs(want) + 1e-15;
}

static double sum_range(const double *v, int lo, int hi) {
  double s = 0;
  for (int l = lo; l < hi; l++) s += v[l];
  return s;
}

static void check_layers(const pt_layer_times *t, const pt_model *m) {
  CHECK(t->n_layers == m->n_layers, "%d layers, model has %d", t->n_layers, m->n_layers);
  for (int l = 0; l < m->n_layers; l++) {
    CHECK(t->f[l] > 0 && t->i[l] > 0, "layer %d: f %g, i %g", l, t->f[l], t->i[l]);
    if (m->layers[l].n_params == 0)
      CHECK(t->w[l] == 0.0, "layer %d (%s) has no parameters but w %g", l,
            m->layers[l].type->name, t->w[l]);
    CHECK(t->w[l] >= 0 && t->opt[l] >= 0, "layer %d: w %g, opt %g", l, t->w[l], t->opt[l]);
  }
  CHECK(t->p2p_latency_s == PROFILE_P2P_LATENCY_S && t->p2p_bytes_per_s == PROFILE_P2P_BYTES_PER_S,
        "transfer defaults");
}

static int has_params(const pt_model *m, int lo, int hi) {
  int n = 0;
  for (int l = lo; l < hi; l++) n += m->layers[l].n_params;
  return n > 0;
}

/* What chunk c's i + w must add up to (trace_times.h). */
static double backward_total(const expected *x, int c) {
  const double *k = x->kind[c];
  double w = k[3] > 0 ? k[3] : 0, b = k[1] >= 0 ? k[1] : k[2] + w;
  if (x->checkpointing > 0) b = b - k[0] > 0.01 * b ? b - k[0] : 0.01 * b;
  return b;
}

static void check_chunks(const pt_layer_times *t, const pt_model *m, const expected *x) {
  for (int c = 0; c < x->n_chunks; c++) {
    int lo = x->bounds[c], hi = x->bounds[c + 1];
    const double *k = x->kind[c];
    double f = sum_range(t->f, lo, hi), iw = sum_range(t->i, lo, hi) + sum_range(t->w, lo, hi);
    CHECK(k[0] > 0 && close_to(f, k[0]), "chunk %d: f adds up to %.9g, median F %.9g", c, f, k[0]);
    CHECK(close_to(iw, backward_total(x, c)), "chunk %d: i + w add up to %.9g, want %.9g", c, iw,
          backward_total(x, c));
    if (k[1] < 0 && x->checkpointing == 0 && has_params(m, lo, hi))
      CHECK(close_to(sum_range(t->w, lo, hi), k[3]), "chunk %d: w adds up to %.9g, median W %.9g",
            c, sum_range(t->w, lo, hi), k[3]);
  }
  for (int s = 0; s < MAX_CHUNKS && x->opt[s] >= 0; s++) {
    double opt = 0;
    int params = 0;
    for (int c = 0; c < x->n_chunks; c++)
      if (x->chunk_stage[c] == s) {
        opt += sum_range(t->opt, x->bounds[c], x->bounds[c + 1]);
        params += has_params(m, x->bounds[c], x->bounds[c + 1]);
      }
    CHECK(close_to(opt, params ? x->opt[s] : 0.0), "stage %d: opt adds up to %.9g, median %.9g",
          s, opt, x->opt[s]);
  }
}


static void run_check(const pt_model *m, const char *trace, const char *expected_path) {
  expected x;
  pt_layer_times t;
  char err[1024], want[128];
  read_expected(expected_path, &x);
  if (trace_read_times(trace, m, &t, err, sizeof err) != 0) {
    CHECK(0, "%s", err);
    return;
  }
  check_layers(&t, m);
  check_chunks(&t, m, &x);
  snprintf(want, sizeof want, " (%d steps, %d micro-batches)", x.steps, x.micro_batches);
  CHECK(!strncmp(t.source, "trace ", 6) && strstr(t.source, trace) && strstr(t.source, want),
        "source '%s', want 'trace %s%s'", t.source, trace, want);
  profile_times_free(&t);
}

static void run_refuse(const pt_model *m, const char *trace, const char *text) {
  pt_layer_times t;
  char err[1024] = "";
  int rc = trace_read_times(trace, m, &t, err, sizeof err);
  CHECK(rc == -1 && strstr(err, trace) && strstr(err, text) && !strchr(err, '\n'),
        "trace_read_times(%s) returned %d with '%s', want a line naming it with '%s'", trace, rc,
        err, text);
  CHECK(!t.f && !t.i && !t.w && !t.opt, "a refused trace left arrays behind");
  if (rc == 0) profile_times_free(&t);
}

int main(int argc, char **argv) {
  if (argc < 5 || (strcmp(argv[1], "check") && strcmp(argv[1], "refuse")))
    pt_fatal("usage: test_trace_times check|refuse SPEC TRACE EXPECTED|TEXT [KEY=VALUE ...]");
  pt_spec s;
  pt_model m;
  load_model(argv[2], argv + 5, argc - 5, &s, &m);
  if (!strcmp(argv[1], "check")) run_check(&m, argv[3], argv[4]);
  else run_refuse(&m, argv[3], argv[4]);
  model_free(&m);
  spec_free(&s);
  return test_summary("trace times");
}
