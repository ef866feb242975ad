/* Reading checkpoints under any layout (see checkpoint.h). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "checkpoint/safetensors.h"

static char *read_text(const char *path, char *err, size_t errsz) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errsz, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 && n < (64L << 20) ? malloc((size_t)n + 1) : NULL;
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    snprintf(err, errsz, "%s: cannot read the manifest (or it is over 64 MiB)", path);
    free(buf);
    fclose(f);
    return NULL;
  }
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* A directory with a manifest, or the newest step-* under it that has one. */
static int resolve_dir(const char *path, char *out, size_t outsz, char *err, size_t errsz) {
  char m[4400];
  snprintf(m, sizeof m, "%s/manifest.json", path);
  if (exists(m)) return snprintf(out, outsz, "%s", path), 0;
  snprintf(m, sizeof m, "%s.previous/manifest.json", path); /* a save into path was cut short */
  if (exists(m)) return snprintf(out, outsz, "%s.previous", path), 0;
  DIR *d = opendir(path);
  if (!d) {
    snprintf(err, errsz, "%s: no such checkpoint: %s", path, strerror(errno));
    return -1;
  }
  /* the newest step with a manifest; a step-N.previous (a save over step-N was cut short)
   * stands in for step-N, which wins when both are complete */
  long long best = -1, step;
  int best_previous = 0, previous;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!checkpoint_parse_step_dir(e->d_name, &step, &previous) || step < best) continue;
    if (step == best && (previous || !best_previous)) continue;
    snprintf(m, sizeof m, "%s/%s/manifest.json", path, e->d_name);
    if (exists(m)) best = step, best_previous = previous;
  }
  closedir(d);
  if (best < 0) {
    snprintf(err, errsz, "%s: not a checkpoint: no manifest.json (an interrupted save leaves no "
             "manifest) and no step-N checkpoint inside", path);
    return -1;
  }
  snprintf(out, outsz, "%s/step-%08lld%s", path, best, best_previous ? ".previous" : "");
  return 0;
}

static int manifest_fail(char *err, size_t errsz, const pt_checkpoint *c, const char *what) {
  snprintf(err, errsz, "%s/manifest.json: %s", c->dir, what);
  return -1;
}

/* A step count: a JSON number in [0, 2^53], so its conversion to int64_t is defined (a huge
 * value such as 1e999 parses as inf). */
static int json_count(const cJSON *n) {
  return cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble <= 9007199254740992.0;
}

static int check_manifest(pt_checkpoint *c, char *err, size_t errsz) {
  cJSON *o = c->manifest;
  cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
  cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
  cJSON *opt = cJSON_GetObjectItemCaseSensitive(o, "optimizer");
  cJSON *name = cJSON_GetObjectItemCaseSensitive(opt, "name");
  cJSON *t = cJSON_GetObjectItemCaseSensitive(opt, "t");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) != 0)
    return manifest_fail(err, errsz, c, "not a pipetrain checkpoint manifest (format '" CKPT_FORMAT "')");
  if (!json_count(step) || !cJSON_IsString(name) || !json_count(t))
    return manifest_fail(err, errsz, c, "step or optimizer missing or malformed");
  if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "tensors")) ||
      !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "files")))
    return manifest_fail(err, errsz, c, "tensors or files missing");
  c->step = (int64_t)step->valuedouble;
  c->opt_t = (int64_t)t->valuedouble;
  snprintf(c->optimizer, sizeof c->optimizer, "%s", name->valuestring);
  return 0;
}

/* The manifest's checksum (CKPT_MANIFEST_CRC). A manifest written before it existed has none and
 * still loads, with a notice: refusing would strand every older checkpoint, and its step and t
 * are still cross-checked against the optimizer files' CRC-protected metadata on resume. */
