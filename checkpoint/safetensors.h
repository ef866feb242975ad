/* checkpoint/safetensors.h: reading and writing safetensors files.
 *
 * Format: 8-byte little-endian header length N; N bytes of JSON (padded with spaces so the data
 * starts at a multiple of 8) mapping each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (offsets relative to the data section), plus an optional "__metadata__" object
 * of string values; then the raw little-endian row-major data. Parsed and written with cJSON.
 *
 * Reading validates everything before any data is used: header length within the file, JSON
 * that parses, every entry's dtype known, shape non-negative, end - begin == numel * dtype size,
 * offsets inside the data section, tensors neither overlapping nor leaving gaps, data section
 * exactly the file's remainder, no duplicate names. Errors are one line naming the file (and the
 * tensor): "PATH: tensor 'X': ...".
 * Writing is atomic: PATH.tmp.<pid>, fsync, rename to PATH, fsync of the directory, so PATH is
 * either the old file or the complete new one.
 */
#ifndef PT_SAFETENSORS_H
#define PT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_NAME_MAX 256
#define ST_MAX_DIMS 8

typedef struct {
  char name[ST_NAME_MAX];
  char dtype[8];      /* "F32", "F16", "BF16", "F64", "I64", "I32", "U8", ... as in the file */
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  int64_t numel;
  uint64_t begin, end; /* byte offsets within the data section */
} st_tensor;

typedef struct {
  char path[4096];
  st_tensor *tensors;
  int n_tensors;
  char **meta_keys, **meta_values; /* "__metadata__" entries */
  int n_meta;
  uint64_t data_start; /* file offset of the data section */
  uint64_t file_size;
  int fd;
} st_file;

/* Opens and validates path. Returns 0, or -1 with a one-line message in err. */
int st_open(st_file *f, const char *path, char *err, size_t errsz);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key);
/* Reads tensor t into dst as float32 (dtype must be F32) with the expected shape (ndim, shape):
 * a different dtype or shape is an error naming the tensor and both shapes. */
int st_read_f32(const st_file *f, const st_tensor *t, int ndim, const int64_t *shape, float *dst,
                char *err, size_t errsz);

/* As st_read_f32, also from F16 and BF16 tensors, widened to float32 exactly (every half and
 * bfloat16 value is a float32). dst holds numel floats. */
int st_read_as_f32(const st_file *f, const st_tensor *t, int ndim, const int64_t *shape,
                   float *dst, char *err, size_t errsz);

typedef struct {
  const char *name;
  const float *data; /* F32 only: that is all pipetrain writes */
  int ndim;
  int64_t shape[ST_MAX_DIMS];
} st_entry;

/* Writes the tensors in the given order with the metadata (n_meta key/value string pairs),
 * atomically. *crc32_out (if not NULL) receives the zlib CRC-32 of the whole file. Returns 0, or
 * -1 with err set (the temporary file is removed; an existing PATH is untouched). */
int st_write(const char *path, const st_entry *entries, int n, const char *const *meta_keys,
             const char *const *meta_values, int n_meta, uint32_t *crc32_out, char *err,
             size_t errsz);
/* zlib CRC-32 of a whole file; returns 0 or -1 with err. */
int st_file_crc32(const char *path, uint32_t *crc, char *err, size_t errsz);

#endif
