/* Schedule files (docs/schedules.md, "Schedule files"): every registered schedule written out
 * and read back identical, in full and with only its compute actions; hand-written files in
 * our codes and torch's; bad files refused with one line naming the file, the line, the rank
 * and the action. Runs from the repository root (tests/schedule/). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schedule/schedule.h"
#include "test_util.h"

static char g_tmp[64];

/* A fresh temporary file, its path in g_tmp (removed by the caller); NULL, counted as a failed
 * check, when none can be made. */
static FILE *tmp_file(void) {
  snprintf(g_tmp, sizeof g_tmp, "/tmp/pipetrain_sched_XXXXXX");
  int fd = mkstemp(g_tmp);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  CHECK(f != NULL, "no temporary file %s", g_tmp);
  return f;
}

static int same_schedule(const pt_schedule *a, const pt_schedule *b) {
  if (a->n_ranks != b->n_ranks || a->n_chunks != b->n_chunks || a->n_micro != b->n_micro ||
      a->placement != b->placement)
    return 0;
  size_t C = (size_t)a->n_chunks * sizeof(int);
  if (memcmp(a->chunk_rank, b->chunk_rank, C) || memcmp(a->n_slots, b->n_slots, C) ||
      memcmp(a->n_w_pending, b->n_w_pending, C))
    return 0;
  for (int r = 0; r < a->n_ranks; r++)
    if (a->n_acts[r] != b->n_acts[r] ||
        memcmp(a->acts[r], b->acts[r], sizeof(pt_action) * (size_t)a->n_acts[r]))
      return 0;
  return 1;
}

/* Only the compute actions (F, B, I, W), as a person would write the file. */
static void write_compute(FILE *f, const pt_schedule *s) {
  fprintf(f, "placement: %s\n", s->placement == PT_PLACE_V ? "v" : "loop");
  for (int r = 0; r < s->n_ranks; r++) {
    fprintf(f, "rank %d:", r);
    for (int i = 0; i < s->n_acts[r]; i++) {
      pt_action_kind k = s->acts[r][i].kind;
      char text[48];
      if (k == ACT_FORWARD || k == ACT_BACKWARD || k == ACT_BACKWARD_INPUT || k == ACT_BACKWARD_WEIGHT)
        fprintf(f, " %s", schedule_action_text(&s->acts[r][i], text, sizeof text));
    }
    fputc('\n', f);
  }
}

/* Built, written (in full, or compute actions only), read back: the same schedule. */
static void round_trip(const pt_schedule_type *t, int P, int v, int M, int compute_only) {
  pt_schedule built, back;
  char err[1024] = "";
  if (schedule_build_v(&built, t, P, v, M, err, sizeof err) != 0) return;
  FILE *f = tmp_file();
  if (!f) return;
  if (compute_only) write_compute(f, &built);
  else schedule_write_actions(f, &built);
  fclose(f);
  int rc = schedule_from_file(&back, g_tmp, P, M, 0, err, sizeof err);
  CHECK(rc == 0 && same_schedule(&built, &back), "%s P=%d v=%d M=%d (%s): read back %s (%s)",
        t->name, P, v, M, compute_only ? "compute actions" : "in full",
        rc ? "failed" : "differs", err);
  if (rc == 0) schedule_free(&back);
  schedule_free(&built);
  remove(g_tmp);
}

/* Built, written as torch's CSV (compute actions; with comms, torch's lowering), read back:
 * the same schedule (the builder adds back the loads and the step end, and places its own
 * transfers). */
static void torch_round_trip(const pt_schedule_type *t, int P, int v, int M, int comms) {
  pt_schedule built, back;
  char err[1024] = "";
  if (schedule_build_v(&built, t, P, v, M, err, sizeof err) != 0) return;
  FILE *f = tmp_file();
  if (!f) return;
  schedule_write_torch(f, &built, comms);
  fclose(f);
  int rc = schedule_from_file(&back, g_tmp, P, M, 0, err, sizeof err);
  if (rc == 0 && P == 1) back.placement = built.placement; /* torch's CSV names none; one rank
                                                              fits both */
  CHECK(rc == 0 && same_schedule(&built, &back), "%s P=%d v=%d M=%d (torch CSV%s): read back %s "
        "(%s)", t->name, P, v, M, comms ? " with comms" : "", rc ? "failed" : "differs", err);
  if (rc == 0) schedule_free(&back);
  schedule_free(&built);
  remove(g_tmp);
}

