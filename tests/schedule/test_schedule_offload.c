/* Activation offload's frames and host buffers from action lists (schedule/schedule_offload.h):
 * the counts for 1F1B's stage 0 worked out by hand, and for every schedule and fraction a walk
 * of the rules that never needs more than it said (what the engine relies on). */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule_offload.h"
#include "tests/test_util.h"

/* Whether every micro-batch of the chunk was offloaded where the sim says, and the counts are
 * within the slots + 1 (a prefetch beside the slots' frames). */
static void check_counts(const pt_schedule *s, int c, double f, const char *name) {
  pt_offload_sim o;
  schedule_offload_sim(s, c, f, &o);
  int n = 0;
  for (int mb = 0; mb < s->n_micro; mb++) n += o.offloaded[mb];
  CHECK(n <= (int)(f * s->n_micro + 0.999999), "%s chunk %d f %.2f: %d offloaded", name, c, f, n);
  if (c == 0 && s->n_ranks > 1 && f == 1.0) /* chunk 0's backward never follows its forward */
    CHECK(n == s->n_micro, "%s chunk 0: %d of %d offloaded", name, n, s->n_micro);
  CHECK(o.frames >= 1 && o.frames <= s->n_slots[c] + 1, "%s chunk %d f %.2f: %d frames for %d "
        "slots", name, c, f, o.frames, s->n_slots[c]);
  CHECK(o.hosts <= s->n_slots[c], "%s chunk %d: %d host buffers", name, c, o.hosts);
  if (f == 0) CHECK(o.frames == s->n_slots[c] && o.hosts == 0, "%s: nothing offloaded", name);
  schedule_offload_free(&o);
}

static void frames_of(const char *name, int P, int M, int c, double f, int *frames, int *hosts) {
  pt_schedule s;
  if (schedule_build(&s, name, P, M) != 0) {
    CHECK(0, "%s P=%d M=%d does not build", name, P, M);
    return;
  }
  pt_offload_sim o;
  schedule_offload_sim(&s, c, f, &o);
  *frames = o.frames, *hosts = o.hosts;
  schedule_offload_free(&o);
  schedule_free(&s);
}

int main(void) {
  /* 1F1B, stage 0 holds P: all out needs a frame for the forward and one for the prefetch;
   * half out, the half kept (about P / 2) and those two: nothing saved at P = 4, 2 of 8 at 8. */
  int fr = 0, ho = 0;
  frames_of("1f1b", 4, 16, 0, 1.0, &fr, &ho);
  CHECK(fr == 2 && ho == 4, "1f1b stage 0 all out: %d frames, %d host buffers", fr, ho);
  frames_of("1f1b", 4, 16, 0, 0.5, &fr, &ho);
  CHECK(fr == 4 && ho == 3, "1f1b P=4 stage 0 half out: %d frames, %d host buffers", fr, ho);
  frames_of("1f1b", 8, 16, 0, 0.5, &fr, &ho);
  CHECK(fr == 6, "1f1b P=8 stage 0 half out: %d frames", fr);
  frames_of("gpipe", 4, 8, 0, 1.0, &fr, &ho); /* every forward, then every backward */
  CHECK(fr == 2 && ho == 8, "gpipe stage 0 all out: %d frames, %d host buffers", fr, ho);
  frames_of("1f1b", 4, 16, 3, 1.0, &fr, &ho); /* the last stage: B right after F, kept */
  CHECK(fr == 1 && ho == 0, "1f1b last stage: %d frames, %d host buffers", fr, ho);
  const char *names[] = {"1f1b", "gpipe", "zb_h1", "zb_h2", "interleaved_1f1b", "zbv",
                         "dualpipev", NULL};
  double fs[] = {0, 0.25, 0.5, 1.0};
  for (int i = 0; names[i]; i++)
    for (int P = 2; P <= 4; P += 2) {
      pt_schedule s;
      if (schedule_build(&s, names[i], P, 8) != 0) continue;
      for (int c = 0; c < s.n_chunks; c++)
        for (int j = 0; j < 4; j++) check_counts(&s, c, fs[j], names[i]);
      schedule_free(&s);
    }
  return test_summary("schedule_offload");
}
