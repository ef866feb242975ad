/* core/cpu_features.h: on x86-64 Linux each flag agrees with the kernel's /proc/cpuinfo (which
 * also lists only what the OS enabled); elsewhere every flag is 0. Cached: one struct. */
#include <stdio.h>
#include <string.h>

#include "core/cpu_features.h"
#include "test_util.h"

/* The "flags" line of /proc/cpuinfo, padded with spaces; "" where there is none. */
static void cpuinfo_flags(char *out, size_t size) {
  out[0] = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  static char line[8192];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "flags", 5) && strchr(line, ':')) {
      line[strcspn(line, "\n")] = 0;
      snprintf(out, size, " %s ", strchr(line, ':') + 1);
      break;
    }
  fclose(f);
}

static int listed(const char *flags, const char *word) {
  char w[64];
  snprintf(w, sizeof w, " %s ", word);
  return strstr(flags, w) != NULL;
}

int main(void) {
  const cpu_features *f = cpu_features_get();
  CHECK(f == cpu_features_get(), "one cached struct");
  static char flags[8192];
  cpuinfo_flags(flags, sizeof flags);
  const struct { int have; const char *word; } w[] = {
      {f->sse4_2, "sse4_2"},     {f->avx, "avx"},           {f->avx2, "avx2"},
      {f->fma, "fma"},           {f->avx512f, "avx512f"},   {f->avx512bw, "avx512bw"},
      {f->avx512vl, "avx512vl"}, {f->avx512dq, "avx512dq"}, {f->avx512_bf16, "avx512_bf16"},
      {f->amx_tile, "amx_tile"}, {f->amx_bf16, "amx_bf16"}};
#if defined(__x86_64__) && defined(__linux__)
  int x86 = 1;
#else
  int x86 = 0;
#endif
  int compare = !x86 || flags[0]; /* x86 without /proc: nothing to compare with */
  for (size_t i = 0; compare && i < sizeof w / sizeof *w; i++) {
    int want = x86 ? listed(flags, w[i].word) : 0;
    CHECK(w[i].have == want, "%s: cpuid says %d, /proc/cpuinfo %d", w[i].word, w[i].have, want);
  }
  CHECK(!x86 || f->vendor[0], "x86 has a vendor string");
  char text[128];
  cpu_features_describe(f, text, sizeof text);
  printf("cpu: %s (%s): %s\n", f->model, f->vendor, text);
  CHECK(text[0], "describe says something");
  cpu_features all = {.sse4_2 = 1, .avx = 1, .avx2 = 1, .fma = 1, .avx512f = 1, .avx512bw = 1,
                      .avx512vl = 1, .avx512dq = 1, .avx512_bf16 = 1, .amx_tile = 1,
                      .amx_bf16 = 1};
  cpu_features_describe(&all, text, sizeof text);
  CHECK(!strcmp(text, "avx2 fma avx512 avx512_bf16 amx"), "all: '%s'", text);
  cpu_features none = {0};
  cpu_features_describe(&none, text, sizeof text);
  CHECK(!strcmp(text, "none"), "none: '%s'", text);
  return test_summary("test_cpu_features");
}
