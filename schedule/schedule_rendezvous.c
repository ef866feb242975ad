/* Can a schedule run over NCCL without deadlock? (schedule.h: schedule_check_rendezvous)
 *
 * NCCL's point-to-point calls are not MPI's independent requests: calls on one communicator
 * run on one stream in issue order, and a transfer finishes only when the peer's stream has
 * reached the matching one (a rendezvous). Transfers issued in one group run together and
 * finish together. The device transport (comm/nccl/comm_nccl.c) therefore holds sends back
 * and issues them, with the one receive the engine waits for, as one group when the engine
 * first waits for something not yet done; a receive posted early is issued only when waited
 * for, so it cannot hold up later sends. A FLUSH issues the held sends as a group of their
 * own (comm_flush). The step end's reductions run on communicators of their own
 * (schedule_reduce.c): entering one issues nothing held on the pipeline's, and a tie
 * reduction waits for its group. OPTIMIZER first waits for every send of the rank. This
 * simulation runs every rank's host (the action list, blocking where the engine waits) and its
 * stream under exactly those rules, and reports the first state where nothing can move, or a
 * rank that entered a reduction with sends still held (a peer waits for them until the
 * reduction ends, or forever). It is conservative: NCCL may buffer small messages; this never
 * assumes it does.
 *
 * That is the transport of one chunk per rank (the code keeps a stream per chunk, which is the
 * same). Schedules with several chunks per rank need a stream per link instead and are checked
 * under those rules (schedule_links.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/check.h"

enum { K_RA, K_SA, K_RG, K_SG, N_KINDS };
enum { DONE = 1, ISSUED = 2 };

typedef struct {
  pt_action op;
  int group, matched;
} rdv_op;

typedef struct {
  const pt_schedule *s;
  int *pc;              /* [rank]: next action of the host */
  rdv_op **stream;      /* [chunk][i]: issued transfers, in order, with their group */
  int *head, *tail;     /* [chunk]: first unfinished and next free entry of the stream */
  int *groups;          /* [chunk]: groups issued so far */
  pt_action **held;     /* [chunk][i]: sends held back until the next wait */
  int *n_held;
  unsigned char *state; /* [chunk][kind][mb]: DONE, ISSUED */
  sched_reduce red;
  pt_sched_where stall;  /* the first reduction entered with sends held (index -1: none) */
  pt_action stall_held;  /* one of those sends */
} rdv;

static int kind_of(pt_action_kind k) {
  return k == ACT_RECV_ACT ? K_RA : k == ACT_SEND_ACT ? K_SA : k == ACT_RECV_GRAD ? K_RG
                                                        : k == ACT_SEND_GRAD ? K_SG : -1;
}

static unsigned char *state(rdv *r, const pt_action *a) {
  return &r->state[((size_t)a->chunk * N_KINDS + kind_of(a->kind)) * r->s->n_micro + a->mb];
}

/* The chunk and kind of the transfer that matches a. */
static int peer_of(const pt_action *a, int *want) {
  int k = kind_of(a->kind);
  *want = k == K_RA ? K_SA : k == K_SA ? K_RA : k == K_RG ? K_SG : K_RG;
  return a->chunk + (k == K_RA || k == K_SG ? -1 : 1);
}

static void push(rdv *r, int c, pt_action a, int g) {
  r->stream[c][r->tail[c]++] = (rdv_op){a, g, 0};
  *state(r, &a) |= ISSUED;
}

/* Chunk c's group: its held sends and, when the wait is for its receive not yet issued, that. */
static void issue_group(rdv *r, int c, const pt_action *recv) {
  int g = r->groups[c]++;
  for (int i = 0; i < r->n_held[c]; i++) push(r, c, r->held[c][i], g);
  r->n_held[c] = 0;
  if (recv && !(*state(r, recv) & ISSUED)) push(r, c, *recv, g);
}

/* A wait on rank rk, or a FLUSH: every chunk's held sends go out, the awaited receive (NULL:
 * none) with its chunk's. */
