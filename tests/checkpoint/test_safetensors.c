/* tests/checkpoint/test_safetensors.c: safetensors round trips, every validation failure st_open and
 * st_read_f32 report (from hand-built files), CRC-32 of the written file, atomic writes.
 *
 * Works in a fresh directory under $TMPDIR (or /tmp), removed at the end. Set ST_TEST_VERBOSE=1
 * to print every error message the checks provoke. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint/safetensors.h"
#include "test_util.h"

static char g_dir[512];
static int g_verbose;

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static void put_file(const char *path, const void *buf, size_t n) {
  FILE *fp = fopen(path, "wb");
  if (!fp || fwrite(buf, 1, n, fp) != n || fclose(fp) != 0) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

static unsigned char *get_file(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long len = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)len + 1);
  *n = fread(buf, 1, (size_t)len, fp);
  fclose(fp);
  return buf;
}

static int file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Files in g_dir whose name starts with prefix. */
static int count_prefix(const char *prefix) {
  DIR *d = opendir(g_dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
  if (d) closedir(d);
  return n;
}

/* A file with header length field len_field, header bytes hdr (n_hdr), then data_len data bytes. */
static void craft_raw(const char *path, uint64_t len_field, const char *hdr, size_t n_hdr, size_t data_len) {
  size_t total = 8 + n_hdr + data_len;
  unsigned char *buf = calloc(total, 1);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(len_field >> (8 * i));
  memcpy(buf + 8, hdr, n_hdr);
  for (size_t i = 0; i < data_len; i++) buf[8 + n_hdr + i] = (unsigned char)(i * 7 + 1);
  put_file(path, buf, total);
  free(buf);
}

/* JSON written with ' for " (so the tests stay readable), padded with pad spaces. */
static void craft(const char *path, const char *json, size_t pad, size_t data_len) {
  size_t n = strlen(json);
  char *hdr = malloc(n + pad + 1);
  for (size_t i = 0; i < n; i++) hdr[i] = json[i] == '\'' ? '"' : json[i];
  memset(hdr + n, ' ', pad);
  craft_raw(path, n + pad, hdr, n + pad, data_len);
  free(hdr);
}

/* st_open must fail with a message naming the file, the tensor (if given) and containing
 * what. Returns 1 when it does. */
static int open_fails(const char *path, const char *tensor, const char *what) {
  st_file f;
  char err[2048] = "";
  if (st_open(&f, path, err, sizeof err) == 0) {
    fprintf(stderr, "  %s opened, expected an error containing '%s'\n", path, what);
    st_close(&f);
    return 0;
  }
  if (g_verbose) printf("  [st_open] %s\n", err);
  int ok = f.fd == -1 && f.tensors == NULL && f.n_tensors == 0;
  ok = ok && !strncmp(err, path, strlen(path)) && strstr(err, what) && !strchr(err, '\n');
  if (tensor) {
    char needle[512];
    snprintf(needle, sizeof needle, "tensor '%s'", tensor);
    ok = ok && strstr(err, needle);
  }
  if (!ok) fprintf(stderr, "  unexpected error text: %s (wanted tensor '%s', '%s')\n", err,
                   tensor ? tensor : "", what);
  return ok;
}

#define BAD(json, pad, data_len, tensor, what)                                           \
  do {                                                                                   \
    char p_[600];                                                                        \
    path_in(p_, sizeof p_, "bad.safetensors");                                           \
    craft(p_, json, pad, data_len);                                                      \
    CHECK(open_fails(p_, tensor, what), "%s", json);                                     \
  } while (0)

#define GOOD(json, pad, data_len)                                                        \
  do {                                                                                   \
    char p_[600], e_[2048] = "";                                                         \
    st_file f_;                                                                          \
    path_in(p_, sizeof p_, "good.safetensors");                                          \
    craft(p_, json, pad, data_len);                                                      \
    CHECK(st_open(&f_, p_, e_, sizeof e_) == 0, "%s: %s", json, e_);                     \
    st_close(&f_);                                                                       \
  } while (0)

static float *values(int64_t n, float base) {
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = base + (float)i * 0.375f - (float)(i % 5) * 1.5f;
  return v;
}

static void test_round_trip(void) {
  char path[600], err[2048] = "";
  path_in(path, sizeof path, "model.safetensors");
  float scalar = 3.25f;
  float *bias = values(5, 1);
  float *w = values(12, -2);
  float *conv = values(2 * 3 * 2 * 2, 0.5f);
  float special[6] = {0.0f, -0.0f, 1e-42f /* denormal */, -1e30f, 1.0f / 0.0f, 0.0f};
  special[5] = special[4] - special[4]; /* NaN */
  float *big = values(1 << 20, 7);      /* 4 MiB */
  const st_entry e[] = {
      {"scalar", &scalar, 0, {0}},
      {"bias", bias, 1, {5}},
      {"0.attn.qkv.weight", w, 2, {3, 4}},
      {"conv", conv, 4, {2, 3, 2, 2}},
      {"empty", NULL, 2, {0, 7}},
      {"special", special, 1, {6}},
      {"gr\xc3\xb6\xc3\x9f" "e \"quoted\"\\", bias, 1, {5}}, /* UTF-8, a quote and a backslash */
      {"big", big, 2, {1024, 1024}},
  };
  const int n = (int)(sizeof e / sizeof e[0]);
  const char *mk[] = {"format", "step", "note"};
  const char *mv[] = {"pt", "42", "line\nbreak \"and quotes\""};
  uint32_t crc = 0;
  CHECK(st_write(path, e, n, mk, mv, 3, &crc, err, sizeof err) == 0, "write: %s", err);
  CHECK(count_prefix("model.safetensors.tmp.") == 0, "temporary file left behind");

  /* the CRC st_write reports is the file's, computed independently too */
  uint32_t crc2 = 0;
  CHECK(st_file_crc32(path, &crc2, err, sizeof err) == 0, "crc: %s", err);
  CHECK(crc == crc2, "st_write crc %08x, st_file_crc32 %08x", crc, crc2);
  size_t len = 0;
  unsigned char *bytes = get_file(path, &len);
  CHECK(bytes && crc == (uint32_t)crc32(0L, bytes, (uInt)len), "zlib crc of the file differs");

  /* raw layout: header length a multiple of 8, padded with spaces */
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | bytes[i];
  CHECK(hl % 8 == 0 && 8 + hl <= len, "header length %llu", (unsigned long long)hl);
  CHECK(bytes[8] == '{', "header starts with %c", bytes[8]);
  free(bytes);

  st_file f;
  CHECK(st_open(&f, path, err, sizeof err) == 0, "open: %s", err);
  CHECK(f.n_tensors == n, "%d tensors", f.n_tensors);
  CHECK(f.data_start == 8 + hl && f.data_start % 8 == 0, "data_start %llu", (unsigned long long)f.data_start);
  CHECK(f.file_size == len, "file_size");
  uint64_t off = 0;
  for (int i = 0; i < n && i < f.n_tensors; i++) {
    const st_tensor *t = &f.tensors[i];
    CHECK(!strcmp(t->name, e[i].name), "order: tensor %d is '%s', expected '%s'", i, t->name, e[i].name);
    CHECK(!strcmp(t->dtype, "F32"), "dtype %s", t->dtype);
    CHECK(t->ndim == e[i].ndim, "%s ndim %d", t->name, t->ndim);
    int64_t numel = 1;
    for (int d = 0; d < e[i].ndim; d++) {
      CHECK(t->shape[d] == e[i].shape[d], "%s shape[%d]", t->name, d);
      numel *= e[i].shape[d];
    }
    CHECK(t->numel == numel, "%s numel %lld", t->name, (long long)t->numel);
    CHECK(t->begin == off && t->end == off + (uint64_t)numel * 4, "%s offsets contiguous in order", t->name);
    off = t->end;
    CHECK(st_find(&f, e[i].name) == t, "st_find %s", e[i].name);
    float *got = malloc((size_t)(numel ? numel : 1) * 4);
    CHECK(st_read_f32(&f, t, e[i].ndim, e[i].shape, got, err, sizeof err) == 0, "read %s: %s", t->name, err);
    CHECK(numel == 0 || !memcmp(got, e[i].data, (size_t)numel * 4), "%s values differ", t->name);
    free(got);
  }
  CHECK(f.file_size == f.data_start + off, "data section fully covered");
  CHECK(st_find(&f, "missing") == NULL, "st_find of a missing tensor");
  CHECK(f.n_meta == 3, "%d metadata", f.n_meta);
  CHECK(st_meta(&f, "format") && !strcmp(st_meta(&f, "format"), "pt"), "meta format");
  CHECK(st_meta(&f, "step") && !strcmp(st_meta(&f, "step"), "42"), "meta step");
  CHECK(st_meta(&f, "note") && !strcmp(st_meta(&f, "note"), mv[2]), "meta note");
  CHECK(st_meta(&f, "nope") == NULL, "missing meta");

  /* st_read_f32: wrong shapes name both */
  const st_tensor *t = st_find(&f, "0.attn.qkv.weight");
  float buf[64];
  int64_t wrong[2] = {4, 3};
  CHECK(st_read_f32(&f, t, 2, wrong, buf, err, sizeof err) != 0 && strstr(err, "[3, 4]") &&
            strstr(err, "[4, 3]") && strstr(err, "tensor '0.attn.qkv.weight'") && strstr(err, path),
        "wrong shape: %s", err);
  if (g_verbose) printf("  [st_read_f32] %s\n", err);
  int64_t flat[1] = {12};
  CHECK(st_read_f32(&f, t, 1, flat, buf, err, sizeof err) != 0 && strstr(err, "[12]"), "wrong ndim: %s", err);
  CHECK(st_read_f32(&f, st_find(&f, "scalar"), 1, (int64_t[]){1}, buf, err, sizeof err) != 0 &&
            strstr(err, "[]") && strstr(err, "[1]"),
        "0-d vs [1]: %s", err);
  st_close(&f);
  CHECK(f.fd == -1 && f.tensors == NULL, "st_close resets");
  st_close(&f); /* twice is harmless */

  /* overwriting replaces the file */
  const st_entry e2[] = {{"only", bias, 1, {5}}};
  CHECK(st_write(path, e2, 1, NULL, NULL, 0, NULL, err, sizeof err) == 0, "rewrite: %s", err);
  CHECK(st_open(&f, path, err, sizeof err) == 0 && f.n_tensors == 1 && f.n_meta == 0, "reopen: %s", err);
  st_close(&f);

  /* no tensors at all: "{}" padded to 8 */
  CHECK(st_write(path, NULL, 0, NULL, NULL, 0, &crc, err, sizeof err) == 0, "empty write: %s", err);
  CHECK(st_open(&f, path, err, sizeof err) == 0 && f.n_tensors == 0 && f.file_size == 16, "empty file: %s", err);
  st_close(&f);
  free(bias);
  free(w);
  free(conv);
  free(big);
}

static void test_header_failures(void) {
  char path[600];
  path_in(path, sizeof path, "bad.safetensors");
  /* shorter than the length field */
  put_file(path, "\x05\0\0", 3);
  CHECK(open_fails(path, NULL, "too short"), "3-byte file");
  put_file(path, "", 0);
  CHECK(open_fails(path, NULL, "too short"), "empty file");
  /* length field: zero, hostile, past the end */
  craft_raw(path, 0, "", 0, 0);
  CHECK(open_fails(path, NULL, "header length is 0"), "zero header length");
  craft_raw(path, 200000000, "{}", 2, 0);
  CHECK(open_fails(path, NULL, "larger than the limit"), "huge header length");
  craft_raw(path, UINT64_MAX, "{}", 2, 0);
  CHECK(open_fails(path, NULL, "larger than the limit"), "u64 max header length");
  craft_raw(path, 1000, "{}      ", 8, 20);
  CHECK(open_fails(path, NULL, "runs past the end of the file"), "header past the end");
  /* header bytes */
  craft_raw(path, 8, "{}\0     ", 8, 0);
  CHECK(open_fails(path, NULL, "NUL byte at offset 2"), "NUL in header");
  craft_raw(path, 8, "{\"\xff\":1} ", 8, 0);
  CHECK(open_fails(path, NULL, "not valid UTF-8"), "invalid UTF-8");
  craft_raw(path, 10, "{\"\xed\xa0\x80\":1} ", 10, 0);
  CHECK(open_fails(path, NULL, "not valid UTF-8"), "UTF-16 surrogate in UTF-8");
  BAD("{'a\\u0000b': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}", 0, 4, NULL, "u0000 escape");
  GOOD("{'a\\\\u0000b': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}", 0, 4); /* an escaped backslash */
  BAD("{'a': {'dtype': 'F32',", 0, 0, NULL, "not valid JSON");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}}", 0, 4, NULL, "text after the JSON");
  BAD("{}x", 5, 0, NULL, "text after the JSON");
  BAD("[1, 2]", 2, 0, NULL, "not a JSON object");
  BAD(" {}", 5, 0, NULL, "not a JSON object");
  BAD("'a'", 5, 0, NULL, "not a JSON object");
  /* data not covered */
  BAD("{}", 6, 4, NULL, "data section is 4 bytes but the tensors cover 0");
  /* metadata */
  BAD("{'__metadata__': 5}", 0, 0, NULL, "__metadata__ is 5, not an object of strings");
  BAD("{'__metadata__': {'a': 'x', 'b': 1}}", 0, 0, NULL, "__metadata__: 'b' is 1, not a string");
  BAD("{'__metadata__': {'a': 'x', 'a': 'y'}}", 0, 0, NULL, "key 'a' appears twice");
  BAD("{'__metadata__': {}, '__metadata__': {}}", 0, 0, NULL, "__metadata__ appears twice");
}

