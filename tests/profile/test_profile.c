/* Layer times (profile/): a measurement of a small MLP on the cpu is complete and consistent
 * (every step timed, weights' steps exactly where there are weights, equal shapes sharing one
 * measurement, a 4x larger layer clearly slower), and the cache round-trips it, refuses other
 * keys and reports corrupt files. The cache lives in a mkdtemp directory (PIPETRAIN_CACHE_DIR).
 * About 3 s; measurement budgets are kept small. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "profile/cache.h"
#include "profile/measure.h"
#include "test_util.h"

/* 9 layers, T = 1, B = 128 (the data file is only opened by runs, never here):
 *   0 linear 16->256 (first layer: no input gradient)   1 relu 256   2 linear 256->256
 *   3 relu 256 (= 1)   4 linear 256->256 (= 2)   5 gelu 256   6 linear 256->1024 (4x the FLOPs
 *   of 2)   7 relu 1024   8 linear 1024->4 (last: plus the mse loss) */
static const char *SPEC_FMT =
    "layers:\n"
    "  - linear: {out: 256}\n"
    "  - relu\n"
    "  - linear: {out: 256}\n"
    "  - relu\n"
    "  - linear: {out: 256}\n"
    "  - gelu\n"
    "  - linear: {out: 1024}\n"
    "  - relu\n"
    "  - linear: {out: 4}\n"
    "loss: mse\n"
    "data: {path: %s, format: f32, inputs: 16, targets: 4}\n"
    "train: {micro_batch_size: 128, micro_batches: 2}\n";

typedef struct {
  pt_spec spec;
  pt_model model;
} loaded;

static char g_dir[64], g_data[128], g_text[2048];

static void setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/pt_test_profile_XXXXXX");
  if (!mkdtemp(g_dir)) pt_fatal("mkdtemp failed");
  snprintf(g_data, sizeof g_data, "%s/data.f32", g_dir);
  FILE *f = fopen(g_data, "wb");
  float zero[20] = {0};
  if (!f || fwrite(zero, sizeof zero, 1, f) != 1 || fclose(f) != 0)
    pt_fatal("cannot write %s", g_data);
  snprintf(g_text, sizeof g_text, SPEC_FMT, g_data);
  setenv("PIPETRAIN_CACHE_DIR", g_dir, 1);
}

static void load(loaded *L, const char *override) {
  spec_errors e = {0};
  const char *over[1] = {override};
  if (spec_load_text(g_text, strlen(g_text), "t.yaml", over, override ? 1 : 0, &L->spec, &e) ||
      model_configure(&L->model, &L->spec, &e))
    pt_fatal("test spec does not load: %s", e.msg);
}

static void unload(loaded *L) {
  model_free(&L->model);
  spec_free(&L->spec);
}

static double step_sum(const pt_layer_times *t, int l) { return t->f[l] + t->i[l] + t->w[l]; }

static void check_measured(const pt_layer_times *t, const pt_model *m) {
  CHECK(t->n_layers == m->n_layers, "%d layer times for %d layers", t->n_layers, m->n_layers);
  for (int l = 0; l < t->n_layers; l++) {
    int params = m->layers[l].n_params > 0;
    CHECK(t->f[l] > 0 && t->i[l] > 0, "layer %d: f %g, i %g", l, t->f[l], t->i[l]);
    CHECK(params ? t->w[l] > 0 : t->w[l] == 0, "layer %d (%d params): w %g", l, params, t->w[l]);
    CHECK(params ? t->opt[l] > 0 : t->opt[l] == 0, "layer %d: opt %g", l, t->opt[l]);
  }
  /* one measurement for equal shapes: the same numbers, to the bit */
  CHECK(t->f[2] == t->f[4] && t->i[2] == t->i[4] && t->w[2] == t->w[4] &&
        t->opt[2] == t->opt[4], "layers 2 and 4 differ: f %g/%g", t->f[2], t->f[4]);
  CHECK(t->f[1] == t->f[3] && t->i[1] == t->i[3], "layers 1 and 3 differ");
  /* 4x the FLOPs (and the bytes) of layer 2: expect about 4x; 1.5 leaves room for noise and
   * for a small layer's fixed costs (BLAS threads waking up) */
  double ratio = step_sum(t, 6) / step_sum(t, 2);
  CHECK(ratio > 1.5, "linear 256->1024 takes %.2fx linear 256->256 (want > 1.5)", ratio);
  CHECK(t->p2p_bytes_per_s > 0 && t->p2p_latency_s == PROFILE_P2P_LATENCY_S, "p2p %g B/s, %g s",
        t->p2p_bytes_per_s, t->p2p_latency_s);
  CHECK(!strncmp(t->source, "measured on cpu, ", 17) && strstr(t->source, "7 shapes"),
        "source '%s'", t->source);
  printf("%s; layer 2 %.3g s, layer 6 %.3g s (%.2fx), memcpy/2 %.3g GB/s\n", t->source,
         step_sum(t, 2), step_sum(t, 6), ratio, t->p2p_bytes_per_s / 1e9);
}

