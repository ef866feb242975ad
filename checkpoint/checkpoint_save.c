/* Writing checkpoints: per-stage safetensors files, then the manifest (see checkpoint.h). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "checkpoint/safetensors.h"

int checkpoint_make_dir(const char *dir, char *err, size_t errsz) {
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  for (char *p = path + 1;; p++) { /* mkdir -p */
    char c = *p;
    if (c != '/' && c != '\0') continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      snprintf(err, errsz, "%s: cannot create the directory: %s", path, strerror(errno));
      return -1;
    }
    *p = c;
    if (c == '\0') break;
  }
  return 0;
}

void checkpoint_step_dir(const char *root, int64_t step, char *out, size_t outsz) {
  snprintf(out, outsz, "%s/step-%08lld", root, (long long)step);
}

/* The tensors of layers [first, end) this model stores itself (tied copies excluded). */
static int stage_tensors(const pt_model *m, int first, int end, int *idx) {
  int n = 0;
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    if (t->layer >= first && t->layer < end && !t->tied_copy) idx[n++] = i;
  }
  return n;
}

static void fill_entry(const pt_model *m, const pt_tensor *t, const float *base, st_entry *e) {
  const pt_param_desc *d = &m->layers[t->layer].params[t->param];
  e->data = base + t->offset;
  e->ndim = d->ndim;
  for (int k = 0; k < d->ndim; k++) e->shape[k] = d->shape[k];
}

static int write_optim(const char *path, const pt_model *m, const pt_optimizer *o, const int *idx,
                       int n, uint32_t *crc, char *err, size_t errsz) {
  int adam = o->host_v != NULL;
  st_entry *e = pt_calloc((size_t)(2 * n + 1), sizeof *e);
  char (*names)[ST_NAME_MAX + 32] = pt_calloc((size_t)(2 * n + 1), ST_NAME_MAX + 32);
  int k = 0;
  for (int i = 0; i < n; i++) {
    const pt_tensor *t = &m->tensors[idx[i]];
    snprintf(names[k], sizeof names[k], "%s.%s", t->name, adam ? "exp_avg" : "momentum_buffer");
    e[k].name = names[k];
    fill_entry(m, t, o->host_m, &e[k++]);
    if (!adam) continue;
    snprintf(names[k], sizeof names[k], "%s.exp_avg_sq", t->name);
    e[k].name = names[k];
    fill_entry(m, t, o->host_v, &e[k++]);
  }
  char step[32];
  snprintf(step, sizeof step, "%lld", (long long)o->t);
  const char *keys[2] = {"format", "step"}, *vals[2] = {CKPT_FORMAT, step};
  int rc = st_write(path, e, k, keys, vals, 2, crc, err, errsz);
  free(e);
  free(names);
  return rc;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

int checkpoint_write_stage(const char *dir, const pt_model *m, const pt_optimizer *o, int chunk,
                           int first, int end, ckpt_stage_files *out, char *err, size_t errsz) {
  int *idx = pt_calloc((size_t)m->n_tensors + 1, sizeof(int)), n = stage_tensors(m, first, end, idx);
  st_entry *e = pt_calloc((size_t)n + 1, sizeof *e);
  for (int i = 0; i < n; i++) {
    e[i].name = m->tensors[idx[i]].name;
    fill_entry(m, &m->tensors[idx[i]], m->host_params, &e[i]);
  }
  memset(out, 0, sizeof *out);
  snprintf(out->model_file, sizeof out->model_file, "model-s%03d.safetensors", chunk);
  snprintf(out->optim_file, sizeof out->optim_file, "optim-s%03d.safetensors", chunk);
  char path[4200];
  const char *keys[1] = {"format"}, *vals[1] = {CKPT_FORMAT};
  snprintf(path, sizeof path, "%s/%s", dir, out->model_file);
  int rc = st_write(path, e, n, keys, vals, 1, &out->model_crc, err, errsz);
  out->model_bytes = file_size(path);
  if (rc == 0 && o) {
    snprintf(path, sizeof path, "%s/%s", dir, out->optim_file);
    rc = write_optim(path, m, o, idx, n, &out->optim_crc, err, errsz);
    out->optim_bytes = file_size(path);
  }
  if (!o) out->optim_file[0] = '\0';
  free(idx);
  free(e);
  return rc;
}

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* path.tmp.<pid>, fsync, rename, fsync of the directory: path is the old file or the new one. */
static int write_text_atomic(const char *dir, const char *path, const char *text, char *err,
                             size_t errsz) {
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t n = strlen(text);
  int ok = fd >= 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
  if (fd >= 0 && close(fd) != 0) ok = 0;
  if (ok && rename(tmp, path) == 0 && fsync_dir(dir) == 0) return 0;
  snprintf(err, errsz, "%s: cannot write: %s", path, strerror(errno));
  unlink(tmp);
  return -1;
}

static cJSON *json_shape(const pt_param_desc *d) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; k < d->ndim; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)d->shape[k]));
  return a;
}

