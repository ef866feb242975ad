/* Exports: one sequential safetensors file of a whole model (pipe_convert, --gather). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "checkpoint/safetensors.h"

/* Tied weights are stored once: metadata "tied.<stored name>" lists the other names. */
static int tie_metadata(const pt_model *m, const char **keys, const char **vals, char (*buf)[512],
                        int max) {
  int n = 0;
  for (int li = 0; li < m->n_layers && n < max; li++) {
    if (!m->layers[li].tie[0] || model_tie_owner(m, li) >= 0) continue;
    snprintf(buf[2 * n], 512, "tied.%d.weight", li);
    buf[2 * n + 1][0] = '\0';
    for (int j = li + 1; j < m->n_layers; j++)
      if (!strcmp(m->layers[j].tie, m->layers[li].tie))
        snprintf(buf[2 * n + 1] + strlen(buf[2 * n + 1]), 512 - strlen(buf[2 * n + 1]), "%s%d.weight",
                 buf[2 * n + 1][0] ? "," : "", j);
    keys[n] = buf[2 * n], vals[n] = buf[2 * n + 1];
    n++;
  }
  return n;
}

int checkpoint_write_sequential(const pt_model *m, const pt_optimizer *o, const char *path,
                                int64_t step, char *err, size_t errsz) {
  st_entry *e = pt_calloc((size_t)m->n_tensors + 1, sizeof *e);
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    const pt_param_desc *d = &m->layers[t->layer].params[t->param];
    e[i] = (st_entry){.name = t->name, .data = m->host_params + t->offset, .ndim = d->ndim};
    for (int k = 0; k < d->ndim; k++) e[i].shape[k] = d->shape[k];
  }
  const char *keys[66] = {"format", "step"}, *vals[66];
  char stepbuf[32], ties[128][512];
  snprintf(stepbuf, sizeof stepbuf, "%lld", (long long)step);
  vals[0] = "pipetrain-sequential/1", vals[1] = stepbuf;
  int n_meta = 2 + tie_metadata(m, keys + 2, vals + 2, ties, 64);
  int rc = st_write(path, e, m->n_tensors, keys, vals, n_meta, NULL, err, errsz);
  free(e);
  if (rc != 0 || !o) return rc;
  char opath[4200], *dot;
  snprintf(opath, sizeof opath, "%s", path);
  if ((dot = strstr(opath, ".safetensors")) && dot[12] == '\0') *dot = '\0';
  strncat(opath, ".optimizer.safetensors", sizeof opath - strlen(opath) - 1);
  ckpt_stage_files f; /* the optimizer file of a one-stage checkpoint has exactly this content */
  char dir[4200];
  snprintf(dir, sizeof dir, "%s.tmpdir", path);
  if (checkpoint_make_dir(dir, err, errsz) != 0 ||
      checkpoint_write_stage(dir, m, o, 0, 0, m->n_layers, &f, err, errsz) != 0)
    return -1;
  char from[4400];
  snprintf(from, sizeof from, "%s/%s", dir, f.optim_file);
  rc = rename(from, opath);
  if (rc != 0) snprintf(err, errsz, "cannot move %s to %s: %s", from, opath, strerror(errno));
  snprintf(from, sizeof from, "%s/%s", dir, f.model_file);
  remove(from);
  remove(dir);
  return rc;
}