static int same_times(const pt_layer_times *a, const pt_layer_times *b) {
  size_t n = sizeof(double) * (size_t)a->n_layers;
  return a->n_layers == b->n_layers && !memcmp(a->f, b->f, n) && !memcmp(a->i, b->i, n) &&
         !memcmp(a->w, b->w, n) && !memcmp(a->opt, b->opt, n) &&
         a->p2p_latency_s == b->p2p_latency_s && a->p2p_bytes_per_s == b->p2p_bytes_per_s;
}

/* Whether the cache directory holds a file whose name contains part. */
static int dir_has(const char *part) {
  DIR *d = opendir(g_dir);
  struct dirent *e;
  int found = 0;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, part)) found = 1;
  if (d) closedir(d);
  return found;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) pt_fatal("cannot write %s", path);
}

/* The saved file with f[0] made negative: valid JSON, this model's key, a bad number. */
static void write_negative_time(const char *path, const pt_layer_times *t, const pt_model *m) {
  pt_layer_times bad;
  profile_times_copy(&bad, t);
  bad.f[0] = -1.0;
  char err[512];
  CHECK(profile_cache_save(&bad, m, path, err, sizeof err) == 0, "save: %s", err);
  profile_times_free(&bad);
}

static void check_corrupt(const char *path, const pt_model *m) {
  pt_layer_times t;
  char err[512] = "";
  CHECK(profile_cache_load(&t, m, path, err, sizeof err) == -1, "a corrupt file loaded");
  CHECK(strstr(err, path) && strstr(err, "delete"), "error '%s' lacks the path or the advice",
        err);
  CHECK(t.f == NULL && t.n_layers == 0, "t not left empty");
}

