/* Can a schedule run over NCCL without deadlock? (schedule.h: schedule_check_rendezvous)
 *
 * NCCL's point-to-point calls are not MPI's independent requests: a rank's calls on one
 * communicator run on one stream in issue order, and a transfer finishes only when the peer's
 * stream has reached the matching one (a rendezvous). Transfers issued in one group run
 * together and finish together. The device transport (comm/nccl/comm_nccl.c) therefore holds sends
 * back and issues them, with the one receive the engine waits for, as one group when the
 * engine first waits for something not yet done; a receive posted early is issued only when
 * waited for, so it cannot hold up later sends. This simulation runs every stage's host (the
 * action list, blocking where the engine waits) and its stream under exactly those rules, and
 * reports the first state where nothing can move. It is conservative: NCCL may buffer small
 * messages; this never assumes it does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/schedule.h"

enum { K_RA, K_SA, K_RG, K_SG, N_KINDS };

typedef struct {
  pt_action op;
  int group, matched;
} rdv_op;

typedef struct {
  const pt_schedule *s;
  int *pc;              /* [stage]: next action of the host */
  rdv_op **stream;      /* [stage][i]: issued transfers, in order, with their group */
  int *head, *tail;     /* [stage]: first unfinished and next free entry of the stream */
  int *groups;          /* [stage]: groups issued so far */
  pt_action **held;     /* [stage][i]: sends held back until the next wait */
  int *n_held;
  unsigned char *done;  /* [stage][kind][mb] */
} rdv;

static int kind_of(pt_action_kind k) {
  return k == ACT_RECV_ACT ? K_RA : k == ACT_SEND_ACT ? K_SA : k == ACT_RECV_GRAD ? K_RG
                                                        : k == ACT_SEND_GRAD ? K_SG : -1;
}

static unsigned char *done(rdv *r, int st, int kind, int mb) {
  return &r->done[((size_t)st * N_KINDS + kind) * r->s->n_micro + mb];
}

/* The peer and the kind of transfer that matches a. */
static int peer_of(int st, const pt_action *a, int *want) {
  switch (kind_of(a->kind)) {
  case K_RA: *want = K_SA; return st - 1;
  case K_SA: *want = K_RA; return st + 1;
  case K_RG: *want = K_SG; return st + 1;
  default:   *want = K_RG; return st - 1;
  }
}

static int issued(const rdv *r, int st, pt_action_kind k, int mb) {
  for (int i = 0; i < r->tail[st]; i++)
    if (r->stream[st][i].op.kind == k && r->stream[st][i].op.mb == mb) return 1;
  return 0;
}

/* One group: the held sends and, when the wait is for a receive not yet issued, that receive. */
static void issue_group(rdv *r, int st, const pt_action *recv) {
  int g = r->groups[st]++;
  for (int i = 0; i < r->n_held[st]; i++) r->stream[st][r->tail[st]++] = (rdv_op){r->held[st][i], g, 0};
  r->n_held[st] = 0;
  if (recv && !issued(r, st, recv->kind, recv->mb)) r->stream[st][r->tail[st]++] = (rdv_op){*recv, g, 0};
}

/* Matches the ops of st's first unfinished group with the peers' first unfinished groups, and
 * retires the group when all of its ops are matched. */
static int progress_stream(rdv *r, int st) {
  int moved = 0, h = r->head[st];
  if (h == r->tail[st]) return 0;
  int g = r->stream[st][h].group, all = 1;
  for (int i = h; i < r->tail[st] && r->stream[st][i].group == g; i++) {
    rdv_op *a = &r->stream[st][i];
    int want, peer = peer_of(st, &a->op, &want);
    for (int j = r->head[peer]; !a->matched && j < r->tail[peer]; j++) {
      rdv_op *b = &r->stream[peer][j];
      if (b->group != r->stream[peer][r->head[peer]].group) break;
      if (!b->matched && kind_of(b->op.kind) == want && b->op.mb == a->op.mb)
        a->matched = b->matched = 1, moved = 1;
    }
    all &= a->matched;
  }
  if (!all) return moved;
  for (; r->head[st] < r->tail[st] && r->stream[st][r->head[st]].group == g; r->head[st]++) {
    const pt_action *a = &r->stream[st][r->head[st]].op;
    *done(r, st, kind_of(a->kind), a->mb) = 1;
  }
  return 1;
}

