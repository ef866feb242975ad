/* tests/gpu/emu/nccl/src/comm.c: communicators after their creation: split, destroy, abort and
 * the queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

struct ncclComm *emu_comm_new(MPI_Comm mpi, const char *name) {
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) emu_die("out of memory creating communicator %s", name);
  EMU_CHECK_MPI(MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN));
  c->mpi = mpi;
  EMU_CHECK_MPI(MPI_Comm_rank(mpi, &c->rank));
  EMU_CHECK_MPI(MPI_Comm_size(mpi, &c->nranks));
  snprintf(c->name, sizeof c->name, "%s", name);
  c->refs = 1;
  emu_counters.comms++;
  emu_counters_print_at_exit();
  return c;
}

void emu_comm_release(struct ncclComm *c) {
  if (--c->refs == 0) free(c);
}

/* The parent's ranks of color's members, ordered by key then parent rank (NCCL's and MPI's
 * order of the new ranks). Returns how many. */
static int members_of(const int *all, int n, int color, int *list) {
  int m = 0;
  for (int r = 0; r < n; r++) {
    if (all[2 * r] != color) continue;
    int i = m++;
    for (; i > 0 && all[2 * list[i - 1] + 1] > all[2 * r + 1]; i--) list[i] = list[i - 1];
    list[i] = r;
  }
  return m;
}

static struct ncclComm *child(struct ncclComm *parent, const int *list, int m, int k, int color) {
  MPI_Group pg, g;
  MPI_Comm mpi;
  EMU_CHECK_MPI(MPI_Comm_group(parent->mpi, &pg));
  EMU_CHECK_MPI(MPI_Group_incl(pg, m, list, &g));
  EMU_CHECK_MPI(MPI_Comm_create_group(parent->mpi, g, k % 32768, &mpi));
  EMU_CHECK_MPI(MPI_Group_free(&g));
  EMU_CHECK_MPI(MPI_Group_free(&pg));
  char name[64];
  snprintf(name, sizeof name, "%.40s/%d:%d", parent->name, k, color);
  return emu_comm_new(mpi, name);
}

/* Collective over the parent, like NCCL: every rank's (color, key) gathered without blocking, so
 * a rank that never comes is reported as a deadlock. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  (void)config;
  if (!comm || !newcomm) return emu_fail(ncclInvalidArgument, "ncclCommSplit: a NULL argument");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return emu_fail(ncclInvalidArgument, "ncclCommSplit: color %d (>= 0 or NCCL_SPLIT_NOCOLOR)",
                    color);
  int mine[2] = {color, key}, *all = malloc(sizeof *all * 2 * (size_t)comm->nranks);
  int *list = malloc(sizeof *list * (size_t)comm->nranks);
  if (!all || !list) emu_die("out of memory splitting communicator %s", comm->name);
  MPI_Request q;
  EMU_CHECK_MPI(MPI_Iallgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm->mpi, &q));
  char what[256];
  snprintf(what, sizeof what, "ncclCommSplit of communicator %s (rank %d of %d), waiting for the "
           "other ranks to call it,", comm->name, comm->rank, comm->nranks);
  emu_wait_host(1, &q, NULL, what);
  int k = comm->splits++;
  *newcomm = NULL;
  if (color != NCCL_SPLIT_NOCOLOR) {
    int m = members_of(all, comm->nranks, color, list);
    *newcomm = child(comm, list, m, k, color);
  }
  free(all);
  free(list);
  return ncclSuccess;
}

/* NCCL's destroy finishes the communicator's queued operations first (ncclCommFinalize). */
static void wait_idle(struct ncclComm *c) {
  struct timespec nap = {0, 50000};
  double start = emu_now();
  while (c->done < c->issued && !c->aborted) {
    nccl_emu_stream_progress();
    double waited = emu_now() - start;
    if (waited > emu_timeout())
      emu_deadlock(waited, "ncclCommDestroy of communicator %s (rank %d of %d), waiting for %llu "
                   "queued operations,", c->name, c->rank, c->nranks,
                   (unsigned long long)(c->issued - c->done));
    nanosleep(&nap, NULL);
  }
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  wait_idle(comm);
  EMU_CHECK_MPI(MPI_Comm_free(&comm->mpi));
  emu_comm_release(comm);
  return ncclSuccess;
}

/* Local, immediate: queued operations are dropped when their streams reach them. The MPI
 * communicator is left as it is (freeing it is collective, and the job is usually ending). */
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  comm->aborted = 1;
  emu_comm_release(comm);
  return ncclSuccess;
}

/* A dead peer ends the whole MPI job before anything could be reported here. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm || !asyncError)
    return emu_fail(ncclInvalidArgument, "ncclCommGetAsyncError: a NULL argument");
  *asyncError = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm || !count) return emu_fail(ncclInvalidArgument, "ncclCommCount: a NULL argument");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (!comm || !rank) return emu_fail(ncclInvalidArgument, "ncclCommUserRank: a NULL argument");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclGetVersion(int *version) {
  if (!version) return emu_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
