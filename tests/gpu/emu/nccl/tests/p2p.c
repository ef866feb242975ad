/* tests/gpu/emu/nccl/tests/p2p.c MODE: the emulated NCCL's point-to-point rules, under mpirun.
 * Modes that must complete (exit 0 when every check holds):
 *   grouped      rings of grouped send+recv (nested groups too, a group over two streams),
 *                matching ungrouped sequences, zero-byte transfers, and the counters they leave
 *                (any even rank count);
 *   independent  two communicators on two streams: rank 1 takes the second communicator's
 *                message first, which only independent communicators deliver (2 ranks).
 * Modes that must end in the deadlock report (tests/expect_deadlock.sh; 2 ranks):
 *   ungrouped    both ranks send, then receive, ungrouped: sends wait for their receives;
 *   order        rank 0 sends 100 then 200 bytes, rank 1 receives 200 first: issue order;
 *   one_stream   the independent case with rank 0's two sends on one stream: stream order;
 *   turn         rank 0's two sends on one communicator but two streams, rank 1 takes the
 *                second first: one communicator's operations run in issue order. */
#include <string.h>

#include "emu_test.h"

static int g_rank, g_size;

static void fill(unsigned char *b, size_t n, int seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 31 + (size_t)seed * 7 + 1);
}

static size_t wrong(const unsigned char *b, size_t n, int seed) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += b[i] != (unsigned char)(i * 31 + (size_t)seed * 7 + 1);
  return bad;
}

/* Each rank sends to the next and receives from the previous, in one group (nested: the inner
 * ncclGroupEnd must not start the send alone, or every rank would wait in its send). */
static void ring(ncclComm_t c, cudaStream_t s, size_t n, int nested) {
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  unsigned char *out = malloc(n + 1), *in = calloc(n + 1, 1);
  fill(out, n, g_rank);
  NCCL_MUST(ncclGroupStart());
  if (nested) NCCL_MUST(ncclGroupStart());
  NCCL_MUST(ncclSend(out, n, ncclChar, next, c, s));
  if (nested) NCCL_MUST(ncclGroupEnd());
  NCCL_MUST(ncclRecv(in, n, ncclChar, prev, c, s));
  NCCL_MUST(ncclGroupEnd());
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(wrong(in, n, prev) == 0, "ring of %zu bytes%s: wrong bytes from rank %d", n,
        nested ? " (nested groups)" : "", prev);
  free(out), free(in);
}

/* Even ranks send 100 then 200 bytes to the odd rank above, ungrouped; it receives them in
 * the same order, ungrouped. */
static void in_order(ncclComm_t c, cudaStream_t s) {
  unsigned char a[100], b[200];
  int peer = g_rank ^ 1;
  if (g_rank % 2 == 0) {
    fill(a, sizeof a, 1), fill(b, sizeof b, 2);
    NCCL_MUST(ncclSend(a, sizeof a, ncclChar, peer, c, s));
    NCCL_MUST(ncclSend(b, sizeof b, ncclChar, peer, c, s));
  } else {
    NCCL_MUST(ncclRecv(a, sizeof a, ncclChar, peer, c, s));
    NCCL_MUST(ncclRecv(b, sizeof b, ncclChar, peer, c, s));
  }
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(wrong(a, sizeof a, 1) == 0 && wrong(b, sizeof b, 2) == 0, "ungrouped sends in order");
}

/* The counters since the last reset: sends and receives (count, bytes each), groups. */
/* One group over two streams: it starts when both reach it, and both wait for all of it. */
static void ring_two_streams(ncclComm_t c, cudaStream_t s, cudaStream_t s2) {
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size, out = g_rank, in = -1;
  NCCL_MUST(ncclGroupStart());
  NCCL_MUST(ncclSend(&out, 1, ncclInt, next, c, s));
  NCCL_MUST(ncclRecv(&in, 1, ncclInt, prev, c, s2));
  NCCL_MUST(ncclGroupEnd());
  CUDA_MUST(cudaStreamSynchronize(s2));
  CHECK(in == prev && cudaStreamQuery(s) == cudaSuccess, "a group over two streams: %d from rank %d",
        in, prev);
}

static void check_counters(const uint64_t expect[5], const char *what) {
  nccl_emu_counters k;
  char line[512];
  nccl_emu_counters_read(&k);
  nccl_emu_counters_format(&k, line, sizeof line);
  CHECK(k.sends == expect[0] && k.send_bytes == expect[1] && k.recvs == expect[2] &&
        k.recv_bytes == expect[3] && k.groups == expect[4] && k.collectives == 0,
        "%s: counters %s", what, line);
  nccl_emu_counters_reset();
}

static void grouped(void) {
  cudaStream_t s;
  CUDA_MUST(cudaStreamCreate(&s));
  ncclComm_t c = emu_test_world(g_rank, g_size);
  nccl_emu_counters k;
  nccl_emu_counters_read(&k);
  CHECK(k.comms == 1, "one communicator counted, not %llu", (unsigned long long)k.comms);
  nccl_emu_counters_reset();
  ring(c, s, 4096, 0);
  check_counters((uint64_t[5]){1, 4096, 1, 4096, 1}, "a grouped ring");
  ring(c, s, 3000, 1);
  check_counters((uint64_t[5]){1, 3000, 1, 3000, 1}, "a ring in nested groups");
  ring(c, s, 0, 0);
  check_counters((uint64_t[5]){1, 0, 1, 0, 1}, "a zero-byte ring");
  cudaStream_t s2;
  CUDA_MUST(cudaStreamCreate(&s2));
  ring_two_streams(c, s, s2);
  check_counters((uint64_t[5]){1, 4, 1, 4, 1}, "a group over two streams");
  CUDA_MUST(cudaStreamDestroy(s2));
  in_order(c, s);
  int even = g_rank % 2 == 0;
  check_counters((uint64_t[5]){even ? 2 : 0, even ? 300 : 0, even ? 0 : 2, even ? 0 : 300, 2},
                 "ungrouped sends in order");
  char line[512];
  nccl_emu_counters_read(&k);
  nccl_emu_counters_format(&k, line, sizeof line);
  CHECK(strstr(line, "nccl-emu counters: sends=0 ") != NULL, "the counters' line: %s", line);
  NCCL_MUST(ncclCommDestroy(c));
  CUDA_MUST(cudaStreamDestroy(s));
}

