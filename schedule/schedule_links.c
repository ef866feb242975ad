/* schedule/schedule_links.c: the NCCL check for schedules with several chunks per rank
 * (schedule_check_rendezvous sends them here).
 *
 * One stream per rank, the transport of one chunk per rank (schedule_rendezvous.c), deadlocks
 * chunked schedules: a rank's sends for one chunk wait in line behind another chunk's receive,
 * and the two ranks wait on each other. So the chunked transport gives every link its own
 * communicator and stream pair: a link is chunk c's activations to c + 1, or c + 1's gradients
 * to c, between two ranks. A SEND or RECV action issues its transfer on the link at once
 * (receives early, as the builder placed them: only the link's own traffic waits behind them),
 * and NCCL pairs a link's sends and receives in issue order, so both sides must issue the same
 * micro-batches in the same order. A transfer finishes when both sides have issued it. Hosts
 * block where the engine waits: a FORWARD, B or I for its receive and for the previous send
 * from its slot's buffer, a reduction for every send of the rank, a tie reduction also for its
 * tie groups (schedule_reduce.c). Nothing is held back, so FLUSH does nothing. This simulation
 * runs every rank under those rules and reports a pairing out of order or the first state
 * where nothing can move.
 */
#include <stdlib.h>

#include "core/error.h"
#include "schedule/check.h"

typedef struct {
  int *sent, *recvd;        /* [i]: the micro-batch of the i-th send / receive issued */
  int *send_at, *recv_at;   /* [mb]: its position in that order, -1 before */
  int n_sent, n_recvd;
} link;

typedef struct {
  const pt_schedule *s;
  link *links; /* [2c]: chunk c's activations to c + 1; [2c + 1]: c + 1's gradients to c */
  int *pc;     /* [rank] */
  sched_reduce *red;
  pt_sched_where *where;
  char *err;
  size_t errsz;
} links;

/* The link a transfer action uses, and whether the action is its sending side. */
static link *link_of(links *x, const pt_action *a, int *sending) {
  int c = a->chunk;
  switch (a->kind) {
  case ACT_SEND_ACT: *sending = 1; return &x->links[2 * c];
  case ACT_RECV_ACT: *sending = 0; return &x->links[2 * (c - 1)];
  case ACT_SEND_GRAD: *sending = 1; return &x->links[2 * (c - 1) + 1];
  default: *sending = 0; return &x->links[2 * c + 1];
  }
}

/* Both sides have issued mb on l. */
static int finished(const link *l, int mb) {
  return l->send_at[mb] >= 0 && l->recv_at[mb] >= 0;
}

/* Issues a transfer; -1 when its pairing on the link would join two micro-batches. */
static int issue(links *x, int rk, int index, const pt_action *a) {
  int sending, mb = a->mb;
  link *l = link_of(x, a, &sending);
  int *order = sending ? l->sent : l->recvd, *n = sending ? &l->n_sent : &l->n_recvd;
  const int *other = sending ? l->recvd : l->sent;
  int n_other = sending ? l->n_recvd : l->n_sent;
  if (*n == x->s->n_micro || (sending ? l->send_at : l->recv_at)[mb] >= 0)
    return schedule_fail_at(x->s, x->where, rk, index, x->err, x->errsz, "micro-batch %d "
                            "crosses this link twice", mb);
  if (*n < n_other && other[*n] != mb)
    return schedule_fail_at(x->s, x->where, rk, index, x->err, x->errsz, "NCCL pairs a "
                            "link's transfers in issue order, and this one's partner side issued "
                            "micro-batch %d in its place", other[*n]);
  (sending ? l->send_at : l->recv_at)[mb] = *n;
  order[(*n)++] = mb;
  return 1;
}

/* Whether compute action a on rank rk can start: its receive and its slot's last send done. */
static int inputs_ready(links *x, const pt_action *a) {
  const pt_schedule *s = x->s;
  int c = a->chunk, prev = a->mb - s->n_slots[c], last = s->n_chunks - 1;
  int from_prev = c > 0 && !schedule_is_local(s, c, -1);
  int to_next = c < last && !schedule_is_local(s, c, 1);
  if (a->kind == ACT_FORWARD)
    return (!from_prev || finished(&x->links[2 * (c - 1)], a->mb)) &&
           (!to_next || prev < 0 || finished(&x->links[2 * c], prev));
  if (a->kind == ACT_BACKWARD || a->kind == ACT_BACKWARD_INPUT)
    return (!to_next || finished(&x->links[2 * c + 1], a->mb)) &&
           (!from_prev || prev < 0 || finished(&x->links[2 * (c - 1) + 1], prev));
  return 1;
}

/* Before a reduction every send of the rank has been received. */
static int sends_done(const links *x, int rk) {
  for (int c = 0; c < x->s->n_chunks; c++) {
    if (x->s->chunk_rank[c] != rk) continue;
    if (c < x->s->n_chunks - 1 && x->links[2 * c].n_sent > x->links[2 * c].n_recvd) return 0;
    if (c > 0 && x->links[2 * (c - 1) + 1].n_sent > x->links[2 * (c - 1) + 1].n_recvd) return 0;
  }
  return 1;
}

/* 1: done, 0: waits, -1: error. */
static int step(void *ctx, int rk, int index, const pt_action *a) {
  links *x = ctx;
  switch (a->kind) {
  case ACT_SEND_ACT:
  case ACT_RECV_ACT:
  case ACT_SEND_GRAD:
  case ACT_RECV_GRAD: return issue(x, rk, index, a);
  case ACT_FLUSH: return 1;
  case ACT_REDUCE_TIED: return sends_done(x, rk) && sched_reduce_tie_met(x->red, x->pc, rk);
  case ACT_REDUCE_DP:
  case ACT_OPTIMIZER: return sends_done(x, rk);
  default: return inputs_ready(x, a);
  }
}

static int run(links *x) {
  const pt_schedule *s = x->s;
  int rc = schedule_sweep(s, x->pc, step, x);
  for (int rk = 0; rc > 0 && rk < s->n_ranks; rk++)
    if (x->pc[rk] < s->n_acts[rk])
      return schedule_fail_at(s, x->where, rk, x->pc[rk], x->err, x->errsz, "%s, %d ranks, %d "
                              "micro-batches: deadlock under NCCL's per-link transfers", s->name,
                              s->n_ranks, s->n_micro);
  return rc;
}

int schedule_check_links(const pt_schedule *s, sched_reduce *red, pt_sched_where *where,
                         char *err, size_t errsz) {
  size_t n = 2 * (size_t)s->n_chunks, M = (size_t)s->n_micro;
  links x = {s, pt_calloc(n, sizeof(link)), pt_calloc((size_t)s->n_ranks, sizeof(int)), red,
             where, err, errsz};
  int *cells = pt_calloc(n * 4 * M + 1, sizeof(int));
  for (size_t i = 0; i < n; i++) {
    link *l = &x.links[i];
    l->sent = cells + 4 * M * i, l->recvd = l->sent + M;
    l->send_at = l->recvd + M, l->recv_at = l->send_at + M;
    for (size_t mb = 0; mb < M; mb++) l->send_at[mb] = l->recv_at[mb] = -1;
  }
  int rc = run(&x);
  free(cells), free(x.links), free(x.pc);
  return rc;
}
