/* tests/gpu/emu/nccl/tests/comms.c MODE: communicators of the emulated NCCL, under mpirun.
 *   subsets (4 ranks)  ncclCommInitRank among some world ranks only: two pairs at once (one
 *                      created by its NCCL rank 1), then a pair while the other ranks wait in
 *                      MPI for a message sent only after the pair is done; then ncclCommSplit
 *                      (rank order by key, NCCL_SPLIT_NOCOLOR) with transfers on the children.
 *   init_alone (2)     rank 0 initialises a 2-rank communicator rank 1 never joins: must end in
 *                      the deadlock report (tests/expect_deadlock.sh). */
#include <string.h>

#include "emu_test.h"

static int g_rank, g_size;

/* An id made by world rank `creator` and sent to world rank `other` over MPI. */
static ncclUniqueId shared_id(int creator, int other) {
  ncclUniqueId id;
  if (g_rank == creator) {
    NCCL_MUST(ncclGetUniqueId(&id));
    MPI_MUST(MPI_Send(&id, (int)sizeof id, MPI_BYTE, other, 7, MPI_COMM_WORLD));
  } else {
    MPI_MUST(MPI_Recv(&id, (int)sizeof id, MPI_BYTE, creator, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  return id;
}

/* Both ranks of c send each other their world rank, grouped. */
static void swap_ranks(ncclComm_t c, cudaStream_t s, int peer_world, const char *what) {
  int me, n, mine = g_rank, theirs = -1;
  NCCL_MUST(ncclCommUserRank(c, &me));
  NCCL_MUST(ncclCommCount(c, &n));
  CHECK(n == 2, "%s: %d ranks", what, n);
  NCCL_MUST(ncclGroupStart());
  NCCL_MUST(ncclSend(&mine, 1, ncclInt, 1 - me, c, s));
  NCCL_MUST(ncclRecv(&theirs, 1, ncclInt, 1 - me, c, s));
  NCCL_MUST(ncclGroupEnd());
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(theirs == peer_world, "%s: got world rank %d from NCCL rank %d, expected %d", what, theirs,
        1 - me, peer_world);
}

/* A pair {creator, other}: NCCL rank 0 is `first`. */
static void pair(cudaStream_t s, int creator, int other, int first, const char *what) {
  ncclUniqueId id = shared_id(creator, other);
  ncclComm_t c;
  NCCL_MUST(ncclCommInitRank(&c, 2, id, g_rank == first ? 0 : 1));
  swap_ranks(c, s, g_rank == creator ? other : creator, what);
  NCCL_MUST(ncclCommDestroy(c));
}

static void subsets(cudaStream_t s) {
  /* two pairs at once; the second's creator (3) is its NCCL rank 1 */
  if (g_rank == 1 || g_rank == 2) pair(s, 1, 2, 1, "pair {1, 2}");
  else pair(s, 3, 0, 0, "pair {3, 0}");
  /* {1, 2} again, while 0 and 3 wait for a message sent only once the pair is done */
  int done = 0;
  if (g_rank == 1 || g_rank == 2) {
    pair(s, 2, 1, 2, "pair {2, 1}, the others waiting");
    done = 1;
    MPI_MUST(MPI_Send(&done, 1, MPI_INT, g_rank == 1 ? 0 : 3, 8, MPI_COMM_WORLD));
  } else {
    MPI_MUST(MPI_Recv(&done, 1, MPI_INT, g_rank == 0 ? 1 : 2, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  CHECK(done == 1, "the pair's message to the waiting ranks");
}

/* Even and odd world ranks, NCCL ranks in reverse (key -rank); a broadcast from each child's
 * rank 0 (the highest world rank of the color). */
static void split_parity(ncclComm_t world, cudaStream_t s) {
  ncclComm_t c;
  NCCL_MUST(ncclCommSplit(world, g_rank % 2, -g_rank, &c, NULL));
  int me, n, members = (g_size - g_rank % 2 + 1) / 2, top = g_rank % 2;
  while (top + 2 < g_size) top += 2;
  NCCL_MUST(ncclCommUserRank(c, &me));
  NCCL_MUST(ncclCommCount(c, &n));
  CHECK(n == members && me == (top - g_rank) / 2, "split by parity: rank %d of %d", me, n);
  int v = g_rank;
  NCCL_MUST(ncclBroadcast(&v, &v, 1, ncclInt, 0, c, s));
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(v == top, "broadcast on the split: %d, expected world rank %d", v, top);
  NCCL_MUST(ncclCommDestroy(c));
}

/* World rank 0 stays out (NCCL_SPLIT_NOCOLOR); the rest pass a token around a ring. */
static void split_nocolor(ncclComm_t world, cudaStream_t s) {
  ncclComm_t c = world;
  NCCL_MUST(ncclCommSplit(world, g_rank == 0 ? NCCL_SPLIT_NOCOLOR : 5, g_rank, &c, NULL));
  if (g_rank == 0) {
    CHECK(c == NULL, "NCCL_SPLIT_NOCOLOR gives no communicator");
    return;
  }
  int me, n, out = g_rank, in = -1;
  NCCL_MUST(ncclCommUserRank(c, &me));
  NCCL_MUST(ncclCommCount(c, &n));
  CHECK(n == g_size - 1 && me == g_rank - 1, "split without rank 0: rank %d of %d", me, n);
  NCCL_MUST(ncclGroupStart());
  NCCL_MUST(ncclSend(&out, 1, ncclInt, (me + 1) % n, c, s));
  NCCL_MUST(ncclRecv(&in, 1, ncclInt, (me + n - 1) % n, c, s));
  NCCL_MUST(ncclGroupEnd());
  CUDA_MUST(cudaStreamSynchronize(s));
  CHECK(in == (me + n - 1) % n + 1, "ring on the split: %d from NCCL rank %d", in, (me + n - 1) % n);
  NCCL_MUST(ncclCommDestroy(c));
}

static void init_alone(void) {
  if (g_rank == 0) {
    ncclUniqueId id;
    ncclComm_t c;
    NCCL_MUST(ncclGetUniqueId(&id));
    NCCL_MUST(ncclCommInitRank(&c, 2, id, 0));
    CHECK(0, "ncclCommInitRank completed with a rank missing");
  }
  MPI_MUST(MPI_Barrier(MPI_COMM_WORLD)); /* rank 1 waits here, never joining */
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  emu_test_init(&argc, &argv, &g_rank, &g_size);
  cudaStream_t s;
  CUDA_MUST(cudaStreamCreate(&s));
  if (!strcmp(mode, "subsets")) {
    MUST(g_size == 4, mode, "needs 4 ranks");
    subsets(s);
    ncclComm_t world = emu_test_world(g_rank, g_size);
    split_parity(world, s);
    split_nocolor(world, s);
    NCCL_MUST(ncclCommDestroy(world));
  } else if (!strcmp(mode, "init_alone")) {
    init_alone();
  } else {
    MUST(0, "comms MODE", "unknown mode");
  }
  CUDA_MUST(cudaStreamDestroy(s));
  return emu_test_end(mode, g_rank);
}
