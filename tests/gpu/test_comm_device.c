/* test_comm_device MODE: comm.h with buffers in GPU memory, under mpirun (any rank count).
 * MODE nccl: NCCL between the ranks (one GPU each; with fewer GPUs than ranks the test skips);
 * MODE staged: MPI through pinned host copies (ranks may share one GPU);
 * MODE nccl_id_fail: ncclGetUniqueId fails on rank 0 (its NCCL_SOCKET_IFNAME names no
 * interface, so NCCL's bootstrap finds none): every rank's comm_use_device fails, with the same
 * one line naming it (none may go on to ncclCommInitRank with a zeroed id and hang).
 * Checks: a ring of grouped device sends/receives delivers every byte; the device chain sum
 * equals the host chain sum ((x0 + x1) + x2) + ... bit for bit, on the world and on a group
 * split from it, and so does the sharded optimizer's reduce-scatter, whose gather delivers every
 * range; host buffers on the same groups go over MPI (an f64 sum, and host
 * sends interleaved with device ones on one group); comm_connect works; a send
 * the transport holds back goes out at comm_flush while its rank sums on another group (the
 * tied-weight deadlock of pipelined runs over NCCL: without the flush this test hangs); buffers
 * rewritten on the compute stream right after comm_wait, round after round, and received ones
 * read only at the end, carry exactly each round's bytes (the stream ordering of docs/gpu.md
 * "Overlap"; PT_EMU_COMM_UNORDERED breaks it on purpose), and the staged transport reuses its
 * pinned buffers instead of allocating one per message, each only once its copy ran.
 * Exit 77 (CTest skip) on every rank when there is no usable GPU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/nccl/comm_pinned.h"
#include "kernels/cuda/gpu.h"
#include "test_util.h"

static float value(int rank, size_t i) { return (float)((int)(i * 7 + rank * 13) % 101) / 7.0f - 3.0f; }

/* What the chain sum must give: ((x0 + x1) + x2) + ..., in float, over the given ranks. */
static float chain_expect(const int *ranks, int n, size_t i) {
  float acc = value(ranks[0], i);
  for (int k = 1; k < n; k++) acc = acc + value(ranks[k], i);
  return acc;
}

static void check_sum(gpu_ctx *g, pt_comm *c, const int *ranks, int n_ranks, int me, size_t n,
                      const char *what) {
  float *host = malloc(n * sizeof *host), *dev = gpu_alloc(g, n * sizeof *dev);
  for (size_t i = 0; i < n; i++) host[i] = value(me, i);
  gpu_to_device(g, dev, host, n * sizeof *host);
  comm_allreduce_sum_f32(c, dev, n);
  gpu_to_host(g, host, dev, n * sizeof *host);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += memcmp(&host[i], &(float){chain_expect(ranks, n_ranks, i)}, 4) != 0;
  CHECK(bad == 0, "%s: %zu of %zu sums differ from the host chain order", what, bad, n);
  gpu_free(dev);
  free(host);
}

/* The sharded optimizer's halves (comm.h) on uneven ranges, rank 0's empty from 3 ranks on:
 * the reduce-scatter leaves the chain's bits on each rank's range and on the last rank's whole
 * buffer; the gather then brings every rank's range (marked with its rank) to every rank. */
static void check_shard(gpu_ctx *g, pt_comm *c, const int *ranks, int n_ranks, int me, size_t n) {
  int gr = comm_rank(c);
  size_t *ends = calloc((size_t)n_ranks, sizeof *ends);
  for (int r = 0; r < n_ranks; r++)
    ends[r] = r == n_ranks - 1       ? n
              : n_ranks > 2 && r == 0 ? 0
                                      : (size_t)(r + 1) * n / (n_ranks + 1);
  float *host = malloc(n * sizeof *host), *dev = gpu_alloc(g, n * sizeof *dev);
  for (size_t i = 0; i < n; i++) host[i] = value(me, i);
  gpu_to_device(g, dev, host, n * sizeof *host);
  comm_reduce_scatter_sum_f32(c, dev, n, ends);
  gpu_to_host(g, host, dev, n * sizeof *host);
  size_t lo = gr ? ends[gr - 1] : 0, bad = 0;
  int last = gr == n_ranks - 1; /* the chain ends there: the whole sum */
  for (size_t i = last ? 0 : lo; i < ends[gr]; i++)
    bad += host[i] != chain_expect(ranks, n_ranks, i);
  CHECK(bad == 0, "reduce-scatter: %zu sums differ from the chain's on group rank %d", bad, gr);
  for (size_t i = lo; i < ends[gr]; i++) host[i] = (float)gr + (float)(i % 8) / 8.0f;
  gpu_to_device(g, dev, host, n * sizeof *host);
  comm_allgather_f32(c, dev, n, ends);
  gpu_to_host(g, host, dev, n * sizeof *host);
  bad = 0;
  for (int r = 0, i = 0; r < n_ranks; r++)
    for (; (size_t)i < ends[r]; i++) bad += host[i] != (float)r + (float)(i % 8) / 8.0f;
  CHECK(bad == 0, "gather: %zu floats not their range's owner's on group rank %d", bad, gr);
  gpu_free(dev);
  free(host), free(ends);
}

