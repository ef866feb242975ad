/* checkpoint/hf_import.c: a transformers directory's weights into a pipetrain model. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

/* The safetensors files of a directory, and which of their tensors the mapping used. */
typedef struct {
  st_file *files;
  char **used;
  int n;
} hf_source;

static void source_close(hf_source *s) {
  for (int i = 0; i < s->n; i++) {
    st_close(&s->files[i]);
    free(s->used[i]);
  }
  free(s->files);
  free(s->used);
}

static int source_add(hf_source *s, const char *path, char *err, size_t errsz) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->files[i].path, path)) return 0;
  s->files = realloc(s->files, sizeof *s->files * (size_t)(s->n + 1));
  s->used = realloc(s->used, sizeof *s->used * (size_t)(s->n + 1));
  if (!s->files || !s->used) pt_fatal("out of memory opening %s", path);
  if (st_open(&s->files[s->n], path, err, errsz) != 0) return -1;
  s->used[s->n] = pt_calloc((size_t)s->files[s->n].n_tensors + 1, 1);
  s->n++;
  return 0;
}

/* Every shard model.safetensors.index.json's weight_map names. */
static int source_open_index(hf_source *s, const char *dir, const char *index, char *err,
                             size_t errsz) {
  FILE *f = fopen(index, "rb");
  char *text = NULL;
  long len = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    text = pt_calloc((size_t)len + 1, 1);
    if (fread(text, 1, (size_t)len, f) != (size_t)len) len = -1;
  }
  if (f) fclose(f);
  cJSON *root = len >= 0 ? cJSON_Parse(text) : NULL;
  free(text);
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  int rc = 0;
  if (!cJSON_IsObject(map)) {
    snprintf(err, errsz, "%s: weight_map: missing or not an object (is the index complete?)", index);
    rc = -1;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, map) {
    if (rc != 0) break;
    if (!cJSON_IsString(it) || strchr(it->valuestring, '/')) {
      snprintf(err, errsz, "%s: weight_map: '%s' does not name a shard file in %s", index,
               it->string, dir);
      rc = -1;
      break;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, it->valuestring);
    rc = source_add(s, path, err, errsz);
  }
  cJSON_Delete(root);
  return rc;
}

static int source_open(hf_source *s, const char *dir, char *err, size_t errsz) {
  memset(s, 0, sizeof *s);
  char one[4200], index[4200];
  snprintf(one, sizeof one, "%s/model.safetensors", dir);
  snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
  if (access(one, F_OK) == 0) return source_add(s, one, err, errsz);
  if (access(index, F_OK) == 0) return source_open_index(s, dir, index, err, errsz);
  snprintf(err, errsz, "%s: no model.safetensors nor model.safetensors.index.json (only "
           "safetensors weights are read; save the model with safe_serialization=True)", dir);
  return -1;
}

/* The tensor `name` (GPT-2 files saved without the "transformer." prefix also match). */
static const st_tensor *source_find(hf_source *s, const char *name, int *file) {
  for (int pass = 0; pass < 2; pass++) {
    const char *n = name;
    if (pass == 1 && strncmp(name, "transformer.", 12) != 0) break;
    if (pass == 1) n = name + 12;
    for (int i = 0; i < s->n; i++) {
      const st_tensor *t = st_find(&s->files[i], n);
      if (t) {
        *file = i;
        s->used[i][t - s->files[i].tensors] = 1;
        return t;
      }
    }
  }
  return NULL;
}

static int find_pt_tensor(const pt_model *m, const char *name) {
  for (int i = 0; i < m->n_tensors; i++)
    if (!strcmp(m->tensors[i].name, name)) return i;
  return -1;
}

/* The parameter of layer li named name (its state-dict suffix), or NULL: read from the layers
 * alone, so it works before the model's storage exists. */
static const pt_param_desc *param_of(const pt_model *m, int li, const char *name) {
  const pt_layer *L = &m->layers[li];
  for (int p = 0; p < L->n_params; p++)
    if (!strcmp(L->params[p].name, name)) return &L->params[p];
  return NULL;
}

static void shape_text(int ndim, const int64_t *shape, char *out, size_t outsz) {
  size_t n = (size_t)snprintf(out, outsz, "[");
  for (int i = 0; i < ndim && n < outsz; i++)
    n += (size_t)snprintf(out + n, outsz - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < outsz) snprintf(out + n, outsz - n, "]");
}

static int is_float_dtype(const char *dtype) {
  return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16");
}

