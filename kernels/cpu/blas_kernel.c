/* The OpenBLAS kernel check behind kernels/cpu/blas_kernel.h. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "kernels/cpu/blas_kernel.h"

#include <cblas.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PINNED_VAR "PIPETRAIN_BLAS_CORETYPE"
#define GUARD_VAR "PIPETRAIN_BLAS_RESTARTED"
/* Set by a corrected process for the ranks it starts itself, which inherit the kernel and so
 * never restart: the kernel it corrected, so their start-up says the correction. */
#define CORRECTED_VAR "PIPETRAIN_BLAS_CORRECTED"

/* OpenBLAS's x86 core names (as its DYNAMIC_ARCH dispatch spells them), lowest level first.
 * preferred: the one to ask for at its level. probe: newer than some DYNAMIC_ARCH libraries,
 * asked for only when the library has it. Steamroller has FMA but not AVX2: it counts as AVX. */
static const struct {
  const char *name;
  blas_isa isa;
  int preferred, probe;
} kernels[] = {
    {"Katmai", BLAS_ISA_SSE, 0, 0},       {"Coppermine", BLAS_ISA_SSE, 0, 0},
    {"Northwood", BLAS_ISA_SSE, 0, 0},    {"Prescott", BLAS_ISA_SSE, 1, 0},
    {"Banias", BLAS_ISA_SSE, 0, 0},       {"Atom", BLAS_ISA_SSE, 0, 0},
    {"Core2", BLAS_ISA_SSE, 0, 0},        {"Penryn", BLAS_ISA_SSE, 0, 0},
    {"Dunnington", BLAS_ISA_SSE, 0, 0},   {"Nehalem", BLAS_ISA_SSE, 0, 0},
    {"Athlon", BLAS_ISA_SSE, 0, 0},       {"Opteron", BLAS_ISA_SSE, 0, 0},
    {"Opteron_SSE3", BLAS_ISA_SSE, 0, 0}, {"Barcelona", BLAS_ISA_SSE, 0, 0},
    {"Nano", BLAS_ISA_SSE, 0, 0},         {"Bobcat", BLAS_ISA_SSE, 0, 0},
    {"Sandybridge", BLAS_ISA_AVX, 1, 0},  {"Bulldozer", BLAS_ISA_AVX, 0, 0},
    {"Piledriver", BLAS_ISA_AVX, 0, 0},   {"Steamroller", BLAS_ISA_AVX, 0, 0},
    {"Haswell", BLAS_ISA_AVX2, 1, 0},     {"Zen", BLAS_ISA_AVX2, 0, 0},
    {"Excavator", BLAS_ISA_AVX2, 0, 0},   {"SkylakeX", BLAS_ISA_AVX512, 1, 0},
    {"Cooperlake", BLAS_ISA_AVX512_BF16, 1, 0},
    {"SapphireRapids", BLAS_ISA_AMX, 1, 1},
};
#define N_KERNELS (int)(sizeof kernels / sizeof *kernels)

static const char *const isa_words[] = {"sse", "avx", "avx2", "avx512", "avx512_bf16", "amx"};

static int find(const char *core) {
  for (int i = 0; core && i < N_KERNELS; i++)
    if (!strcasecmp(core, kernels[i].name)) return i;
  return -1;
}

int blas_kernel_isa(const char *core) {
  int i = find(core);
  return i < 0 ? -1 : (int)kernels[i].isa;
}

blas_isa blas_kernel_cpu_isa(const cpu_features *f) {
  if (!f->avx) return BLAS_ISA_SSE;
  if (!f->avx2 || !f->fma) return BLAS_ISA_AVX;
  if (!cpu_features_avx512(f)) return BLAS_ISA_AVX2;
  if (!f->avx512_bf16) return BLAS_ISA_AVX512;
  return f->amx_tile && f->amx_bf16 ? BLAS_ISA_AMX : BLAS_ISA_AVX512_BF16;
}

const char *blas_kernel_isa_word(blas_isa isa) { return isa_words[isa]; }