static void test_round_trips(void) {
  for (int k = 0; schedule_types[k]; k++) {
    const pt_schedule_type *t = schedule_types[k];
    int v = t->virtual_stages == SCHEDULE_ANY_V ? 2 : t->virtual_stages;
    for (int P = 1; P <= 4; P++)
      for (int M = P; M <= 3 * P; M += P + 1) {
        int m = t->min_micro && M < t->min_micro(P) ? t->min_micro(P) : M;
        round_trip(t, P, v, m, 0);
        round_trip(t, P, v, m, 1);
        torch_round_trip(t, P, v, m, 0);
        torch_round_trip(t, P, v, m, 1);
      }
  }
}

/* path read as a schedule of P ranks, M micro-batches, v chunks per rank: fails with err
 * containing want (NULL: succeeds). */
static void expect_file(const char *path, int P, int M, int v, const char *want) {
  pt_schedule s;
  char err[1024] = "";
  int rc = schedule_from_file(&s, path, P, M, v, err, sizeof err);
  if (!want) {
    CHECK(rc == 0, "%s: %s", path, err);
    if (rc == 0) schedule_free(&s);
    return;
  }
  CHECK(rc == -1 && strstr(err, want) && !strchr(err, '\n'), "%s: got '%s', want '%s'", path,
        rc ? err : "success", want);
}

/* text written to a temporary file, then as expect_file. */
static void expect_text(const char *text, int P, int M, int v, const char *want) {
  FILE *f = tmp_file();
  if (!f) return;
  fputs(text, f);
  fclose(f);
  char path[80];
  snprintf(path, sizeof path, "%s", g_tmp);
  expect_file(path, P, M, v, want);
  remove(path);
}

static void test_hand_written(void) {
  pt_schedule a, b;
  char err[1024] = "";
  CHECK(schedule_from_file(&a, "tests/schedule/zb_p2.txt", 2, 3, 0, err, sizeof err) == 0,
        "zb_p2: %s", err);
  CHECK(schedule_from_file(&b, "tests/schedule/torch_forms.txt", 2, 3, 1, err, sizeof err) == 0,
        "torch_forms: %s", err);
  CHECK(a.n_slots[0] == 3 && a.n_slots[1] == 2 && a.n_w_pending[1] == 2 &&
            !strcmp(a.name, "file zb_p2.txt") && a.type == NULL,
        "zb_p2: slots %d %d, W pending %d, name '%s'", a.n_slots[0], a.n_slots[1],
        a.n_w_pending[1], a.name);
  CHECK(schedule_validate(&b, err, sizeof err) == 0, "torch forms: %s", err);
  schedule_free(&a), schedule_free(&b);
  expect_file("tests/schedule/v_local_send.txt", 1, 1, 0, "tests/schedule/v_local_send.txt:2: "
              "rank 0, action 0sA0: chunk 0 hands over to chunk 1 on this rank");
  expect_text("placement: v\nrank 0: 0F0 1F0 1B0 0B0\n", 1, 1, 2, NULL);
  /* a step end written out needs a FLUSH before its reductions: the file check assumes any
   * layout (ties, DP); one after TIE comes too late */
  const char *held = "rank 0: 0L0 0F0 0sA0 0rG0 0B0 TIE FLUSH DP OPT\n"
                     "rank 1: 1rA0 1L0 1F0 1B0 1sG0 TIE FLUSH DP OPT\n";
  expect_text(held, 2, 1, 0, ":1: rank 0, action 0B0: file pipetrain_sched_");
  expect_text(held, 2, 1, 0, "deadlock under NCCL's ordered transfers");
  expect_text(held, 2, 1, 0, "rank 1 waits in TIE for its tie group (ranks 0, 1) with 1sG0 held "
              "back; held sends go out only at a wait or a FLUSH");
  expect_text("rank 0: 0L0 0F0 0sA0 0rG0 0B0 FLUSH TIE DP OPT\n"
              "rank 1: 1rA0 1L0 1F0 1B0 1sG0 FLUSH TIE DP OPT\n", 2, 1, 0, NULL);
  /* a step end without any FLUSH (files from before it existed) gets one before its first
   * reduction */
  expect_text("rank 0: 0L0 0F0 0sA0 0rG0 0B0 TIE DP OPT\n"
              "rank 1: 1rA0 1L0 1F0 1B0 1sG0 TIE DP OPT\n", 2, 1, 0, NULL);
  expect_text("rank 0: 0F0 0B0 TIE DP OPT FLUSH\nrank 1: 1F0 1B0 TIE DP OPT\n", 2, 1, 0,
              "rank 0, action FLUSH: FLUSH stands alone, before OPT");
}

