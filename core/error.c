#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = -1;
static pt_abort_hook g_hook;

void pt_error_set_rank(int rank) { g_rank = rank; }
void pt_error_set_abort_hook(pt_abort_hook hook) { g_hook = hook; }

static void print_prefix(void) {
  if (g_rank >= 0)
    fprintf(stderr, "pipetrain[rank %d]: ", g_rank);
  else
    fprintf(stderr, "pipetrain: ");
}

static void die(int code) __attribute__((noreturn));
static void die(int code) {
  fflush(stdout);
  fflush(stderr);
  if (g_hook) g_hook(code);
  exit(code);
}

void pt_fatal(const char *fmt, ...) {
  va_list ap;
  print_prefix();
  fprintf(stderr, "error: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  die(PT_EXIT_FATAL);
}

void pt_fail_input(const char *fmt, ...) {
  va_list ap;
  print_prefix();
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  die(PT_EXIT_INPUT);
}

static void say(const char *label, const char *fmt, va_list ap) {
  fflush(stdout); /* the line lands after the progress line it concerns */
  print_prefix();
  fprintf(stderr, "%s: ", label);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
}

void pt_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say("warning", fmt, ap);
  va_end(ap);
}

void pt_notice(const char *fmt, ...) {
  if (g_rank > 0) return;
  va_list ap;
  va_start(ap, fmt);
  say("notice", fmt, ap);
  va_end(ap);
}

int pt_errorf(char *err, size_t errsz, const char *fmt, ...) {
  if (!err || errsz == 0) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errsz, fmt, ap);
  va_end(ap);
  return -1;
}

#define PT_WORD_MAX 160
#define PT_WORD_HEAD 100
#define PT_WORD_TAIL 50

char *pt_shorten_words(char *dst, size_t dstsz, const char *src) {
  size_t o = 0;
  if (!dstsz) return dst;
  while (*src && o + 1 < dstsz) {
    size_t len = strcspn(src, " \t\n");
    if (len == 0) len = 1; /* a blank is copied as it is */
    const char *tail = src + len - PT_WORD_TAIL;
    int cut = len > PT_WORD_MAX;
    int w = cut ? snprintf(dst + o, dstsz - o, "%.*s...%.*s", PT_WORD_HEAD, src, PT_WORD_TAIL, tail)
                : snprintf(dst + o, dstsz - o, "%.*s", (int)len, src);
    if (w < 0) break;
    o += (size_t)w < dstsz - o ? (size_t)w : dstsz - o - 1;
    src += len;
  }
  dst[o] = '\0';
  return dst;
}

int pt_errorf_short(char *err, size_t errsz, const char *fmt, ...) {
  if (!err || errsz == 0) return -1;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *full = malloc(n > 0 ? (size_t)n + 1 : 1);
  if (!full) return pt_errorf(err, errsz, "%s", "out of memory formatting an error message");
  va_start(ap, fmt);
  vsnprintf(full, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
  va_end(ap);
  pt_shorten_words(err, errsz, full);
  free(full);
  return -1;
}

void pt_fail_lib(const char *file, int line, const char *call, const char *library,
                 const char *code_text) {
  pt_fatal("%s:%d: %s failed: %s: %s", file, line, call, library, code_text);
}

const char *pt_libc_error_text(long result) {
  (void)result; /* -1: the reason is in errno */
  return errno ? strerror(errno) : "unexpected result";
}

void *pt_calloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) pt_fatal("out of memory allocating %zu x %zu bytes", count, size);
  return p;
}

/* Aligned blocks carry their size in a 64-byte header so frees can be counted: the tracker
 * gives the measured peak that memory estimates are checked against. */
static size_t g_mem_current, g_mem_peak;

void *pt_alloc_aligned(size_t bytes) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  unsigned char *p = aligned_alloc(64, rounded + 64);
  if (!p) pt_fatal("out of memory allocating %zu bytes", bytes);
  memset(p, 0, rounded + 64);
  memcpy(p, &rounded, sizeof rounded);
  g_mem_current += rounded;
  if (g_mem_current > g_mem_peak) g_mem_peak = g_mem_current;
  return p + 64;
}

void pt_free_aligned(void *ptr) {
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - 64;
  size_t rounded;
  memcpy(&rounded, p, sizeof rounded);
  g_mem_current -= rounded;
  free(p);
}

void *pt_grow_aligned(void **buf, size_t *cap, size_t bytes) {
  if (bytes > *cap) {
    pt_free_aligned(*buf);
    *buf = pt_alloc_aligned(bytes);
    *cap = bytes;
  }
  return *buf;
}

size_t pt_mem_current(void) { return g_mem_current; }

void pt_mem_account(int64_t delta) {
  g_mem_current = (size_t)((int64_t)g_mem_current + delta);
  if (g_mem_current > g_mem_peak) g_mem_peak = g_mem_current;
}
size_t pt_mem_peak(void) { return g_mem_peak; }
void pt_mem_reset_peak(void) { g_mem_peak = g_mem_current; }

char *pt_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = pt_calloc(n, 1);
  memcpy(d, s, n);
  return d;
}