int blas_kernel_cpu_amd(const cpu_features *f) {
  return !strcmp(f->vendor, "AuthenticAMD") || !strcmp(f->vendor, "HygonGenuine");
}

static int usable(int i, int (*has)(const char *core)) {
  return i >= 0 && (has ? has(kernels[i].name) : !kernels[i].probe);
}

const char *blas_kernel_best(blas_isa isa, int amd, int (*has)(const char *core)) {
  for (int i = N_KERNELS - 1; i >= 0; i--) {
    if (!kernels[i].preferred || kernels[i].isa > isa || !usable(i, has)) continue;
    /* AMD's AVX2 kernel: Zen's blocking over Haswell's kernels, OpenBLAS's own pick there */
    int zen = find("Zen");
    if (amd && kernels[i].isa == BLAS_ISA_AVX2 && usable(zen, has)) return kernels[zen].name;
    return kernels[i].name;
  }
  return NULL;
}

const char *blas_kernel_wanted(const char *chosen, blas_isa isa, int amd,
                               int (*has)(const char *core)) {
  int level = blas_kernel_isa(chosen);
  const char *best = blas_kernel_best(isa, amd, has);
  return level >= 0 && best && level < blas_kernel_isa(best) ? best : NULL;
}

/* A DYNAMIC_ARCH library exports each kernel's table as gotoblas_<NAME>; one that exports none
 * cannot be asked, and then the table's non-probe names are taken on trust. */
static int library_has(const char *core) {
  char sym[64] = "gotoblas_";
  size_t n = strlen(sym);
  for (const char *c = core; *c && n + 1 < sizeof sym; c++) sym[n++] = (char)toupper(*c);
  sym[n] = 0;
  if (dlsym(RTLD_DEFAULT, sym)) return 1;
  int i = find(core);
  return i >= 0 && !kernels[i].probe && !dlsym(RTLD_DEFAULT, "gotoblas_PRESCOTT");
}

/* What blas_kernel_describe adds after the name; the kernel before the restart; the line saying
 * the restart, for blas_kernel_say_restart. */
static char g_note[96], g_before[32], g_restarted[320];

static int is_rank0(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
  for (int i = 0; i < 4; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v) == 0;
  }
  return 1;
}

/* One line on stderr from rank 0: every rank does the same, one saying it is enough. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  if (!is_rank0()) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "pipetrain: %s\n", line);
}

static const char *cpu_word(const char *core) {
  int isa = blas_kernel_isa(core);
  return isa < 0 ? "?" : blas_kernel_isa_word((blas_isa)isa);
}

/* Executes this program again: by its own path, so the process keeps its name (ps, pkill and
 * schedulers that signal processes by name still find "pipe_train", where /proc/self/exe would
 * rename it "exe"); by /proc/self/exe where that path is gone (a binary replaced or deleted). */
static void exec_self(char **argv) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    execv(self, argv);
  }
  execv("/proc/self/exe", argv);
}

/* Replaces this process with itself under OPENBLAS_CORETYPE=want; returns only on failure, with
 * the environment as it was. */
static void restart(char **argv, const char *chosen, const char *want, int pinned) {
  const char *old = getenv("OPENBLAS_CORETYPE");
  char *saved = old ? strdup(old) : NULL;
  if (argv && argv[0]) {
    fflush(NULL);
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv(GUARD_VAR, chosen, 1);
    exec_self(argv);
  }
  const char *why = argv && argv[0] ? strerror(errno) : "no argv";
  unsetenv(GUARD_VAR);
  if (saved) setenv("OPENBLAS_CORETYPE", saved, 1);
  else unsetenv("OPENBLAS_CORETYPE");
  free(saved);
  if (pinned)
    say("warning: OpenBLAS chose the %s kernel, not " PINNED_VAR "=%s: the restart to switch "
        "failed (/proc/self/exe: %s)", chosen, want, why);
  else
    say("warning: OpenBLAS chose the %s kernel; this CPU runs %s (%s), but the restart to "
        "switch failed (/proc/self/exe: %s): BLAS runs slower; set OPENBLAS_CORETYPE=%s", chosen,
        want, cpu_word(want), why, want);
}