/* What the engine waits for before action a (pipeline.c), as (kind, mb) pairs; n of them. */
static int needs(const rdv *r, int st, const pt_action *a, pt_action *need) {
  int P = r->s->n_stages, prev = a->mb - r->s->n_slots[st], n = 0;
  if (a->kind == ACT_FORWARD) {
    if (st > 0) need[n++] = (pt_action){ACT_RECV_ACT, a->mb};
    if (st < P - 1 && prev >= 0) need[n++] = (pt_action){ACT_SEND_ACT, prev};
  } else if (a->kind == ACT_BACKWARD) {
    if (st < P - 1) need[n++] = (pt_action){ACT_RECV_GRAD, a->mb};
    if (st > 0 && prev >= 0) need[n++] = (pt_action){ACT_SEND_GRAD, prev};
  }
  return n;
}

static int step_wide(pt_action_kind k) {
  return k == ACT_REDUCE_TIED || k == ACT_REDUCE_DP || k == ACT_OPTIMIZER;
}

static int progress_host(rdv *r, int st) {
  if (r->pc[st] == r->s->n_acts[st]) return 0;
  const pt_action *a = &r->s->acts[st][r->pc[st]];
  pt_action need[2];
  int n = needs(r, st, a, need), ready = 1;
  for (int i = 0; i < n; i++) {
    if (*done(r, st, kind_of(need[i].kind), need[i].mb)) continue;
    ready = 0; /* a wait: what is held goes out, with the receive waited for */
    int is_recv = need[i].kind == ACT_RECV_ACT || need[i].kind == ACT_RECV_GRAD;
    if (r->n_held[st] > 0 || (is_recv && !issued(r, st, need[i].kind, need[i].mb)))
      issue_group(r, st, is_recv ? &need[i] : NULL);
  }
  if (step_wide(a->kind) && (r->n_held[st] > 0 || r->head[st] < r->tail[st])) {
    if (r->n_held[st] > 0) issue_group(r, st, NULL);
    ready = 0;
  }
  if (!ready) return 0;
  if (a->kind == ACT_SEND_ACT || a->kind == ACT_SEND_GRAD) r->held[st][r->n_held[st]++] = *a;
  r->pc[st]++;
  return 1;
}

static void describe(rdv *r, char *err, size_t errsz) {
  int n = snprintf(err, errsz, "%s, %d stages, %d micro-batches: deadlock under NCCL's ordered "
                   "transfers:", r->s->type->name, r->s->n_stages, r->s->n_micro);
  for (int st = 0; st < r->s->n_stages && n > 0 && (size_t)n < errsz; st++) {
    const pt_action *q = r->head[st] < r->tail[st] ? &r->stream[st][r->head[st]].op : NULL;
    n += snprintf(err + n, errsz - (size_t)n, " stage %d at action %d, stream %s%d;", st,
                  r->pc[st], q ? schedule_action_code(q->kind) : "idle", q ? q->mb : -1);
  }
}

static void rdv_free(rdv *r) {
  for (int st = 0; st < r->s->n_stages; st++) free(r->stream[st]), free(r->held[st]);
  free(r->stream), free(r->held), free(r->n_held), free(r->groups);
  free(r->pc), free(r->head), free(r->tail), free(r->done);
}

int schedule_check_rendezvous(const pt_schedule *s, char *err, size_t errsz) {
  size_t P = (size_t)s->n_stages;
  rdv r = {.s = s, .pc = pt_calloc(P, sizeof(int)), .head = pt_calloc(P, sizeof(int)),
           .tail = pt_calloc(P, sizeof(int)), .groups = pt_calloc(P, sizeof(int)),
           .n_held = pt_calloc(P, sizeof(int)), .stream = pt_calloc(P, sizeof(rdv_op *)),
           .held = pt_calloc(P, sizeof(pt_action *)),
           .done = pt_calloc(P * N_KINDS * (size_t)(s->n_micro + 1), 1)};
  for (size_t st = 0; st < P; st++) {
    r.stream[st] = pt_calloc((size_t)s->n_acts[st] + 1, sizeof(rdv_op));
    r.held[st] = pt_calloc((size_t)s->n_acts[st] + 1, sizeof(pt_action));
  }
  for (int moved = 1; moved;) {
    moved = 0;
    for (int st = 0; st < s->n_stages; st++) moved |= progress_host(&r, st) | progress_stream(&r, st);
  }
  int ok = 1;
  for (int st = 0; st < s->n_stages; st++) ok &= r.pc[st] == s->n_acts[st] && r.head[st] == r.tail[st];
  if (!ok) describe(&r, err, errsz);
  rdv_free(&r);
  return ok ? 0 : -1;
}
