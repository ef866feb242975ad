/* schedule_validate: runs every rank's action list together as the executor would (sends never
 * block; a FORWARD/BACKWARD waits for its matching send, or for the chunk before it on the
 * same rank; a slot's output may be overwritten only once the next chunk has posted the
 * receive of its previous send; reductions are collective) and reports the first mismatch,
 * a break of the exactness rule (schedule.h) or a deadlock. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/check.h"

enum {
  F_RECV_ACT = 1, F_FWD = 2, F_SEND_ACT = 4, F_RECV_GRAD = 8, F_BWD = 16, /* B or I */
  F_SEND_GRAD = 32, F_WGT = 64, /* B or W */ F_LOAD = 128,
};

typedef struct {
  const pt_schedule *s;
  int *pc;        /* [rank] */
  int *flags;     /* [chunk * M + mb] */
  int *next_w;    /* [chunk]: the micro-batch whose weight gradient comes next */
  int *slot_mb;   /* [chunk * max_slots + slot]: micro-batch holding the slot, -1 free */
  int *last_sent; /* [chunk * max_slots + slot]: last micro-batch sent from the slot, -1 none */
  int max_slots;
  pt_sched_where *where;
  char *err;
  size_t errsz;
} sim;

#define fail(x, r, index, ...) \
  schedule_fail_at((x)->s, (x)->where, r, index, (x)->err, (x)->errsz, __VA_ARGS__)

static int *flag(sim *x, int c, int mb) { return &x->flags[c * x->s->n_micro + mb]; }
static int slot_of(const sim *x, int c, int mb) { return mb % x->s->n_slots[c]; }
static int *slot_cell(sim *x, int *base, int c, int mb) {
  return &base[c * x->max_slots + slot_of(x, c, mb)];
}
static int remote(const sim *x, int c, int dir) {
  int o = c + dir;
  return o >= 0 && o < x->s->n_chunks && !schedule_is_local(x->s, c, dir);
}

/* A slot is taken by the first action that writes it (receive, load or forward). */
static int take_slot(sim *x, int r, int i, int c, int mb) {
  int *h = slot_cell(x, x->slot_mb, c, mb);
  if (*h >= 0 && *h != mb)
    return fail(x, r, i, "chunk %d: micro-batch %d needs slot %d while micro-batch %d still "
                "holds it", c, mb, slot_of(x, c, mb), *h);
  *h = mb;
  return 0;
}

/* Ends mb's weight gradient on chunk c (B or W): ascending micro-batches only. */
static int add_weights(sim *x, int r, int i, int c, int mb, const char *what) {
  if (x->next_w[c] != mb)
    return fail(x, r, i, "%s of micro-batch %d before micro-batch %d's: on a chunk, weight "
                "gradients add up in ascending micro-batch order, as in the sequential run", what,
                mb, x->next_w[c]);
  x->next_w[c]++;
  *flag(x, c, mb) |= F_WGT;
  *slot_cell(x, x->slot_mb, c, mb) = -1;
  return 0;
}

static int step_forward(sim *x, int r, int i, int c, int mb) {
  int *f = flag(x, c, mb), last = x->s->n_chunks - 1;
  if (*f & F_FWD) return fail(x, r, i, "forward of micro-batch %d runs twice", mb);
  if ((c == 0 || c == last) && !(*f & F_LOAD))
    return fail(x, r, i, "forward of micro-batch %d before its LOAD", mb);
  if (remote(x, c, -1)) {
    if (!(*f & F_RECV_ACT))
      return fail(x, r, i, "forward of micro-batch %d without receiving it", mb);
    if (!(*flag(x, c - 1, mb) & F_SEND_ACT)) return 0;
  } else if (c > 0 && !(*flag(x, c - 1, mb) & F_FWD)) {
    return fail(x, r, i, "forward of micro-batch %d before chunk %d's, which hands it over on "
                "this rank", mb, c - 1);
  }
  int prev = *slot_cell(x, x->last_sent, c, mb);
  if (prev >= 0 && remote(x, c, 1) && !(*flag(x, c + 1, prev) & F_RECV_ACT)) return 0;
  if (take_slot(x, r, i, c, mb)) return -1;
  *f |= F_FWD;
  return 1;
}