/* The kernel was corrected from `before` to `now`: what describe says, and the line it says. */
static void corrected(const char *before, const char *now) {
  snprintf(g_note, sizeof g_note, " (corrected from %s)", before);
  snprintf(g_before, sizeof g_before, "%s", before);
  snprintf(g_restarted, sizeof g_restarted,
           "OpenBLAS chose the %s kernel; this CPU runs %s (%s): restarted with "
           "OPENBLAS_CORETYPE=%s (" PINNED_VAR "=%s keeps it)", before, now, cpu_word(now), now,
           before);
}

/* After the restart: did OpenBLAS take the kernel asked for? */
static void after_restart(const char *before, const char *chosen, const char *pinned) {
  const char *want = pinned ? pinned : getenv("OPENBLAS_CORETYPE");
  if (want && !strcasecmp(chosen, want)) {
    if (pinned) {
      snprintf(g_note, sizeof g_note, " (%s)", PINNED_VAR);
      return;
    }
    corrected(before, want);
    setenv(CORRECTED_VAR, before, 1);
    return;
  }
  if (pinned)
    say("warning: OpenBLAS runs the %s kernel, not " PINNED_VAR "=%s: this library lacks that "
        "kernel (%s)", chosen, pinned, openblas_get_config());
  else
    say("warning: OpenBLAS runs the %s kernel; this CPU runs %s (%s), but this library lacks it "
        "(%s): BLAS runs slower; a newer OpenBLAS built with DYNAMIC_ARCH=1 has it", chosen,
        want ? want : "", want ? cpu_word(want) : "", openblas_get_config());
}

void blas_kernel_ensure(char **argv) {
  const char *chosen = openblas_get_corename(), *pinned = getenv(PINNED_VAR);
  if (pinned && !*pinned) pinned = NULL;
  const char *guard = getenv(GUARD_VAR);
  if (guard) {
    char before[32];
    snprintf(before, sizeof before, "%s", guard);
    unsetenv(GUARD_VAR); /* programs this one starts check for themselves */
    after_restart(before, chosen, pinned);
    return;
  }
  const char *by_parent = getenv(CORRECTED_VAR), *asked = getenv("OPENBLAS_CORETYPE");
  if (!pinned && by_parent && *by_parent && asked && !strcasecmp(chosen, asked)) {
    corrected(by_parent, chosen); /* a rank of a job its corrected parent started */
    return;
  }
  if (pinned && !strcasecmp(chosen, pinned)) snprintf(g_note, sizeof g_note, " (%s)", PINNED_VAR);
  const cpu_features *cpu = cpu_features_get();
  const char *want = pinned ? pinned
                            : blas_kernel_wanted(chosen, blas_kernel_cpu_isa(cpu),
                                                 blas_kernel_cpu_amd(cpu), library_has);
  if (!want || !strcasecmp(chosen, want)) return;
  if (!strstr(openblas_get_config(), "DYNAMIC_ARCH")) {
    say("warning: OpenBLAS runs its %s kernel and cannot switch to %s: this library is built for "
        "one CPU (%s)%s", chosen, want, openblas_get_config(),
        pinned ? "" : "; one built with DYNAMIC_ARCH=1 or for this CPU is faster");
    return;
  }
  restart(argv, chosen, want, pinned != NULL);
}

const char *blas_kernel_name(void) { return openblas_get_corename(); }
const char *blas_kernel_corrected_from(void) { return g_before[0] ? g_before : NULL; }

void blas_kernel_say_restart(void) {
  if (g_restarted[0]) say("%s", g_restarted);
  g_restarted[0] = '\0';
}

void blas_kernel_describe(char *buf, size_t size) {
  snprintf(buf, size, "OpenBLAS %s kernel%s", blas_kernel_name(), g_note);
}
