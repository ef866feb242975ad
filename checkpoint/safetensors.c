/* checkpoint/safetensors.c: safetensors reading (validated before use) and atomic writing.
 *
 * Reading: the 8-byte header length, then the header (no NUL bytes nor backslash-u0000 escapes,
 * valid UTF-8, a JSON object starting with '{' and followed only by whitespace), then every entry (dtype known, shape of
 * non-negative integers, data_offsets [begin, end] with end - begin == numel * dtype size), then
 * the layout (duplicate names, offsets inside the data section, no overlap, no gap, the data
 * section exactly covered). Unknown fields inside an entry are ignored (as the reference
 * implementation does); a field given twice is an error. JSON numbers must be integral and at
 * most 2^53 (exact in a double): that bounds files to 9 PB.
 *
 * Writing: the header is built with cJSON, integers printed by us (cJSON would print large
 * ones in exponent notation), padded with spaces so the data starts at a multiple of 8; the
 * tensor data goes straight from the caller's buffers to PATH.tmp.<pid>, CRC-32 computed on the
 * way; fsync, rename, fsync of the directory.
 */
#include "checkpoint/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads and writes tensors in host byte order: it needs a little-endian host"
#endif

#define ST_HEADER_MAX 100000000ull      /* larger headers are rejected as hostile */
#define ST_EXACT_MAX 9007199254740992.0 /* 2^53: the largest integer a JSON double holds exactly */
#define ST_IO_CHUNK ((size_t)1 << 30)   /* largest single read/write/crc32 call */

static const struct {
  const char *name;
  int size;
} k_dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};
#define N_DTYPES ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))

static int dtype_size(const char *name) {
  for (int i = 0; i < N_DTYPES; i++)
    if (!strcmp(k_dtypes[i].name, name)) return k_dtypes[i].size;
  return 0;
}

/* ---- messages ---------------------------------------------------------------------------- */

/* A name or text made printable on one line: control bytes become '?', long text is cut to
 * max bytes followed by "...". */