static void test_entry_failures(void) {
  /* the message of the brief, verbatim */
  char path[600], err[2048] = "", want[1024];
  path_in(path, sizeof path, "bad.safetensors");
  craft(path, "{'3.attn.qkv.weight': {'dtype': 'F32', 'shape': [3, 5], 'data_offsets': [0, 100]}}", 0, 100);
  st_file f;
  snprintf(want, sizeof want, "%s: tensor '3.attn.qkv.weight': data_offsets [0, 100] hold 100 bytes but F32 [3, 5] needs 60", path);
  CHECK(st_open(&f, path, err, sizeof err) != 0 && !strcmp(err, want), "got: %s", err);

  BAD("{'a': 5}", 0, 0, "a", "entry is 5, not an object");
  BAD("{'a': [1]}", 0, 0, "a", "not an object");
  BAD("{'a': {'shape': [1], 'data_offsets': [0, 4]}}", 0, 4, "a", "missing \"dtype\"");
  BAD("{'a': {'dtype': 4, 'shape': [1], 'data_offsets': [0, 4]}}", 0, 4, "a", "dtype is 4, not a string");
  BAD("{'a': {'dtype': 'F31', 'shape': [1], 'data_offsets': [0, 4]}}", 0, 4, "a", "unknown dtype 'F31'");
  BAD("{'a': {'dtype': 'F32', 'data_offsets': [0, 4]}}", 0, 4, "a", "missing \"shape\"");
  BAD("{'a': {'dtype': 'F32', 'shape': 1, 'data_offsets': [0, 4]}}", 0, 4, "a", "shape is 1, not an array");
  BAD("{'a': {'dtype': 'F32', 'shape': ['1'], 'data_offsets': [0, 4]}}", 0, 4, "a", "shape[0] is \"1\": is not a number");
  BAD("{'a': {'dtype': 'F32', 'shape': [2, 1.5], 'data_offsets': [0, 12]}}", 0, 12, "a", "shape[1] is 1.5: is not an integer");
  BAD("{'a': {'dtype': 'F32', 'shape': [2, -1], 'data_offsets': [0, 0]}}", 0, 0, "a", "shape[1] is -1: a negative dimension");
  BAD("{'a': {'dtype': 'F32', 'shape': [1e300], 'data_offsets': [0, 0]}}", 0, 0, "a", "out of range");
  BAD("{'a': {'dtype': 'F32', 'shape': [1,1,1,1,1,1,1,1,1], 'data_offsets': [0, 4]}}", 0, 4, "a", "9 dimensions");
  BAD("{'a': {'dtype': 'F32', 'shape': [4294967296, 4294967296, 4294967296], 'data_offsets': [0, 4]}}", 0, 4,
      "a", "element count overflows");
  BAD("{'a': {'dtype': 'F32', 'shape': [4503599627370496, 512], 'data_offsets': [0, 4]}}", 0, 4, "a",
      "byte count overflows");
  BAD("{'a': {'dtype': 'F32', 'shape': [1]}}", 0, 4, "a", "missing \"data_offsets\"");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0]}}", 0, 4, "a", "data_offsets is [0], expected [begin, end]");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': {'b': 0}}}", 0, 4, "a", "expected [begin, end]");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, '4']}}", 0, 4, "a", "data_offsets[1] is \"4\": is not a number");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [-4, 0]}}", 0, 4, "a", "data_offsets[0] is -4: negative");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0.5, 4]}}", 0, 4, "a", "is not an integer");
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 18014398509481984]}}", 0, 4, "a", "out of range");
  BAD("{'a': {'dtype': 'F32', 'shape': [0], 'data_offsets': [4, 0]}}", 0, 4, "a", "end before they begin");
  BAD("{'a': {'dtype': 'F32', 'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}", 0, 4, "a",
      "field \"dtype\" appears twice");
  BAD("{'a': {'dtype': 'BF16', 'shape': [3], 'data_offsets': [0, 4]}}", 0, 4, "a", "hold 4 bytes but BF16 [3] needs 6");
  BAD("{'s': {'dtype': 'F64', 'shape': [], 'data_offsets': [0, 4]}}", 0, 4, "s", "hold 4 bytes but F64 [] needs 8");
  /* names */
  BAD("{'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}, 'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [4, 8]}}",
      0, 8, "a", "appears twice");
  {
    char json[1024], name[301];
    memset(name, 'n', 300);
    name[300] = 0;
    snprintf(json, sizeof json, "{'%s': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}", name);
    char p[600];
    path_in(p, sizeof p, "bad.safetensors");
    craft(p, json, 0, 4);
    CHECK(open_fails(p, NULL, "nnnnnnnn...': name is 300 bytes long, at most 255 allowed"), "long name");
    name[255] = 0; /* 255 bytes: the longest allowed */
    snprintf(json, sizeof json, "{'%s': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}", name);
    GOOD(json, 0, 4);
  }
  /* layout */
  BAD("{'a': {'dtype': 'F32', 'shape': [25], 'data_offsets': [0, 100]}}", 0, 40, "a",
      "data_offsets [0, 100] run past the end of the data section (40 bytes)");
  BAD("{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}, 'b': {'dtype': 'F32', 'shape': [4], 'data_offsets': [8, 24]}}",
      0, 24, "b", "data_offsets [8, 24] overlap tensor 'a' [0, 16]");
  BAD("{'b': {'dtype': 'F32', 'shape': [4], 'data_offsets': [8, 24]}, 'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}}",
      0, 24, "b", "overlap tensor 'a'");
  BAD("{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}, 'b': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}}",
      0, 16, "b", "overlap tensor 'a'");
  BAD("{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}, 'b': {'dtype': 'F32', 'shape': [4], 'data_offsets': [20, 36]}}",
      0, 36, "b", "gap of 4 bytes after tensor 'a'");
  BAD("{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [4, 20]}}", 0, 20, "a",
      "leave a gap of 4 bytes at the start of the data section");
  BAD("{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}, 'z': {'dtype': 'F32', 'shape': [0], 'data_offsets': [8, 8]}}",
      0, 16, "z", "overlap tensor 'a'");
  BAD("{'a': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}}", 0, 20, NULL,
      "data section is 20 bytes but the tensors cover 16");
  /* accepted: other dtypes, unpadded and pretty-printed headers, unknown fields, empty tensors
   * anywhere their offsets are contiguous, data stored in another order than the header's */
  GOOD("{'i': {'dtype': 'I64', 'shape': [2], 'data_offsets': [0, 16]}, 'h': {'dtype': 'BF16', 'shape': [3], 'data_offsets': [16, 22]},"
       " 'b': {'dtype': 'BOOL', 'shape': [1, 1], 'data_offsets': [22, 23]}}", 0, 23);
  GOOD("{\n  'a': {\n\t'dtype': 'F32',\r\n 'shape': [1], 'data_offsets': [0, 4], 'extra': {'x': [1]}}\n}\n", 3, 4);
  GOOD("{'e': {'dtype': 'F32', 'shape': [0, 3], 'data_offsets': [0, 0]}, 'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]},"
       " 'z': {'dtype': 'F32', 'shape': [5, 0], 'data_offsets': [4, 4]}}", 0, 4);
  GOOD("{'__metadata__': {}, 'x': {'dtype': 'U8', 'shape': [3], 'data_offsets': [0, 3]}}", 1, 3);
}

