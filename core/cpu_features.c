/* cpuid and xgetbv behind core/cpu_features.h: the one place that knows x86 from the rest. */
#include "core/cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

/* XCR0 bits: the register state the OS saves on a context switch. */
#define XCR0_YMM 0x6u           /* SSE + AVX upper halves */
#define XCR0_ZMM 0xe0u          /* opmask, ZMM_Hi256, Hi16_ZMM */
#define XCR0_TILE (3u << 17)    /* XTILECFG + XTILEDATA */

static unsigned xcr0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return lo;
}

static void read_brand(char *model, size_t size) {
  unsigned r[12] = {0}, top = 0, b, c, d;
  __get_cpuid(0x80000000u, &top, &b, &c, &d);
  for (unsigned i = 0; i < 3 && 0x80000002u + i <= top; i++)
    __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
  char text[49] = {0};
  memcpy(text, r, 48);
  const char *s = text;
  while (*s == ' ') s++;
  snprintf(model, size, "%s", s);
  for (size_t n = strlen(model); n > 0 && model[n - 1] == ' '; n--) model[n - 1] = 0;
}

static void read_features(cpu_features *f) {
  unsigned top, a, b, c, d;
  if (!__get_cpuid(0, &top, &b, &c, &d)) return;
  memcpy(f->vendor, &b, 4), memcpy(f->vendor + 4, &d, 4), memcpy(f->vendor + 8, &c, 4);
  read_brand(f->model, sizeof f->model);
  __get_cpuid(1, &a, &b, &c, &d);
  unsigned os = (c >> 27 & 1) ? xcr0() : 0; /* OSXSAVE: xgetbv is there to ask */
  int ymm = (os & XCR0_YMM) == XCR0_YMM, zmm = ymm && (os & XCR0_ZMM) == XCR0_ZMM;
  int tile = (os & XCR0_TILE) == XCR0_TILE;
  f->sse4_2 = c >> 20 & 1;
  f->avx = ymm && (c >> 28 & 1);
  f->fma = f->avx && (c >> 12 & 1);
  if (top < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  unsigned leaf7_subleaves = a;
  f->avx2 = f->avx && (b >> 5 & 1);
  f->avx512f = zmm && (b >> 16 & 1);
  f->avx512dq = zmm && (b >> 17 & 1);
  f->avx512bw = zmm && (b >> 30 & 1);
  f->avx512vl = zmm && (b >> 31 & 1);
  f->amx_bf16 = tile && (d >> 22 & 1);
  f->amx_tile = tile && (d >> 24 & 1);
  if (leaf7_subleaves < 1) return;
  __cpuid_count(7, 1, a, b, c, d);
  f->avx512_bf16 = f->avx512f && (a >> 5 & 1);
}
#else
static void read_features(cpu_features *f) { (void)f; }
#endif

static cpu_features g_features;
static void read_once(void) { read_features(&g_features); }

const cpu_features *cpu_features_get(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, read_once);
  return &g_features;
}

int cpu_features_avx512(const cpu_features *f) {
  return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
}

void cpu_features_describe(const cpu_features *f, char *buf, size_t size) {
  const struct { int on; const char *word; } w[] = {
      {f->sse4_2 && !f->avx, "sse4.2"}, {f->avx && !f->avx2, "avx"}, {f->avx2, "avx2"},
      {f->fma, "fma"}, {cpu_features_avx512(f), "avx512"}, {f->avx512_bf16, "avx512_bf16"},
      {f->amx_tile && f->amx_bf16, "amx"}};
  size_t n = 0;
  buf[0] = 0;
  for (size_t i = 0; i < sizeof w / sizeof *w; i++)
    if (w[i].on && n < size)
      n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " " : "", w[i].word);
  if (n == 0) snprintf(buf, size, "none");
}