static void printable(char *dst, size_t dstsz, const char *src, size_t max) {
  size_t n = 0, len = strlen(src);
  for (size_t i = 0; i < len && i < max && n + 1 < dstsz; i++) {
    unsigned char c = (unsigned char)src[i];
    dst[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (len > max)
    for (int k = 0; k < 3 && n + 1 < dstsz; k++) dst[n++] = '.';
  dst[n] = 0;
}

typedef struct {
  const char *path;
  char *err;
  size_t errsz;
} ctx_t;

/* "PATH: tensor 'NAME': message" (or "PATH: message" with name NULL). */
static int fail(const ctx_t *c, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const ctx_t *c, const char *name, const char *fmt, ...) {
  char msg[1024], nm[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (name) {
    printable(nm, sizeof nm, name, 100);
    pt_errorf(c->err, c->errsz, "%s: tensor '%s': %s", c->path, nm, msg);
  } else {
    pt_errorf(c->err, c->errsz, "%s: %s", c->path, msg);
  }
  return -1;
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Short printable JSON text of an item for messages ("1.5", "\"abc\"", "[1,2]"). */
static void json_snippet(char *buf, size_t n, const cJSON *item) {
  char *s = cJSON_PrintUnformatted(item);
  if (!s) {
    snprintf(buf, n, "(unprintable)");
    return;
  }
  printable(buf, n, s, 40);
  cJSON_free(s);
}

/* ---- small helpers ----------------------------------------------------------------------- */

/* Reads exactly n bytes at off (fewer only at end of file). Returns bytes read or -1. */
static int64_t pread_full(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    size_t want = n - got < ST_IO_CHUNK ? n - got : ST_IO_CHUNK;
    ssize_t r = pread(fd, (char *)buf + got, want, (off_t)(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  return (int64_t)got;
}

static int write_full(int fd, const void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    size_t want = n - done < ST_IO_CHUNK ? n - done : ST_IO_CHUNK;
    ssize_t w = write(fd, (const char *)buf + done, want);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (w == 0) {
      errno = EIO;
      return -1;
    }
    done += (size_t)w;
  }
  return 0;
}

static uLong crc_update(uLong crc, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n > 0) {
    size_t k = n < ST_IO_CHUNK ? n : ST_IO_CHUNK;
    crc = crc32(crc, p, (uInt)k);
    p += k;
    n -= k;
  }
  return crc;
}

/* Returns the offset of the first byte that is not valid UTF-8, or -1 when all of s is. */
static int64_t utf8_invalid_at(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return (int64_t)i;
    }
    if (i + len > n) return (int64_t)i;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return (int64_t)i;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return (int64_t)i;
    i += len;
  }
  return -1;
}

/* A JSON number that is a non-negative-or-negative integer of magnitude at most 2^53.
 * Returns NULL and sets *out, or a reason ("is not a number", ...). */
static const char *json_int(const cJSON *it, int64_t *out) {
  if (!cJSON_IsNumber(it)) return "is not a number";
  double d = it->valuedouble;
  if (!(d >= -ST_EXACT_MAX && d <= ST_EXACT_MAX)) return "is out of range (more than 2^53)";
  int64_t v = (int64_t)d;
  if ((double)v != d) return "is not an integer";
  *out = v;
  return NULL;
}

/* ---- reading ----------------------------------------------------------------------------- */

static int parse_entry(const ctx_t *c, const cJSON *e, st_tensor *t) {
  const char *name = e->string;
  char snip[64];
  size_t len = strlen(name);
  if (len >= ST_NAME_MAX)
    return fail(c, name, "name is %zu bytes long, at most %d allowed", len, ST_NAME_MAX - 1);
  memcpy(t->name, name, len + 1);
  if (!cJSON_IsObject(e)) {
    json_snippet(snip, sizeof snip, e);
    return fail(c, name, "entry is %s, not an object with dtype, shape and data_offsets", snip);
  }
  const cJSON *dt = NULL, *sh = NULL, *off = NULL, *it;
  cJSON_ArrayForEach(it, e) {
    const cJSON **slot = !strcmp(it->string, "dtype")          ? &dt
                         : !strcmp(it->string, "shape")        ? &sh
                         : !strcmp(it->string, "data_offsets") ? &off
                                                               : NULL;
    if (!slot) continue; /* unknown fields are ignored, as by the reference implementation */
    if (*slot) return fail(c, name, "field \"%s\" appears twice", it->string);
    *slot = it;
  }
  /* dtype */
  if (!dt) return fail(c, name, "missing \"dtype\"");
  if (!cJSON_IsString(dt)) {
    json_snippet(snip, sizeof snip, dt);
    return fail(c, name, "dtype is %s, not a string", snip);
  }
  int size = dtype_size(dt->valuestring);
  if (!size) {
    char known[256];
    size_t k = 0;
    for (int i = 0; i < N_DTYPES && k < sizeof known; i++)
      k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", k_dtypes[i].name);
    printable(snip, sizeof snip, dt->valuestring, 20);
    return fail(c, name, "unknown dtype '%s' (known: %s)", snip, known);
  }
  snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
  /* shape */
  if (!sh) return fail(c, name, "missing \"shape\"");
  if (!cJSON_IsArray(sh)) {
    json_snippet(snip, sizeof snip, sh);
    return fail(c, name, "shape is %s, not an array of dimensions", snip);
  }
  int ndim = cJSON_GetArraySize(sh);
  if (ndim > ST_MAX_DIMS)
    return fail(c, name, "shape has %d dimensions, at most %d supported", ndim, ST_MAX_DIMS);
  t->ndim = ndim;
  int64_t numel = 1;
  int i = 0;
  cJSON_ArrayForEach(it, sh) {
    int64_t v;
    const char *why = json_int(it, &v);
    if (!why && v < 0) why = "a negative dimension";
    if (why) {
      json_snippet(snip, sizeof snip, it);
      return fail(c, name, "shape[%d] is %s: %s", i, snip, why);
    }
    t->shape[i++] = v;
    if (v != 0 && numel > INT64_MAX / v) {
      char sbuf[256];
      fmt_shape(sbuf, sizeof sbuf, i, t->shape);
      return fail(c, name, "shape %s...: the element count overflows 64 bits", sbuf);
    }
    numel *= v;
  }
  t->numel = numel;
  char sbuf[256];
  fmt_shape(sbuf, sizeof sbuf, ndim, t->shape);
  if (numel > INT64_MAX / size)
    return fail(c, name, "%s %s holds %" PRId64 " elements: the byte count overflows 64 bits",
                t->dtype, sbuf, numel);
  uint64_t need = (uint64_t)numel * (uint64_t)size;
  /* data_offsets */
  if (!off) return fail(c, name, "missing \"data_offsets\"");
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
    json_snippet(snip, sizeof snip, off);
    return fail(c, name, "data_offsets is %s, expected [begin, end]", snip);
  }
  int64_t be[2];
  for (int k = 0; k < 2; k++) {
    const cJSON *o = cJSON_GetArrayItem(off, k);
    const char *why = json_int(o, &be[k]);
    if (!why && be[k] < 0) why = "negative";
    if (why) {
      json_snippet(snip, sizeof snip, o);
      return fail(c, name, "data_offsets[%d] is %s: %s", k, snip, why);
    }
  }
  t->begin = (uint64_t)be[0];
  t->end = (uint64_t)be[1];
  if (t->end < t->begin)
    return fail(c, name, "data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", t->begin,
                t->end);
  if (t->end - t->begin != need)
    return fail(c, name, "data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes but %s %s needs %" PRIu64,
                t->begin, t->end, t->end - t->begin, t->dtype, sbuf, need);
  return 0;
}

typedef struct {
  const char *name;
  int idx;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
  const name_ref *x = a, *y = b;
  int r = strcmp(x->name, y->name);
  return r ? r : (x->idx > y->idx) - (x->idx < y->idx);
}

typedef struct {
  uint64_t begin, end;
  int idx;
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static int parse_metadata(const ctx_t *c, st_file *f, const cJSON *md) {
  char snip[64], key[160];
  if (!cJSON_IsObject(md)) {
    json_snippet(snip, sizeof snip, md);
    return fail(c, NULL, "__metadata__ is %s, not an object of strings", snip);
  }
  int n = cJSON_GetArraySize(md);
  f->meta_keys = pt_calloc((size_t)n, sizeof *f->meta_keys);
  f->meta_values = pt_calloc((size_t)n, sizeof *f->meta_values);
  const cJSON *it;
  cJSON_ArrayForEach(it, md) {
    printable(key, sizeof key, it->string, 100);
    if (!cJSON_IsString(it)) {
      json_snippet(snip, sizeof snip, it);
      return fail(c, NULL, "__metadata__: '%s' is %s, not a string", key, snip);
    }
    for (int k = 0; k < f->n_meta; k++)
      if (!strcmp(f->meta_keys[k], it->string))
        return fail(c, NULL, "__metadata__: key '%s' appears twice", key);
    f->meta_keys[f->n_meta] = pt_strdup(it->string);
    f->meta_values[f->n_meta] = pt_strdup(it->valuestring);
    f->n_meta++;
  }
  return 0;
}

/* Everything after the header has been read into buf (n bytes, NUL-terminated). */
static int parse_header(const ctx_t *c, st_file *f, const char *buf, uint64_t n, uint64_t data_len) {
  char snip[64];
  const char *nul = memchr(buf, 0, n);
  if (nul) return fail(c, NULL, "header has a NUL byte at offset %td", nul - buf);
  int64_t bad = utf8_invalid_at((const unsigned char *)buf, n);
  if (bad >= 0) return fail(c, NULL, "header is not valid UTF-8 (byte %" PRId64 " of the header)", bad);
  for (uint64_t i = 0; i + 1 < n; i++) /* backslashes only occur in JSON strings */
    if (buf[i] == '\\') {
      if (buf[i + 1] == 'u' && i + 6 <= n && !memcmp(buf + i + 2, "0000", 4))
        return fail(c, NULL, "header has a \\u0000 escape (a NUL character) in a string at byte %" PRIu64, i);
      i++; /* skip the escaped character */
    }
  if (buf[0] != '{') {
    printable(snip, sizeof snip, buf, 20);
    return fail(c, NULL, "header is not a JSON object: it starts with '%s' instead of '{'", snip);
  }
  const char *endp = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(buf, (size_t)n, &endp, 0);
  if (!root) {
    size_t at = endp && endp >= buf && endp <= buf + n ? (size_t)(endp - buf) : 0;
    printable(snip, sizeof snip, buf + at, 24);
    return fail(c, NULL, "header is not valid JSON (error at byte %zu of the header, near '%s')", at, snip);
  }
  int rc = -1;
  for (const char *p = endp; p < buf + n; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
      printable(snip, sizeof snip, p, 24);
      fail(c, NULL, "header has text after the JSON object at byte %td: '%s' (only space padding may follow)",
           p - buf, snip);
      goto done;
    }
  if (!cJSON_IsObject(root)) {
    fail(c, NULL, "header is not a JSON object");
    goto done;
  }
  int n_entries = cJSON_GetArraySize(root), n_md = 0;
  const cJSON *it, *md = NULL;
  cJSON_ArrayForEach(it, root) {
    if (strcmp(it->string, "__metadata__")) continue;
    if (md) {
      fail(c, NULL, "__metadata__ appears twice in the header");
      goto done;
    }
    md = it;
    n_md = 1;
  }
  if (md && parse_metadata(c, f, md)) goto done;
  f->tensors = pt_calloc((size_t)(n_entries - n_md), sizeof *f->tensors);
  cJSON_ArrayForEach(it, root) {
    if (it == md) continue;
    if (parse_entry(c, it, &f->tensors[f->n_tensors])) goto done;
    f->n_tensors++;
  }
  int nt = f->n_tensors;
  /* duplicate names */
  name_ref *names = pt_calloc((size_t)nt, sizeof *names);
  for (int i = 0; i < nt; i++) names[i] = (name_ref){f->tensors[i].name, i};
  qsort(names, (size_t)nt, sizeof *names, cmp_name_ref);
  for (int i = 1; i < nt; i++)
    if (!strcmp(names[i].name, names[i - 1].name)) {
      fail(c, names[i].name, "name appears twice in the header");
      free(names);
      goto done;
    }
  free(names);
  /* offsets inside the data section */
  for (int i = 0; i < nt; i++) {
    const st_tensor *t = &f->tensors[i];
    if (t->end > data_len) {
      fail(c, t->name, "data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the data section (%" PRIu64
           " bytes): the file is truncated or the header is wrong", t->begin, t->end, data_len);
      goto done;
    }
  }
  /* contiguous: no overlap, no gap, the whole data section covered */
  span *sp = pt_calloc((size_t)nt, sizeof *sp);
  for (int i = 0; i < nt; i++) sp[i] = (span){f->tensors[i].begin, f->tensors[i].end, i};
  qsort(sp, (size_t)nt, sizeof *sp, cmp_span);
  uint64_t pos = 0;
  int prev = -1;
  for (int i = 0; i < nt; i++) {
    const st_tensor *t = &f->tensors[sp[i].idx];
    if (t->begin < pos) {
      const st_tensor *p = &f->tensors[prev];
      char pn[160];
      printable(pn, sizeof pn, p->name, 100);
      fail(c, t->name, "data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
           t->begin, t->end, pn, p->begin, p->end);
      free(sp);
      goto done;
    }
    if (t->begin > pos) {
      if (prev < 0) {
        fail(c, t->name, "data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap of %" PRIu64
             " bytes at the start of the data section", t->begin, t->end, t->begin);
      } else {
        char pn[160];
        printable(pn, sizeof pn, f->tensors[prev].name, 100);
        fail(c, t->name, "data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap of %" PRIu64
             " bytes after tensor '%s' (which ends at %" PRIu64 ")", t->begin, t->end, t->begin - pos, pn, pos);
      }
      free(sp);
      goto done;
    }
    pos = t->end;
    prev = sp[i].idx;
  }
  free(sp);
  if (pos != data_len) {
    fail(c, NULL, "data section is %" PRIu64 " bytes but the tensors cover %" PRIu64 " (%" PRIu64
         " bytes of unclaimed data at the end)", data_len, pos, data_len - pos);
    goto done;
  }
  rc = 0;
done:
  cJSON_Delete(root);
  return rc;
}

static void st_reset(st_file *f) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
}

void st_close(st_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  for (int i = 0; i < f->n_meta; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->meta_keys);
  free(f->meta_values);
  free(f->tensors);
  st_reset(f);
}

int st_open(st_file *f, const char *path, char *err, size_t errsz) {
  ctx_t c = {path, err, errsz};
  st_reset(f);
  snprintf(f->path, sizeof f->path, "%s", path);
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) return fail(&c, NULL, "cannot open: %s", strerror(errno));
  struct stat sb;
  if (fstat(f->fd, &sb) != 0) {
    fail(&c, NULL, "cannot stat: %s", strerror(errno));
    goto bad;
  }
  if (!S_ISREG(sb.st_mode)) {
    fail(&c, NULL, "not a regular file");
    goto bad;
  }
  f->file_size = (uint64_t)sb.st_size;
  if (f->file_size < 8) {
    fail(&c, NULL, "file is %" PRIu64 " bytes, too short for the 8-byte header length", f->file_size);
    goto bad;
  }
  unsigned char lenb[8];
  int64_t got = pread_full(f->fd, lenb, 8, 0);
  if (got != 8) {
    fail(&c, NULL, "cannot read the header length: %s", got < 0 ? strerror(errno) : "truncated");
    goto bad;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | lenb[i];
  if (n == 0) {
    fail(&c, NULL, "header length is 0: expected a JSON object");
    goto bad;
  }
  if (n > ST_HEADER_MAX) {
    fail(&c, NULL, "header length %" PRIu64 " is larger than the limit of %llu bytes: not a safetensors file",
         n, ST_HEADER_MAX);
    goto bad;
  }
  if (n > f->file_size - 8) {
    fail(&c, NULL, "header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes)", n,
         f->file_size);
    goto bad;
  }
  char *buf = pt_calloc((size_t)n + 1, 1);
  got = pread_full(f->fd, buf, (size_t)n, 8);
  if (got != (int64_t)n) {
    fail(&c, NULL, "cannot read the header: %s", got < 0 ? strerror(errno) : "truncated");
    free(buf);
    goto bad;
  }
  f->data_start = 8 + n;
  int rc = parse_header(&c, f, buf, n, f->file_size - f->data_start);
  free(buf);
  if (rc) goto bad;
  return 0;
bad:
  st_close(f);
  return -1;
}

const st_tensor *st_find(const st_file *f, const char *name) {
  for (int i = 0; i < f->n_tensors; i++)
    if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
  return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
  for (int i = 0; i < f->n_meta; i++)
    if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
  return NULL;
}

int st_read_f32(const st_file *f, const st_tensor *t, int ndim, const int64_t *shape, float *dst,
                char *err, size_t errsz) {
  ctx_t c = {f->path, err, errsz};
  if (!t) return fail(&c, NULL, "st_read_f32: no tensor given");
  char have[256], want[256];
  fmt_shape(have, sizeof have, t->ndim, t->shape);
  if (ndim < 0 || ndim > ST_MAX_DIMS)
    return fail(&c, t->name, "expected shape has %d dimensions (at most %d supported)", ndim, ST_MAX_DIMS);
  fmt_shape(want, sizeof want, ndim, shape);
  if (strcmp(t->dtype, "F32"))
    return fail(&c, t->name, "dtype %s %s in the file, expected F32 %s", t->dtype, have, want);
  int same = ndim == t->ndim;
  for (int i = 0; same && i < ndim; i++) same = shape[i] == t->shape[i];
  if (!same) return fail(&c, t->name, "shape %s in the file, expected %s", have, want);
  uint64_t bytes = t->end - t->begin;
  if (bytes == 0) return 0;
  if (f->fd < 0) return fail(&c, t->name, "the file is not open");
  if (bytes > SIZE_MAX) return fail(&c, t->name, "%" PRIu64 " bytes do not fit in memory", bytes);
  int64_t got = pread_full(f->fd, dst, (size_t)bytes, f->data_start + t->begin);
  if (got < 0) return fail(&c, t->name, "read failed: %s", strerror(errno));
  if ((uint64_t)got != bytes)
    return fail(&c, t->name, "truncated: read %" PRId64 " of %" PRIu64 " bytes at file offset %" PRIu64
                " (the file changed after it was opened?)", got, bytes, f->data_start + t->begin);
  return 0;
}

/* IEEE half to float: every half is exactly a float (subnormals, infinities and NaNs too). */
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      man <<= 1;
      e++;
    } while (!(man & 0x400u));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

