#include "engine/data.h"

#include "engine/data_order.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data_pack.h"

static int map_file(pt_data *d, const char *path, char *err, size_t errsz) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    snprintf(err, errsz, "%s: cannot open data file: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    snprintf(err, errsz, "%s: data file is empty; point data.path at a token file", path);
    close(fd);
    return -1;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    snprintf(err, errsz, "%s: cannot map data file: %s", path, strerror(errno));
    return -1;
  }
  d->map = p;
  d->map_bytes = (size_t)st.st_size;
  return 0;
}

int64_t data_token(const pt_data *d, int64_t i) {
  const uint8_t *p = d->map;
  if (d->format == DATA_BYTES) return p[i];
  if (d->format == DATA_U16) return p[2 * i] | (p[2 * i + 1] << 8);
  return (int64_t)((uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
                   ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24));
}

static int check_tokens(const pt_data *d, const pt_spec *spec, const char *path, char *err,
                        size_t errsz) {
  int64_t T = spec->seq_len, vocab = spec->vocab;
  if (d->n_tokens < T + 2) {
    snprintf(err, errsz, "%s: %lld tokens is too short for seq_len %lld; need at least %lld",
             path, (long long)d->n_tokens, (long long)T, (long long)T + 2);
    return -1;
  }
  for (int64_t i = 0; i < d->n_tokens; i++) {
    int64_t t = data_token(d, i);
    if (t >= vocab) {
      snprintf(err, errsz, "%s: token %lld at position %lld is >= model.vocab %lld; raise vocab "
               "or check data.format", path, (long long)t, (long long)i,
               (long long)vocab);
      return -1;
    }
  }
  return 0;
}

static int open_layout(pt_data *d, const pt_spec *spec, const char *path, char *err,
                       size_t errsz) {
  if (d->format == DATA_F32) {
    size_t rec = sizeof(float) * (size_t)(d->inputs + d->targets);
    d->n_records = (int64_t)(d->map_bytes / rec);
    if (d->map_bytes % rec != 0 || d->n_records == 0) {
      snprintf(err, errsz, "%s: %zu bytes is not a whole number of %zu-byte records (%d inputs + "
               "%d targets float32)", path, d->map_bytes, rec, d->inputs, d->targets);
      return -1;
    }
    return 0;
  }
  if (spec->seq_len <= 0 || spec->vocab <= 0) {
    snprintf(err, errsz, "%s: token data needs model.seq_len and model.vocab", spec->path);
    return -1;
  }
  if (d->format == DATA_U16 && d->map_bytes % 2 != 0) {
    snprintf(err, errsz, "%s: u16 token file has an odd byte count (%zu); is it really u16?",
             path, d->map_bytes);
    return -1;
  }
  if (d->format == DATA_U32 && d->map_bytes % 4 != 0) {
    snprintf(err, errsz, "%s: u32 token file's byte count (%zu) is not a multiple of 4; is it "
             "really u32?", path, d->map_bytes);
    return -1;
  }
  size_t width = d->format == DATA_U32 ? 4 : d->format == DATA_U16 ? 2 : 1;
  d->n_tokens = (int64_t)(d->map_bytes / width);
  return check_tokens(d, spec, path, err, errsz);
}

static int data_open_file(pt_data *d, const pt_spec *spec, const char *path,
                          spec_data_format f, char *err, size_t errsz) {
  memset(d, 0, sizeof *d);
  d->format = f == SPEC_DATA_U16   ? DATA_U16
              : f == SPEC_DATA_U32 ? DATA_U32
              : f == SPEC_DATA_F32 ? DATA_F32
                                   : DATA_BYTES;
  d->inputs = spec->data.inputs;
  d->targets = spec->data.targets;
  d->shuffled = spec->data.order == SPEC_ORDER_SHUFFLED;
  d->seed = spec->train.seed;
  if (map_file(d, path, err, errsz) != 0) return -1;
  if (open_layout(d, spec, path, err, errsz) != 0) {
    data_close(d);
    return -1;
  }
  return 0;
}