static int step_backward(sim *x, int r, int i, const pt_action *a) {
  int c = a->chunk, mb = a->mb, *f = flag(x, c, mb), last = x->s->n_chunks - 1;
  const char *name = a->kind == ACT_BACKWARD ? "backward" : "I";
  if (!(*f & F_FWD))
    return fail(x, r, i, "%s of micro-batch %d comes before its forward", name, mb);
  if (*f & F_BWD) return fail(x, r, i, "%s of micro-batch %d: its backward already ran", name, mb);
  if (remote(x, c, 1)) {
    if (!(*f & F_RECV_GRAD))
      return fail(x, r, i, "%s of micro-batch %d without receiving its gradient", name, mb);
    if (!(*flag(x, c + 1, mb) & F_SEND_GRAD)) return 0;
  } else if (c < last && !(*flag(x, c + 1, mb) & F_BWD)) {
    return fail(x, r, i, "%s of micro-batch %d before chunk %d's, which hands the gradient over "
                "on this rank", name, mb, c + 1);
  }
  if (a->kind == ACT_BACKWARD && add_weights(x, r, i, c, mb, "B")) return -1;
  *f |= F_BWD;
  return 1;
}

static int step_weight(sim *x, int r, int i, int c, int mb) {
  int *f = flag(x, c, mb);
  if (!(*f & F_BWD)) return fail(x, r, i, "W of micro-batch %d before its I", mb);
  if (*f & F_WGT)
    return fail(x, r, i, "W of micro-batch %d: its weight gradient is already in", mb);
  return add_weights(x, r, i, c, mb, "W") ? -1 : 1;
}

/* Transfers and loads: where they may be, and once each. */
static int step_transfer(sim *x, int r, int i, const pt_action *a) {
  int c = a->chunk, mb = a->mb, *f = flag(x, c, mb), last = x->s->n_chunks - 1;
  int dir = a->kind == ACT_RECV_ACT || a->kind == ACT_SEND_GRAD ? -1 : 1, bit;
  if (a->kind == ACT_LOAD) {
    if (c != 0 && c != last)
      return fail(x, r, i, "only chunk 0 (inputs) and chunk %d (targets) load data", last);
    bit = F_LOAD;
  } else {
    if (c + dir < 0 || c + dir > last)
      return fail(x, r, i, "chunk %d has no chunk %d to transfer with", c, c + dir);
    if (!remote(x, c, dir))
      return fail(x, r, i, "chunk %d hands over to chunk %d on this rank, with no send or "
                  "receive", c, c + dir);
    bit = a->kind == ACT_RECV_ACT ? F_RECV_ACT : a->kind == ACT_SEND_ACT ? F_SEND_ACT
          : a->kind == ACT_RECV_GRAD ? F_RECV_GRAD : F_SEND_GRAD;
    if (a->kind == ACT_SEND_ACT && !(*f & F_FWD))
      return fail(x, r, i, "sends micro-batch %d before its forward", mb);
    if (a->kind == ACT_SEND_GRAD && !(*f & F_BWD))
      return fail(x, r, i, "sends gradient %d before its backward", mb);
  }
  if (*f & bit) return fail(x, r, i, "micro-batch %d: the same transfer twice", mb);
  *f |= bit;
  if (a->kind == ACT_SEND_ACT) *slot_cell(x, x->last_sent, c, mb) = mb;
  if (a->kind == ACT_RECV_ACT || a->kind == ACT_LOAD) return take_slot(x, r, i, c, mb) ? -1 : 1;
  return 1;
}

/* 1: done, 0: must wait, -1: error (err set). */
static int step_micro(sim *x, int r, int i, const pt_action *a) {
  switch (a->kind) {
  case ACT_FORWARD: return step_forward(x, r, i, a->chunk, a->mb);
  case ACT_BACKWARD:
  case ACT_BACKWARD_INPUT: return step_backward(x, r, i, a);
  case ACT_BACKWARD_WEIGHT: return step_weight(x, r, i, a->chunk, a->mb);
  default: return step_transfer(x, r, i, a);
  }
}

/* Reductions are collective: a rank passes one only when every rank has reached the same
 * reduction (the conservative reading: tie groups may span any ranks). Under MPI's rules
 * sends never block, so FLUSH (NCCL's held sends) changes nothing here. */
static int step_collective(sim *x, int r, const pt_action *a) {
  if (a->kind == ACT_OPTIMIZER || a->kind == ACT_REDUCE_DP || a->kind == ACT_FLUSH) return 1;
  for (int o = 0; o < x->s->n_ranks; o++) {
    int pc = x->pc[o];
    if (o == r) continue;
    int at_same = pc < x->s->n_acts[o] && x->s->acts[o][pc].kind == a->kind;
    int past = 0;
    for (int i = 0; i < pc; i++) past |= x->s->acts[o][i].kind == a->kind;
    if (!at_same && !past) return 0;
  }
  return 1;
}

