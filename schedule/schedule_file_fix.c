/* schedule/schedule_file_fix.c: a schedule file's lists checked and adjusted before building
 * (file_fix.h): counts and duplicates named at their line, torch's transfers dropped, full
 * backwards out of order split so the weight gradients keep the sequential order. */
#include "schedule/file_fix.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int transfer_kind(pt_action_kind k) {
  return k == ACT_RECV_ACT || k == ACT_SEND_ACT || k == ACT_RECV_GRAD || k == ACT_SEND_GRAD;
}

static int fail_action(const file_lists *x, int r, int i, const char *fmt, const char *what) {
  char text[48];
  return pt_errorf(x->err, x->errsz, "%s:%d: rank %d, action %s: %s", x->path,
                   x->ranks[r].src[i], r, schedule_action_text(&x->ranks[r].a[i], text,
                   sizeof text), what ? what : fmt);
}

/* The first action naming a chunk from `from` on (from 0: the highest chunk's first), and where.
 * *chunk -1: none. */
static void find_chunk(const file_lists *x, int from, int *chunk, int *rank, int *index) {
  *chunk = -1;
  for (int r = 0; r < x->n_ranks; r++)
    for (int i = 0; i < x->ranks[r].n; i++) {
      int c = x->ranks[r].a[i].chunk;
      if (c >= from && (from > 0 ? *chunk < 0 : c > *chunk)) *chunk = c, *rank = r, *index = i;
    }
}

static int check_ranges(const file_lists *x, int n_micro, int n_chunks) {
  char why[320];
  for (int r = 0; r < x->n_ranks; r++)
    for (int i = 0; i < x->ranks[r].n; i++) {
      int mb = x->ranks[r].a[i].mb;
      if (mb < n_micro) continue;
      snprintf(why, sizeof why, "micro-batch %d is out of range: train.micro_batches is %d "
               "(micro-batches 0..%d); renumber the action or raise train.micro_batches", mb,
               n_micro, n_micro - 1);
      return fail_action(x, r, i, NULL, why);
    }
  int c, r = 0, i = 0;
  find_chunk(x, n_chunks > 0 ? n_chunks : 0, &c, &r, &i);
  if (n_chunks > 0 && c >= n_chunks) {
    snprintf(why, sizeof why, "chunk %d is out of range: %d ranks x pipeline.virtual_stages %d "
             "make chunks 0..%d; renumber the chunk or set pipeline.virtual_stages to %d", c,
             x->n_ranks, n_chunks / x->n_ranks, n_chunks - 1,
             (c + x->n_ranks) / x->n_ranks);
    return fail_action(x, r, i, NULL, why);
  }
  if (n_chunks <= 0 && c >= 0 && (c + 1) % x->n_ranks != 0) {
    snprintf(why, sizeof why, "chunk %d makes %d chunks on %d ranks, but every rank holds as "
             "many (a multiple of %d chunks); renumber the chunks", c, c + 1, x->n_ranks,
             x->n_ranks);
    return fail_action(x, r, i, NULL, why);
  }
  return 0;
}

enum { SEEN_F, SEEN_BWD, SEEN_W, SEEN_RECV_ACT, SEEN_SEND_ACT, SEEN_RECV_GRAD, SEEN_SEND_GRAD,
       SEEN_KINDS };

/* The cells an action fills: a B is both the backward and the weight gradient; -1: none. */
static void seen_cells(pt_action_kind k, int seen[2]) {
  seen[1] = -1;
  switch (k) {
  case ACT_FORWARD: seen[0] = SEEN_F; break;
  case ACT_BACKWARD: seen[0] = SEEN_BWD, seen[1] = SEEN_W; break;
  case ACT_BACKWARD_INPUT: seen[0] = SEEN_BWD; break;
  case ACT_BACKWARD_WEIGHT: seen[0] = SEEN_W; break;
  case ACT_RECV_ACT: seen[0] = SEEN_RECV_ACT; break;
  case ACT_SEND_ACT: seen[0] = SEEN_SEND_ACT; break;
  case ACT_RECV_GRAD: seen[0] = SEEN_RECV_GRAD; break;
  case ACT_SEND_GRAD: seen[0] = SEEN_SEND_GRAD; break;
  default: seen[0] = -1;
  }
}

static int fail_duplicate(const file_lists *x, int r, int i, int seen, int first) {
  static const char *what[SEEN_KINDS] = {"forward", "backward (B or I)", NULL, "receive",
                                         "send", "receive", "send"};
  const pt_action *a = &x->ranks[r].a[i];
  char why[256];
  if (seen == SEEN_W)
    snprintf(why, sizeof why, "W of micro-batch %d: its weight gradient is already in (B or W "
             "at line %d); remove one", a->mb, first);
  else if (seen >= SEEN_RECV_ACT)
    snprintf(why, sizeof why, "micro-batch %d's %s %s on chunk %d is written twice (first at "
             "line %d); remove one", a->mb,
             seen == SEEN_RECV_ACT || seen == SEEN_SEND_ACT ? "activation" : "gradient",
             what[seen], a->chunk, first);
  else
    snprintf(why, sizeof why, "%s of micro-batch %d runs twice on chunk %d (first at line %d); "
             "remove one", what[seen], a->mb, a->chunk, first);
  return fail_action(x, r, i, NULL, why);
}