int data_open(pt_data *d, const pt_spec *spec, char *err, size_t errsz) {
  memset(d, 0, sizeof *d);
  if (!spec->data.path[0]) {
    snprintf(err, errsz, "%s: no data: section; add data: {path: FILE, format: bytes}", spec->path);
    return -1;
  }
  if (data_open_file(d, spec, spec->data.path, spec->data.format, err, errsz) != 0) return -1;
  char why[400];
  if (spec->data.documents &&
      data_pack_build(d, spec->data.doc_eos, (int)spec->seq_len, why, sizeof why) != 0) {
    snprintf(err, errsz, "%s: %s", spec->data.path, why);
    data_close(d);
    return -1;
  }
  return 0;
}

int data_open_eval(pt_data *d, const pt_spec *spec, char *err, size_t errsz) {
  memset(d, 0, sizeof *d);
  if (!spec->data.eval_path[0]) return 0;
  if (data_open_file(d, spec, spec->data.eval_path, spec->data.eval_format, err, errsz) != 0)
    return -1;
  d->shuffled = 0; /* held-out data: always the same batches, in file order */
  return 0;
}

void data_close(pt_data *d) {
  if (d->map) munmap((void *)d->map, d->map_bytes);
  free(d->seq_start);
  memset(d, 0, sizeof *d);
}

/* (a * b + c) mod m without overflow for any int64 step counts. */
static int64_t mulmod_add(int64_t a, int64_t b, int64_t c, int64_t m) {
  return (int64_t)(((unsigned __int128)a * (unsigned __int128)b + (unsigned __int128)c) %
                   (unsigned __int128)m);
}

void data_fill(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T, void *inputs,
               void *targets, int as_class) {
  data_fill_prefix(d, step, G, j0, B, T, T, inputs, targets, as_class);
}

void data_fill_prefix(const pt_data *d, int64_t step, int64_t G, int64_t j0, int B, int T,
                      int span, void *inputs, void *targets, int as_class) {
  for (int r = 0; r < B; r++) {
    int64_t j = j0 + r;
    if (d->format == DATA_F32) {
      int64_t rec = data_order_window(d->shuffled, d->seed, step, G, j, d->n_records);
      const float *src = (const float *)d->map + rec * (d->inputs + d->targets);
      memcpy((float *)inputs + (int64_t)r * d->inputs, src, sizeof(float) * d->inputs);
      for (int t = 0; t < d->targets; t++) {
        float v = src[d->inputs + t];
        if (as_class)
          ((int32_t *)targets)[(int64_t)r * d->targets + t] = (int32_t)v;
        else
          ((float *)targets)[(int64_t)r * d->targets + t] = v;
      }
      continue;
    }
    if (d->n_seqs > 0) {
      int32_t *in = (int32_t *)inputs + (int64_t)r * T, *tg = (int32_t *)targets + (int64_t)r * T;
      data_pack_fill_row(d, data_pack_sequence(d, step, G, j), T, in, tg);
      continue;
    }
    /* shuffled: n = floor((N - 1) / span) windows of span (the longest T of the run), so a
     * sequence-length schedule keeps its windows; span + 1 tokens fit at w span */
    int64_t o = d->shuffled
                    ? data_order_window(1, d->seed, step, G, j, (d->n_tokens - 1) / span) * span
                    : mulmod_add(mulmod_add(step, G, j, d->n_tokens - span), span, 0,
                                 d->n_tokens - span);
    int32_t *in = (int32_t *)inputs + (int64_t)r * T, *tg = (int32_t *)targets + (int64_t)r * T;
    for (int t = 0; t < T; t++) {
      in[t] = (int32_t)data_token(d, o + t); /* check_tokens: every id < vocab <= INT32_MAX */
      tg[t] = (int32_t)data_token(d, o + t + 1);
    }
  }
}