/* "rank 0 at 0F3, rank 1 at 1B2, ..." into buf. */
static void stuck_ranks(const sim *x, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int r = 0; r < x->s->n_ranks && n + 1 < size; r++) {
    char text[48] = "its end";
    if (x->pc[r] < x->s->n_acts[r])
      schedule_action_text(&x->s->acts[r][x->pc[r]], text, sizeof text);
    int w = snprintf(buf + n, size - n, "%srank %d at %s", r ? ", " : "", r, text);
    if (w < 0) break;
    n += (size_t)w;
  }
}

static int sim_step(void *ctx, int r, int i, const pt_action *a) {
  sim *x = ctx;
  return a->mb >= 0 ? step_micro(x, r, i, a) : step_collective(x, r, a);
}

static int sim_run(sim *x) {
  int rc = schedule_sweep(x->s, x->pc, sim_step, x);
  for (int r = 0; rc > 0 && r < x->s->n_ranks; r++)
    if (x->pc[r] < x->s->n_acts[r]) {
      char all[256];
      stuck_ranks(x, all, sizeof all);
      return fail(x, r, x->pc[r], "deadlock: it waits forever (%s)", all);
    }
  return rc;
}

static int sim_check_complete(sim *x) {
  const pt_schedule *s = x->s;
  int last = s->n_chunks - 1;
  for (int c = 0; c < s->n_chunks; c++)
    for (int mb = 0; mb < s->n_micro; mb++) {
      int f = *flag(x, c, mb), want = F_FWD | F_BWD | F_WGT;
      want |= (remote(x, c, -1) ? F_RECV_ACT | F_SEND_GRAD : 0) |
              (remote(x, c, 1) ? F_SEND_ACT | F_RECV_GRAD : 0) | (c == 0 || c == last ? F_LOAD : 0);
      const char *missing = !(f & F_FWD) ? "no forward" : !(f & F_BWD) ? "no backward"
                            : !(f & F_WGT) ? "no W" : (want & ~f & F_LOAD) ? "no LOAD"
                            : "a send or receive is missing";
      if ((f & want) != want)
        return fail(x, s->chunk_rank[c], -1, "chunk %d never completes micro-batch %d (%s)", c,
                    mb, missing);
    }
  return 0;
}

int schedule_validate_where(const pt_schedule *s, pt_sched_where *where, char *err,
                            size_t errsz) {
  if (schedule_check_structure(s, where, err, errsz) != 0) return -1;
  sim x = {.s = s, .where = where, .err = err, .errsz = errsz};
  for (int c = 0; c < s->n_chunks; c++)
    if (s->n_slots[c] > x.max_slots) x.max_slots = s->n_slots[c];
  size_t C = (size_t)s->n_chunks, cells = C * (size_t)s->n_micro, slots = C * (size_t)x.max_slots;
  x.pc = pt_calloc((size_t)s->n_ranks, sizeof(int));
  x.flags = pt_calloc(cells + 1, sizeof(int));
  x.next_w = pt_calloc(C, sizeof(int));
  x.slot_mb = pt_calloc(slots, sizeof(int));
  x.last_sent = pt_calloc(slots, sizeof(int));
  for (size_t i = 0; i < slots; i++) x.slot_mb[i] = x.last_sent[i] = -1;
  int rc = sim_run(&x);
  if (rc == 0) rc = sim_check_complete(&x);
  free(x.pc), free(x.flags), free(x.next_w), free(x.slot_mb), free(x.last_sent);
  return rc;
}

int schedule_validate(const pt_schedule *s, char *err, size_t errsz) {
  return schedule_validate_where(s, NULL, err, errsz);
}

/* Under activation checkpointing a split schedule's I runs the fused backward (engine/stage.h),
 * so its weight gradients accumulate at B and I: those too must come in ascending micro-batch
 * order on every chunk, as the validator makes B and W come. */
int schedule_check_checkpoint_order(const pt_schedule *s, char *err, size_t errsz) {
  int *last = pt_calloc((size_t)s->n_chunks, sizeof(int)), bad = 0;
  for (int c = 0; c < s->n_chunks; c++) last[c] = -1;
  for (int r = 0; r < s->n_ranks && !bad; r++)
    for (int i = 0; i < s->n_acts[r] && !bad; i++) {
      const pt_action *a = &s->acts[r][i];
      if (a->kind != ACT_BACKWARD && a->kind != ACT_BACKWARD_INPUT) continue;
      bad = a->mb < last[a->chunk];
      if (bad)
        snprintf(err, errsz, "schedule %s: chunk %d runs the backward of micro-batch %d after "
                 "%d; with train.activation_checkpoint_interval the weight gradients accumulate "
                 "there and must come in ascending order (set the interval to 0, or pick "
                 "another schedule)", s->name, a->chunk, a->mb, last[a->chunk]);
      last[a->chunk] = a->mb;
    }
  free(last);
  return bad ? -1 : 0;
}