/* Each micro-batch's forward, backward (B or I), weight gradient (B or W) and each of its
 * transfers once per chunk: a transfer written twice would otherwise be lowered once, the other
 * dropped without a word (emit.c's hoist_receives keeps one receive per slot). */
static int check_duplicates(const file_lists *x, int n_micro) {
  int C = 0;
  for (int r = 0; r < x->n_ranks; r++)
    for (int i = 0; i < x->ranks[r].n; i++)
      if (x->ranks[r].a[i].chunk + 1 > C) C = x->ranks[r].a[i].chunk + 1;
  size_t cells = (size_t)C * (size_t)n_micro * SEEN_KINDS;
  int *line = pt_calloc(cells + 1, sizeof(int)), rc = 0;
  for (int r = 0; r < x->n_ranks && rc == 0; r++)
    for (int i = 0; i < x->ranks[r].n && rc == 0; i++) {
      pt_action a = x->ranks[r].a[i];
      int seen[2];
      seen_cells(a.kind, seen);
      for (int k = 0; k < 2 && rc == 0; k++) {
        if (seen[k] < 0 || a.chunk < 0 || a.mb < 0) continue;
        int *at = &line[((size_t)a.chunk * (size_t)n_micro + (size_t)a.mb) * SEEN_KINDS + (size_t)seen[k]];
        if (*at) rc = fail_duplicate(x, r, i, seen[k], *at);
        *at = x->ranks[r].src[i];
      }
    }
  free(line);
  return rc;
}

int file_check_ranges(const file_lists *x, int n_micro, int n_chunks) {
  return check_ranges(x, n_micro, n_chunks);
}

int file_check_duplicates(const file_lists *x, int n_micro) {
  return check_duplicates(x, n_micro);
}

int file_drop_torch_transfers(file_lists *x) {
  int transfers = 0;
  for (int r = 0; r < x->n_ranks; r++)
    for (int i = 0; i < x->ranks[r].n; i++) {
      if (x->ranks[r].a[i].kind == ACT_LOAD) return 0;
      transfers |= transfer_kind(x->ranks[r].a[i].kind);
    }
  if (!transfers) return 0;
  for (int r = 0; r < x->n_ranks; r++) {
    schedule_list *l = &x->ranks[r];
    int n = 0;
    for (int i = 0; i < l->n; i++)
      if (!transfer_kind(l->a[i].kind)) l->a[n] = l->a[i], l->src[n++] = l->src[i];
    l->n = n;
  }
  return 1;
}

/* Rank r's list with every B that comes before its chunk's turn as an I, and the Ws that
 * become due right after the action that makes them so. */
static int order_rank(schedule_list *l, int *next_w, int *pending, unsigned char *held,
                      int n_micro) {
  schedule_list out = {0};
  int most = 0;
  for (int i = 0; i < l->n; i++) {
    pt_action a = l->a[i];
    int c = a.chunk;
    if (a.kind == ACT_BACKWARD && a.mb != next_w[c]) {
      a.kind = ACT_BACKWARD_INPUT;
      held[(size_t)c * (size_t)n_micro + (size_t)a.mb] = 1;
      if (++pending[c] > most) most = pending[c];
    }
    schedule_list_push(&out, a, l->src[i]);
    if ((a.kind == ACT_BACKWARD || a.kind == ACT_BACKWARD_WEIGHT) && a.mb == next_w[c])
      next_w[c]++;
    while (c >= 0 && next_w[c] < n_micro && held[(size_t)c * (size_t)n_micro + (size_t)next_w[c]]) {
      held[(size_t)c * (size_t)n_micro + (size_t)next_w[c]] = 0;
      pending[c]--;
      schedule_list_push(&out, (pt_action){ACT_BACKWARD_WEIGHT, next_w[c]++, c}, l->src[i]);
    }
  }
  schedule_list_free(l);
  *l = out;
  return most;
}

int file_order_weights(file_lists *x, int n_chunks, int n_micro) {
  int *next_w = pt_calloc(2 * (size_t)n_chunks, sizeof(int)), *pending = next_w + n_chunks;
  int most = 0;
  unsigned char *held = pt_calloc((size_t)n_chunks * (size_t)n_micro + 1, 1);
  for (int r = 0; r < x->n_ranks; r++) {
    int m = order_rank(&x->ranks[r], next_w, pending, held, n_micro);
    if (m > most) most = m;
  }
  free(next_w), free(held);
  return most;
}
