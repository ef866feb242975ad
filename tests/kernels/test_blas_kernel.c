/* The OpenBLAS core-name table (kernels/cpu/blas_kernel.h): each name's ISA level, the CPU's
 * level from its features, the best kernel per level, and which choices get corrected. */
#include <string.h>

#include "kernels/cpu/blas_kernel.h"
#include "test_util.h"

static int same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }
static const char *show(const char *s) { return s ? s : "(none)"; }

static int has_all(const char *core) { (void)core; return 1; }
static int no_cooperlake(const char *core) { return strcmp(core, "Cooperlake") != 0; }
static int no_zen(const char *core) { return strcmp(core, "Zen") != 0; }
static int no_skylakex(const char *core) { return strcmp(core, "SkylakeX") != 0; }

static void test_levels(void) {
  static const struct { const char *name; int isa; } cases[] = {
      {"Prescott", BLAS_ISA_SSE},       {"prescott", BLAS_ISA_SSE},
      {"Core2", BLAS_ISA_SSE},          {"Nehalem", BLAS_ISA_SSE},
      {"Atom", BLAS_ISA_SSE},           {"Sandybridge", BLAS_ISA_AVX},
      {"Bulldozer", BLAS_ISA_AVX},      {"Piledriver", BLAS_ISA_AVX},
      {"Steamroller", BLAS_ISA_AVX},    {"Haswell", BLAS_ISA_AVX2},
      {"Zen", BLAS_ISA_AVX2},           {"Excavator", BLAS_ISA_AVX2},
      {"SkylakeX", BLAS_ISA_AVX512},    {"COOPERLAKE", BLAS_ISA_AVX512_BF16},
      {"SapphireRapids", BLAS_ISA_AMX}, {"Unknown", -1},
      {"armv8", -1},                    {"", -1},
      {NULL, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    CHECK(blas_kernel_isa(cases[i].name) == cases[i].isa, "%s: level %d, want %d",
          show(cases[i].name), blas_kernel_isa(cases[i].name), cases[i].isa);
  /* the levels are ordered: each preferred kernel beats the one below */
  const char *up[] = {"Prescott", "Sandybridge", "Haswell", "SkylakeX", "Cooperlake",
                      "SapphireRapids"};
  for (int i = 1; i < 6; i++)
    CHECK(blas_kernel_isa(up[i]) == blas_kernel_isa(up[i - 1]) + 1, "%s after %s", up[i],
          up[i - 1]);
  CHECK(!strcmp(blas_kernel_isa_word(BLAS_ISA_AVX512_BF16), "avx512_bf16"), "isa word");
}

static void test_cpu_levels(void) {
  cpu_features f = {0};
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_SSE, "no features: sse");
  f.sse4_2 = f.avx = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX, "avx");
  f.avx2 = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX, "avx2 without fma: avx");
  f.fma = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX2, "avx2 + fma");
  f.avx512f = 1; /* Knights Landing: F without BW/VL/DQ */
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX2, "avx512f alone: avx2");
  f.avx512bw = f.avx512vl = f.avx512dq = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX512, "avx512");
  f.avx512_bf16 = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX512_BF16, "avx512_bf16 (Zen 4, Cooper Lake)");
  f.amx_tile = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AVX512_BF16, "amx tile without amx bf16");
  f.amx_bf16 = 1;
  CHECK(blas_kernel_cpu_isa(&f) == BLAS_ISA_AMX, "amx (Sapphire Rapids)");
}

