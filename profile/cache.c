/* Where layer times are cached and under which key (cache.h), and the cache-or-measure entry
 * point. The file format is cache_file.c's. */
#include "profile/cache.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "kernels/cpu/blas_kernel.h"
#include "kernels/kernels.h"
#include "profile/measure.h"

#define FNV_OFFSET 0xcbf29ce484222325ull

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t k = 0; k < n; k++) h = (h ^ p[k]) * 0x100000001b3ull;
  return h;
}

static uint64_t hash_layer(uint64_t h, const pt_layer *L) {
  int dims[4] = {L->in_dim, L->out_dim, L->in_tokens, L->n_params};
  h = fnv(h, L->type->name, strlen(L->type->name) + 1);
  h = fnv(h, dims, sizeof dims);
  h = fnv(h, L->set.i, sizeof L->set.i);
  h = fnv(h, L->set.f, sizeof L->set.f);
  for (int p = 0; p < L->n_params; p++) {
    h = fnv(h, &L->params[p].ndim, sizeof L->params[p].ndim);
    h = fnv(h, L->params[p].shape, sizeof(int64_t) * (size_t)L->params[p].ndim);
  }
  return h;
}

uint64_t profile_times_key(const pt_model *m) {
  const pt_spec *s = m->spec;
  int64_t run[7] = {PROFILE_CACHE_VERSION, m->n_layers, s->train.micro_batch_size, s->seq_len,
                    m->loss, device_resolve(s->pipeline.device), s->train.optimizer};
  uint64_t h = fnv(FNV_OFFSET, run, sizeof run);
  int threads = kernels_cpu_threads();
  h = fnv(h, &threads, sizeof threads);
  int precision = s->train.precision; /* fp32 keeps the keys it always had */
  if (precision != SPEC_PRECISION_FP32) h = fnv(h, &precision, sizeof precision);
  const char *products = device_cpu_bf16_products(s->pipeline.device, s->train.precision);
  if (products) h = fnv(h, products, strlen(products)); /* oneDNN and emulated time apart */
  for (int l = 0; l < m->n_layers; l++) h = hash_layer(h, &m->layers[l]);
  return h;
}

/* The first "model name" line of /proc/cpuinfo (x86; "" where there is none). */
static void cpu_model(char *out, size_t outsz) {
  out[0] = '\0';
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10)) {
      snprintf(out, outsz, "%s", line);
      break;
    }
  fclose(f);
}

void profile_machine_id(char *out, size_t outsz) {
  char host[64] = "host", cpu[512];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
  host[sizeof host - 1] = '\0';
  host[strcspn(host, ".")] = '\0'; /* the short name */
  for (char *c = host; *c; c++) /* a file name on any file system */
    if (!isalnum((unsigned char)*c) && *c != '-') *c = '_';
  cpu_model(cpu, sizeof cpu);
  uint64_t h = fnv(FNV_OFFSET, cpu, strlen(cpu));
  const char *gpu = device_gpu_name(device_current());
  h = fnv(h, gpu, strlen(gpu));
  /* times measured under a mis-detected BLAS kernel are several times too long */
  const char *blas = blas_kernel_name();
  h = fnv(h, blas, strlen(blas));
  snprintf(out, outsz, "%.32s-%08x", host[0] ? host : "host", (unsigned)(h ^ (h >> 32)));
}

/* mkdir -p: every missing component of path, in order. */
static int make_dirs(char *path) {
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    int ok = mkdir(path, 0777) == 0 || errno == EEXIST;
    *p = c;
    if (!ok) return -1;
    if (c == '\0') return 0;
  }
}

static int cache_dir(char *out, size_t outsz) {
  const char *v;
  int n;
  if ((v = getenv("PIPETRAIN_CACHE_DIR")) && *v) n = snprintf(out, outsz, "%s", v);
  else if ((v = getenv("XDG_CACHE_HOME")) && *v) n = snprintf(out, outsz, "%s/pipetrain", v);
  else if ((v = getenv("HOME")) && *v) n = snprintf(out, outsz, "%s/.cache/pipetrain", v);
  else return -1;
  if (n < 0 || (size_t)n >= outsz) return -1;
  return make_dirs(out);
}

int profile_cache_path(const pt_model *m, char *out, size_t outsz) {
  char dir[4096], machine[64];
  if (cache_dir(dir, sizeof dir) != 0) return -1;
  profile_machine_id(machine, sizeof machine);
  int n = snprintf(out, outsz, "%s/layer-times-%s-%016llx.json", dir, machine,
                   (unsigned long long)profile_times_key(m));
  return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

/* Says in the source why these times were not saved (as much of it as fits). */
static void note_not_cached(pt_layer_times *t, const char *why) {
  size_t used = strlen(t->source);
  snprintf(t->source + used, sizeof t->source - used, "; not cached: %s", why);
}

int profile_times_get(pt_layer_times *t, const pt_model *m, double budget_s, int use_cache,
                      char *err, size_t errsz) {
  char path[4400], why[512] = "";
  int have_path = use_cache && profile_cache_path(m, path, sizeof path) == 0;
  if (have_path) {
    int rc = profile_cache_load(t, m, path, why, sizeof why);
    if (rc == 1) return 0;
    if (rc < 0) pt_warn("%s", why); /* measured again below, and the file replaced */
  }
  if (profile_measure(t, m, budget_s, err, errsz) != 0) return -1;
  if (!use_cache) return 0;
  if (!have_path)
    note_not_cached(t, "no cache directory (set PIPETRAIN_CACHE_DIR)");
  else if (profile_cache_save(t, m, path, why, sizeof why) != 0)
    note_not_cached(t, why);
  return 0;
}
