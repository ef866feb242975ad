/* Schedule generators against the validator, and the validator against broken lists. */
#include <string.h>

#include "schedule/schedule.h"
#include "test_util.h"

static int count(const pt_schedule *s, int st, pt_action_kind k) {
  int n = 0;
  for (int i = 0; i < s->n_acts[st]; i++) n += s->acts[st][i].kind == k;
  return n;
}

/* Largest number of micro-batches between their FORWARD and BACKWARD at once on a stage. */
static int peak_in_flight(const pt_schedule *s, int st) {
  int cur = 0, peak = 0;
  for (int i = 0; i < s->n_acts[st]; i++) {
    if (s->acts[st][i].kind == ACT_FORWARD) cur++;
    if (s->acts[st][i].kind == ACT_BACKWARD) cur--;
    if (cur > peak) peak = cur;
  }
  return peak;
}

static void test_generators(void) {
  const char *names[2] = {"1f1b", "gpipe"};
  for (int k = 0; k < 2; k++)
    for (int P = 1; P <= 8; P++)
      for (int M = 1; M <= 12; M++) {
        pt_schedule s;
        char err[256] = "";
        CHECK(schedule_build(&s, names[k], P, M) == 0, "build %s", names[k]);
        CHECK(schedule_validate(&s, err, sizeof err) == 0, "%s P=%d M=%d: %s", names[k], P, M, err);
        CHECK(schedule_check_rendezvous(&s, err, sizeof err) == 0, "%s P=%d M=%d: %s", names[k],
              P, M, err);
        for (int st = 0; st < P; st++) {
          int want = k == 0 ? (P - st < M ? P - st : M) : M;
          CHECK(peak_in_flight(&s, st) == want && s.n_slots[st] == want,
                "%s P=%d M=%d stage %d: in flight %d, slots %d, want %d", names[k], P, M, st,
                peak_in_flight(&s, st), s.n_slots[st], want);
          CHECK(count(&s, st, ACT_FORWARD) == M && count(&s, st, ACT_BACKWARD) == M &&
                count(&s, st, ACT_OPTIMIZER) == 1, "%s P=%d M=%d stage %d counts", names[k], P, M,
                st);
          int last_b = -1, ordered = 1;
          for (int i = 0; i < s.n_acts[st]; i++)
            if (s.acts[st][i].kind == ACT_BACKWARD) ordered &= s.acts[st][i].mb == ++last_b;
          CHECK(ordered, "%s P=%d M=%d stage %d: backward not in ascending order", names[k], P, M, st);
        }
        schedule_free(&s);
      }
  pt_schedule s;
  CHECK(schedule_build(&s, "zigzag", 2, 2) == -1, "unknown schedule accepted");
}

/* Mutations the validator must reject, each with its reason. */
static void expect_invalid(void (*mutate)(pt_schedule *), const char *needle) {
  pt_schedule s;
  char err[256] = "";
  schedule_build(&s, "1f1b", 4, 6);
  mutate(&s);
  CHECK(schedule_validate(&s, err, sizeof err) != 0 && strstr(err, needle),
        "mutation not caught as '%s' (got '%s')", needle, err);
  schedule_free(&s);
}

static void drop_send(pt_schedule *s) { /* stage 1 never sends mb 2 */
  for (int i = 0; i < s->n_acts[1]; i++)
    if (s->acts[1][i].kind == ACT_SEND_ACT && s->acts[1][i].mb == 2) s->acts[1][i].kind = ACT_LOAD;
}

static void swap_backward(pt_schedule *s) { /* stage 3 runs backward before forward for mb 0 */
  for (int i = 0; i < s->n_acts[3]; i++)
    if (s->acts[3][i].kind == ACT_FORWARD && s->acts[3][i].mb == 0) {
      for (int j = i + 1; j < s->n_acts[3]; j++)
        if (s->acts[3][j].kind == ACT_BACKWARD && s->acts[3][j].mb == 0) {
          s->acts[3][i].kind = ACT_BACKWARD;
          s->acts[3][j].kind = ACT_FORWARD;
          return;
        }
    }
}

static void late_send(pt_schedule *s) { /* stage 1 sends gradient 0 only after the reductions */
  pt_action *a = s->acts[1];
  int n = s->n_acts[1];
  for (int i = 0; i < n; i++)
    if (a[i].kind == ACT_SEND_GRAD && a[i].mb == 0) {
      pt_action t = a[i];
      memmove(a + i, a + i + 1, sizeof *a * (size_t)(n - i - 1));
      a[n - 1] = t;
      return;
    }
}

static void small_slots(pt_schedule *s) { s->n_slots[0] = 2; /* 1F1B stage 0 needs 4 */ }

/* The NCCL check must catch what cannot finish, under its rules as under MPI's. */
static void expect_rendezvous_stuck(void (*mutate)(pt_schedule *)) {
  pt_schedule s;
  char err[512] = "";
  schedule_build(&s, "1f1b", 4, 6);
  mutate(&s);
  CHECK(schedule_check_rendezvous(&s, err, sizeof err) != 0 && strstr(err, "deadlock"),
        "rendezvous check did not catch the mutation (got '%s')", err);
  schedule_free(&s);
}

int main(void) {
  test_generators();
  expect_invalid(drop_send, "deadlock");
  expect_invalid(swap_backward, "before its forward");
  expect_invalid(late_send, "deadlock");
  expect_invalid(small_slots, "slot");
  expect_rendezvous_stuck(drop_send);
  expect_rendezvous_stuck(late_send);
  return test_summary("schedule");
}
