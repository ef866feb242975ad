/* tests/checkpoint/safetensors_tool.c: the C side of tests/checkpoint/safetensors_interop.py.
 *
 *   safetensors_tool read FILE
 *     Opens FILE with st_open and prints, tab-separated, one line per item:
 *       file    N_TENSORS  DATA_START  FILE_SIZE
 *       tensor  NAME  DTYPE  [D0,D1,...]  SUM  CRC      (header order; "[]" for 0-d)
 *       meta    KEY  VALUE                              (header order)
 *     SUM is the sum of the values in file order, each widened to double, printed with %.17g
 *     (F32 only, read with st_read_f32; "-" for other dtypes). CRC is the zlib CRC-32 of the
 *     tensor's raw bytes as 8 hex digits (every dtype).
 *   safetensors_tool write FILE
 *     Writes with st_write, in this order, all F32, value i of tensor k being
 *     ((37*i + 11*k) % 101 - 50) / 8 (exact in float32):
 *       k=0 "embed.weight" [4, 3]; k=1 "conv.weight" [2, 1, 3, 3]; k=2 "scalar" [];
 *       k=3 "empty" [0, 5]; k=4 "bias" [7]; k=5 "0.attn.qkv.weight" [3, 5]
 *     with metadata format=pt, producer=pipetrain safetensors_tool, note=<tab, quotes, UTF-8>
 *     (see k_meta_* below), and prints "crc<TAB>XXXXXXXX", the CRC-32 st_write returned.
 * Exit status: 0; 2 for bad input (usage, a file st_open or st_read_f32 rejects, message on
 * stderr); 1 when the write fails. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint/safetensors.h"

static const char *const k_meta_keys[] = {"format", "producer", "note"};
static const char *const k_meta_values[] = {"pt", "pipetrain safetensors_tool",
                                            "tab\there, \"quotes\", gr\xc3\xb6\xc3\x9f" "e"};

static int do_read(const char *path) {
  st_file f;
  char err[2048];
  if (st_open(&f, path, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  printf("file\t%d\t%" PRIu64 "\t%" PRIu64 "\n", f.n_tensors, f.data_start, f.file_size);
  int rc = 0;
  for (int i = 0; i < f.n_tensors && rc == 0; i++) {
    const st_tensor *t = &f.tensors[i];
    size_t bytes = (size_t)(t->end - t->begin);
    unsigned char *raw = malloc(bytes ? bytes : 1);
    if (!raw) {
      fprintf(stderr, "%s: out of memory\n", path);
      return 1;
    }
    if (bytes && pread(f.fd, raw, bytes, (off_t)(f.data_start + t->begin)) != (ssize_t)bytes) {
      fprintf(stderr, "%s: tensor '%s': short read\n", path, t->name);
      free(raw);
      rc = 2;
      break;
    }
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), raw, (uInt)bytes);
    char sum[64] = "-";
    if (!strcmp(t->dtype, "F32")) {
      float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
      if (!v || st_read_f32(&f, t, t->ndim, t->shape, v, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", v ? err : "out of memory");
        free(v);
        free(raw);
        rc = 2;
        break;
      }
      double s = 0;
      for (int64_t k = 0; k < t->numel; k++) s += (double)v[k];
      snprintf(sum, sizeof sum, "%.17g", s);
      free(v);
    }
    printf("tensor\t%s\t%s\t[", t->name, t->dtype);
    for (int d = 0; d < t->ndim; d++) printf("%s%" PRId64, d ? "," : "", t->shape[d]);
    printf("]\t%s\t%08" PRIx32 "\n", sum, crc);
    free(raw);
  }
  for (int i = 0; i < f.n_meta && rc == 0; i++) printf("meta\t%s\t%s\n", f.meta_keys[i], f.meta_values[i]);
  st_close(&f);
  return rc;
}

static int do_write(const char *path) {
  static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
  } spec[] = {
      {"embed.weight", 2, {4, 3}}, {"conv.weight", 4, {2, 1, 3, 3}}, {"scalar", 0, {0}},
      {"empty", 2, {0, 5}},        {"bias", 1, {7}},                 {"0.attn.qkv.weight", 2, {3, 5}},
  };
  enum { N = (int)(sizeof spec / sizeof spec[0]) };
  st_entry e[N];
  float *data[N];
  for (int k = 0; k < N; k++) {
    int64_t numel = 1;
    for (int d = 0; d < spec[k].ndim; d++) numel *= spec[k].shape[d];
    data[k] = malloc((size_t)(numel ? numel : 1) * sizeof(float));
    if (!data[k]) return 1;
    for (int64_t i = 0; i < numel; i++) data[k][i] = (float)((37 * i + 11 * k) % 101 - 50) / 8.0f;
    memset(&e[k], 0, sizeof e[k]);
    e[k].name = spec[k].name;
    e[k].data = data[k];
    e[k].ndim = spec[k].ndim;
    for (int d = 0; d < spec[k].ndim; d++) e[k].shape[d] = spec[k].shape[d];
  }
  char err[2048];
  uint32_t crc = 0;
  int rc = st_write(path, e, N, k_meta_keys, k_meta_values, 3, &crc, err, sizeof err);
  for (int k = 0; k < N; k++) free(data[k]);
  if (rc != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  printf("crc\t%08" PRIx32 "\n", crc);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "read")) return do_read(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "write")) return do_write(argv[2]);
  fprintf(stderr, "usage: %s read FILE | write FILE\n", argv[0]);
  return 2;
}