static void flush(rdv *r, int rk, const pt_action *recv) {
  for (int c = 0; c < r->s->n_chunks; c++)
    if (r->s->chunk_rank[c] == rk && (r->n_held[c] > 0 || (recv && recv->chunk == c)))
      issue_group(r, c, recv && recv->chunk == c ? recv : NULL);
}

/* Matches the ops of chunk c's first unfinished group with the peer chunks' first unfinished
 * groups, and retires the group when all of its ops are matched. */
static int progress_stream(rdv *r, int c) {
  int moved = 0, h = r->head[c];
  if (h == r->tail[c]) return 0;
  int g = r->stream[c][h].group, all = 1;
  for (int i = h; i < r->tail[c] && r->stream[c][i].group == g; i++) {
    rdv_op *a = &r->stream[c][i];
    int want, peer = peer_of(&a->op, &want);
    for (int j = r->head[peer]; !a->matched && j < r->tail[peer]; j++) {
      rdv_op *b = &r->stream[peer][j];
      if (b->group != r->stream[peer][r->head[peer]].group) break;
      if (!b->matched && kind_of(b->op.kind) == want && b->op.mb == a->op.mb)
        a->matched = b->matched = 1, moved = 1;
    }
    all &= a->matched;
  }
  if (!all) return moved;
  for (; r->head[c] < r->tail[c] && r->stream[c][r->head[c]].group == g; r->head[c]++)
    *state(r, &r->stream[c][r->head[c]].op) |= DONE;
  return 1;
}

/* What the engine waits for before action a (pipeline.c), as transfers; n of them. */
static int needs(const rdv *r, const pt_action *a, pt_action *need) {
  const pt_schedule *s = r->s;
  int c = a->chunk, n = 0, prev = a->mb >= 0 ? a->mb - s->n_slots[c] : -1;
  int from_prev = c > 0 && !schedule_is_local(s, c, -1);
  int to_next = c < s->n_chunks - 1 && !schedule_is_local(s, c, 1);
  if (a->kind == ACT_FORWARD) {
    if (from_prev) need[n++] = (pt_action){ACT_RECV_ACT, a->mb, c};
    if (to_next && prev >= 0) need[n++] = (pt_action){ACT_SEND_ACT, prev, c};
  } else if (a->kind == ACT_BACKWARD || a->kind == ACT_BACKWARD_INPUT) {
    if (to_next) need[n++] = (pt_action){ACT_RECV_GRAD, a->mb, c};
    if (from_prev && prev >= 0) need[n++] = (pt_action){ACT_SEND_GRAD, prev, c};
  }
  return n;
}

/* Rank rk's transfers all issued and finished (before the optimizer, which waits for every
 * send). */
static int drained(rdv *r, int rk) {
  int busy = 0;
  for (int c = 0; c < r->s->n_chunks; c++)
    busy |= r->s->chunk_rank[c] == rk && (r->n_held[c] > 0 || r->head[c] < r->tail[c]);
  if (busy) flush(r, rk, NULL);
  return !busy;
}

/* A held send of rank rk, or NULL. */
static const pt_action *held_send(const rdv *r, int rk) {
  for (int c = 0; c < r->s->n_chunks; c++)
    if (r->s->chunk_rank[c] == rk && r->n_held[c] > 0) return &r->held[c][0];
  return NULL;
}

/* Rank rk enters a reduction: with a send held back and anything to exchange, its peer waits
 * for the send until the reduction ends; the first such entry is reported. */
static void enter_reduction(rdv *r, int rk, pt_action_kind k) {
  const pt_action *h = held_send(r, rk);
  if (!h || r->stall.index >= 0 || !sched_reduce_exchanges(&r->red, rk, k)) return;
  r->stall = (pt_sched_where){rk, r->pc[rk]};
  r->stall_held = *h;
}

/* A compute action's waits: 1 when all it needs is done; else what it waits for is issued. */
static int inputs_done(rdv *r, int rk, const pt_action *a) {
  pt_action need[2];
  int n = needs(r, a, need), ready = 1;
  for (int i = 0; i < n; i++) {
    if (*state(r, &need[i]) & DONE) continue;
    ready = 0; /* a wait: what is held goes out, with the receive waited for */
    int is_recv = need[i].kind == ACT_RECV_ACT || need[i].kind == ACT_RECV_GRAD;
    flush(r, rk, is_recv ? &need[i] : NULL);
  }
  return ready;
}