/* name -> {file, shape} for every tensor of the whole model, each tied weight once. */
static cJSON *json_tensors(const pt_model *m, const int *bounds, int n_chunks,
                           const ckpt_stage_files *files) {
  cJSON *o = cJSON_CreateObject();
  int s = 0;
  for (int li = 0; li < m->n_layers; li++) {
    while (s + 1 < n_chunks && li >= bounds[s + 1]) s++;
    const pt_layer *L = &m->layers[li];
    int owner = model_tie_owner(m, li);
    for (int p = 0; p < L->n_params; p++) {
      if (owner >= 0 && p == model_tied_param(L)) continue; /* stored under its first owner */
      char name[SPEC_NAME_MAX + PT_PARAM_NAME_MAX + 16];
      snprintf(name, sizeof name, "%d.%s", li, L->params[p].name);
      cJSON *t = cJSON_AddObjectToObject(o, name);
      cJSON_AddStringToObject(t, "file", files[s].model_file);
      cJSON_AddItemToObject(t, "shape", json_shape(&L->params[p]));
    }
  }
  return o;
}

static cJSON *json_ties(const pt_model *m) {
  cJSON *o = cJSON_CreateObject();
  for (int li = 0; li < m->n_layers; li++) {
    const pt_layer *L = &m->layers[li];
    if (!L->tie[0]) continue;
    cJSON *g = cJSON_GetObjectItemCaseSensitive(o, L->tie);
    if (!g) g = cJSON_AddArrayToObject(o, L->tie);
    char name[SPEC_NAME_MAX + PT_PARAM_NAME_MAX + 16];
    snprintf(name, sizeof name, "%d.%s", li, L->params[model_tied_param(L)].name);
    cJSON_AddItemToArray(g, cJSON_CreateString(name));
  }
  return o;
}

/* "stage": the chunk that wrote the file (with one chunk per stage, its stage); with several,
 * also "chunk" and the stage that ran it. */
static cJSON *json_files(const ckpt_stage_files *files, const ckpt_layout *lay) {
  cJSON *a = cJSON_CreateArray();
  for (int s = 0; s < lay->n_chunks; s++) {
    const char *names[2] = {files[s].model_file, files[s].optim_file};
    uint32_t crcs[2] = {files[s].model_crc, files[s].optim_crc};
    int64_t bytes[2] = {files[s].model_bytes, files[s].optim_bytes};
    for (int k = 0; k < 2; k++) {
      if (!names[k][0]) continue;
      cJSON *f = cJSON_CreateObject();
      cJSON_AddStringToObject(f, "name", names[k]);
      cJSON_AddNumberToObject(f, "crc32", (double)crcs[k]);
      cJSON_AddNumberToObject(f, "bytes", (double)bytes[k]);
      if (lay->chunk_stage) cJSON_AddNumberToObject(f, "chunk", s);
      cJSON_AddNumberToObject(f, "stage", lay->chunk_stage ? lay->chunk_stage[s] : s);
      cJSON_AddItemToArray(a, f);
    }
  }
  return a;
}

