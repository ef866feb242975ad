/* data/data.c: opening the data (data/data.h): the geometry, the format's source, the file. */
#include "data/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "data/data_pack.h"
#include "data/source.h"

static int map_file(pt_data *d, const char *path, char *err, size_t errsz) {
  const char *why;
  int fd = pt_open_regular_file(path, &why); /* a FIFO must not block, a device stream */
  if (fd < 0) {
    pt_errorf_short(err, errsz, "%s: cannot open data file: %s; point data.path at a token file",
                    path, why);
    return -1;
  }
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    pt_errorf_short(err, errsz, "%s: data file is empty; point data.path at a token file", path);
    close(fd);
    return -1;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    pt_errorf_short(err, errsz, "%s: cannot map data file: %s", path, strerror(errno));
    return -1;
  }
  d->map = p;
  d->map_bytes = (size_t)st.st_size;
  return 0;
}

/* The one place a format's name becomes its source: every name spec_load accepts has one. */
static const struct data_source *source_of(spec_data_format f) {
  const data_source *src = data_source_find(spec_data_format_names[f]);
  if (!src) pt_fatal("data.format %s has no entry in the data source table (data/source.c)",
                     spec_data_format_names[f]);
  return src;
}

static void init_format(pt_data *d, const pt_spec *spec, spec_data_format f) {
  memset(d, 0, sizeof *d);
  d->src = source_of(f);
  d->inputs = spec->data.inputs;
  d->targets = spec->data.targets;
  d->shuffled = spec->data.order == SPEC_ORDER_SHUFFLED;
  d->seed = spec->train.seed;
  d->B = (int)spec->train.micro_batch_size;
  d->T = d->src->token ? (int)spec->seq_len : 1;
  d->M = spec->train.micro_batches;
  d->G = spec->pipeline.data_parallel * d->M * d->B;
  d->as_class = spec->loss != SPEC_LOSS_MSE;
}

void data_init(pt_data *d, const pt_spec *spec) { init_format(d, spec, spec->data.format); }

static int open_file(pt_data *d, const pt_spec *spec, const char *path, spec_data_format f,
                     char *err, size_t errsz) {
  init_format(d, spec, f);
  if (map_file(d, path, err, errsz) != 0) return -1;
  if (d->src->open(d, spec, path, err, errsz) != 0) {
    data_close(d);
    return -1;
  }
  return 0;
}

int data_open(pt_data *d, const pt_spec *spec, char *err, size_t errsz) {
  data_init(d, spec);
  if (!spec->data.path[0]) {
    snprintf(err, errsz, "%s: no data: section; add data: {path: FILE, format: bytes}", spec->path);
    return -1;
  }
  if (open_file(d, spec, spec->data.path, spec->data.format, err, errsz) != 0) return -1;
  if (!spec->data.documents) return 0;
  char why[400];
  if (!d->src->documents)
    snprintf(why, sizeof why, "data.documents needs token data, not format %s", d->src->name);
  else if (data_pack_build(d, spec->data.doc_eos, (int)spec->seq_len, why, sizeof why) == 0)
    return 0;
  snprintf(err, errsz, "%s: %s", spec->data.path, why);
  data_close(d);
  return -1;
}

int data_open_eval(pt_data *d, const pt_spec *spec, char *err, size_t errsz) {
  if (!spec->data.eval_path[0]) {
    data_init(d, spec);
    return 0;
  }
  if (open_file(d, spec, spec->data.eval_path, spec->data.eval_format, err, errsz) != 0)
    return -1;
  d->shuffled = 0; /* held-out data: always the same batches, in file order */
  return 0;
}

void data_close(pt_data *d) {
  if (d->map) munmap((void *)d->map, d->map_bytes);
  free(d->seq_start);
  memset(d, 0, sizeof *d);
}