static int check_seal(pt_checkpoint *c, char *err, size_t errsz) {
  cJSON *seal = cJSON_DetachItemFromObjectCaseSensitive(c->manifest, CKPT_MANIFEST_CRC);
  if (!seal) {
    pt_notice("%s/manifest.json has no " CKPT_MANIFEST_CRC " (written by an older pipetrain): "
              "its values are not checksummed; a save with this version adds one", c->dir);
    return 0;
  }
  double want = cJSON_GetNumberValue(seal);
  cJSON_Delete(seal);
  uint32_t got = checkpoint_manifest_crc(c->manifest);
  if (want == (double)got) return 0;
  snprintf(err, errsz, "%s/manifest.json: damaged: its content has CRC-32 %08x, its "
           CKPT_MANIFEST_CRC " says %.0f (the file changed after the save): restore it from a "
           "copy or load an earlier checkpoint", c->dir, got, want);
  return -1;
}

static int open_checkpoint(pt_checkpoint *c, const char *path, char *err, size_t errsz) {
  memset(c, 0, sizeof *c);
  if (resolve_dir(path, c->dir, sizeof c->dir, err, errsz) != 0) return -1;
  char mpath[4400];
  snprintf(mpath, sizeof mpath, "%s/manifest.json", c->dir);
  char *text = read_text(mpath, err, errsz);
  if (!text) return -1;
  c->manifest = cJSON_Parse(text);
  free(text);
  if (!c->manifest) return manifest_fail(err, errsz, c, "is not valid JSON (damaged?)");
  if (check_seal(c, err, errsz) != 0 || check_manifest(c, err, errsz) != 0) {
    checkpoint_close(c);
    return -1;
  }
  return 0;
}

/* The reason is formatted in full, then shortened: a path of several KB would otherwise push
 * the reason out of err. */
int checkpoint_open(pt_checkpoint *c, const char *path, char *err, size_t errsz) {
  size_t bigsz = strlen(path) * 3 + 8192;
  char *big = pt_calloc(bigsz, 1);
  int rc = open_checkpoint(c, path, big, bigsz);
  if (rc != 0) pt_shorten_words(err, errsz, big);
  free(big);
  return rc;
}

void checkpoint_close(pt_checkpoint *c) {
  cJSON_Delete(c->manifest);
  c->manifest = NULL;
}

static cJSON *spec_obj(const pt_checkpoint *c) {
  return cJSON_GetObjectItemCaseSensitive(c->manifest, "spec");
}

const char *checkpoint_spec_text(const pt_checkpoint *c) {
  cJSON *t = cJSON_GetObjectItemCaseSensitive(spec_obj(c), "text");
  return cJSON_IsString(t) ? t->valuestring : NULL;
}

const char *checkpoint_spec_origin(const pt_checkpoint *c) {
  cJSON *t = cJSON_GetObjectItemCaseSensitive(spec_obj(c), "origin");
  return cJSON_IsString(t) ? t->valuestring : "checkpoint spec";
}

int checkpoint_spec_overrides(const pt_checkpoint *c, const char **out, int max) {
  cJSON *a = cJSON_GetObjectItemCaseSensitive(spec_obj(c), "overrides"), *it;
  int n = 0;
  cJSON_ArrayForEach(it, a) if (cJSON_IsString(it) && n < max) out[n++] = it->valuestring;
  return n;
}

/* Open files, each CRC-checked against the manifest once. */
typedef struct {
  char name[64];
  st_file f;
} open_file;

typedef struct {
  pt_checkpoint *c;
  open_file files[256];
  int n;
} file_cache;

/* The CRC-32 the manifest records for file `name`: 0, 1 when the file is not listed, -1 when its
 * crc32 is not an integer in [0, 2^32) (converting such a double to uint32_t would be undefined). */
static int file_record(const pt_checkpoint *c, const char *name, uint32_t *crc) {
  cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(c->manifest, "files")) {
    cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
    if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0) continue;
    double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(it, "crc32"));
    if (!(v >= 0 && v <= 4294967295.0) || v != (double)(uint32_t)v) return -1; /* NaN fails too */
    *crc = (uint32_t)v;
    return 0;
  }
  return 1;
}

