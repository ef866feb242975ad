/* tests/gpu/emu/nccl/src/post.c: each operation as MPI transfers, posted when its group starts.
 *
 * Every send is MPI_Issend, which completes only once the peer's receive matched it: NCCL's
 * rendezvous, so a program that relies on a send finishing before its receive is posted hangs
 * here as it would on NCCL. Tags carry the operation's kind and its byte count (modulo 8192),
 * so a receive does not match a send of another size or kind; it waits, and the wait is reported
 * as a deadlock. A size that collides modulo 8192 is caught when the receive completes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK ((size_t)1 << 30) /* MPI counts are int */

/* Sends and receives match each other; each collective has its own class. At most 32767, the
 * smallest MPI_TAG_UB MPI allows. */
static int tag_of(const emu_op *op) {
  int cls = op->kind == OP_SEND || op->kind == OP_RECV ? 0 : (int)op->kind - 1; /* 1, 2, 3 */
  return cls * 8192 + (int)(op->bytes % 8192);
}

static MPI_Request *req_add(emu_reqs *r, int peer, int expect) {
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 8;
    r->q = realloc(r->q, sizeof *r->q * (size_t)r->cap);
    r->peer = realloc(r->peer, sizeof *r->peer * (size_t)r->cap);
    r->expect = realloc(r->expect, sizeof *r->expect * (size_t)r->cap);
    if (!r->q || !r->peer || !r->expect) emu_die("out of memory posting NCCL operations");
  }
  r->peer[r->n] = peer;
  r->expect[r->n] = expect;
  return &r->q[r->n++];
}

/* bytes to or from peer, in chunks MPI can count (a zero-byte transfer is still a rendezvous). */
static void xfer(emu_reqs *r, const emu_op *op, int send, const void *buf, int peer) {
  MPI_Comm c = op->comm->mpi;
  size_t off = 0;
  do {
    size_t n = op->bytes - off < CHUNK ? op->bytes - off : CHUNK;
    MPI_Request *q = req_add(r, peer, send ? -1 : (int)n);
    int tag = tag_of(op);
    if (send) EMU_CHECK_MPI(MPI_Issend((const char *)buf + off, (int)n, MPI_BYTE, peer, tag, c, q));
    else EMU_CHECK_MPI(MPI_Irecv((char *)buf + off, (int)n, MPI_BYTE, peer, tag, c, q));
    off += n;
  } while (off < op->bytes);
}

/* A zero-byte message both ways with every other rank: no rank's broadcast or reduce completes
 * before every rank has started it (NCCL's rings and trees need all ranks; the rendezvous reading
 * of that is the strictest). Posted after the data with the same tag: MPI keeps the order. */
static void tokens(const emu_op *op, emu_reqs *r) {
  static char none;
  int tag = tag_of(op);
  for (int p = 0; p < op->comm->nranks; p++) {
    if (p == op->comm->rank) continue;
    EMU_CHECK_MPI(MPI_Issend(&none, 0, MPI_BYTE, p, tag, op->comm->mpi, req_add(r, p, -1)));
    EMU_CHECK_MPI(MPI_Irecv(&none, 0, MPI_BYTE, p, tag, op->comm->mpi, req_add(r, p, 0)));
  }
}

/* Reductions: every contribution lands in scratch at its rank's slot, summed in rank order at
 * the end; gather_to_all: every rank receives (allreduce) or only the root (reduce). */
static void post_reduce(emu_op *op, emu_reqs *r, int gather_to_all) {
  int me = op->comm->rank, n = op->comm->nranks;
  int receives = gather_to_all || me == op->peer;
  if (receives) {
    op->scratch = malloc(op->bytes * (size_t)n + 1);
    if (!op->scratch) emu_die("out of memory for a reduction of %zu bytes", op->bytes);
    memcpy(op->scratch + op->bytes * (size_t)me, op->sendbuf, op->bytes);
  }
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    if (receives) xfer(r, op, 0, op->scratch + op->bytes * (size_t)p, p);
    if (gather_to_all || p == op->peer) xfer(r, op, 1, op->sendbuf, p);
  }
  if (!gather_to_all) tokens(op, r); /* an allreduce's data already goes every way */
}

static void post_bcast(emu_op *op, emu_reqs *r) {
  int me = op->comm->rank;
  if (me != op->peer) {
    xfer(r, op, 0, op->recvbuf, op->peer);
  } else {
    if (op->recvbuf != op->sendbuf) memmove(op->recvbuf, op->sendbuf, op->bytes);
    for (int p = 0; p < op->comm->nranks; p++)
      if (p != me) xfer(r, op, 1, op->sendbuf, p);
  }
  tokens(op, r);
}

void emu_post(emu_op *op, emu_reqs *r) {
  op->first_req = r->n;
  switch (op->kind) {
  case OP_SEND: xfer(r, op, 1, op->sendbuf, op->peer); break;
  case OP_RECV: xfer(r, op, 0, op->recvbuf, op->peer); break;
  case OP_BCAST: post_bcast(op, r); break;
  case OP_ALLREDUCE: post_reduce(op, r, 1); break;
  case OP_REDUCE: post_reduce(op, r, 0); break;
  }
  op->n_req = r->n - op->first_req;
}

void emu_finish(emu_op *op) {
  if (op->scratch)
    emu_reduce(op->recvbuf, op->scratch, op->comm->nranks, op->count, op->type, op->red);
  free(op->scratch);
  op->scratch = NULL;
}

const char *emu_op_name(emu_op_kind kind) {
  static const char *const names[] = {"ncclSend", "ncclRecv", "ncclBroadcast", "ncclAllReduce",
                                      "ncclReduce"};
  return names[kind];
}

void emu_describe(const emu_op *op, char *buf, size_t n) {
  switch (op->kind) {
  case OP_SEND: snprintf(buf, n, "ncclSend of %zu bytes to rank %d", op->bytes, op->peer); break;
  case OP_RECV: snprintf(buf, n, "ncclRecv of %zu bytes from rank %d", op->bytes, op->peer); break;
  case OP_BCAST: snprintf(buf, n, "ncclBroadcast of %zu bytes from root %d", op->bytes, op->peer); break;
  case OP_ALLREDUCE: snprintf(buf, n, "ncclAllReduce of %zu bytes", op->bytes); break;
  case OP_REDUCE: snprintf(buf, n, "ncclReduce of %zu bytes to root %d", op->bytes, op->peer); break;
  }
}