static int progress_host(rdv *r, int rk) {
  if (r->pc[rk] == r->s->n_acts[rk]) return 0;
  const pt_action *a = &r->s->acts[rk][r->pc[rk]];
  switch (a->kind) {
  case ACT_FLUSH: flush(r, rk, NULL); break;
  case ACT_REDUCE_TIED:
    enter_reduction(r, rk, a->kind);
    if (!sched_reduce_tie_met(&r->red, r->pc, rk)) return 0;
    break;
  case ACT_REDUCE_DP: enter_reduction(r, rk, a->kind); break;
  case ACT_OPTIMIZER:
    if (!drained(r, rk)) return 0;
    break;
  default:
    if (!inputs_done(r, rk, a)) return 0;
    if (a->kind == ACT_SEND_ACT || a->kind == ACT_SEND_GRAD)
      r->held[a->chunk][r->n_held[a->chunk]++] = *a;
  }
  r->pc[rk]++;
  return 1;
}

/* " rank 1 waits in TIE for its tie group (ranks 0, 1) with 1sG3 held back;" for each rank
 * stuck in a tie reduction (held sends go out only at a wait or a FLUSH; a reduction is
 * neither). */
static int describe_reductions(rdv *r, char *buf, size_t size) {
  int n = 0;
  for (int rk = 0; rk < r->s->n_ranks && n >= 0 && (size_t)n < size; rk++) {
    char ranks[128], text[48] = "nothing";
    if (r->pc[rk] == r->s->n_acts[rk] || r->s->acts[rk][r->pc[rk]].kind != ACT_REDUCE_TIED ||
        !sched_reduce_waits_for(&r->red, r->pc, rk, ranks, sizeof ranks))
      continue;
    const pt_action *h = held_send(r, rk);
    if (h) schedule_action_text(h, text, sizeof text);
    n += snprintf(buf + n, size - (size_t)n, " rank %d waits in TIE for its tie group (ranks %s) "
                  "with %s held back;", rk, ranks, text);
  }
  return n;
}

static int describe(rdv *r, pt_sched_where *where, char *err, size_t errsz) {
  char all[768];
  int n = 0, first = -1;
  for (int c = 0; c < r->s->n_chunks && n >= 0 && (size_t)n < sizeof all; c++) {
    const pt_action *q = r->head[c] < r->tail[c] ? &r->stream[c][r->head[c]].op : NULL;
    int rk = r->s->chunk_rank[c];
    char text[48] = "idle";
    if (q) schedule_action_text(q, text, sizeof text);
    if (first < 0 && r->pc[rk] < r->s->n_acts[rk]) first = rk;
    n += snprintf(all + n, sizeof all - (size_t)n, " chunk %d (rank %d at action %d), stream %s;",
                  c, rk, r->pc[rk], text);
  }
  if (n >= 0 && (size_t)n < sizeof all) describe_reductions(r, all + n, sizeof all - (size_t)n);
  if (first < 0) first = 0;
  int at = r->pc[first] < r->s->n_acts[first] ? r->pc[first] : -1;
  return schedule_fail_at(r->s, where, first, at, err, errsz, "%s, %d ranks, %d micro-batches: "
                          "deadlock under NCCL's ordered transfers:%s held sends go out only at "
                          "a wait or a FLUSH", r->s->name, r->s->n_ranks, r->s->n_micro, all);
}

/* A reduction entered with a send held: its peer waits for the send until the reduction ends. */
static int describe_stall(rdv *r, pt_sched_where *where, char *err, size_t errsz) {
  const pt_action *h = &r->stall_held;
  int rk = r->stall.rank, peer = h->chunk + (h->kind == ACT_SEND_GRAD ? -1 : 1);
  pt_action_kind k = r->s->acts[rk][r->stall.index].kind;
  char text[48];
  schedule_action_text(h, text, sizeof text);
  return schedule_fail_at(r->s, where, rk, r->stall.index, err, errsz, "%s, %d ranks, %d "
                          "micro-batches: enters the %s reduction with %s held back, so rank %d "
                          "waits for it until the reduction ends (over NCCL a send goes out only "
                          "at a wait or a FLUSH); put FLUSH before the step's reductions",
                          r->s->name, r->s->n_ranks, r->s->n_micro,
                          k == ACT_REDUCE_TIED ? "tied-weight" : "data-parallel", text,
                          r->s->chunk_rank[peer]);
}