static cJSON *json_spec(const pt_spec_source *src) {
  cJSON *o = cJSON_CreateObject(), *ov = cJSON_AddArrayToObject(o, "overrides");
  cJSON_AddStringToObject(o, "origin", src->origin);
  cJSON_AddStringToObject(o, "text", src->text);
  for (int i = 0; i < src->n_overrides; i++)
    cJSON_AddItemToArray(ov, cJSON_CreateString(src->overrides[i]));
  return o;
}

static cJSON *json_layout(const ckpt_layout *lay) {
  cJSON *o = cJSON_CreateObject(), *b = cJSON_AddArrayToObject(o, "bounds");
  cJSON_AddNumberToObject(o, "stages", lay->stages);
  cJSON_AddNumberToObject(o, "data_parallel", lay->data_parallel);
  for (int s = 0; s <= lay->n_chunks; s++)
    cJSON_AddItemToArray(b, cJSON_CreateNumber(lay->bounds[s]));
  if (!lay->chunk_stage) return o;
  cJSON_AddNumberToObject(o, "chunks", lay->n_chunks);
  cJSON *cs = cJSON_AddArrayToObject(o, "chunk_stage");
  for (int c = 0; c < lay->n_chunks; c++)
    cJSON_AddItemToArray(cs, cJSON_CreateNumber(lay->chunk_stage[c]));
  return o;
}

uint32_t checkpoint_manifest_crc(const void *manifest) {
  char *text = cJSON_PrintUnformatted((const cJSON *)manifest);
  if (!text) pt_fatal("out of memory checking a manifest");
  uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text, (uInt)strlen(text));
  free(text);
  return crc;
}

int checkpoint_write_manifest(const char *dir, const pt_model *m, const pt_spec_source *src,
                              int64_t step, int64_t opt_t, const ckpt_layout *layout,
                              const ckpt_stage_files *files, char *err, size_t errsz) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", CKPT_FORMAT);
  cJSON_AddNumberToObject(o, "step", (double)step);
  char hash[32];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)m->spec->hash);
  cJSON_AddStringToObject(o, "spec_hash", hash);
  /* Training has no random state beyond the seed: initialisation is a counter-based function
   * of (seed, layer, element) and the data position a function of the step, so the next step
   * and the seed are the whole RNG and data state. */
  cJSON *data = cJSON_AddObjectToObject(o, "data");
  cJSON_AddNumberToObject(data, "next_step", (double)step);
  cJSON *rng = cJSON_AddObjectToObject(o, "rng");
  cJSON_AddNumberToObject(rng, "seed", (double)m->spec->train.seed);
  cJSON *opt = cJSON_AddObjectToObject(o, "optimizer");
  cJSON_AddStringToObject(opt, "name", spec_optimizer_names[m->spec->train.optimizer]);
  cJSON_AddNumberToObject(opt, "t", (double)opt_t);
  cJSON_AddItemToObject(o, "layout", json_layout(layout));
  cJSON_AddItemToObject(o, "files", json_files(files, layout));
  cJSON_AddItemToObject(o, "tensors", json_tensors(m, layout->bounds, layout->n_chunks, files));
  cJSON_AddItemToObject(o, "ties", json_ties(m));
  cJSON_AddItemToObject(o, "spec", json_spec(src));
  cJSON_AddNumberToObject(o, CKPT_MANIFEST_CRC, (double)checkpoint_manifest_crc(o));
  char *text = cJSON_Print(o), path[4200];
  cJSON_Delete(o);
  if (!text) pt_fatal("out of memory writing a manifest");
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  int rc = write_text_atomic(dir, path, text, err, errsz);
  free(text);
  return rc;
}

