/* tests/gpu/emu/nccl/src/internal.h: pt_ncclemu's own types and helpers (rules: nccl_emu.h). */
#ifndef PT_NCCL_EMU_INTERNAL_H
#define PT_NCCL_EMU_INTERNAL_H

#include <mpi.h>
#include <nccl.h>
#include <stdint.h>

#include "nccl_emu.h"
#include "nccl_emu_stream.h"

struct ncclComm {
  MPI_Comm mpi;            /* this communicator's own: matching never crosses communicators */
  int rank, nranks;
  char name[64];           /* in messages: "w<creator's world rank>#<id>", children "/<k>:<color>" */
  uint64_t issued, done;   /* issue-order tickets handed out and completed */
  int refs;                /* the handle plus every queued group using it */
  int aborted;             /* ncclCommAbort: its queued operations are dropped */
  int splits;              /* ncclCommSplit calls so far: the children's tags and names */
};

typedef enum { OP_SEND, OP_RECV, OP_BCAST, OP_ALLREDUCE, OP_REDUCE } emu_op_kind;

typedef struct {
  emu_op_kind kind;
  struct ncclComm *comm;
  cudaStream_t stream;
  const void *sendbuf;
  void *recvbuf;
  size_t count, bytes;
  ncclDataType_t type;
  ncclRedOp_t red;
  int peer;           /* send/recv: the peer; broadcast, reduce: the root; allreduce: -1 */
  uint64_t ticket;    /* its place in the communicator's issue order */
  int takes_turn;     /* the group's first operation on its communicator (it advances done) */
  int first_req, n_req;
  unsigned char *scratch; /* reductions: every rank's contribution, in rank order */
} emu_op;

/* ---- errors (error.c) ---- */
/* Sets ncclGetLastError's text and returns r, for `return emu_fail(ncclInvalidArgument, ...)`. */
ncclResult_t emu_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int emu_world_rank(void); /* -1 when MPI is not up: for messages only */
/* Ends the job with one line "nccl-emu[rank R]: ..." on stderr (MPI_Abort). */
void emu_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void emu_fail_mpi(const char *file, int line, const char *call, int code) __attribute__((noreturn));
/* Every MPI call of the emulation: a failure ends the job naming the call (the shape of
 * core/error.h's PT_CHECK_CALL, without linking pipetrain). */
#define EMU_CHECK_MPI(call)                                         \
  do {                                                              \
    int emu_rc_ = (call);                                           \
    if (emu_rc_ != MPI_SUCCESS) emu_fail_mpi(__FILE__, __LINE__, #call, emu_rc_); \
  } while (0)

/* ---- time and deadlocks (wait.c) ---- */
double emu_now(void);
double emu_timeout(void); /* PT_EMU_NCCL_TIMEOUT, seconds */
void emu_deadlock(double waited, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* Host-side wait for requests (init, split): polls them and the streams, reports a deadlock
 * after the timeout with "WHAT blocked ...". */
void emu_wait_host(int n, MPI_Request *reqs, MPI_Status *st, const char *what);

/* ---- communicators (comm.c) ---- */
/* Takes mpi (errors returned as codes) into a new communicator, one reference (the handle). */
struct ncclComm *emu_comm_new(MPI_Comm mpi, const char *name);
void emu_comm_release(struct ncclComm *c);

/* ---- queued groups (group.c, post.c) ---- */
/* A group's MPI requests, with the peer each waits on and the bytes each receive expects
 * (-1: a send), for the size check and the deadlock report. */
typedef struct {
  MPI_Request *q;
  int *peer, *expect;
  int n, cap;
} emu_reqs;
/* Adds op to the open group, or queues it alone when no group is open. */
ncclResult_t emu_issue(const emu_op *op);
/* A refused call: returns r, and inside a group marks the group failed. */
ncclResult_t emu_refuse(ncclResult_t r);
/* Posts op's transfers (appending to r; sets op->first_req, n_req), copying what it sends. */
void emu_post(emu_op *op, emu_reqs *r);
/* After every transfer of op completed: finishes a reduction into its receive buffer. */
void emu_finish(emu_op *op);
const char *emu_op_name(emu_op_kind kind); /* "ncclSend", ...: a string literal */
/* "ncclSend of 400 bytes to rank 1" */
void emu_describe(const emu_op *op, char *buf, size_t n);

typedef struct emu_group emu_group;
typedef struct {
  emu_group *g;
  int arrived; /* its stream has reached the group */
} emu_entry;

struct emu_group {
  emu_op *ops;
  int n_ops, cap_ops;
  emu_reqs reqs;
  emu_entry *entries; /* one per distinct stream */
  int n_streams, arrived;
  int posted, done, refs;
  double since;       /* when a stream first reached it: the deadlock clock */
};

/* ---- what went wrong in a group (report.c) ---- */
/* Ends the job: the deadlock line naming the operation that waits, its peer and state. */
void emu_group_report(const emu_group *g, double waited) __attribute__((noreturn));
/* After MPI_Testall returned rc with statuses st: ends the job if a receive got a message of
 * another size than it expects, or a transfer failed. */
void emu_group_check(const emu_group *g, MPI_Status *st, int rc);

/* ---- reductions (reduce.c) ---- */
/* dst = src[0] op src[1] op ... src[n-1], in that order, count elements each. */
void emu_reduce(void *dst, const unsigned char *src, int n, size_t count, ncclDataType_t t,
                ncclRedOp_t op);

/* ---- counters (counters.c) ---- */
extern nccl_emu_counters emu_counters;
void emu_counters_print_at_exit(void); /* registers the exit print when PT_EMU_NCCL_COUNTERS=1 */

#endif