/* path and text read as P ranks, M micro-batches: the same schedule. */
static void expect_same(const char *path, const char *text, int P, int M) {
  pt_schedule a, b;
  char err[1024] = "", err2[1024] = "";
  FILE *f = tmp_file();
  if (!f) return;
  fputs(text, f);
  fclose(f);
  int ra = schedule_from_file(&a, path, P, M, 0, err, sizeof err);
  int rb = schedule_from_file(&b, g_tmp, P, M, 0, err2, sizeof err2);
  CHECK(ra == 0 && rb == 0 && same_schedule(&a, &b), "%s against '%.60s...': %s %s", path, text,
        err, err2);
  if (ra == 0) schedule_free(&a);
  if (rb == 0) schedule_free(&b);
  remove(g_tmp);
}

/* A file's own receives, in whatever order it lists them, are posted where pipetrain posts its
 * own: the first slots' in the order of their forwards, whatever the sender's order. Here rank
 * 1 lists rA1 before rA0 (rank 0's send order) but runs F0 first. */
static void test_receive_order(void) {
  FILE *f = tmp_file();
  if (!f) return;
  fputs("rank 0: 0F1 0F0 0B0 0B1\nrank 1: 1F0 1F1 1B0 1B1\n", f);
  fclose(f);
  char compute[80];
  snprintf(compute, sizeof compute, "%s", g_tmp);
  expect_same(compute, "rank 0: 0L1 0F1 0sA1 0L0 0F0 0sA0 0rG0 0B0 0rG1 0B1\n"
              "rank 1: 1rA1 1rA0 1L0 1F0 1L1 1F1 1B0 1sG0 1B1 1sG1\n", 2, 2);
  remove(compute);
}

/* torch.distributed.pipelining's forms (docs/schedules.md, "Schedules from torch"). */
static void test_torch_forms(void) {
  const char *zb = "tests/schedule/zb_p2.txt";
  /* _dump_csv's compute-only CSV, empty cells for idle steps */
  expect_same(zb, "0F0,0F1,0I0,0F2,0W0,0I1,0W1,0I2,0W2\n,1F0,1I0,1F1,1I1,1W0,1F2,1I2,1W1,1W2\n",
              2, 3);
  /* its lowering: receives posted as soon as the peer sends (before pipetrain's slot is free),
   * waits, FSDP and gradient reductions: ignored, pipetrain places its own transfers */
  expect_same(zb, "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0I0,0WAIT_SEND_F0,0F2,0SEND_F2,"
              "0W0,0RECV_B1,0I1,0WAIT_SEND_F1,0W1,0RECV_B2,0I2,0WAIT_SEND_F2,0W2,0REDUCE_GRAD,"
              "0WAIT_REDUCE_GRAD,0RESHARD\n1UNSHARD,1RECV_F0,1RECV_F1,1RECV_F2,1F0,1I0,1SEND_B0,"
              "1F1,1I1,1SEND_B1,1W0,1F2,1I2,1SEND_B2,1W1,1W2,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,"
              "1RESHARD,1WAIT_SEND_B0,1WAIT_SEND_B1,1WAIT_SEND_B2\n", 2, 3);
  /* _format_pipeline_order's table */
  expect_same(zb, "         Rank 0 Rank 1\n"
              "Step 00: 0F0          \nStep 01: 0F1    1F0   \nStep 02: 0I0    1I0   \n"
              "Step 03: 0F2    1F1   \nStep 04: 0W0    1I1   \nStep 05: 0I1    1W0   \n"
              "Step 06: 0W1    1F2   \nStep 07: 0I2    1I2   \nStep 08: 0W2    1W1 <-- ERROR HERE\n"
              "Step 09:        1W2   \n", 2, 3);
  /* OVERLAP_F_B: its F, then its B */
  expect_text("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 (1F1;1B0)OVERLAP_F_B 1B1\n", 2, 2, 0, NULL);
  expect_text("rank 0: 0F0 (0F1;0LOAD0)OVERLAP_F_B\nrank 1: 1F0\n", 2, 2, 0, "'(0F1;0LOAD0)"
              "OVERLAP_F_B' is not an action");
  /* torch's ScheduleLoopedBFS: backwards in descending order run as I, W ascending after */
  pt_schedule s;
  char err[1024] = "";
  FILE *f = tmp_file();
  if (!f) return;
  fputs("0F0,0F1,0F2,2F0,2F1,2F2,,,2B2,2B1,2B0,0B2,0B1,0B0\n"
        ",1F0,1F1,1F2,3F0,3F1,3F2,3B2,3B1,3B0,1B2,1B1,1B0\n", f);
  fclose(f);
  int rc = schedule_from_file(&s, g_tmp, 2, 3, 2, err, sizeof err);
  CHECK(rc == 0 && s.n_w_pending[0] == 2 && s.n_w_pending[3] == 2, "looped BFS in torch's "
        "order: %s", rc ? err : "W pending differs");
  if (rc == 0) {
    char text[48];
    const pt_action *a = s.acts[1];
    int n = s.n_acts[1];
    CHECK(!strcmp(schedule_action_text(&a[n - 8], text, sizeof text), "1B0") &&
          a[n - 7].kind == ACT_SEND_GRAD && !strcmp(schedule_action_text(&a[n - 6], text,
          sizeof text), "1W1"), "looped BFS: rank 1 ends %s", text);
    schedule_free(&s);
  }
  remove(g_tmp);
}

