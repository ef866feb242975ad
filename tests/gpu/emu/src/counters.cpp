/* The per-process counters (emu.h) and their report at exit (PT_EMU_COUNTERS). */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <cstring>
#include <map>
#include <string>
#include <unistd.h>

#include "internal.h"

namespace pt_emu {

pt_emu_counters g_counters;

namespace {
/* Host waits per call site ("FILE:LINE"), so a report can say whose waits they are. Never
 * destroyed: the report runs at exit, after the destructors of statics made since atexit. */
std::map<std::string, unsigned long long> &sync_sites() {
  static auto *sites = new std::map<std::string, unsigned long long>;
  return *sites;
}

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
  bool ok = f && std::fputs(line, f) >= 0;
  for (const auto &site : sync_sites()) /* a file only: stderr gets the one line */
    ok = ok && std::fprintf(f, "pt_emu sync site: rank=%d pid=%ld n=%llu at=%s\n",
                            launcher_rank(), static_cast<long>(getpid()), site.second,
                            site.first.c_str()) >= 0;
  if (!f || !ok || std::fclose(f) != 0)
    std::fprintf(stderr, "pt_emu: cannot append the counters to %s (PT_EMU_COUNTERS): %s\n", to,
                 std::strerror(errno));
}
} // namespace

void count_sync(const char *file, int line) {
  g_counters.syncs++;
  sync_sites()[std::string(file ? file : "?") + ":" + std::to_string(line)]++;
}

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
                "launches=%llu blas=%llu heuristics=%llu syncs=%llu queries=%llu h2d_bytes=%llu "
                "d2h_bytes=%llu d2d_bytes=%llu memset_bytes=%llu external_ops=%llu",
                (unsigned long long)c->launches, (unsigned long long)c->blas_calls,
                (unsigned long long)c->heuristics, (unsigned long long)c->syncs,
                (unsigned long long)c->queries, (unsigned long long)c->h2d_bytes,
                (unsigned long long)c->d2h_bytes, (unsigned long long)c->d2d_bytes,
                (unsigned long long)c->memset_bytes, (unsigned long long)c->external_ops);
}

} // extern "C"