static void check_ring(gpu_ctx *g, pt_comm *c, int rank, int size, size_t bytes) {
  unsigned char *out = malloc(bytes), *in = malloc(bytes);
  for (size_t i = 0; i < bytes; i++) out[i] = (unsigned char)(i * 31 + rank);
  void *dout = gpu_alloc(g, bytes), *din = gpu_alloc(g, bytes);
  gpu_to_device(g, dout, out, bytes);
  pt_request s = {0}, r = {0};
  comm_group_start(c); /* each send with the receive it pairs with: no deadlock in a ring */
  comm_send_async(c, dout, bytes, (rank + 1) % size, 5, &s);
  comm_recv_async(c, din, bytes, (rank + size - 1) % size, 5, &r);
  comm_group_end(c);
  comm_wait(&s), comm_wait(&r);
  gpu_to_host(g, in, din, bytes);
  int from = (rank + size - 1) % size;
  size_t bad = 0;
  for (size_t i = 0; i < bytes; i++) bad += in[i] != (unsigned char)(i * 31 + from);
  CHECK(bad == 0, "ring of %zu bytes: %zu bytes wrong from rank %d", bytes, bad, from);
  gpu_free(dout), gpu_free(din);
  free(out), free(in);
}

/* Rank 0 sends rounds messages to rank 1, which receives each into its own part of din and
 * reads them once at the end: receives back to back, with no send between them whose copy
 * would synchronise the stream, so a staged receive's pinned buffer reused before its copy to
 * the device ran shows as wrong bytes. Returns rank 1's count of wrong bytes. */
static size_t one_way(gpu_ctx *g, pt_comm *c, int rank, unsigned char *dout, unsigned char *din,
                      size_t bytes, int rounds) {
  unsigned char *buf = malloc(bytes * (size_t)rounds);
  size_t bad = 0;
  for (int round = 0; round < rounds && rank < 2; round++) {
    pt_request q = {0};
    if (rank == 0) {
      for (size_t i = 0; i < bytes; i++) buf[i] = (unsigned char)(i * 5 + round);
      gpu_to_device(g, dout, buf, bytes);
      comm_send_async(c, dout, bytes, 1, 7, &q);
    } else {
      comm_recv_async(c, din + (size_t)round * bytes, bytes, 0, 7, &q);
    }
    comm_wait(&q);
  }
  if (rank == 1) {
    gpu_to_host(g, buf, din, bytes * (size_t)rounds);
    for (int round = 0; round < rounds; round++)
      for (size_t i = 0; i < bytes; i++)
        bad += buf[(size_t)round * bytes + i] != (unsigned char)(i * 5 + round);
  }
  free(buf);
  return bad;
}

/* Rounds of a ring exchange where the compute stream rewrites the send buffer right after
 * comm_wait on the send; each round lands in its own part of one receive buffer, read once at
 * the end, so nothing synchronises the host between rounds: the peer must get each round's
 * bytes exactly. Staged: the pinned buffers are reused, each only once its copy to the device
 * ran (rounds faster than the copies would overwrite one still to be copied). */