int st_read_as_f32(const st_file *f, const st_tensor *t, int ndim, const int64_t *shape,
                   float *dst, char *err, size_t errsz) {
  ctx_t c = {f->path, err, errsz};
  if (!t) return fail(&c, NULL, "st_read_as_f32: no tensor given");
  int half = !strcmp(t->dtype, "F16"), bf16 = !strcmp(t->dtype, "BF16");
  if (!half && !bf16) return st_read_f32(f, t, ndim, shape, dst, err, errsz);
  char have[256], want[256];
  fmt_shape(have, sizeof have, t->ndim, t->shape);
  fmt_shape(want, sizeof want, ndim, shape);
  int same = ndim == t->ndim;
  for (int i = 0; same && i < ndim; i++) same = shape[i] == t->shape[i];
  if (!same) return fail(&c, t->name, "shape %s in the file, expected %s", have, want);
  uint64_t bytes = t->end - t->begin;
  if (bytes == 0) return 0;
  if (f->fd < 0) return fail(&c, t->name, "the file is not open");
  if (bytes > SIZE_MAX / 2) return fail(&c, t->name, "%" PRIu64 " bytes do not fit in memory", bytes);
  /* the 16-bit values go into the back half of dst, then widen front to back: element i is read
   * (at byte 2n + 2i) before float i (bytes 4i..4i+3 <= 2n + 2i) overwrites it */
  uint16_t *src = (uint16_t *)dst + t->numel;
  int64_t got = pread_full(f->fd, src, (size_t)bytes, f->data_start + t->begin);
  if (got < 0) return fail(&c, t->name, "read failed: %s", strerror(errno));
  if ((uint64_t)got != bytes)
    return fail(&c, t->name, "truncated: read %" PRId64 " of %" PRIu64 " bytes", got, bytes);
  for (int64_t i = 0; i < t->numel; i++) {
    uint16_t v = src[i];
    if (half) {
      dst[i] = half_to_float(v);
    } else {
      uint32_t bits = (uint32_t)v << 16;
      memcpy(&dst[i], &bits, sizeof bits);
    }
  }
  return 0;
}

