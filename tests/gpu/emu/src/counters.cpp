/* The per-process counters (emu.h) and their report at exit (PT_EMU_COUNTERS). */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <cstring>
#include <unistd.h>

#include "internal.h"

namespace pt_emu {

pt_emu_counters g_counters;

namespace {
/* The MPI rank from the launcher's environment (Open MPI, MPICH, PMIx), or -1. */
int launcher_rank() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *v = std::getenv(name)) return std::atoi(v);
  return -1;
}

void report() {
  char line[512], counts[400];
  pt_emu_counters_format(&g_counters, counts, sizeof counts);
  std::snprintf(line, sizeof line, "pt_emu counters: rank=%d pid=%ld %s\n", launcher_rank(),
                static_cast<long>(getpid()), counts);
  const char *to = cfg().counters;
  if (!std::strcmp(to, "1")) {
    std::fputs(line, stderr);
    return;
  }
  FILE *f = std::fopen(to, "a");
  if (!f || std::fputs(line, f) < 0 || std::fclose(f) != 0)
    std::fprintf(stderr, "pt_emu: cannot append the counters to %s (PT_EMU_COUNTERS): %s\n", to,
                 std::strerror(errno));
}
} // namespace

void counters_at_exit_once() {
  static bool registered;
  if (registered || !cfg().counters) return;
  registered = true;
  if (std::atexit(report) != 0) fail("atexit failed: the counters could not be reported");
}

} // namespace pt_emu

extern "C" {

void pt_emu_counters_read(pt_emu_counters *out) { *out = pt_emu::g_counters; }
void pt_emu_counters_reset(void) { pt_emu::g_counters = pt_emu_counters{}; }

void pt_emu_counters_format(const pt_emu_counters *c, char *buf, size_t bufsz) {
  std::snprintf(buf, bufsz,
                "launches=%llu blas=%llu syncs=%llu queries=%llu h2d_bytes=%llu d2h_bytes=%llu "
                "d2d_bytes=%llu memset_bytes=%llu external_ops=%llu",
                (unsigned long long)c->launches, (unsigned long long)c->blas_calls,
                (unsigned long long)c->syncs, (unsigned long long)c->queries,
                (unsigned long long)c->h2d_bytes, (unsigned long long)c->d2h_bytes,
                (unsigned long long)c->d2d_bytes, (unsigned long long)c->memset_bytes,
                (unsigned long long)c->external_ops);
}

} // extern "C"