/* st_read_f32 honours the header's offsets, checks dtype, and notices truncation after open. */
static void test_read_failures(void) {
  char path[600], err[2048] = "";
  path_in(path, sizeof path, "order.safetensors");
  /* b's data first in the file, a's after it */
  craft(path, "{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}, 'b': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]},"
              " 'h': {'dtype': 'BF16', 'shape': [2], 'data_offsets': [12, 16]}}", 0, 16);
  st_file f;
  CHECK(st_open(&f, path, err, sizeof err) == 0, "open: %s", err);
  size_t len = 0;
  unsigned char *bytes = get_file(path, &len);
  float a[2] = {0}, b = 0, want_a[2], want_b;
  memcpy(want_a, bytes + f.data_start + 4, 8);
  memcpy(&want_b, bytes + f.data_start, 4);
  free(bytes);
  CHECK(st_read_f32(&f, st_find(&f, "a"), 1, (int64_t[]){2}, a, err, sizeof err) == 0 && !memcmp(a, want_a, 8),
        "a from offset 4: %s", err);
  CHECK(st_read_f32(&f, st_find(&f, "b"), 1, (int64_t[]){1}, &b, err, sizeof err) == 0 && !memcmp(&b, &want_b, 4),
        "b from offset 0: %s", err);
  CHECK(st_read_f32(&f, st_find(&f, "h"), 1, (int64_t[]){2}, a, err, sizeof err) != 0 && strstr(err, "tensor 'h'") &&
            strstr(err, "BF16") && strstr(err, "expected F32"),
        "dtype: %s", err);
  if (g_verbose) printf("  [st_read_f32] %s\n", err);
  CHECK(st_read_f32(&f, NULL, 0, NULL, a, err, sizeof err) != 0, "NULL tensor");
  CHECK(st_read_f32(&f, st_find(&f, "a"), 9, (int64_t[9]){0}, a, err, sizeof err) != 0, "9 dims");
  /* the file shrinks after st_open */
  CHECK(truncate(path, (off_t)(f.data_start + 8)) == 0, "truncate");
  CHECK(st_read_f32(&f, st_find(&f, "a"), 1, (int64_t[]){2}, a, err, sizeof err) != 0 && strstr(err, "truncated") &&
            strstr(err, "tensor 'a'") && strstr(err, path),
        "truncated after open: %s", err);
  if (g_verbose) printf("  [st_read_f32] %s\n", err);
  st_close(&f);
  /* ... and before: the header's offsets no longer fit */
  CHECK(open_fails(path, "a", "run past the end of the data section"), "truncated file");
}