/* The manifest goes first: a directory left half-deleted by a crash is then an incomplete
 * checkpoint (never loaded), not a complete-looking one with files missing. */
static void remove_dir(const char *dir) {
  char path[4400 + 512];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  unlink(path);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (w > 0 && (size_t)w < sizeof path) unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static int manifest_exists(const char *dir) {
  char path[4400 + 32];
  struct stat st;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  return stat(path, &st) == 0;
}

/* Parent directory of path ("." when it has none), for the fsync that makes a rename durable. */
static void parent_of(const char *path, char *out, size_t outsz) {
  snprintf(out, outsz, "%s", path);
  char *slash = strrchr(out, '/');
  if (!slash) snprintf(out, outsz, ".");
  else if (slash == out) out[1] = '\0';
  else *slash = '\0';
}

int checkpoint_begin_save(const char *dir, char *err, size_t errsz) {
  if (manifest_exists(dir)) { /* never write over a complete checkpoint: set it aside whole */
    char prev[4400], parent[4400];
    snprintf(prev, sizeof prev, "%s.previous", dir);
    remove_dir(prev);
    if (rename(dir, prev) != 0) {
      snprintf(err, errsz, "%s: cannot set the existing checkpoint aside: %s", dir, strerror(errno));
      return -1;
    }
    parent_of(dir, parent, sizeof parent);
    fsync_dir(parent);
  }
  if (checkpoint_make_dir(dir, err, errsz) == 0) return 0;
  checkpoint_abort_save(dir); /* puts the set-aside checkpoint back */
  return -1;
}

/* Only names a save writes (model-/optim- files, their temporaries, the manifest): the user's
 * --save directory may hold other files, which are left alone. */
static int written_by_save(const char *name) {
  return !strncmp(name, "model-s", 7) || !strncmp(name, "optim-s", 7) ||
         !strncmp(name, "manifest.json", 13);
}

void checkpoint_abort_save(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char path[4400 + 512];
    while ((e = readdir(d))) {
      int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (written_by_save(e->d_name) && w > 0 && (size_t)w < sizeof path) unlink(path);
    }
    closedir(d);
    rmdir(dir);
  }
  char prev[4400], parent[4400];
  snprintf(prev, sizeof prev, "%s.previous", dir);
  if (manifest_exists(prev) && rename(prev, dir) == 0) {
    parent_of(dir, parent, sizeof parent);
    fsync_dir(parent);
  }
}

/* Why no file system would take target's name, or NULL: a part over NAME_MAX bytes (the run
 * would train to the end, then fail to create it), or the whole over what the writers hold. */
static const char *name_too_long(const char *target, char *why, size_t whysz) {
  size_t n = strlen(target);
  if (n + 64 >= 4096) { /* room for the names a save adds under it */
    snprintf(why, whysz, "the path is %zu bytes, over the %d this job can use", n, 4096 - 64);
    return why;
  }
  for (const char *p = target; *p;) {
    size_t len = strcspn(p, "/");
    if (len > NAME_MAX) {
      snprintf(why, whysz, "its part '%.24s...' is %zu bytes, over the %d a file name may have",
               p, len, NAME_MAX);
      return why;
    }
    p += len + (p[len] == '/');
  }
  return NULL;
}

/* For a file: what is at the target itself, if anything, must be a writable file; the fix for
 * each, NULL when it holds (or nothing is there). */
static const char *file_target_problem(const char *target, const char **fix) {
  struct stat t;
  if (stat(target, &t) != 0) return NULL;
  *fix = "give a file's name";
  if (S_ISDIR(t.st_mode)) return "it is a directory, not a file";
  *fix = "choose another path";
  if (access(target, W_OK) != 0) return "the file there is not writable";
  return NULL;
}

