/* tests/gpu/emu/nccl/src/report.c: a group that waits too long (a deadlock), a receive of the
 * wrong size, or a failed transfer, each reported as one line naming the operation. */
#include <stdio.h>

#include "internal.h"

static const emu_op *owner(const emu_group *g, int req) {
  for (int i = 0; i < g->n_ops; i++)
    if (req >= g->ops[i].first_req && req < g->ops[i].first_req + g->ops[i].n_req) return &g->ops[i];
  return &g->ops[0];
}

/* Why the group has not started or finished: its state in words, and the operation concerned. */
static const emu_op *state(const emu_group *g, char *buf, size_t n) {
  if (!g->posted && g->arrived < g->n_streams) {
    snprintf(buf, n, "waiting for %d more of the group's streams to reach it",
             g->n_streams - g->arrived);
    return &g->ops[0];
  }
  if (!g->posted) {
    for (int i = 0; i < g->n_ops; i++) {
      const emu_op *op = &g->ops[i];
      if (op->comm->done == op->ticket) continue;
      snprintf(buf, n, "waiting for %llu operations issued before it on that communicator",
               (unsigned long long)(op->ticket - op->comm->done));
      return op;
    }
  }
  for (int i = 0; i < g->reqs.n; i++) {
    int flag = 0;
    EMU_CHECK_MPI(MPI_Request_get_status(g->reqs.q[i], &flag, MPI_STATUS_IGNORE));
    if (flag) continue;
    snprintf(buf, n, "posted, not matched by rank %d", g->reqs.peer[i]);
    return owner(g, i);
  }
  snprintf(buf, n, "posted");
  return &g->ops[0];
}

void emu_group_report(const emu_group *g, double waited) {
  char why[160], what[160], in_group[48] = "";
  const emu_op *op = state(g, why, sizeof why);
  emu_describe(op, what, sizeof what);
  if (g->n_ops > 1) snprintf(in_group, sizeof in_group, " (one of %d in a group)", g->n_ops);
  emu_deadlock(waited, "%s on communicator %s (rank %d of %d)%s, %s,", what, op->comm->name,
               op->comm->rank, op->comm->nranks, in_group, why);
}

/* got < 0: more than expected (MPI truncated it). */
static void __attribute__((noreturn)) mismatch(const emu_op *op, int peer, int got, int expect) {
  char what[160], size[40];
  emu_describe(op, what, sizeof what);
  if (got < 0) snprintf(size, sizeof size, "more than %d", expect);
  else snprintf(size, sizeof size, "%d", got);
  emu_die("%s on communicator %s (rank %d of %d) got %s bytes from rank %d where it expects %d: "
          "the two sides disagree on the size (NCCL needs equal counts)", what, op->comm->name,
          op->comm->rank, op->comm->nranks, size, peer, expect);
}

void emu_group_check(const emu_group *g, MPI_Status *st, int rc) {
  for (int i = 0; i < g->reqs.n; i++) {
    const emu_op *op = owner(g, i);
    int err = rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : MPI_SUCCESS, cls = MPI_SUCCESS;
    if (err == MPI_ERR_PENDING) continue;
    if (err != MPI_SUCCESS) EMU_CHECK_MPI(MPI_Error_class(err, &cls));
    if (cls == MPI_ERR_TRUNCATE) mismatch(op, g->reqs.peer[i], -1, g->reqs.expect[i]);
    if (err != MPI_SUCCESS) emu_fail_mpi(__FILE__, __LINE__, "an NCCL transfer (MPI_Testall)", err);
    if (g->reqs.expect[i] < 0) continue; /* a send */
    int got = 0;
    EMU_CHECK_MPI(MPI_Get_count(&st[i], MPI_BYTE, &got));
    if (got != g->reqs.expect[i]) mismatch(op, g->reqs.peer[i], got, g->reqs.expect[i]);
  }
}