static void test_crc_and_corruption(void) {
  char path[600], err[2048] = "";
  path_in(path, sizeof path, "crc.safetensors");
  float *v = values(100, 1);
  const st_entry e[] = {{"v", v, 2, {10, 10}}};
  uint32_t crc = 0, now = 0;
  CHECK(st_write(path, e, 1, NULL, NULL, 0, &crc, err, sizeof err) == 0, "write: %s", err);
  st_file f;
  CHECK(st_open(&f, path, err, sizeof err) == 0, "open: %s", err);
  uint64_t at = f.data_start + 123;
  st_close(&f);
  /* flip one data byte: the file still opens but its CRC changes */
  FILE *fp = fopen(path, "r+b");
  int c = 0;
  if (fp) {
    fseek(fp, (long)at, SEEK_SET);
    c = fgetc(fp);
    fseek(fp, (long)at, SEEK_SET);
    fputc(c ^ 0x10, fp);
    fclose(fp);
  }
  CHECK(st_open(&f, path, err, sizeof err) == 0, "flipped byte still opens: %s", err);
  float got[100];
  CHECK(st_read_f32(&f, st_find(&f, "v"), 2, (int64_t[]){10, 10}, got, err, sizeof err) == 0 &&
            memcmp(got, v, sizeof got) != 0,
        "flipped value read back");
  st_close(&f);
  CHECK(st_file_crc32(path, &now, err, sizeof err) == 0 && now != crc, "CRC detects the flip (%08x vs %08x)", now, crc);
  CHECK(st_file_crc32("/nonexistent/x.safetensors", &now, err, sizeof err) != 0 && strstr(err, "/nonexistent/x.safetensors"),
        "crc of a missing file: %s", err);
  /* not a regular file, missing file */
  CHECK(open_fails(g_dir, NULL, "not a regular file"), "directory");
  char missing[600];
  path_in(missing, sizeof missing, "missing.safetensors");
  CHECK(open_fails(missing, NULL, "cannot open"), "missing file");
  free(v);
}