static void test_bad_files(void) {
  const char *d = "tests/schedule/";
  char path[256];
  static const struct {
    const char *file;
    int P, M, v;
    const char *want;
  } cases[] = {
      {"w_before_i.txt", 2, 3, 0, "w_before_i.txt:3: rank 1, action 1W2: W of micro-batch 2 before its I"},
      {"w_order.txt", 2, 3, 0, "w_order.txt:2: rank 0, action 0W1: W of micro-batch 1 before "
       "micro-batch 0's: on a chunk, weight gradients add up in ascending micro-batch order"},
      {"deadlock.txt", 2, 2, 0, "deadlock.txt:2: rank 0, action 0B0: deadlock: it waits forever"},
      {"bad_token.txt", 2, 1, 0, "bad_token.txt:2: rank 0: '0X1' is not an action"},
      {"bad_token.txt", 2, 1, 0, "or FLUSH, TIE, DP, OPT"},
      {"zb_p2.txt", 3, 3, 0, "zb_p2.txt: 2 ranks, but pipeline.stages is 3"},
      {"zb_p2.txt", 2, 4, 0, "zb_p2.txt: micro-batches 0..2, but train.micro_batches is 4"},
      {"zb_p2.txt", 2, 3, 2, "zb_p2.txt: 1 chunk per rank, but pipeline.virtual_stages is 2"},
      {"no_such_file.txt", 2, 3, 0, "no_such_file.txt: cannot open the schedule file"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(path, sizeof path, "%s%s", d, cases[i].file);
    expect_file(path, cases[i].P, cases[i].M, cases[i].v, cases[i].want);
  }
  expect_text("rank 0: 0F0 0B0\nrank 1: 0F0 1B0\n", 2, 1, 0, ":2: rank 1, action 0F0: chunk 0 "
              "already runs on rank 0");
  expect_text("rank 0: 0F0 0B0\nstage 1: 1F0 1B0\n", 2, 1, 0, ":2: expected 'rank N: ACTIONS'");
  expect_text("placement: v\nrank 0: 0F0 0B0\nrank 1: 1F0 1B0\n", 2, 1, 0, "fit no 'placement: loop|v' line's");
  expect_text("rank 0: 0F0 2F0 2B0 0B0\nrank 1: 1F0 3F0 3B0 1B0\n", 2, 1, 0, NULL);
  expect_text("rank 0: 0F0 3F0 3B0 0B0\nrank 1: 1F0 2F0 2B0 1B0\n", 2, 1, 0, NULL);
  expect_text("rank 0: 0F0 0FLUSH0 0B0\nrank 1: 1F0 1B0\n", 2, 1, 0, "'0FLUSH0' is not an action");
  expect_text("rank 0: 0F0 0B0 OPT\nrank 1: 1F0 1B0 TIE DP OPT\n", 2, 1, 0,
              "rank 0, action OPT: the step ends with TIE DP OPT");
  expect_text("rank 0: 0F0 0B0 0W0\nrank 1: 1F0 1B0\n", 2, 1, 0, ":1: rank 0, action 0W0: W of "
              "micro-batch 0: its weight gradient is already in");
  expect_text("rank 0:\nrank 1: 1F0 1B0\n", 2, 1, 0, "rank 0 has no actions");
  expect_text("# nothing\n", 2, 1, 0, "no 'rank N:' lines");
  /* counts at their line and action, with the fix; a duplicate at itself, not at the load
   * the builder would add before it; torch's names */
  static const struct {
    const char *text;
    int P, M, v;
    const char *want;
  } refused[] = {
      {"rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F1 1B0 1F2 1B1\n", 2, 2, 0, ":2: rank 1, action 1F2: "
       "micro-batch 2 is out of range: train.micro_batches is 2 (micro-batches 0..1); renumber "
       "the action or raise train.micro_batches"},
      {"rank 0: 0F0 0B0 2F0 2B0\nrank 1: 1F0 1B0 3F0 3B0\n", 2, 1, 1, ":1: rank 0, action 2F0: "
       "chunk 2 is out of range: 2 ranks x pipeline.virtual_stages 1 make chunks 0..1; renumber "
       "the chunk or set pipeline.virtual_stages to 2"},
      {"rank 0: 0F0 0B0 2F0 2B0\nrank 1: 1F0 1B0\n", 2, 1, 0, ":1: rank 0, action 2F0: chunk 2 "
       "makes 3 chunks on 2 ranks"},
      {"rank 0: 0F0 0F1\nrank 0: 0F1 0B0 0B1\nrank 1: 1F0 1F1 1B0 1B1\n", 2, 2, 0, ":2: rank 0, "
       "action 0F1: forward of micro-batch 1 runs twice on chunk 0 (first at line 1); remove one"},
      {"rank 0: 0L0 0F0 0sA0 0rG0 0B0\nrank 1: 1rA0 1L0 1F0 1rA0 1B0 1sG0\n", 2, 1, 0,
       ":2: rank 1, action 1rA0: micro-batch 0's activation receive on chunk 1 is written twice "
       "(first at line 2); remove one"},
      /* past the first slots: the one hoisting used to drop without a word */
      {"rank 0: 0L0 0F0 0sA0 0L1 0F1 0sA1 0L2 0F2 0sA2 0rG0 0B0 0rG1 0B1 0rG2 0B2\n"
       "rank 1: 1rA0 1L0 1F0 1B0 1sG0 1rA1 1L1 1F1 1B1 1sG1 1rA2 1L2 1rA2 1F2 1B2 1sG2\n", 2, 3,
       0, ":2: rank 1, action 1rA2: micro-batch 2's activation receive on chunk 1 is written "
       "twice (first at line 2); remove one"},
      {"rank 0: 0L0 0F0 0L1 0F1 0sA0 0sA1\nrank 0: 0sA1 0rG0 0B0 0rG1 0B1\n"
       "rank 1: 1rA0 1rA1 1L0 1F0 1L1 1F1 1B0 1sG0 1B1 1sG1\n", 2, 2, 0, ":2: rank 0, action "
       "0sA1: micro-batch 1's activation send on chunk 0 is written twice (first at line 1); "
       "remove one"},
      {"rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1F1 1rG1 1B0 1rG1 1B1\n", 2, 2, 0, ":2: rank 1, "
       "action 1rG1: micro-batch 1's gradient receive on chunk 1 is written twice (first at line "
       "2); remove one"},
      {"rank 0: 0LOAD0 0F0 0B0\nrank 1: 1F0 1B0\n", 2, 1, 0, "'0LOAD0' is not an action; write "
       "CHUNK CODE MB (0F3, 1I2, 1W2, 0sA3, or torch's 0SEND_F3) or FLUSH, TIE, DP, OPT; "
       "pipetrain's load is L (0L3), and torch writes none"},
      {"0F0,0B0\n1F0,1B0\n0F0\n", 2, 1, 0, ": 3 ranks, but pipeline.stages is 2; set "
       "pipeline.stages to 3 or write a row per rank"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    expect_text(refused[i].text, refused[i].P, refused[i].M, refused[i].v, refused[i].want);
}

int main(void) {
  test_round_trips();
  test_hand_written();
  test_torch_forms();
  test_receive_order();
  test_bad_files();
  return test_summary("schedule files");
}
