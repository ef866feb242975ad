/* schedule/schedule_write.c: a schedule written as a file, ours (schedule_write_actions) or
 * torch.distributed.pipelining's CSV (schedule_write_torch).
 *
 * Receives are written right before the action that waits for them, after the peer's send in
 * any order that runs: torch's simulator (_simulate_comms_compute) takes a receive to block
 * until the peer has sent, so the early receives pipetrain posts would read there as a
 * deadlock. Reading our file back posts them early again (schedule_lower). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "schedule/schedule.h"

typedef void (*write_fn)(FILE *f, const pt_action *a, void *ctx);

static int receive_of(pt_action_kind k) {
  return k == ACT_FORWARD || k == ACT_LOAD ? ACT_RECV_ACT
         : k == ACT_BACKWARD || k == ACT_BACKWARD_INPUT ? ACT_RECV_GRAD : -1;
}

/* Rank r's actions in order, each receive moved to just before the first action of its
 * micro-batch that needs it (its L or F; its B or I). */
static void each_action(FILE *f, const pt_schedule *s, int r, write_fn write, void *ctx) {
  size_t cells = (size_t)s->n_chunks * (size_t)s->n_micro;
  unsigned char *owed = pt_calloc(2 * cells + 1, 1); /* [act/grad][chunk][mb]: not yet written */
  for (int i = 0; i < s->n_acts[r]; i++) {
    const pt_action *a = &s->acts[r][i];
    if (a->kind == ACT_RECV_ACT || a->kind == ACT_RECV_GRAD)
      owed[(a->kind == ACT_RECV_GRAD) * cells + (size_t)a->chunk * s->n_micro + a->mb] = 1;
  }
  for (int i = 0; i < s->n_acts[r]; i++) {
    const pt_action *a = &s->acts[r][i];
    if (a->kind == ACT_RECV_ACT || a->kind == ACT_RECV_GRAD) continue;
    int k = receive_of(a->kind);
    if (k >= 0) {
      unsigned char *o = &owed[(k == ACT_RECV_GRAD) * cells + (size_t)a->chunk * s->n_micro + a->mb];
      pt_action recv = {(pt_action_kind)k, a->mb, a->chunk};
      if (*o) write(f, &recv, ctx), *o = 0;
    }
    write(f, a, ctx);
  }
  free(owed);
}

static void write_ours(FILE *f, const pt_action *a, void *ctx) {
  char text[48];
  (void)ctx;
  fprintf(f, " %s", schedule_action_text(a, text, sizeof text));
}

void schedule_write_actions(FILE *f, const pt_schedule *s) {
  fprintf(f, "# pipetrain schedule file: %s, %d ranks, %d chunks, %d micro-batches\n"
          "# one line per rank of CHUNK CODE MB actions (docs/schedules.md, \"Schedule files\")\n"
          "placement: %s\n", s->name, s->n_ranks, s->n_chunks, s->n_micro,
          s->placement == PT_PLACE_V ? "v" : "loop");
  for (int r = 0; r < s->n_ranks; r++) {
    fprintf(f, "rank %d:", r);
    each_action(f, s, r, write_ours, NULL);
    fputc('\n', f);
  }
}

/* One rank's torch CSV row: its cells so far, and the sends whose WAIT_SEND is still due. */
typedef struct {
  int comms, cells;
  pt_action *sent; /* sends without their wait yet, in send order */
  int n_sent;
} torch_row;

static const char *torch_code(pt_action_kind k) {
  switch (k) {
  case ACT_FORWARD: return "F";
  case ACT_BACKWARD: return "B";
  case ACT_BACKWARD_INPUT: return "I";
  case ACT_BACKWARD_WEIGHT: return "W";
  case ACT_SEND_ACT: return "SEND_F";
  case ACT_RECV_ACT: return "RECV_F";
  case ACT_SEND_GRAD: return "SEND_B";
  case ACT_RECV_GRAD: return "RECV_B";
  default: return NULL; /* L, FLUSH and the step end: torch has none */
  }
}

static void torch_cell(FILE *f, torch_row *row, const char *code, int chunk, int mb) {
  fprintf(f, "%s%d%s%d", row->cells++ ? "," : "", chunk, code, mb);
}

/* Torch's _add_wait_send: a forward's send is waited for right after the local backward of
 * the same micro-batch (its peer has received it by then); every other at the row's end. */
static void write_torch(FILE *f, const pt_action *a, void *ctx) {
  torch_row *row = ctx;
  const char *code = torch_code(a->kind);
  int comm = a->kind == ACT_SEND_ACT || a->kind == ACT_RECV_ACT || a->kind == ACT_SEND_GRAD ||
             a->kind == ACT_RECV_GRAD;
  if (!code || (comm && !row->comms)) return;
  torch_cell(f, row, code, a->chunk, a->mb);
  if (a->kind == ACT_SEND_ACT || a->kind == ACT_SEND_GRAD) row->sent[row->n_sent++] = *a;
  if (a->kind != ACT_BACKWARD && a->kind != ACT_BACKWARD_INPUT) return;
  for (int i = 0; i < row->n_sent; i++) {
    pt_action *p = &row->sent[i];
    if (p->kind != ACT_SEND_ACT || p->chunk != a->chunk || p->mb != a->mb) continue;
    torch_cell(f, row, "WAIT_SEND_F", p->chunk, p->mb);
    memmove(p, p + 1, sizeof *p * (size_t)(--row->n_sent - i));
    break;
  }
}

void schedule_write_torch(FILE *f, const pt_schedule *s, int comms) {
  for (int r = 0; r < s->n_ranks; r++) {
    torch_row row = {comms, 0, pt_calloc((size_t)s->n_acts[r] + 1, sizeof(pt_action)), 0};
    each_action(f, s, r, write_torch, &row);
    for (int i = 0; i < row.n_sent; i++)
      torch_cell(f, &row, row.sent[i].kind == ACT_SEND_ACT ? "WAIT_SEND_F" : "WAIT_SEND_B",
                 row.sent[i].chunk, row.sent[i].mb);
    free(row.sent);
    fputc('\n', f);
  }
}