static void check_cache(const pt_layer_times *measured, loaded *L) {
  char path[4400], err[512] = "";
  pt_layer_times back;
  CHECK(profile_cache_path(&L->model, path, sizeof path) == 0, "no cache path");
  CHECK(!strncmp(path, g_dir, strlen(g_dir)) && strstr(path, "/layer-times-"), "path %s", path);
  CHECK(profile_cache_load(&back, &L->model, path, err, sizeof err) == 0, "absent file: %s", err);
  CHECK(profile_cache_save(measured, &L->model, path, err, sizeof err) == 0, "save: %s", err);
  CHECK(!dir_has(".tmp"), "the save left a temporary file");
  CHECK(profile_cache_load(&back, &L->model, path, err, sizeof err) == 1, "load: %s", err);
  CHECK(back.f && same_times(&back, measured), "the loaded times differ from the saved ones");
  CHECK(back.f && !strncmp(back.source, "cache ", 6), "source '%s'", back.source);
  profile_times_free(&back);
  /* profile_times_get finds the file without measuring */
  CHECK(profile_times_get(&back, &L->model, 0.1, 1, err, sizeof err) == 0, "get: %s", err);
  CHECK(back.f && same_times(&back, measured) && strstr(back.source, path), "get: '%s'",
        back.source);
  profile_times_free(&back);

  /* another micro-batch size: another key, so the file is stale for that model */
  loaded other;
  load(&other, "train.micro_batch_size=64");
  CHECK(profile_times_key(&other.model) != profile_times_key(&L->model), "same key for B=64");
  CHECK(profile_cache_load(&back, &other.model, path, err, sizeof err) == 0,
        "a file for B=128 loaded for B=64");
  /* measured once, then found in the cache */
  char other_path[4400];
  CHECK(profile_cache_path(&other.model, other_path, sizeof other_path) == 0, "no path");
  CHECK(profile_times_get(&back, &other.model, 0.2, 1, err, sizeof err) == 0, "get: %s", err);
  CHECK(!strncmp(back.source, "measured", 8) && !strstr(back.source, "not cached"), "'%s'",
        back.source);
  profile_times_free(&back);
  CHECK(profile_times_get(&back, &other.model, 0.2, 1, err, sizeof err) == 0, "get: %s", err);
  CHECK(!strncmp(back.source, "cache ", 6), "second get: '%s'", back.source);
  profile_times_free(&back);
  unlink(other_path);
  unload(&other);

  write_negative_time(path, measured, &L->model);
  check_corrupt(path, &L->model);
  write_text(path, "{\"version\": 1, \"key\": ");
  check_corrupt(path, &L->model);
  /* profile_times_get measures again (warning about the file) and replaces it */
  CHECK(profile_times_get(&back, &L->model, 0.2, 1, err, sizeof err) == 0, "get: %s", err);
  CHECK(!strncmp(back.source, "measured", 8), "over a corrupt file: '%s'", back.source);
  profile_times_free(&back);
  CHECK(profile_cache_load(&back, &L->model, path, err, sizeof err) == 1, "not replaced: %s", err);
  profile_times_free(&back);
  unlink(path);
}

static void check_flops(const pt_model *m) {
  pt_layer_times t, c;
  profile_times_from_flops(&t, m, 100.0);
  /* layer 2: 2 * 128 * 256 * 256 forward FLOPs (+ bias: the default estimate counts 2 per
   * parameter and token) at 1e11 FLOP/s */
  double want = 2.0 * 128 * (256 * 256 + 256) / 1e11;
  CHECK(t.f[2] > 0.99 * want && t.f[2] < 1.01 * want, "flops f[2] %g, want %g", t.f[2], want);
  CHECK(t.w[1] == 0 && t.w[2] > 0 && t.i[2] == t.w[2], "flops i/w split");
  profile_times_copy(&c, &t);
  CHECK(same_times(&c, &t) && !strcmp(c.source, t.source), "copy differs");
  profile_times_free(&c);
  profile_times_free(&t);
}

int main(void) {
  setup();
  loaded L;
  load(&L, NULL);
  check_flops(&L.model);
  pt_layer_times t;
  char err[512] = "";
  /* a timing check on a shared machine. One BLAS thread: with two on two busy cores a product
   * waits a whole time slice for its preempted half (10 ms for layer 2's 0.3 ms, seen in CI),
   * which no median hides; the test also runs alone (RUN_SERIAL), and a burst of load from
   * elsewhere can still squeeze one measurement, so up to two more are taken before the ratio
   * counts as wrong */
  kernels_cpu_set_threads(1);
  CHECK(profile_measure(&t, &L.model, 1.0, err, sizeof err) == 0, "measure: %s", err);
  for (int again = 0; t.f && again < 2 && step_sum(&t, 6) <= 1.5 * step_sum(&t, 2); again++) {
    profile_times_free(&t);
    CHECK(profile_measure(&t, &L.model, 1.0, err, sizeof err) == 0, "measure: %s", err);
  }
  if (t.f) {
    check_measured(&t, &L.model);
    check_cache(&t, &L);
  }
  profile_times_free(&t);
  unload(&L);
  unlink(g_data);
  CHECK(rmdir(g_dir) == 0, "%s not empty at the end", g_dir);
  return test_summary("profile");
}