/* tie_word_embeddings: true with an lm_head.weight in the files: transformers ties the two only
 * when their values agree, and otherwise keeps the head apart (with a warning). pipetrain's
 * tied spec has one tensor for both, so an lm_head that differs from the embedding would be
 * dropped: it is refused instead, naming the fix. */
static int check_tied_head(hf_source *s, const pt_model *m, const char *hf, const char *dir,
                           char *err, size_t errsz) {
  int fi = -1, ti = find_pt_tensor(m, "0.weight");
  const st_tensor *t = source_find(s, hf, &fi);
  if (!t || ti < 0) return 0;
  const pt_tensor *emb = &m->tensors[ti];
  const pt_param_desc *d = &m->layers[emb->layer].params[emb->param];
  int64_t n = d->shape[0] * (d->ndim > 1 ? d->shape[1] : 1);
  float *head = pt_calloc((size_t)n + 1, sizeof *head);
  int rc = st_read_as_f32(&s->files[fi], t, d->ndim, d->shape, head, err, errsz);
  if (rc == 0 && memcmp(head, m->host_params + emb->offset, (size_t)n * sizeof *head) != 0) {
    snprintf(err, errsz, "%s: tensor '%s' differs from the input embedding, but config.json says "
             "tie_word_embeddings: true (transformers then keeps them apart): set "
             "\"tie_word_embeddings\": false in %s/config.json to convert the separate head",
             s->files[fi].path, hf, dir);
    rc = -1;
  }
  free(head);
  return rc;
}

/* Where block b's tensor of mapping nm comes from and goes (*t NULL: nothing to import, a head
 * tied to the embedding), its dtype and shape checked against the layer's parameter (*d);
 * *shape gets the shape in the file. 0, or -1 with err naming the directory and tensor. */
static int locate(hf_source *s, const hf_config *c, const pt_model *m, const hf_name *nm, int b,
                  const char *dir, const st_tensor **t, int *fi, const pt_param_desc **d,
                  int64_t shape[2], char *err, size_t errsz) {
  int li = hf_role_layer(c->arch->family, nm->role, b, (int)c->layers);
  char name[256], hf[300];
  snprintf(name, sizeof name, nm->hf, b);
  snprintf(hf, sizeof hf, "%s%s", c->arch->prefix ? c->arch->prefix : "", name);
  *t = NULL;
  *d = param_of(m, li, nm->pt);
  if (nm->role == HF_ROLE_HEAD && c->tied) /* stored once, as the embedding (read by then) */
    return m->host_params ? check_tied_head(s, m, hf, dir, err, errsz) : 0;
  if (!*d && nm->optional) return 0;
  if (!*d) {
    snprintf(err, errsz, "%s: pipetrain's %s layer %d has no tensor '%d.%s' for '%s' (does this "
             "build's layer match docs/checkpoint.md?)", dir, m->spec->layers[li].type, li, li,
             nm->pt, hf);
    return -1;
  }
  *t = source_find(s, hf, fi);
  if (!*t) {
    snprintf(err, errsz, "%s: tensor '%s' is missing from the model's safetensors", dir, hf);
    return -1;
  }
  if (!is_float_dtype((*t)->dtype)) {
    snprintf(err, errsz, "%s: tensor '%s' is %s; pipetrain reads F32, F16 or BF16 weights",
             s->files[*fi].path, hf, (*t)->dtype);
    return -1;
  }
  int nd = (*d)->ndim, same = (*t)->ndim == nd;
  for (int i = 0; i < nd && i < 2; i++) shape[i] = (*d)->shape[nm->transpose ? 1 - i : i];
  for (int f = 1; f < nm->fused; f++) shape[0] += (*d)[f].shape[0]; /* a group, stacked */
  for (int i = 0; same && i < nd; i++) same = (*t)->shape[i] == (nd == 2 ? shape[i] : (*d)->shape[i]);
  if (!same) {
    char have[128], want[128];
    shape_text((*t)->ndim, (*t)->shape, have, sizeof have);
    shape_text(nd, nd == 2 ? shape : (*d)->shape, want, sizeof want);
    snprintf(err, errsz, "%s: tensor '%s' has shape %s in the file, but config.json makes it %s",
             s->files[*fi].path, hf, have, want);
    return -1;
  }
  return 0;
}

