/* Schedule generators against the validator, the registry against the spec and the docs, and
 * the validator against broken lists. Usage: test_schedule [docs/schedules.md]. */
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

/* The in-flight rule of the built-in schedules, written out: 1F1B min(P - s, M), GPipe M. */
static int expected_in_flight(const char *name, int P, int M, int st) {
  if (!strcmp(name, "gpipe")) return M;
  if (!strcmp(name, "1f1b")) return P - st < M ? P - st : M;
  return -1; /* a new schedule: its own entry is the rule */
}

static void check_stage(const pt_schedule *s, int st) {
  const char *name = s->type->name;
  int P = s->n_stages, M = s->n_micro, want = s->type->in_flight(st, P, M);
  int rule = expected_in_flight(name, P, M, st);
  CHECK(rule < 0 || rule == want, "%s P=%d M=%d stage %d: registry says %d in flight, want %d",
        name, P, M, st, want, rule);
  CHECK(peak_in_flight(s, st) == want && s->n_slots[st] == want,
        "%s P=%d M=%d stage %d: in flight %d, slots %d, want %d", name, P, M, st,
        peak_in_flight(s, st), s->n_slots[st], want);
  CHECK(count(s, st, ACT_FORWARD) == M && count(s, st, ACT_BACKWARD) == M &&
            count(s, st, ACT_OPTIMIZER) == 1,
        "%s P=%d M=%d stage %d counts", name, P, M, st);
  int last_b = -1, ordered = 1;
  for (int i = 0; i < s->n_acts[st]; i++)
    if (s->acts[st][i].kind == ACT_BACKWARD) ordered &= s->acts[st][i].mb == ++last_b;
  CHECK(ordered, "%s P=%d M=%d stage %d: backward not in ascending order", name, P, M, st);
}

/* Every registered schedule, on every small layout: valid under MPI's and NCCL's rules, within
 * its own in-flight count, every micro-batch once, backwards ascending. */
static void test_generators(void) {
  for (int k = 0; schedule_types[k]; k++) {
    const char *name = schedule_types[k]->name;
    CHECK(schedule_find(name) == schedule_types[k], "%s: not found by name", name);
    for (int P = 1; P <= 8; P++)
      for (int M = 1; M <= 12; M++) {
        pt_schedule s;
        char err[256] = "";
        CHECK(schedule_build(&s, name, P, M) == 0, "build %s", name);
        CHECK(s.type == schedule_types[k], "%s: built from another entry", name);
        CHECK(schedule_validate(&s, err, sizeof err) == 0, "%s P=%d M=%d: %s", name, P, M, err);
        CHECK(schedule_check_rendezvous(&s, err, sizeof err) == 0, "%s P=%d M=%d: %s", name, P,
              M, err);
        for (int st = 0; st < P; st++) check_stage(&s, st);
        schedule_free(&s);
      }
  }
  CHECK(schedule_find("1f1b") && schedule_find("gpipe"), "a built-in schedule is missing");
  pt_schedule s;
  CHECK(schedule_build(&s, "zigzag", 2, 2) == -1, "unknown schedule accepted");
}

/* pipeline.schedule against the registry: the spec's default and every registered name
 * resolve; an unknown name is an error at its value, spec-style. */
static const pt_schedule_type *resolve(const char *text, const char *set, spec_errors *e) {
  pt_spec spec;
  if (spec_load_text(text, strlen(text), "inline.yaml", &set, set ? 1 : 0, &spec, e) != 0)
    return NULL;
  const pt_schedule_type *t = schedule_from_spec(&spec.pipeline, e);
  spec_free(&spec);
  return t;
}

static void test_spec_names(void) {
  spec_errors e = {0, ""};
  CHECK(resolve("layers: [gelu]\n", NULL, &e) == schedule_find("1f1b"), "default: %s", e.msg);
  for (int k = 0; schedule_types[k]; k++) {
    char set[128];
    snprintf(set, sizeof set, "pipeline.schedule=%s", schedule_types[k]->name);
    spec_errors ek = {0, ""};
    CHECK(resolve("layers: [gelu]\n", set, &ek) == schedule_types[k], "%s: %s", set, ek.msg);
  }
  static const struct {
    const char *text, *set, *msg;
  } bad[] = {
      {"layers: [gelu]\npipeline: {schedule: zigzag}\n", NULL,
       "inline.yaml:2:22: error: pipeline.schedule: expected one of 1f1b, gpipe, got 'zigzag'"},
      {"layers: [gelu]\n", "pipeline.schedule=1F1B",
       "--set pipeline.schedule=1F1B: error: pipeline.schedule: expected one of 1f1b, gpipe, "
       "got '1F1B'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    spec_errors eb = {0, ""};
    CHECK(resolve(bad[i].text, bad[i].set, &eb) == NULL && eb.failed, "case %zu accepted", i);
    CHECK(strncmp(eb.msg, bad[i].msg, strlen(bad[i].msg)) == 0, "got '%s', want '%s'", eb.msg,
          bad[i].msg);
  }
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

/* docs/schedules.md's table of schedules, under "## Registered schedules", has exactly one
 * row per registry entry: "| `NAME` | IN_FLIGHT_DOC | DOC |". */
static void test_docs(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "cannot open %s", path);
  if (!f) return;
  char line[1024];
  int in_table = 0, seen[64] = {0};
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (!strncmp(line, "## ", 3)) in_table = !strcmp(line, "## Registered schedules");
    if (!in_table || strncmp(line, "| `", 3) != 0) continue;
    int known = 0;
    for (int k = 0; schedule_types[k] && k < 64; k++) {
      const pt_schedule_type *t = schedule_types[k];
      char want[1024];
      snprintf(want, sizeof want, "| `%s` | %s | %s |", t->name, t->in_flight_doc, t->doc);
      if (!strcmp(line, want)) known = 1, seen[k]++;
    }
    CHECK(known, "%s: row '%s' is no registered schedule's (name, in flight and doc as in "
          "schedule/*.c)", path, line);
  }
  fclose(f);
  for (int k = 0; schedule_types[k] && k < 64; k++)
    CHECK(seen[k] == 1, "%s: %d rows for schedule %s under '## Registered schedules', want 1",
          path, seen[k], schedule_types[k]->name);
}

/* With an argument: only the check of docs/schedules.md (that path) against the registry. */
int main(int argc, char **argv) {
  if (argc > 1) {
    test_docs(argv[1]);
    return test_summary("schedule docs");
  }
  test_generators();
  test_spec_names();
  expect_invalid(drop_send, "deadlock");
  expect_invalid(swap_backward, "before its forward");
  expect_invalid(late_send, "deadlock");
  expect_invalid(small_slots, "slot");
  expect_rendezvous_stuck(drop_send);
  expect_rendezvous_stuck(late_send);
  return test_summary("schedule");
}
