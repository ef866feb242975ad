/* tests/gpu/emu/nccl/src/group.c: groups, queued on their streams and polled there.
 *
 * Every call is part of a group: the calls between the outermost ncclGroupStart/ncclGroupEnd,
 * or a call alone. The group is queued once on each of its streams; it starts (posts every
 * transfer at once) when all those streams have reached it and, on each of its communicators,
 * every group issued before it has completed (NCCL's per-communicator order, across streams);
 * it completes when every transfer has, and only then do its streams go on. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int g_depth;           /* ncclGroupStart nesting */
static emu_group *g_open;     /* the group being gathered */
static ncclResult_t g_error;  /* the open group's first refused call: the group is dropped */

static void group_free(emu_group *g) {
  for (int i = 0; i < g->n_ops; i++) {
    free(g->ops[i].scratch);
    emu_comm_release(g->ops[i].comm);
  }
  free(g->ops), free(g->entries);
  free(g->reqs.q), free(g->reqs.peer), free(g->reqs.expect);
  free(g);
}

static void add_op(emu_group *g, const emu_op *op) {
  if (g->n_ops == g->cap_ops) {
    g->cap_ops = g->cap_ops ? 2 * g->cap_ops : 4;
    g->ops = realloc(g->ops, sizeof *g->ops * (size_t)g->cap_ops);
    if (!g->ops) emu_die("out of memory gathering an NCCL group");
  }
  g->ops[g->n_ops++] = *op;
  op->comm->refs++;
}

/* Takes one ticket per communicator, and finds the group's distinct streams. */
static void take_turns(emu_group *g) {
  g->entries = calloc((size_t)g->n_ops, sizeof *g->entries);
  if (!g->entries) emu_die("out of memory queueing an NCCL group");
  for (int i = 0; i < g->n_ops; i++) {
    emu_op *op = &g->ops[i];
    int j = 0, s = 0;
    while (j < i && g->ops[j].comm != op->comm) j++;
    op->takes_turn = j == i;
    op->ticket = op->takes_turn ? op->comm->issued++ : g->ops[j].ticket;
    while (s < i && g->ops[s].stream != op->stream) s++;
    if (s == i) g->entries[g->n_streams++].g = g;
  }
}

static int its_turn(const emu_group *g) {
  for (int i = 0; i < g->n_ops; i++)
    if (g->ops[i].comm->done != g->ops[i].ticket) return 0;
  return 1;
}

static int aborted(const emu_group *g) {
  for (int i = 0; i < g->n_ops; i++)
    if (g->ops[i].comm->aborted) return 1;
  return 0;
}

static void complete(emu_group *g) {
  for (int i = 0; i < g->n_ops; i++) {
    if (!aborted(g)) emu_finish(&g->ops[i]);
    if (g->ops[i].takes_turn) g->ops[i].comm->done++;
  }
  g->done = 1;
}

/* Whether every transfer has completed; a receive of another size ends the job. */
static int transfers_done(emu_group *g) {
  MPI_Status *st = malloc(sizeof *st * (size_t)(g->reqs.n + 1));
  if (!st) emu_die("out of memory testing NCCL transfers");
  int flag = 0, rc = MPI_Testall(g->reqs.n, g->reqs.q, &flag, st);
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
    emu_fail_mpi(__FILE__, __LINE__, "MPI_Testall", rc);
  if (flag || rc == MPI_ERR_IN_STATUS) emu_group_check(g, st, rc);
  free(st);
  return flag;
}

static nccl_emu_status poll_group(void *arg) {
  emu_entry *e = arg;
  emu_group *g = e->g;
  if (!e->arrived) e->arrived = 1, g->arrived++;
  if (g->done) return NCCL_EMU_DONE;
  if (g->since == 0) g->since = emu_now();
  if (aborted(g)) { /* dropped: NCCL's abort does not finish them either */
    complete(g);
    return NCCL_EMU_DONE;
  }
  if (!g->posted && g->arrived == g->n_streams && its_turn(g)) {
    for (int i = 0; i < g->n_ops; i++) emu_post(&g->ops[i], &g->reqs);
    g->posted = 1;
  }
  if (g->posted && transfers_done(g)) {
    complete(g);
    return NCCL_EMU_DONE;
  }
  double waited = emu_now() - g->since;
  if (waited > emu_timeout()) emu_group_report(g, waited);
  return NCCL_EMU_AGAIN;
}

static void after_entry(void *arg) {
  emu_group *g = ((emu_entry *)arg)->g;
  if (--g->refs == 0) group_free(g);
}

static const char *label(const emu_group *g) {
  return g->n_ops == 1 ? emu_op_name(g->ops[0].kind) : "NCCL group";
}

static void queue(emu_group *g) {
  take_turns(g);
  emu_counters.groups++;
  g->refs = g->n_streams + 1; /* + 1: a stream that runs it at once cannot free it under us */
  for (int k = 0, i = 0; k < g->n_streams; i++) {
    int s = 0;
    while (s < i && g->ops[s].stream != g->ops[i].stream) s++;
    if (s < i) continue; /* a stream already queued on */
    nccl_emu_stream_enqueue(g->ops[i].stream, label(g), poll_group, after_entry, &g->entries[k++]);
  }
  after_entry(&g->entries[0]); /* drops the + 1 */
}

ncclResult_t emu_issue(const emu_op *op) {
  if (!g_open) {
    g_open = calloc(1, sizeof *g_open);
    if (!g_open) emu_die("out of memory starting an NCCL group");
  }
  add_op(g_open, op);
  if (g_depth == 0) {
    queue(g_open);
    g_open = NULL;
  }
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  g_depth++;
  return ncclSuccess;
}

ncclResult_t emu_refuse(ncclResult_t r) {
  if (g_depth > 0 && g_error == ncclSuccess) g_error = r;
  return r;
}

/* As NCCL: a group with a refused call is not run, and its end returns that call's error. */
ncclResult_t ncclGroupEnd(void) {
  if (g_depth == 0) return emu_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--g_depth > 0) return ncclSuccess;
  ncclResult_t r = g_error;
  g_error = ncclSuccess;
  if (g_open && r == ncclSuccess) queue(g_open);
  else if (g_open) group_free(g_open);
  g_open = NULL;
  return r;
}