static void test_atomic_write(void) {
  char path[600], err[2048] = "", tmp[700];
  path_in(path, sizeof path, "atomic.safetensors");
  float *old = values(64, 1), *new = values(1 << 18, -3);
  const st_entry e_old[] = {{"w", old, 1, {64}}};
  uint32_t crc_old = 0, crc = 0;
  CHECK(st_write(path, e_old, 1, NULL, NULL, 0, &crc_old, err, sizeof err) == 0, "write: %s", err);

  /* a directory that does not exist: -1, the path named, nothing created */
  char nodir[700];
  snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", g_dir);
  CHECK(st_write(nodir, e_old, 1, NULL, NULL, 0, NULL, err, sizeof err) != 0 && strstr(err, nodir) &&
            strstr(err, "No such file"),
        "missing directory: %s", err);
  if (g_verbose) printf("  [st_write] %s\n", err);

  /* a write that fails half way (file size limit: EFBIG, works as root too): old file intact,
   * temporary file removed */
  struct rlimit saved, small;
  if (getrlimit(RLIMIT_FSIZE, &saved) == 0) {
    small = saved;
    small.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    const st_entry e_big[] = {{"w", new, 1, {1 << 18}}};
    int rc = -2;
    if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
      rc = st_write(path, e_big, 1, NULL, NULL, 0, NULL, err, sizeof err);
      setrlimit(RLIMIT_FSIZE, &saved);
    }
    signal(SIGXFSZ, prev);
    CHECK(rc == -1 && strstr(err, "too large"), "write past RLIMIT_FSIZE: rc %d: %s", rc, err);
    if (g_verbose) printf("  [st_write] %s\n", err);
    CHECK(count_prefix("atomic.safetensors.tmp.") == 0, "temporary file left behind after a failed write");
    CHECK(st_file_crc32(path, &crc, err, sizeof err) == 0 && crc == crc_old, "old file changed by a failed write");
  }

  /* rename onto a directory fails after the data is written: temporary file removed */
  char dirpath[600];
  path_in(dirpath, sizeof dirpath, "adir.safetensors");
  mkdir(dirpath, 0755);
  CHECK(st_write(dirpath, e_old, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "rename"),
        "rename onto a directory: %s", err);
  if (g_verbose) printf("  [st_write] %s\n", err);
  CHECK(count_prefix("adir.safetensors.tmp.") == 0, "temporary file left behind after a failed rename");
  rmdir(dirpath);

  /* an interrupted write (another process died half way) leaves only a stale temporary file:
   * PATH still opens with the old contents, and the next write replaces PATH normally */
  snprintf(tmp, sizeof tmp, "%s.tmp.999999", path);
  put_file(tmp, "\x40\0\0\0\0\0\0\0{\"w\":{\"dtype\":\"F3", 24);
  st_file f;
  float got[64];
  CHECK(st_open(&f, path, err, sizeof err) == 0 &&
            st_read_f32(&f, st_find(&f, "w"), 1, (int64_t[]){64}, got, err, sizeof err) == 0 &&
            !memcmp(got, old, sizeof got),
        "old file after an interrupted write: %s", err);
  st_close(&f);
  /* our own pid's stale temporary file is overwritten */
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  put_file(tmp, "garbage garbage garbage garbage", 31);
  const st_entry e_new[] = {{"w", new, 2, {512, 512}}};
  CHECK(st_write(path, e_new, 1, NULL, NULL, 0, &crc, err, sizeof err) == 0, "write after interruption: %s", err);
  CHECK(!file_exists(tmp), "own temporary file renamed away");
  snprintf(tmp, sizeof tmp, "%s.tmp.999999", path);
  CHECK(file_exists(tmp), "another process's temporary file is left alone");
  unlink(tmp);
  float *back = malloc((size_t)(1 << 18) * 4);
  CHECK(st_open(&f, path, err, sizeof err) == 0 &&
            st_read_f32(&f, st_find(&f, "w"), 2, (int64_t[]){512, 512}, back, err, sizeof err) == 0 &&
            !memcmp(back, new, (size_t)(1 << 18) * 4),
        "new contents: %s", err);
  st_close(&f);
  free(back);

  /* bad entries are refused before anything is written */
  char bad[600];
  path_in(bad, sizeof bad, "refused.safetensors");
  char longname[300];
  memset(longname, 'x', 299);
  longname[299] = 0;
  const st_entry dup[] = {{"a", old, 1, {4}}, {"b", old, 1, {4}}, {"a", old, 1, {4}}};
  const st_entry neg[] = {{"a", old, 2, {4, -1}}};
  const st_entry many[] = {{"a", old, 9, {1, 1, 1, 1, 1, 1, 1, 1}}};
  const st_entry lng[] = {{longname, old, 1, {4}}};
  const st_entry res[] = {{"__metadata__", old, 1, {4}}};
  const st_entry nodata[] = {{"a", NULL, 1, {4}}};
  const st_entry noname[] = {{NULL, old, 1, {4}}};
  const st_entry badutf[] = {{"\xc3(", old, 1, {4}}};
  CHECK(st_write(bad, dup, 3, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "tensor 'a'") &&
            strstr(err, "twice"), "duplicate: %s", err);
  CHECK(st_write(bad, neg, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "negative"), "negative: %s", err);
  CHECK(st_write(bad, many, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "9 dimensions"), "ndim: %s", err);
  CHECK(st_write(bad, lng, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "299 bytes"), "long: %s", err);
  CHECK(st_write(bad, res, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "reserved"), "reserved: %s", err);
  CHECK(st_write(bad, nodata, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "no data"), "no data: %s", err);
  CHECK(st_write(bad, noname, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1, "no name: %s", err);
  CHECK(st_write(bad, badutf, 1, NULL, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "UTF-8"), "utf8: %s", err);
  const char *k2[] = {"k", "k"}, *v2[] = {"1", "2"};
  CHECK(st_write(bad, e_old, 1, k2, v2, 2, NULL, err, sizeof err) == -1 && strstr(err, "key 'k' given twice"),
        "dup meta: %s", err);
  CHECK(!file_exists(bad) && count_prefix("refused.safetensors") == 0, "refused writes created files");
  free(old);
  free(new);
}

static void remove_dir(void) {
  DIR *d = opendir(g_dir);
  struct dirent *de;
  char p[1200];
  while (d && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
    if (unlink(p) != 0) rmdir(p);
  }
  if (d) closedir(d);
  rmdir(g_dir);
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/pt_safetensors_XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(g_dir)) {
    fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
    return 1;
  }
  g_verbose = getenv("ST_TEST_VERBOSE") != NULL;
  test_round_trip();
  test_header_failures();
  test_entry_failures();
  test_read_failures();
  test_crc_and_corruption();
  test_atomic_write();
  remove_dir();
  return test_summary("test_safetensors");
}
