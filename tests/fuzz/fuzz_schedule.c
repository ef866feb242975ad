/* tests/fuzz/fuzz_schedule.c: libFuzzer target for schedule files (schedule/schedule_file.c,
 * docs/schedules.md "Schedule files"), the input `pipeline.schedule_file` names.
 *
 * Input: three layout bytes, then the file's text:
 *   ranks = 1 + byte0 % 4, micro-batches = 1 + byte1 % 8, chunks per rank v = byte2 % 3
 *   (0: as the file has them), the layouts a small spec gives.
 * The contract checked: schedule_from_file returns 0, or -1 with a message; it never exits,
 * touches memory it does not own or leaks. A schedule it accepts must also
 *   - pass schedule_validate and schedule_check_rendezvous again (it says it ran them), and
 *   - read back as itself: schedule_write_actions' text, read with the same layout, gives the
 *     same chunks, placement and action lists (what `--format actions` promises).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_files.h"
#include "schedule/schedule.h"

#define T "fuzz_schedule"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[4096], g_file[4200], g_back[4200];

static void fuzz_schedule_cleanup(void) { fuzz_remove_dir(g_dir); }

static void fuzz_schedule_setup(void) {
  if (g_dir[0]) return;
  fuzz_make_dir(T, "schedule", g_dir, sizeof g_dir);
  fuzz_path(T, g_file, sizeof g_file, g_dir, "schedule.txt");
  fuzz_path(T, g_back, sizeof g_back, g_dir, "written.txt");
  atexit(fuzz_schedule_cleanup);
}

static int fuzz_schedule_same(const pt_schedule *a, const pt_schedule *b) {
  if (a->n_ranks != b->n_ranks || a->n_chunks != b->n_chunks || a->n_micro != b->n_micro ||
      a->placement != b->placement)
    return 0;
  for (int c = 0; c < a->n_chunks; c++)
    if (a->chunk_rank[c] != b->chunk_rank[c] || a->n_slots[c] != b->n_slots[c]) return 0;
  for (int r = 0; r < a->n_ranks; r++) {
    if (a->n_acts[r] != b->n_acts[r]) return 0;
    for (int i = 0; i < a->n_acts[r]; i++)
      if (a->acts[r][i].kind != b->acts[r][i].kind || a->acts[r][i].mb != b->acts[r][i].mb ||
          a->acts[r][i].chunk != b->acts[r][i].chunk)
        return 0;
  }
  return 1;
}

/* The accepted schedule, written out and read back with the same layout; printed too (the
 * printer walks the same lists: a bad index shows under ASan). */
static void fuzz_schedule_round_trip(const pt_schedule *s, int v) {
  char *text = NULL, err[1024] = "";
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) fuzz_die(T, "open_memstream failed", NULL);
  schedule_write_actions(f, s);
  fclose(f);
  fuzz_write_file(T, g_back, text, len);
  free(text);
  f = open_memstream(&text, &len);
  if (!f) fuzz_die(T, "open_memstream failed", NULL);
  schedule_print(f, s);
  fclose(f);
  free(text);
  pt_schedule back;
  if (schedule_from_file(&back, g_back, s->n_ranks, s->n_micro, v, err, sizeof err) != 0)
    fuzz_die(T, "an accepted schedule, written out, is refused", err);
  if (!fuzz_schedule_same(s, &back)) fuzz_die(T, "an accepted schedule reads back different", NULL);
  schedule_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  fuzz_schedule_setup();
  int ranks = 1 + data[0] % 4, micro = 1 + data[1] % 8, v = data[2] % 3;
  fuzz_write_file(T, g_file, data + 3, size - 3);
  pt_schedule s;
  char err[1024] = "";
  int rc = schedule_from_file(&s, g_file, ranks, micro, v, err, sizeof err);
  fuzz_expect_msg(T, rc, err, "schedule_from_file");
  if (rc != 0) return 0;
  if (schedule_validate(&s, err, sizeof err) != 0)
    fuzz_die(T, "an accepted schedule fails schedule_validate", err);
  if (schedule_check_rendezvous(&s, err, sizeof err) != 0)
    fuzz_die(T, "an accepted schedule fails schedule_check_rendezvous", err);
  fuzz_schedule_round_trip(&s, v);
  schedule_free(&s);
  return 0;
}