/* ---- writing ----------------------------------------------------------------------------- */

static cJSON *json_uint(uint64_t v) {
  char num[32];
  snprintf(num, sizeof num, "%" PRIu64, v);
  return cJSON_CreateRaw(num);
}

/* Adds item to array/object or returns -1 (out of memory) */
static int add_item(cJSON *parent, const char *key, cJSON *item) {
  if (!item) return -1;
  if (key) cJSON_AddItemToObject(parent, key, item);
  else cJSON_AddItemToArray(parent, item);
  return 0;
}

static int check_entries(const ctx_t *c, const st_entry *entries, int n, const char *const *mk,
                         const char *const *mv, int n_meta, uint64_t *bytes) {
  if (n < 0 || n_meta < 0) return fail(c, NULL, "st_write: negative count (%d tensors, %d metadata)", n, n_meta);
  if (n > 0 && !entries) return fail(c, NULL, "st_write: %d tensors but no entries", n);
  if (n_meta > 0 && (!mk || !mv)) return fail(c, NULL, "st_write: %d metadata entries but no keys/values", n_meta);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    const st_entry *e = &entries[i];
    if (!e->name) return fail(c, NULL, "st_write: tensor %d has no name", i);
    size_t len = strlen(e->name);
    if (len == 0) return fail(c, NULL, "st_write: tensor %d has an empty name", i);
    if (len >= ST_NAME_MAX) return fail(c, e->name, "name is %zu bytes long, at most %d allowed", len, ST_NAME_MAX - 1);
    if (!strcmp(e->name, "__metadata__")) return fail(c, e->name, "reserved name");
    if (utf8_invalid_at((const unsigned char *)e->name, len) >= 0) return fail(c, e->name, "name is not valid UTF-8");
    if (e->ndim < 0 || e->ndim > ST_MAX_DIMS)
      return fail(c, e->name, "%d dimensions (0 to %d supported)", e->ndim, ST_MAX_DIMS);
    int64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) {
      int64_t v = e->shape[d];
      if (v < 0) return fail(c, e->name, "shape[%d] is %" PRId64 ": a negative dimension", d, v);
      if (v != 0 && numel > INT64_MAX / v) return fail(c, e->name, "the element count overflows 64 bits");
      numel *= v;
    }
    if (numel > INT64_MAX / 4 || (uint64_t)numel * 4 > (uint64_t)ST_EXACT_MAX - total)
      return fail(c, e->name, "too large (the file would exceed 2^53 bytes)");
    if (numel > 0 && !e->data) return fail(c, e->name, "no data given for %" PRId64 " elements", numel);
    total += (uint64_t)numel * 4;
  }
  name_ref *names = pt_calloc((size_t)n, sizeof *names);
  for (int i = 0; i < n; i++) names[i] = (name_ref){entries[i].name, i};
  qsort(names, (size_t)n, sizeof *names, cmp_name_ref);
  for (int i = 1; i < n; i++)
    if (!strcmp(names[i].name, names[i - 1].name)) {
      fail(c, names[i].name, "given twice (tensors %d and %d)", names[i - 1].idx, names[i].idx);
      free(names);
      return -1;
    }
  free(names);
  for (int i = 0; i < n_meta; i++) {
    if (!mk[i] || !mv[i]) return fail(c, NULL, "__metadata__: entry %d has no key or value", i);
    if (utf8_invalid_at((const unsigned char *)mk[i], strlen(mk[i])) >= 0 ||
        utf8_invalid_at((const unsigned char *)mv[i], strlen(mv[i])) >= 0)
      return fail(c, NULL, "__metadata__: entry %d is not valid UTF-8", i);
    for (int k = 0; k < i; k++)
      if (!strcmp(mk[k], mk[i])) {
        char key[160];
        printable(key, sizeof key, mk[i], 100);
        return fail(c, NULL, "__metadata__: key '%s' given twice", key);
      }
  }
  *bytes = total;
  return 0;
}