int checkpoint_check_writable(const char *target, int is_file, const char *what, char *err,
                              size_t errsz) {
  char path[4096], why_buf[160];
  struct stat st;
  const char *why = name_too_long(target, why_buf, sizeof why_buf);
  if (why) {
    snprintf(err, errsz, "%s %.200s...: cannot write there: %s; choose a shorter path", what,
             target, why);
    return -1;
  }
  const char *fix = NULL;
  why = is_file ? file_target_problem(target, &fix) : NULL;
  if (why) {
    pt_errorf_short(err, errsz, "%s %s: cannot write there: %s; %s", what, target, why, fix);
    return -1;
  }
  if (is_file) parent_of(target, path, sizeof path);
  else snprintf(path, sizeof path, "%s", target);
  if (is_file && stat(path, &st) != 0) {
    snprintf(err, errsz, "%s %s: cannot write there: its directory %s: %s; create it first",
             what, target, path, strerror(errno));
    return -1;
  }
  for (;;) { /* the nearest part of the path that exists decides */
    if (stat(path, &st) == 0) break;
    char *slash = strrchr(path, '/');
    if (!slash) {
      snprintf(path, sizeof path, ".");
    } else if (slash == path) {
      path[1] = '\0';
    } else {
      *slash = '\0';
    }
  }
  if (!S_ISDIR(st.st_mode)) why = "it is not a directory";
  if (!why && access(path, W_OK | X_OK) != 0) why = strerror(errno);
  if (!why) return 0;
  pt_errorf_short(err, errsz, "%s %s: cannot write there: %s: %s; choose a directory this job "
                  "can write", what, target, path, why);
  return -1;
}

void checkpoint_end_save(const char *dir) {
  char prev[4400];
  snprintf(prev, sizeof prev, "%s.previous", dir);
  remove_dir(prev);
}

int checkpoint_parse_step_dir(const char *name, long long *step, int *previous) {
  int n = 0;
  if (sscanf(name, "step-%lld%n", step, &n) != 1 || n == 0) return 0;
  *previous = !strcmp(name + n, ".previous");
  return name[n] == '\0' || *previous;
}

static int has_manifest(const char *root, const char *name) {
  char dir[4400];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  return manifest_exists(dir);
}

typedef struct {
  long long step;
  int previous, complete;
  char name[256];
} step_dir;

/* The step-N and step-N.previous entries under root (at most max). */
static int list_step_dirs(const char *root, step_dir *out, int max) {
  DIR *d = opendir(root);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    step_dir *s = &out[n];
    if (!checkpoint_parse_step_dir(e->d_name, &s->step, &s->previous)) continue;
    if (strlen(e->d_name) >= sizeof s->name) continue;
    snprintf(s->name, sizeof s->name, "%s", e->d_name);
    s->complete = has_manifest(root, e->d_name);
    n++;
  }
  closedir(d);
  return n;
}

void checkpoint_prune(const char *root, int keep) {
  enum { MAX_DIRS = 4096 };
  step_dir *dirs = pt_calloc(MAX_DIRS, sizeof *dirs);
  int n = list_step_dirs(root, dirs, MAX_DIRS);
  long long newest = -1;
  for (int i = 0; i < n; i++)
    if (dirs[i].complete && dirs[i].step > newest) newest = dirs[i].step;
  for (int i = 0; i < n; i++) {
    const step_dir *s = &dirs[i];
    int newer = 0, replaced = 0; /* complete plain checkpoints after it; the same step redone */
    for (int j = 0; j < n; j++) {
      int plain = !dirs[j].previous && dirs[j].complete;
      newer += plain && dirs[j].step > s->step;
      replaced |= plain && dirs[j].step == s->step && s->previous;
    }
    /* leftovers go once something newer is complete, never while they are the newest's fallback */
    int leftover = ((!s->complete || s->previous) && s->step < newest) || replaced;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", root, s->name);
    if (leftover || (s->complete && !s->previous && newer >= keep)) remove_dir(dir);
  }
  free(dirs);
}
