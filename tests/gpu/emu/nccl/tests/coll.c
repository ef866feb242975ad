/* tests/gpu/emu/nccl/tests/coll.c [missing]: the emulated NCCL's collectives and argument
 * checks, under mpirun (3 ranks or more). "missing": a broadcast the last rank never joins must
 * end in the deadlock report (a rank of a collective finishes only once all have joined). Else: ncclBroadcast in and out of place, ncclAllReduce and ncclReduce in
 * rank order, bit for bit, the same twice; ncclAvg, ncclMax; refused arguments return NCCL's
 * codes with a last-error text and queue nothing (a group with one is dropped whole); the
 * counters count the collectives asked for, and the groups queued. */
#include <string.h>

#include "emu_test.h"

#define N 1001

static int g_rank, g_size;

static float value(int rank, size_t i) {
  return (float)((int)(i * 7 + (size_t)rank * 13) % 101) / 7.0f - 3.0f;
}

/* ((x0 + x1) + x2) + ..., in float: the order the emulation promises. */
static float chain(size_t i) {
  float acc = value(0, i);
  for (int r = 1; r < g_size; r++) acc = acc + value(r, i);
  return acc;
}

static void broadcasts(ncclComm_t c, cudaStream_t s) {
  float src[N], dst[N];
  int root = 1 % g_size;
  for (size_t i = 0; i < N; i++) src[i] = g_rank == root ? value(root, i) : -1.0f, dst[i] = 0;
  NCCL_MUST(ncclBroadcast(src, dst, N, ncclFloat, root, c, s));
  CUDA_MUST(cudaStreamSynchronize(s));
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) bad += dst[i] != value(root, i);
  CHECK(bad == 0, "broadcast from rank %d: %zu of %d values wrong", root, bad, N);
  int64_t v[3] = {g_rank, 2 * g_rank, 3 * g_rank}; /* in place, the last rank as the root */
  NCCL_MUST(ncclBcast(v, 3, ncclInt64, g_size - 1, c, s));
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(v[0] == g_size - 1 && v[2] == 3 * (g_size - 1), "in-place broadcast: %lld", (long long)v[0]);
}

static void sums(ncclComm_t c, cudaStream_t s) {
  float x[N], y[N], again[N];
  for (size_t i = 0; i < N; i++) x[i] = value(g_rank, i);
  NCCL_MUST(ncclAllReduce(x, y, N, ncclFloat, ncclSum, c, s));
  memcpy(again, x, sizeof x); /* in place this time */
  NCCL_MUST(ncclAllReduce(again, again, N, ncclFloat, ncclSum, c, s));
  CUDA_MUST(cudaStreamSynchronize(s));
  size_t bad = 0;
  for (size_t i = 0; i < N; i++) bad += memcmp(&y[i], &(float){chain(i)}, sizeof(float)) != 0;
  CHECK(bad == 0, "allreduce: %zu of %d sums differ from the rank-order chain", bad, N);
  CHECK(memcmp(y, again, sizeof y) == 0, "allreduce twice (in place): different bits");
  int root = 2 % g_size;
  float *out = g_rank == root ? again : NULL; /* only the root's receive buffer is used */
  memset(again, 0, sizeof again);
  NCCL_MUST(ncclReduce(x, out, N, ncclFloat, ncclSum, root, c, s));
  CUDA_MUST(cudaStreamSynchronize(s));
  if (g_rank == root)
    CHECK(memcmp(y, again, sizeof y) == 0, "reduce to rank %d differs from allreduce", root);
}

static void other_ops(ncclComm_t c, cudaStream_t s) {
  int32_t m = g_rank * 10 - 7, mx = 0;
  double a = g_rank + 0.5, avg = 0;
  NCCL_MUST(ncclGroupStart()); /* two collectives in one group */
  NCCL_MUST(ncclAllReduce(&m, &mx, 1, ncclInt32, ncclMax, c, s));
  NCCL_MUST(ncclAllReduce(&a, &avg, 1, ncclDouble, ncclAvg, c, s));
  NCCL_MUST(ncclGroupEnd());
  CUDA_MUST(cudaStreamSynchronize(s));
  double sum = 0;
  for (int r = 0; r < g_size; r++) sum += r + 0.5;
  CHECK(mx == (g_size - 1) * 10 - 7, "max: %d", mx);
  CHECK(avg == sum / g_size, "avg: %g, expected %g", avg, sum / g_size);
}

