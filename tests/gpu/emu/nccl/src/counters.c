/* tests/gpu/emu/nccl/src/counters.c: what this process asked of the emulated NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

nccl_emu_counters emu_counters;

void nccl_emu_counters_read(nccl_emu_counters *out) { *out = emu_counters; }

void nccl_emu_counters_reset(void) { memset(&emu_counters, 0, sizeof emu_counters); }

void nccl_emu_counters_format(const nccl_emu_counters *c, char *buf, size_t bufsz) {
  snprintf(buf, bufsz, "nccl-emu counters: sends=%llu send_bytes=%llu recvs=%llu recv_bytes=%llu "
           "collectives=%llu coll_bytes=%llu groups=%llu comms=%llu",
           (unsigned long long)c->sends, (unsigned long long)c->send_bytes,
           (unsigned long long)c->recvs, (unsigned long long)c->recv_bytes,
           (unsigned long long)c->collectives, (unsigned long long)c->coll_bytes,
           (unsigned long long)c->groups, (unsigned long long)c->comms);
}

static int g_world_rank = -1;

static void print_counters(void) {
  char line[512];
  nccl_emu_counters_format(&emu_counters, line, sizeof line);
  fprintf(stderr, "[rank %d] %s\n", g_world_rank, line);
}

/* The rank is taken now: at exit MPI may be finalized. */
void emu_counters_print_at_exit(void) {
  static int registered;
  const char *s = getenv("PT_EMU_NCCL_COUNTERS");
  if (registered || !s || strcmp(s, "1") != 0) return;
  registered = 1;
  g_world_rank = emu_world_rank();
  if (atexit(print_counters) != 0) emu_die("atexit failed registering the counters' print");
}
