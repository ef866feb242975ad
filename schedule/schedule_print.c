/* schedule/schedule_print.c: a schedule as text for people (schedule_print), and the action
 * codes every text form shares. The schedule files it writes: schedule/schedule_write.c. */
#include <stdio.h>

#include "schedule/schedule.h"

const char *schedule_action_code(pt_action_kind k) {
  static const char *const codes[ACT_KINDS] = {"rA", "L", "F", "sA", "rG", "B", "sG", "TIE", "DP",
                                               "OPT", "I", "W", "FLUSH"};
  return k >= 0 && k < ACT_KINDS ? codes[k] : "?";
}

const char *schedule_action_text(const pt_action *a, char *buf, size_t size) {
  if (a->mb < 0) snprintf(buf, size, "%s", schedule_action_code(a->kind));
  else snprintf(buf, size, "%d%s%d", a->chunk, schedule_action_code(a->kind), a->mb);
  return buf;
}

static int has_split(const pt_schedule *s) {
  for (int c = 0; c < s->n_chunks; c++)
    if (s->n_w_pending[c] > 0) return 1;
  return 0;
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* "(4 slots)", "(4 slots, 2 W pending)" for one chunk per rank; "(chunk 0: 8 slots, 1 W
 * pending; chunk 7: 2 slots)" otherwise. */
static void print_rank_head(FILE *f, const pt_schedule *s, int r, int chunked, int split) {
  if (!chunked) fprintf(f, "stage %d (", r);
  else fprintf(f, "rank %d (", r);
  for (int c = 0, n = 0; c < s->n_chunks; c++) {
    if (s->chunk_rank[c] != r) continue;
    if (chunked) fprintf(f, "%schunk %d: ", n++ ? "; " : "", c);
    fprintf(f, "%d slot%s", s->n_slots[c], plural(s->n_slots[c]));
    if (split) fprintf(f, ", %d W pending", s->n_w_pending[c]);
  }
  fputs("):", f);
}

void schedule_print(FILE *f, const pt_schedule *s) {
  int chunked = s->n_chunks != s->n_ranks, split = has_split(s);
  const char *legend = "rA/sA: receive/send activation, rG/sG: gradient, L: load, F: forward, "
                       "B: backward";
  if (!chunked)
    fprintf(f, "schedule %s: %d stages, %d micro-batches (%s%s)\n", s->name, s->n_ranks,
            s->n_micro, legend, split ? ", I/W: backward input/weight" : "");
  else
    fprintf(f, "schedule %s: %d ranks, %d chunks (%s placement), %d micro-batches (%s%s; the "
            "chunk leads each action)\n", s->name, s->n_ranks, s->n_chunks,
            s->placement == PT_PLACE_V ? "v" : "loop", s->n_micro, legend,
            split ? ", I/W: backward input/weight" : "");
  for (int r = 0; r < s->n_ranks; r++) {
    print_rank_head(f, s, r, chunked, split);
    for (int i = 0; i < s->n_acts[r]; i++) {
      const pt_action *a = &s->acts[r][i];
      char text[48];
      if (chunked || a->mb < 0) fprintf(f, " %s", schedule_action_text(a, text, sizeof text));
      else fprintf(f, " %s%d", schedule_action_code(a->kind), a->mb);
    }
    fputc('\n', f);
  }
}