/* An optimizer file records the optimizer's step count t in its CRC-checked metadata "step":
 * it must agree with the manifest's optimizer.t (a changed t would change AdamW's bias
 * correction without a word). */
static int check_optim_step(const pt_checkpoint *c, const char *name, const st_file *f,
                            const char *path, char *err, size_t errsz) {
  const char *step = strncmp(name, "optim", 5) ? NULL : st_meta(f, "step");
  if (!step) return 0;
  char *end;
  errno = 0;
  long long t = strtoll(step, &end, 10);
  if (!errno && end != step && !*end && t == c->opt_t) return 0;
  snprintf(err, errsz, "%s: its metadata says optimizer step %s, %s/manifest.json says "
           "optimizer.t %lld: one of them is damaged; restore the checkpoint from a copy or load "
           "an earlier one", path, step, c->dir, (long long)c->opt_t);
  return -1;
}

static st_file *cache_get(file_cache *fc, const char *name, char *err, size_t errsz) {
  for (int i = 0; i < fc->n; i++)
    if (!strcmp(fc->files[i].name, name)) return &fc->files[i].f;
  uint32_t want_crc = 0;
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", fc->c->dir, name);
  int listed = strchr(name, '/') ? 1 : file_record(fc->c, name, &want_crc);
  if (listed > 0) {
    snprintf(err, errsz, "%s/manifest.json: file '%s' is not listed in files", fc->c->dir, name);
    return NULL;
  }
  if (listed < 0) {
    snprintf(err, errsz, "%s/manifest.json: file '%s' has no valid crc32 (damaged manifest?)",
             fc->c->dir, name);
    return NULL;
  }
  if (fc->n == 256) {
    snprintf(err, errsz, "%s/manifest.json: tensors are spread over more than 256 files",
             fc->c->dir);
    return NULL;
  }
  uint32_t crc;
  if (st_file_crc32(path, &crc, err, errsz) != 0) return NULL;
  if (crc != want_crc) {
    snprintf(err, errsz, "%s: damaged: CRC-32 %08x, the manifest recorded %08x (the file changed "
             "after the checkpoint was written)", path, crc, want_crc);
    return NULL;
  }
  open_file *o = &fc->files[fc->n];
  if (st_open(&o->f, path, err, errsz) != 0) return NULL;
  if (check_optim_step(fc->c, name, &o->f, path, err, errsz) != 0) {
    st_close(&o->f);
    return NULL;
  }
  snprintf(o->name, sizeof o->name, "%s", name);
  fc->n++;
  return &o->f;
}

static void cache_close(file_cache *fc) {
  for (int i = 0; i < fc->n; i++) st_close(&fc->files[i].f);
}

static int64_t model_unique_tensors(const pt_model *m) {
  int64_t n = 0;
  for (int li = 0; li < m->n_layers; li++)
    n += m->layers[li].n_params - (model_tie_owner(m, li) >= 0 && m->layers[li].n_params > 0);
  return n;
}

static int check_entry(const pt_checkpoint *c, const char *key, const pt_param_desc *d,
                       cJSON *entry, char *err, size_t errsz) {
  cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape"), *it;
  int k = 0, same = cJSON_IsArray(shape) && cJSON_GetArraySize(shape) == d->ndim;
  cJSON_ArrayForEach(it, shape) same &= k < d->ndim && cJSON_GetNumberValue(it) == d->shape[k], k++;
  if (same && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(entry, "file"))) return 0;
  char want[96] = "";
  for (int i = 0; i < d->ndim; i++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "",
             (long long)d->shape[i]);
  snprintf(err, errsz, "%s/manifest.json: tensor '%s' has another shape than this spec's [%s]: "
           "the checkpoint was written for a different model", c->dir, key, want);
  return -1;
}