static void check_reuse(gpu_ctx *g, pt_comm *c, int rank, int size, int staged) {
  enum { ROUNDS = 12 };
  size_t bytes = 65536 + 3;
  unsigned char *out = malloc(bytes), *in = malloc(bytes * ROUNDS);
  unsigned char *dout = gpu_alloc(g, bytes), *din = gpu_alloc(g, bytes * ROUNDS);
  int from = (rank + size - 1) % size;
  long before = pinned_allocations();
  for (int round = 0; round < ROUNDS; round++) {
    for (size_t i = 0; i < bytes; i++) out[i] = (unsigned char)(i * 7 + rank * 3 + round);
    gpu_to_device(g, dout, out, bytes); /* queued behind the previous round's send wait */
    pt_request s = {0}, r = {0};
    comm_group_start(c);
    comm_send_async(c, dout, bytes, (rank + 1) % size, 6, &s);
    comm_recv_async(c, din + (size_t)round * bytes, bytes, from, 6, &r);
    comm_group_end(c);
    comm_wait(&s), comm_wait(&r);
  }
  gpu_to_host(g, in, din, bytes * ROUNDS);
  long made = pinned_allocations() - before;
  size_t bad = one_way(g, c, rank, dout, din, bytes, ROUNDS);
  for (int round = 0; round < ROUNDS; round++)
    for (size_t i = 0; i < bytes; i++)
      bad += in[(size_t)round * bytes + i] != (unsigned char)(i * 7 + from * 3 + round);
  CHECK(bad == 0, "reuse: %zu bytes wrong over %d rounds from rank %d", bad, ROUNDS, from);
  if (staged) /* the ring's: bounded by the copies in flight, never one per message */
    CHECK(made <= ROUNDS / 2, "staged: %ld pinned allocations for %d rounds", made, ROUNDS);
  gpu_free(dout), gpu_free(din);
  free(out), free(in);
}

/* The last rank sends to rank 0 on c and then, before anything waits for that send, joins a
 * sum on another group (other) that rank 0 joins only once it has the message: the schedule's
 * sG FLUSH TIE. Over NCCL the send is held until a wait on c, so only comm_flush lets it out;
 * without it both ranks wait forever. */
static void check_flush(gpu_ctx *g, pt_comm *c, pt_comm *other, int rank, int size) {
  size_t bytes = 4099, n = 257;
  unsigned char *msg = malloc(bytes);
  float *sum = malloc(n * sizeof *sum);
  for (size_t i = 0; i < bytes; i++) msg[i] = (unsigned char)(i * 13 + 5);
  for (size_t i = 0; i < n; i++) sum[i] = value(rank, i);
  void *dmsg = gpu_alloc(g, bytes);
  float *dsum = gpu_alloc(g, n * sizeof *dsum);
  gpu_to_device(g, dsum, sum, n * sizeof *sum);
  pt_request q = {0};
  if (rank == size - 1) {
    gpu_to_device(g, dmsg, msg, bytes);
    comm_send_async(c, dmsg, bytes, 0, 9, &q);
    comm_flush(c);
  } else if (rank == 0) {
    comm_recv_async(c, dmsg, bytes, size - 1, 9, &q);
    comm_wait(&q);
  }
  comm_allreduce_sum_f32(other, dsum, n);
  comm_wait(&q); /* the sender's, now that rank 0 has it */
  gpu_to_host(g, sum, dsum, n * sizeof *sum);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    int all[64];
    for (int r = 0; r < size && r < 64; r++) all[r] = r;
    bad += memcmp(&sum[i], &(float){chain_expect(all, size < 64 ? size : 64, i)}, 4) != 0;
  }
  CHECK(bad == 0, "flush: %zu of %zu sums on the other group wrong", bad, n);
  if (rank == 0) {
    gpu_to_host(g, msg, dmsg, bytes);
    for (size_t i = 0; i < bytes; i++) bad += msg[i] != (unsigned char)(i * 13 + 5);
    CHECK(bad == 0, "flush: %zu bytes of the held send wrong", bad);
  }
  gpu_free(dmsg), gpu_free(dsum);
  free(msg), free(sum);
}

/* Host buffers on a group with a device transport: over MPI, a ring matched by tag. */
static void check_host_ring(pt_comm *c, int rank, int size) {
  int out = rank * 10 + 1, in = -1, from = (rank + size - 1) % size;
  pt_request s = {0}, r = {0};
  comm_send_host_async(c, &out, sizeof out, (rank + 1) % size, 11, &s);
  comm_recv_host_async(c, &in, sizeof in, from, 11, &r);
  comm_wait(&r), comm_wait(&s);
  CHECK(in == from * 10 + 1, "host ring: %d from rank %d, expected %d", in, from, from * 10 + 1);
}