/* A refused call: its code, and why in ncclGetLastError (right after the call: the next one
 * overwrites it). */
static void expect(ncclResult_t got, ncclResult_t want, const char *text, const char *what) {
  const char *last = ncclGetLastError(NULL);
  CHECK(got == want && strstr(last, text), "%s: %s, last error '%s'", what,
        ncclGetErrorString(got), last);
}

static void refused(ncclComm_t c, cudaStream_t s) {
  float f = 0;
  expect(ncclAllReduce(&f, &f, 1, ncclHalf, ncclSum, c, s), ncclInvalidArgument, "half", "half");
  expect(ncclReduce(&f, &f, 1, ncclBfloat16, ncclSum, 0, c, s), ncclInvalidArgument, "bfloat16", "bf16");
  expect(ncclSend(&f, 1, ncclFloat, g_size + 3, c, s), ncclInvalidArgument, "peer", "a bad peer");
  expect(ncclBroadcast(&f, &f, 1, ncclFloat, -1, c, s), ncclInvalidArgument, "root -1", "a bad root");
  expect(ncclRecv(&f, 1, ncclFloat, 0, NULL, s), ncclInvalidArgument, "comm is NULL", "no comm");
  expect(ncclAllReduce(&f, &f, 1, ncclFloat, ncclNumOps, c, s), ncclInvalidArgument, "reduction",
         "bad op");
  expect(ncclSend(NULL, 4, ncclFloat, 0, c, s), ncclInvalidArgument, "NULL buffer", "NULL buffer");
  expect(ncclGroupEnd(), ncclInvalidUsage, "without ncclGroupStart", "an unopened group");
  /* a group with a refused call is dropped whole: its good call does not run either */
  float x = 1, y = 0;
  NCCL_MUST(ncclGroupStart());
  NCCL_MUST(ncclAllReduce(&x, &y, 1, ncclFloat, ncclSum, c, s));
  expect(ncclAllReduce(&f, &f, 1, ncclHalf, ncclSum, c, s), ncclInvalidArgument, "half", "in a group");
  expect(ncclGroupEnd(), ncclInvalidArgument, "half", "the end of a group with a refused call");
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(y == 0, "the dropped group's allreduce ran");
}

/* The last rank never joins a broadcast: the others must not finish it (deadlock report). */
static int missing(ncclComm_t c, cudaStream_t s) {
  int v = g_rank;
  if (g_rank < g_size - 1) {
    NCCL_MUST(ncclBroadcast(&v, &v, 1, ncclInt, 0, c, s));
    CUDA_MUST(cudaStreamSynchronize(s));
    CHECK(0, "rank %d finished a broadcast rank %d never joined", g_rank, g_size - 1);
  }
  MPI_MUST(MPI_Barrier(MPI_COMM_WORLD));
  return emu_test_end("coll missing", g_rank);
}

int main(int argc, char **argv) {
  emu_test_init(&argc, &argv, &g_rank, &g_size);
  MUST(g_size >= 3, "coll", "needs 3 ranks or more");
  cudaStream_t s;
  CUDA_MUST(cudaStreamCreate(&s));
  ncclComm_t c = emu_test_world(g_rank, g_size);
  if (argc > 1 && !strcmp(argv[1], "missing")) return missing(c, s);
  nccl_emu_counters_reset();
  broadcasts(c, s);
  nccl_emu_counters k;
  nccl_emu_counters_read(&k);
  CHECK(k.collectives == 2 && k.coll_bytes == N * 4 + 24 && k.sends == 0 && k.groups == 2,
        "counters after two broadcasts: %llu collectives, %llu bytes",
        (unsigned long long)k.collectives, (unsigned long long)k.coll_bytes);
  sums(c, s);
  other_ops(c, s);
  refused(c, s);
  nccl_emu_counters_read(&k);
  CHECK(k.collectives == 8 && k.groups == 6,
        "refused calls not counted, the dropped group not queued: %llu collectives, %llu groups",
        (unsigned long long)k.collectives, (unsigned long long)k.groups);
  NCCL_MUST(ncclCommDestroy(c));
  CUDA_MUST(cudaStreamDestroy(s));
  return emu_test_end("coll", g_rank);
}