/* Reads one tensor (name in file `file`) of shape d into dst. */
static int read_tensor(file_cache *fc, const char *file, const char *name, const pt_param_desc *d,
                       float *dst, char *err, size_t errsz) {
  st_file *f = cache_get(fc, file, err, errsz);
  if (!f) return -1;
  const st_tensor *t = st_find(f, name);
  if (!t) {
    snprintf(err, errsz, "%s/%s: tensor '%s' is missing", fc->c->dir, file, name);
    return -1;
  }
  return st_read_f32(f, t, d->ndim, d->shape, dst, err, errsz);
}

static int load_optimizer_tensor(file_cache *fc, const char *model_file, const char *key,
                                 const pt_param_desc *d, const pt_optimizer *o, int64_t off,
                                 char *err, size_t errsz) {
  char file[64], name[ST_NAME_MAX + 32];
  const char *dash = strchr(model_file, '-');
  snprintf(file, sizeof file, "optim%s", dash ? dash : "");
  int adam = o->host_v != NULL;
  snprintf(name, sizeof name, "%s.%s", key, adam ? "exp_avg" : "momentum_buffer");
  if (read_tensor(fc, file, name, d, o->host_m + off, err, errsz) != 0) return -1;
  snprintf(name, sizeof name, "%s.exp_avg_sq", key);
  return adam ? read_tensor(fc, file, name, d, o->host_v + off, err, errsz) : 0;
}

static int check_model(pt_checkpoint *c, const pt_model *m, const pt_optimizer *o, char *err,
                       size_t errsz) {
  int64_t have = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c->manifest, "tensors"));
  if (have != model_unique_tensors(m)) {
    snprintf(err, errsz, "%s/manifest.json: the checkpoint holds %lld tensors, this spec's model "
             "%lld: it was written for a different model", c->dir, (long long)have,
             (long long)model_unique_tensors(m));
    return -1;
  }
  if (o && strcmp(c->optimizer, spec_optimizer_names[m->spec->train.optimizer]) != 0) {
    snprintf(err, errsz, "%s: optimizer state is %s but the spec trains with %s; set "
             "train.optimizer.name: %s to resume", c->dir, c->optimizer,
             spec_optimizer_names[m->spec->train.optimizer], c->optimizer);
    return -1;
  }
  return 0;
}

int checkpoint_load(pt_checkpoint *c, pt_model *m, pt_optimizer *o, char *err, size_t errsz) {
  if (check_model(c, m, o, err, errsz) != 0) return -1;
  cJSON *tensors = cJSON_GetObjectItemCaseSensitive(c->manifest, "tensors");
  file_cache *fc = pt_calloc(1, sizeof *fc);
  fc->c = c;
  int rc = 0;
  for (int i = 0; i < m->n_tensors && rc == 0; i++) {
    const pt_tensor *t = &m->tensors[i];
    const pt_param_desc *d = &m->layers[t->layer].params[t->param];
    char key[ST_NAME_MAX];
    model_tensor_key(m, i, key, sizeof key);
    cJSON *entry = cJSON_GetObjectItemCaseSensitive(tensors, key);
    if (!entry) {
      snprintf(err, errsz, "%s/manifest.json: no tensor '%s': the checkpoint was written for a "
               "different model", c->dir, key);
      rc = -1;
      break;
    }
    rc = check_entry(c, key, d, entry, err, errsz);
    const char *file = rc == 0 ? cJSON_GetObjectItemCaseSensitive(entry, "file")->valuestring : "";
    if (rc == 0) rc = read_tensor(fc, file, key, d, m->host_params + t->offset, err, errsz);
    if (rc == 0 && o) rc = load_optimizer_tensor(fc, file, key, d, o, t->offset, err, errsz);
  }
  if (rc == 0 && o) o->t = c->opt_t;
  cache_close(fc);
  free(fc);
  return rc;
}