static void rdv_free(rdv *r) {
  for (int c = 0; c < r->s->n_chunks; c++) free(r->stream[c]), free(r->held[c]);
  free(r->stream), free(r->held), free(r->n_held), free(r->groups);
  free(r->pc), free(r->head), free(r->tail), free(r->state);
  sched_reduce_free(&r->red);
}

/* Runs every host and stream until nothing moves; 0 when all finished, else the report. */
static int run(rdv *r, pt_sched_where *where, char *err, size_t errsz) {
  const pt_schedule *s = r->s;
  for (int moved = 1; moved;) {
    moved = 0;
    for (int rk = 0; rk < s->n_ranks; rk++) {
      moved |= progress_host(r, rk);
      for (int c = 0; c < s->n_chunks; c++)
        moved |= s->chunk_rank[c] == rk && progress_stream(r, c);
    }
  }
  int ok = 1;
  for (int rk = 0; rk < s->n_ranks; rk++) ok &= r->pc[rk] == s->n_acts[rk];
  for (int c = 0; c < s->n_chunks; c++) ok &= r->head[c] == r->tail[c];
  if (!ok) return describe(r, where, err, errsz);
  return r->stall.index >= 0 ? describe_stall(r, where, err, errsz) : 0;
}

static int check_one_chunk(const pt_schedule *s, const pt_sched_reductions *red,
                           pt_sched_where *where, char *err, size_t errsz) {
  size_t C = (size_t)s->n_chunks;
  rdv r = {.s = s, .stall = {0, -1}, .pc = pt_calloc((size_t)s->n_ranks, sizeof(int)),
           .head = pt_calloc(C, sizeof(int)), .tail = pt_calloc(C, sizeof(int)),
           .groups = pt_calloc(C, sizeof(int)), .n_held = pt_calloc(C, sizeof(int)),
           .stream = pt_calloc(C, sizeof(rdv_op *)), .held = pt_calloc(C, sizeof(pt_action *)),
           .state = pt_calloc(C * N_KINDS * (size_t)(s->n_micro + 1), 1)};
  for (size_t c = 0; c < C; c++) {
    size_t n = (size_t)s->n_acts[s->chunk_rank[c]] + 1;
    r.stream[c] = pt_calloc(n, sizeof(rdv_op));
    r.held[c] = pt_calloc(n, sizeof(pt_action));
  }
  sched_reduce_init(&r.red, s, red);
  int rc = run(&r, where, err, errsz);
  rdv_free(&r);
  return rc;
}

int schedule_check_rendezvous_in(const pt_schedule *s, const pt_sched_reductions *red,
                                 pt_sched_where *where, char *err, size_t errsz) {
  if (schedule_check_structure(s, where, err, errsz) != 0) return -1;
  if (red && (red->dp < 1 || red->n_ties < 0 || (red->n_ties > 0 && !red->tie)))
    return pt_errorf(err, errsz, "%s: reductions of %d tie groups and %d replicas make no "
                     "layout", s->name, red->n_ties, red->dp);
  if (s->n_chunks == s->n_ranks) return check_one_chunk(s, red, where, err, errsz);
  sched_reduce x;
  sched_reduce_init(&x, s, red);
  int rc = schedule_check_links(s, &x, where, err, errsz);
  sched_reduce_free(&x);
  return rc;
}

int schedule_check_rendezvous_where(const pt_schedule *s, pt_sched_where *where, char *err,
                                    size_t errsz) {
  return schedule_check_rendezvous_in(s, NULL, where, err, errsz);
}

int schedule_check_rendezvous(const pt_schedule *s, char *err, size_t errsz) {
  return schedule_check_rendezvous_where(s, NULL, err, errsz);
}