static int import_one(hf_source *s, const hf_config *c, pt_model *m, const hf_name *nm, int b,
                      const char *dir, char *err, size_t errsz) {
  const st_tensor *t;
  const pt_param_desc *d;
  int fi = -1;
  int64_t shape[2];
  if (locate(s, c, m, nm, b, dir, &t, &fi, &d, shape, err, errsz) != 0) return -1;
  if (!t || !m->host_params) return 0; /* nothing to read, or only checking (hf_check_weights) */
  char pt[256];
  snprintf(pt, sizeof pt, "%d.%s", hf_role_layer(c->arch->family, nm->role, b, (int)c->layers),
           nm->pt);
  int ti = find_pt_tensor(m, pt);
  if (ti < 0) {
    snprintf(err, errsz, "%s: '%s' is a tied copy in pipetrain's model; it has nowhere to go", dir,
             pt);
    return -1;
  }
  const pt_tensor *pt_t = &m->tensors[ti];
  float *dst = m->host_params + pt_t->offset;
  if (nm->fused > 1) return st_read_as_f32(&s->files[fi], t, 2, shape, dst, err, errsz);
  if (!nm->transpose) return st_read_as_f32(&s->files[fi], t, d->ndim, d->shape, dst, err, errsz);
  int64_t rows = d->shape[0], cols = d->shape[1];
  float *tmp = pt_calloc((size_t)(rows * cols), sizeof *tmp);
  int rc = st_read_as_f32(&s->files[fi], t, 2, shape, tmp, err, errsz);
  for (int64_t i = 0; rc == 0 && i < rows; i++)
    for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = tmp[j * rows + i];
  free(tmp);
  return rc;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Whether a tensor belongs to a part pipetrain does not convert (the arch's skipped). */
static int skipped(const hf_arch *a, const char *name) {
  for (const char *const *p = a->skipped; p && *p; p++)
    if (!strncmp(name, *p, strlen(*p))) return 1;
  return 0;
}

/* A tensor nothing used is a weight pipetrain's layers have no place for (a bias, a layer
 * beyond num_hidden_layers): refused rather than silently dropped. A skipped part's are left
 * out by design, and counted into *n_skipped. */
static int check_all_used(const hf_source *s, const hf_config *c, int *n_skipped, char *err,
                          size_t errsz) {
  char head[300];
  snprintf(head, sizeof head, "%slm_head.weight", c->arch->prefix ? c->arch->prefix : "");
  for (int i = 0; i < s->n; i++)
    for (int k = 0; k < s->files[i].n_tensors; k++) {
      const char *name = s->files[i].tensors[k].name;
      int ok = s->used[i][k] || (c->tied && !strcmp(name, head));
      if (!ok && skipped(c->arch, name)) ok = 1, ++*n_skipped;
      for (const char *const *ig = c->arch->ignored; !ok && *ig; ig++) ok = ends_with(name, *ig);
      if (!ok) {
        snprintf(err, errsz, "%s: tensor '%s' has no place in pipetrain's %s layers (%s)",
                 s->files[i].path, name, c->arch->family == HF_GPT2 ? "GPT-2" : "llama_block",
                 c->arch->family == HF_LLAMA && strstr(name, "bias")
                     ? "llama_block has biases only on q, k, v, as Qwen2ForCausalLM, and on "
                       "the MLP, as LlamaForCausalLM with mlp_bias"
                     : "not in the mapping");
        return -1;
      }
    }
  return 0;
}

int hf_check_weights(const char *dir, const hf_config *c, const pt_model *m, char *err,
                     size_t errsz) {
  pt_model shape_only = *m; /* import_one reads nothing without storage */
  shape_only.host_params = NULL;
  return hf_import_weights(dir, c, &shape_only, err, errsz);
}

int hf_import_weights(const char *dir, const hf_config *c, pt_model *m, char *err, size_t errsz) {
  hf_source s;
  int rc = source_open(&s, dir, err, errsz);
  for (int k = 0; rc == 0 && k < c->arch->n_names; k++) {
    const hf_name *nm = &c->arch->names[k];
    int n = nm->role == HF_ROLE_BLOCK ? (int)c->layers : 1;
    for (int b = 0; rc == 0 && b < n; b++) rc = import_one(&s, c, m, nm, b, dir, err, errsz);
  }
  int n_skipped = 0;
  if (rc == 0) rc = check_all_used(&s, c, &n_skipped, err, errsz);
  if (rc == 0 && n_skipped && m->host_params) { /* said once: at the import, not its check */
    char parts[256] = "";
    for (const char *const *p = c->arch->skipped; *p; p++)
      snprintf(parts + strlen(parts), sizeof parts - strlen(parts), "%s%s*",
               p == c->arch->skipped ? "" : ", ", *p);
    pt_notice("%s: %d tensors of %s's other parts (%s) are not converted: pipetrain trains and "
              "exports its language model alone", dir, n_skipped, c->arch->architecture, parts);
  }
  source_close(&s);
  return rc;
}
