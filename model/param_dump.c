#include "model/param_dump.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static void put(FILE *f, const void *p, size_t n, const char *path) {
  if (fwrite(p, 1, n, f) != n) pt_fatal("%s: write failed: %s", path, strerror(errno));
}

void param_dump_write(const pt_model *m, const char *prefix, int rank) {
  char path[4200];
  snprintf(path, sizeof path, "%s.%d.bin", prefix, rank);
  FILE *f = fopen(path, "wb");
  if (!f) pt_fatal("%s: cannot write the parameter dump: %s", path, strerror(errno));
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    char name[sizeof t->name];
    model_tensor_key(m, i, name, sizeof name); /* a tied copy is its first owner's tensor */
    uint32_t len = (uint32_t)strlen(name);
    uint8_t tied = (uint8_t)t->tied_copy;
    for (int li = 0; li < m->n_layers && !tied; li++) /* owners of a tie are tied too */
      tied = li != t->layer && m->layers[li].tie[0] &&
             !strcmp(m->layers[li].tie, m->layers[t->layer].tie);
    put(f, &len, 4, path);
    put(f, name, len, path);
    put(f, &tied, 1, path);
    put(f, &t->numel, 8, path);
    put(f, m->host_params + t->offset, 4 * (size_t)t->numel, path);
  }
  if (fclose(f) != 0) pt_fatal("%s: close failed: %s", path, strerror(errno));
}
