/* The layer-times cache file (cache.h): reading it back with every number checked, and
 * writing it atomically. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "profile/cache.h"

#define CACHE_MAX_BYTES (64u << 20)

/* The whole file as a string: 1 read, 0 absent, -1 with err. */
static int read_text(const char *path, char **out, char *err, size_t errsz) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f && errno == ENOENT) return 0;
  if (!f) return pt_errorf(err, errsz, "%s: cannot read the layer-times cache: %s; delete it",
                           path, strerror(errno));
  size_t cap = 4096, len = 0, got;
  char *buf = pt_calloc(cap + 1, 1);
  while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap && cap < CACHE_MAX_BYTES) {
      char *bigger = realloc(buf, 2 * cap + 1);
      if (!bigger) pt_fatal("out of memory reading %s", path);
      buf = bigger, cap *= 2;
    }
    if (len == cap) break; /* at the size limit: the parse reports the cut */
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    return pt_errorf(err, errsz, "%s: cannot read the layer-times cache; delete it", path);
  }
  buf[len] = '\0';
  *out = buf;
  return 1;
}

static int corrupt(const char *path, const char *why, char *err, size_t errsz) {
  return pt_errorf(err, errsz, "%s: corrupt layer-times cache (%s); delete the file, the "
                   "times are measured again", path, why);
}

static int finite_nonneg(const cJSON *x) {
  return cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble >= 0;
}

static int not_cache_file(const char **why, const char *what) {
  *why = what;
  return -1;
}

/* 1 when the file is this model's, 0 when it is another's (stale), -1 when it is not a cache
 * file at all (why set). */
static int check_header(const cJSON *root, const pt_model *m, const char **why) {
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(root, "key");
  const cJSON *machine = cJSON_GetObjectItemCaseSensitive(root, "machine");
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "n_layers");
  if (!cJSON_IsObject(root)) return not_cache_file(why, "not a JSON object");
  if (!cJSON_IsNumber(version)) return not_cache_file(why, "no \"version\" number");
  if (version->valuedouble != PROFILE_CACHE_VERSION) return 0; /* another program's format */
  if (!cJSON_IsString(key) || !cJSON_IsString(machine) || !cJSON_IsNumber(n))
    return not_cache_file(why, "\"key\", \"machine\" or \"n_layers\" missing");
  char ours[32], here[64];
  snprintf(ours, sizeof ours, "%016llx", (unsigned long long)profile_times_key(m));
  profile_machine_id(here, sizeof here);
  return !strcmp(key->valuestring, ours) && !strcmp(machine->valuestring, here) &&
         n->valuedouble == m->n_layers;
}

/* out[0..n) from the array `name`: n finite numbers >= 0, or -1. */
static int read_array(const cJSON *root, const char *name, double *out, int n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, name), *x;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return -1;
  int k = 0;
  cJSON_ArrayForEach(x, a) {
    if (!finite_nonneg(x)) return -1;
    out[k++] = x->valuedouble;
  }
  return 0;
}

static int read_times(const cJSON *root, pt_layer_times *t, const char *path, char *err,
                      size_t errsz) {
  static const char *const arrays[] = {"f", "i", "w", "opt"};
  double *dst[] = {t->f, t->i, t->w, t->opt};
  char why[96];
  for (int a = 0; a < 4; a++)
    if (read_array(root, arrays[a], dst[a], t->n_layers) != 0) {
      snprintf(why, sizeof why, "\"%s\" is not a list of %d finite numbers >= 0", arrays[a],
               t->n_layers);
      return corrupt(path, why, err, errsz);
    }
  const cJSON *lat = cJSON_GetObjectItemCaseSensitive(root, "p2p_latency_s");
  const cJSON *bw = cJSON_GetObjectItemCaseSensitive(root, "p2p_bytes_per_s");
  const cJSON *copy = cJSON_GetObjectItemCaseSensitive(root, "copy_bytes_per_s");
  if (!finite_nonneg(lat) || !finite_nonneg(bw) || bw->valuedouble == 0 ||
      !finite_nonneg(copy) || copy->valuedouble == 0)
    return corrupt(path, "p2p_latency_s, p2p_bytes_per_s or copy_bytes_per_s missing or out of "
                   "range", err, errsz);
  if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "source")))
    return corrupt(path, "no \"source\" string", err, errsz);
  t->p2p_latency_s = lat->valuedouble;
  t->p2p_bytes_per_s = bw->valuedouble;
  t->copy_bytes_per_s = copy->valuedouble;
  snprintf(t->source, sizeof t->source, "cache %s", path);
  return 1;
}