static void test_best(void) {
  static const struct {
    blas_isa isa;
    int amd;
    int (*has)(const char *);
    const char *best;
  } cases[] = {
      {BLAS_ISA_SSE, 0, NULL, "Prescott"},          {BLAS_ISA_AVX, 0, NULL, "Sandybridge"},
      {BLAS_ISA_AVX2, 0, NULL, "Haswell"},          {BLAS_ISA_AVX512, 0, NULL, "SkylakeX"},
      {BLAS_ISA_AVX512_BF16, 0, NULL, "Cooperlake"},
      {BLAS_ISA_AMX, 0, NULL, "Cooperlake"}, /* SapphireRapids only where the library has it */
      {BLAS_ISA_AMX, 0, has_all, "SapphireRapids"},
      {BLAS_ISA_AVX512_BF16, 0, has_all, "Cooperlake"},
      {BLAS_ISA_AVX512_BF16, 0, no_cooperlake, "SkylakeX"},
      /* AMD: Zen at AVX2 (Zen 1 to 3), Haswell where the library lacks it; Zen 4's AVX-512 as
       * Intel's, and Zen below that only where the library lacks SkylakeX */
      {BLAS_ISA_AVX2, 1, NULL, "Zen"},              {BLAS_ISA_AVX2, 1, no_zen, "Haswell"},
      {BLAS_ISA_AVX512_BF16, 1, has_all, "Cooperlake"}, {BLAS_ISA_AVX, 1, NULL, "Sandybridge"},
      {BLAS_ISA_AVX512, 1, no_skylakex, "Zen"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *got = blas_kernel_best(cases[i].isa, cases[i].amd, cases[i].has);
    CHECK(same(got, cases[i].best), "level %d%s: %s, want %s", cases[i].isa,
          cases[i].amd ? " (AMD)" : "", show(got), cases[i].best);
  }
}

static void test_wanted(void) {
  static const struct { const char *chosen; blas_isa isa; const char *want; } cases[] = {
      /* (each also on an AMD CPU below: the same, but Zen at the AVX2 level) */
      {"Prescott", BLAS_ISA_AVX512_BF16, "Cooperlake"}, /* the mis-detection */
      {"Prescott", BLAS_ISA_AMX, "Cooperlake"},         /* Sapphire Rapids under 0.3.21 */
      {"SkylakeX", BLAS_ISA_AVX512_BF16, "Cooperlake"},
      {"Haswell", BLAS_ISA_AVX512, "SkylakeX"},
      {"Steamroller", BLAS_ISA_AVX2, "Haswell"},
      {"Cooperlake", BLAS_ISA_AVX512_BF16, NULL},       /* already the best */
      {"Zen", BLAS_ISA_AVX2, NULL},                     /* same level as Haswell */
      {"SapphireRapids", BLAS_ISA_AVX512_BF16, NULL},   /* above: left alone */
      {"Prescott", BLAS_ISA_SSE, NULL},
      {"Unknown", BLAS_ISA_AVX512_BF16, NULL},          /* names not in the table */
      {"armv8", BLAS_ISA_SSE, NULL},
      {NULL, BLAS_ISA_AVX2, NULL}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *got = blas_kernel_wanted(cases[i].chosen, cases[i].isa, 0, NULL);
    CHECK(same(got, cases[i].want), "%s at level %d: %s, want %s", show(cases[i].chosen),
          cases[i].isa, show(got), show(cases[i].want));
    const char *amd_want = same(cases[i].want, "Haswell") ? "Zen" : cases[i].want;
    got = blas_kernel_wanted(cases[i].chosen, cases[i].isa, 1, NULL);
    CHECK(same(got, amd_want), "%s at level %d (AMD): %s, want %s", show(cases[i].chosen),
          cases[i].isa, show(got), show(amd_want));
  }
  /* the mis-detection on Zen 1 to 3; OpenBLAS's Haswell there is the same level: kept */
  CHECK(same(blas_kernel_wanted("Prescott", BLAS_ISA_AVX2, 1, NULL), "Zen"), "Prescott on Zen");
  CHECK(blas_kernel_wanted("Haswell", BLAS_ISA_AVX2, 1, NULL) == NULL, "Haswell on Zen: kept");
}

static void test_describe(void) {
  char buf[160];
  blas_kernel_describe(buf, sizeof buf);
  CHECK(!strncmp(buf, "OpenBLAS ", 9) && strstr(buf, " kernel"), "describe: '%s'", buf);
  CHECK(strstr(buf, blas_kernel_name()) != NULL, "describe names the kernel: '%s'", buf);
  CHECK(blas_kernel_corrected_from() == NULL, "no restart, nothing corrected");
}

int main(void) {
  test_levels();
  test_cpu_levels();
  test_best();
  test_wanted();
  test_describe();
  return test_summary("test_blas_kernel");
}