/* The header JSON (unpadded), or NULL when out of memory. Free with cJSON_free. */
static char *build_header(const st_entry *entries, int n, const char *const *mk, const char *const *mv,
                          int n_meta) {
  cJSON *root = cJSON_CreateObject();
  char *txt = NULL;
  if (!root) return NULL;
  if (n_meta > 0) {
    cJSON *md = cJSON_CreateObject();
    if (add_item(root, "__metadata__", md)) goto done;
    for (int i = 0; i < n_meta; i++)
      if (add_item(md, mk[i], cJSON_CreateString(mv[i]))) goto done;
  }
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    const st_entry *e = &entries[i];
    cJSON *o = cJSON_CreateObject(), *sh, *offs;
    if (add_item(root, e->name, o)) goto done;
    if (add_item(o, "dtype", cJSON_CreateString("F32"))) goto done;
    if (add_item(o, "shape", sh = cJSON_CreateArray())) goto done;
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) {
      numel *= (uint64_t)e->shape[d];
      if (add_item(sh, NULL, json_uint((uint64_t)e->shape[d]))) goto done;
    }
    if (add_item(o, "data_offsets", offs = cJSON_CreateArray())) goto done;
    if (add_item(offs, NULL, json_uint(off))) goto done;
    off += numel * 4;
    if (add_item(offs, NULL, json_uint(off))) goto done;
  }
  txt = cJSON_PrintUnformatted(root);