int profile_cache_load(pt_layer_times *t, const pt_model *m, const char *path, char *err,
                       size_t errsz) {
  memset(t, 0, sizeof *t);
  char *text;
  int rc = read_text(path, &text, err, errsz);
  if (rc <= 0) return rc;
  cJSON *root = cJSON_Parse(text);
  free(text);
  const char *why = "not JSON";
  rc = root ? check_header(root, m, &why) : -1;
  if (rc < 0) {
    cJSON_Delete(root);
    return corrupt(path, why, err, errsz);
  }
  if (rc == 1) {
    profile_times_alloc(t, m->n_layers);
    rc = read_times(root, t, path, err, errsz);
    if (rc != 1) profile_times_free(t);
  }
  cJSON_Delete(root);
  return rc;
}

/* %.17g, not cJSON's numbers: those may drop the last bits, and a reload must give the
 * measured doubles exactly. */
static cJSON *exact_number(double x) {
  char text[32];
  snprintf(text, sizeof text, "%.17g", x);
  return cJSON_CreateRaw(text);
}

static cJSON *exact_array(const double *x, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; k < n; k++) cJSON_AddItemToArray(a, exact_number(x[k]));
  return a;
}

static cJSON *times_json(const pt_layer_times *t, const pt_model *m) {
  char key[32], machine[64];
  snprintf(key, sizeof key, "%016llx", (unsigned long long)profile_times_key(m));
  profile_machine_id(machine, sizeof machine);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "version", PROFILE_CACHE_VERSION);
  cJSON_AddStringToObject(root, "key", key);
  cJSON_AddStringToObject(root, "machine", machine);
  cJSON_AddNumberToObject(root, "n_layers", t->n_layers);
  cJSON_AddItemToObject(root, "f", exact_array(t->f, t->n_layers));
  cJSON_AddItemToObject(root, "i", exact_array(t->i, t->n_layers));
  cJSON_AddItemToObject(root, "w", exact_array(t->w, t->n_layers));
  cJSON_AddItemToObject(root, "opt", exact_array(t->opt, t->n_layers));
  cJSON_AddItemToObject(root, "p2p_latency_s", exact_number(t->p2p_latency_s));
  cJSON_AddItemToObject(root, "p2p_bytes_per_s", exact_number(t->p2p_bytes_per_s));
  cJSON_AddItemToObject(root, "copy_bytes_per_s", exact_number(t->copy_bytes_per_s));
  cJSON_AddStringToObject(root, "source", t->source);
  return root;
}

/* PATH.tmp.<pid>, fsync, rename: readers see the old file or the new one. */
static int write_atomic(const char *path, const char *text, char *err, size_t errsz) {
  char tmp[4400];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
    return pt_errorf(err, errsz, "%s: path too long", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t n = strlen(text);
  int ok = fd >= 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
  if (fd >= 0 && close(fd) != 0) ok = 0;
  if (ok && rename(tmp, path) == 0) return 0;
  int saved = errno;
  if (fd >= 0) unlink(tmp);
  return pt_errorf(err, errsz, "%s: cannot write the layer-times cache: %s", path,
                   strerror(saved));
}

int profile_cache_save(const pt_layer_times *t, const pt_model *m, const char *path, char *err,
                       size_t errsz) {
  if (t->n_layers != m->n_layers)
    return pt_errorf(err, errsz, "%s: not written: %d layer times for a model of %d layers",
                     path, t->n_layers, m->n_layers);
  for (int k = 0; k < t->n_layers; k++)
    if (!isfinite(t->f[k] + t->i[k] + t->w[k] + t->opt[k]))
      return pt_errorf(err, errsz, "%s: not written: a layer time is not a finite number", path);
  cJSON *root = times_json(t, m);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) pt_fatal("out of memory writing %s", path);
  int rc = write_atomic(path, text, err, errsz);
  cJSON_free(text);
  return rc;
}