/* Sends A then B (sizes a, b) to rank 1 on the given communicators and streams. */
static void send_two(ncclComm_t ca, cudaStream_t sa, size_t a, ncclComm_t cb, cudaStream_t sb,
                     size_t b) {
  unsigned char *x = malloc(a), *y = malloc(b);
  fill(x, a, 10), fill(y, b, 20);
  NCCL_MUST(ncclSend(x, a, ncclChar, 1, ca, sa));
  MUST(cudaStreamQuery(sa) == cudaErrorNotReady, "cudaStreamQuery", "A is not waiting"); /* A first */
  NCCL_MUST(ncclSend(y, b, ncclChar, 1, cb, sb));
  CUDA_MUST(cudaStreamSynchronize(sb));
  CUDA_MUST(cudaStreamSynchronize(sa));
  free(x), free(y);
}

/* Rank 1: B first (and waits for it), then A. */
static void recv_two(ncclComm_t ca, cudaStream_t sa, size_t a, ncclComm_t cb, cudaStream_t sb,
                     size_t b) {
  unsigned char *x = calloc(a, 1), *y = calloc(b, 1);
  NCCL_MUST(ncclRecv(y, b, ncclChar, 0, cb, sb));
  CUDA_MUST(cudaStreamSynchronize(sb));
  CHECK(wrong(y, b, 20) == 0, "the second message, taken first, is the second one sent");
  NCCL_MUST(ncclRecv(x, a, ncclChar, 0, ca, sa));
  CUDA_MUST(cudaStreamSynchronize(sa));
  CHECK(wrong(x, a, 10) == 0, "the first message, taken second");
  free(x), free(y);
}

/* Two communicators X, Y between ranks 0 and 1, equal sizes (so a shared matching would mix up
 * the messages). same_stream / same_comm: rank 0's two sends share a stream / a communicator. */
static void two_messages(int same_stream, int same_comm) {
  cudaStream_t sx, sy;
  CUDA_MUST(cudaStreamCreate(&sx));
  CUDA_MUST(cudaStreamCreate(&sy));
  ncclComm_t x = emu_test_world(g_rank, g_size), y = same_comm ? x : emu_test_world(g_rank, g_size);
  size_t a = 64, b = same_comm ? 128 : 64;
  if (g_rank == 0) send_two(x, sx, a, y, same_stream ? sx : sy, b);
  else recv_two(x, sx, a, y, sy, b);
  if (!same_comm) NCCL_MUST(ncclCommDestroy(y));
  NCCL_MUST(ncclCommDestroy(x));
  CUDA_MUST(cudaStreamDestroy(sx));
  CUDA_MUST(cudaStreamDestroy(sy));
}

/* The deadlocks: each must be reported by the emulation, never reach the end. */
static void deadlock(const char *mode) {
  cudaStream_t s;
  CUDA_MUST(cudaStreamCreate(&s));
  ncclComm_t c = emu_test_world(g_rank, g_size);
  int peer = 1 - g_rank;
  unsigned char out[4096], in[4096];
  fill(out, sizeof out, g_rank);
  if (!strcmp(mode, "ungrouped")) { /* small: MPI would buffer it, were sends not synchronous */
    NCCL_MUST(ncclSend(out, 256, ncclChar, peer, c, s));
    NCCL_MUST(ncclRecv(in, 256, ncclChar, peer, c, s));
  } else if (g_rank == 0) { /* order */
    NCCL_MUST(ncclSend(out, 100, ncclChar, peer, c, s));
    NCCL_MUST(ncclSend(out, 200, ncclChar, peer, c, s));
  } else {
    NCCL_MUST(ncclRecv(in, 200, ncclChar, peer, c, s));
    NCCL_MUST(ncclRecv(in, 100, ncclChar, peer, c, s));
  }
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(0, "%s: completed, where NCCL would hang", mode);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  emu_test_init(&argc, &argv, &g_rank, &g_size);
  int two = !strcmp(mode, "independent") || !strcmp(mode, "ungrouped") || !strcmp(mode, "order") ||
            !strcmp(mode, "one_stream") || !strcmp(mode, "turn");
  MUST(two ? g_size == 2 : g_size % 2 == 0, mode, "needs 2 ranks (grouped: an even count)");
  if (!strcmp(mode, "grouped")) grouped();
  else if (!strcmp(mode, "independent")) two_messages(0, 0);
  else if (!strcmp(mode, "one_stream")) two_messages(1, 0);
  else if (!strcmp(mode, "turn")) two_messages(0, 1);
  else if (!strcmp(mode, "ungrouped") || !strcmp(mode, "order")) deadlock(mode);
  else MUST(0, "p2p MODE", "unknown mode");
  return emu_test_end(mode, g_rank);
}