static uint64_t text_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* MODE nccl_id_fail (see the top): 0 when every rank failed alike. */
static int check_id_fail(gpu_ctx *g, pt_comm *world, int rank, int size) {
  if (rank == 0) setenv("NCCL_SOCKET_IFNAME", "=pt_no_such_interface", 1);
  char err[512] = "";
  int rc = comm_use_device(SPEC_COMM_NCCL, g->stream, err, sizeof err);
  CHECK(rc == -1 && strstr(err, "ncclGetUniqueId failed on rank 0") && !strchr(err, '\n'),
        "rank %d: comm_use_device gave %d, '%s'", rank, rc, err);
  uint64_t mine = text_hash(err), *all = calloc((size_t)size, sizeof *all);
  comm_allgather_u64(world, &mine, 1, all);
  for (int r = 1; r < size; r++)
    CHECK(all[r] == all[0], "rank %d's message differs from rank 0's (rank %d: '%s')", r, rank,
          err);
  free(all);
  gpu_close(g);
  int failed = test_summary("comm_device (ncclGetUniqueId fails on rank 0)");
  comm_finalize();
  return failed;
}

int main(int argc, char **argv) {
  int id_fail = argc > 1 && !strcmp(argv[1], "nccl_id_fail");
  int nccl = argc > 1 && !strcmp(argv[1], "nccl");
  comm_init(&argc, &argv);
  pt_comm *world = comm_world();
  int rank = comm_rank(world), size = comm_size(world);
  char why[256] = "";
  int gpus = gpu_count(why, sizeof why), skip = gpus == 0 || (nccl && gpus < comm_local_size());
  int skip_any = 0, *all = calloc((size_t)size, sizeof(int));
  comm_allgather_int(world, skip, all);
  for (int r = 0; r < size; r++) skip_any |= all[r];
  free(all);
  if (skip_any) {
    if (rank == 0) printf("SKIP: %s\n", gpus == 0 ? why : "fewer GPUs than ranks for NCCL");
    comm_finalize();
    return 77;
  }
  gpu_ctx g;
  char err[512];
  if (id_fail) {
    if (gpu_open(&g, comm_local_rank() % gpus, err, sizeof err) != 0) {
      fprintf(stderr, "rank %d: %s\n", rank, err);
      return 1;
    }
    return check_id_fail(&g, world, rank, size);
  }
  if (gpu_open(&g, comm_local_rank() % gpus, err, sizeof err) != 0 ||
      comm_use_device(nccl ? SPEC_COMM_NCCL : SPEC_COMM_MPI, g.stream, err, sizeof err) != 0) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return 1;
  }
  int ring[2] = {(rank + 1) % size, (rank + size - 1) % size};
  comm_connect(world, ring, size > 2 ? 2 : size - 1);
  check_ring(&g, world, rank, size, 1);
  check_ring(&g, world, rank, size, (3u << 20) + 5);
  if (size > 1) check_reuse(&g, world, rank, size, !nccl);
  int *everyone = calloc((size_t)size, sizeof(int)), n_sub = 0, sub[64] = {0};
  for (int r = 0; r < size; r++) everyone[r] = r;
  check_sum(&g, world, everyone, size, rank, 1000003, "world");
  check_shard(&g, world, everyone, size, rank, 100003);
  for (int r = rank % 2; r < size && n_sub < 64; r += 2) sub[n_sub++] = r;
  pt_comm *half = comm_split(world, rank % 2, rank); /* even and odd ranks */
  check_sum(&g, half, sub, n_sub, rank, 4099, "split group");
  double host = rank + 0.5; /* a host buffer on a device-enabled group still goes over MPI */
  comm_allreduce_sum_f64(half, &host, 1);
  double expect = 0;
  for (int k = 0; k < n_sub; k++) expect += sub[k] + 0.5;
  CHECK(host == expect, "host sum on the split group: %g, expected %g", host, expect);
  check_host_ring(half, comm_rank(half), comm_size(half));
  comm_free(half);
  if (size > 1) {
    pt_comm *other = comm_split(world, 0, rank); /* every rank: a communicator of its own */
    check_flush(&g, world, other, rank, size);
    comm_free(other);
  }
  free(everyone);
  gpu_close(&g);
  int rc = test_summary(nccl ? "comm_device (nccl)" : "comm_device (staged)");
  comm_finalize();
  return rc;
}