done:
  cJSON_Delete(root);
  return txt;
}

static int fsync_parent_dir(const char *path) {
  char dir[4200];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  if (rc != 0 && e == EINVAL) rc = 0; /* file systems that cannot sync directories */
  errno = e;
  return rc;
}

int st_write(const char *path, const st_entry *entries, int n, const char *const *meta_keys,
             const char *const *meta_values, int n_meta, uint32_t *crc32_out, char *err,
             size_t errsz) {
  ctx_t c = {path, err, errsz};
  uint64_t data_bytes;
  if (check_entries(&c, entries, n, meta_keys, meta_values, n_meta, &data_bytes)) return -1;
  char *txt = build_header(entries, n, meta_keys, meta_values, n_meta);
  if (!txt) return fail(&c, NULL, "out of memory building the header");
  size_t len = strlen(txt), padded = (len + 7) & ~(size_t)7;
  unsigned char *head = pt_calloc(8 + padded, 1);
  for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(head + 8, txt, len);
  memset(head + 8 + len, ' ', padded - len);
  cJSON_free(txt);

  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
    free(head);
    return fail(&c, NULL, "path too long");
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    free(head);
    return fail(&c, NULL, "cannot create the temporary file %s: %s", tmp, strerror(e));
  }
  const char *what = "write", *suffix = "";
  uLong crc = crc32(0L, Z_NULL, 0);
  if (write_full(fd, head, 8 + padded)) goto fail_io;
  crc = crc_update(crc, head, 8 + padded);
  for (int i = 0; i < n; i++) {
    size_t bytes = 4;
    for (int d = 0; d < entries[i].ndim; d++) bytes *= (size_t)entries[i].shape[d];
    if (bytes == 0) continue;
    if (write_full(fd, entries[i].data, bytes)) goto fail_io;
    crc = crc_update(crc, entries[i].data, bytes);
  }
  what = "fsync";
  if (fsync(fd) != 0) goto fail_io;
  what = "close";
  int rc = close(fd);
  fd = -1;
  if (rc != 0) goto fail_io;
  what = "rename", suffix = " into place";
  if (rename(tmp, path) != 0) goto fail_io;
  free(head);
  if (fsync_parent_dir(path) != 0)
    return fail(&c, NULL, "written, but the fsync of its directory failed: %s", strerror(errno));
  if (crc32_out) *crc32_out = (uint32_t)crc;
  return 0;
fail_io:;
  int e = errno;
  if (fd >= 0) close(fd);
  unlink(tmp);
  free(head);
  return fail(&c, NULL, "cannot %s the temporary file %s%s: %s (the file at this path, if any, is untouched)",
              what, tmp, suffix, strerror(e));
}

int st_file_crc32(const char *path, uint32_t *crc, char *err, size_t errsz) {
  ctx_t c = {path, err, errsz};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(&c, NULL, "cannot open: %s", strerror(errno));
  size_t cap = (size_t)1 << 20;
  unsigned char *buf = pt_calloc(cap, 1);
  uLong v = crc32(0L, Z_NULL, 0);
  for (;;) {
    ssize_t r = read(fd, buf, cap);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      free(buf);
      close(fd);
      return fail(&c, NULL, "read failed: %s", strerror(e));
    }
    if (r == 0) break;
    v = crc32(v, buf, (uInt)r);
  }
  free(buf);
  close(fd);
  *crc = (uint32_t)v;
  return 0;
}
