/* pipeline.offload in the planner (partition/auto.h, partition/auto_copies.c):
 *   - the copies cost time in the simulation: on the emulated device (copies on the rank) a
 *     slow copy rate lengthens the step by at least stage 0's copies beyond its compute; on a GPU
 *     (a copy stream) fast copies hide behind the compute (the step of no offload) and slow
 *     ones do not. Fails if the simulation ignores the copy time.
 *   - with stage 0 capped at a third of 1F1B's stage-0 memory and schedule, split, checkpointing
 *     and offload left to `auto`, the pick fits every cap, its plan (pinned, built again as a
 *     run would) has the memory the search counted, and its step is within 5% of 1F1B's.
 *     With the schedule and split fixed, offload alone is chosen and pinned as searched.
 *   - pipeline.shard_optimizer: auto with two replicas: sharded chosen and pinned.
 * The model is the gate's GPT (tests/pipeline/gate.yaml, 4 stages, 16 micro-batches); layer
 * times are FLOP counts at 10 GFLOP/s and the copy rate is set by the test, so the answers do
 * not depend on this machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "partition/auto.h"
#include "partition/plan.h"
#include "profile/layer_times.h"
#include "test_util.h"

typedef struct {
  pt_spec spec;
  pt_model model;
} loaded;

static void unload(loaded *L) {
  model_free(&L->model);
  spec_free(&L->spec);
}

/* The gate's GPT (tests/pipeline/gate.yaml) on 4 stages, 16 micro-batches, with more. */
static int load_gate(loaded *L, const char *const *more, int n_more) {
  const char *over[24] = {"pipeline.stages=4", "train.micro_batches=16", "comm.backend=mpi"};
  for (int i = 0; i < n_more && i < 21; i++) over[3 + i] = more[i];
  spec_errors e = {0};
  memset(L, 0, sizeof *L);
  int rc = spec_load("tests/pipeline/gate.yaml", over, 3 + n_more, &L->spec, &e);
  if (rc == 0) rc = model_configure(&L->model, &L->spec, &e);
  CHECK(rc == 0, "gate.yaml did not load: %s", e.msg);
  return rc;
}

/* The step of the gate's plan under `more`, FLOP-count times at 10 GFLOP/s, copies at rate. */
static double predict(const char *const *more, int n, double rate) {
  loaded L;
  if (load_gate(&L, more, n) != 0) return -1;
  pt_layer_times t;
  profile_times_from_flops(&t, &L.model, 10.0);
  t.copy_bytes_per_s = rate;
  double step = -1, bubble = 0;
  spec_errors e = {0};
  CHECK(auto_predict(&L.model, &t, &step, &bubble, &e) == 0, "%s", e.msg);
  profile_times_free(&t);
  unload(&L);
  return step;
}

/* Stage 0's offloaded bytes per micro-batch and its compute per step, of layers [0, 3). */
static void stage0(const char *const *more, int n, int64_t *bytes, double *compute) {
  loaded L;
  *bytes = 0, *compute = 0;
  if (load_gate(&L, more, n) != 0) return;
  pt_layer_times t;
  profile_times_from_flops(&t, &L.model, 10.0);
  for (int k = 0; k < OFFLOAD_KINDS; k++) *bytes += memory_offload_bytes(&L.model, 0, 3, k);
  for (int l = 0; l < 3; l++) *compute += 16 * (t.f[l] + t.i[l] + t.w[l]);
  profile_times_free(&t);
  unload(&L);
}

/* 1F1B with a fixed split, everything offloaded: on the emulated device slow copies lengthen the
 * step by at least stage 0's beyond its compute; on a GPU fast ones hide, slow ones do not. */
static void test_copy_time(void) {
  const char *emu[] = {"pipeline.device=emulated", "pipeline.schedule=1f1b",
                       "pipeline.boundaries=[0, 3, 5, 7]", "pipeline.offload=1.0"};
  double base = predict(emu, 3, 1e9), fast = predict(emu, 4, 1e30);
  double slow_rate = 2e7, slow = predict(emu, 4, slow_rate), compute;
  int64_t bytes;
  stage0(emu, 4, &bytes, &compute);
  CHECK(bytes > 0, "stage 0 offloads nothing");
  CHECK(fabs(fast - base) < 1e-9 * base, "free copies change the step: %g vs %g", fast, base);
  /* at least 8 of its 16 micro-batches go out and come back (those a backward follows at once
   * stay) */
  double floor = compute + 2.0 * (double)bytes * 8 / slow_rate;
  CHECK(floor > 1.5 * base, "the copies are too fast to tell: %g s against a step of %g s", floor,
        base);
  CHECK(slow >= floor * (1 - 1e-9), "emulated: the step %g s ignores the copies (at least %g s)",
        slow, floor);
  const char *gpu[] = {"pipeline.device=gpu", "pipeline.schedule=1f1b",
                       "pipeline.boundaries=[0, 3, 5, 7]", "pipeline.offload=1.0"};
  double g_base = predict(gpu, 3, 1e9), g_fast = predict(gpu, 4, 1e12);
  double g_slow = predict(gpu, 4, slow_rate);
  CHECK(fabs(g_fast - g_base) < 1e-9 * g_base, "gpu: fast copies do not hide: %g vs %g", g_fast,
        g_base);
  CHECK(g_slow > g_base * 1.05, "gpu: slow copies cost nothing: %g vs %g", g_slow, g_base);
  CHECK(g_slow < slow, "gpu: the copy stream hides nothing: %g vs emulated %g", g_slow, slow);
}

/* Stage 0's bytes and the simulated step of the spec's plan; FLOP-count times at 10 GFLOP/s. */
static void plan_of(const char *const *more, int n, int64_t *b0, double *step) {
  loaded L;
  *b0 = -1, *step = -1;
  if (load_gate(&L, more, n) != 0) return;
  pt_plan p;
  spec_errors e = {0};
  if (plan_build(&p, &L.model, &e) == 0) *b0 = p.mem[0].total, plan_free(&p);
  pt_layer_times t;
  profile_times_from_flops(&t, &L.model, 10.0);
  t.copy_bytes_per_s = 8e9;
  double bubble;
  if (!e.failed) auto_predict(&L.model, &t, step, &bubble, &e);
  CHECK(!e.failed, "%s", e.msg);
  profile_times_free(&t);
  unload(&L);
}

/* Searches with stage 0 capped at `share` of 1F1B's stage 0 (the rest uncapped) and what else
 * `more` leaves to auto; the pick must fit, step within 5% of 1F1B's when `near`, and its
 * pinned plan have the bytes and step the search counted. Returns the pick's stage-0 share
 * offloaded. */
static double capped(const char *device, double share, const char *const *more, int n_more,
                     int near) {
  char dev[64], cap[96];
  snprintf(dev, sizeof dev, "pipeline.device=%s", device);
  const char *base[] = {dev, "pipeline.schedule=1f1b"};
  int64_t b0;
  double step0, offloaded = -1;
  plan_of(base, 2, &b0, &step0);
  snprintf(cap, sizeof cap, "pipeline.max_memory=[%lld, 1TiB, 1TiB, 1TiB]",
           (long long)(share * (double)b0));
  const char *over[16] = {dev, cap};
  for (int i = 0; i < n_more; i++) over[2 + i] = more[i];
  loaded L;
  if (load_gate(&L, over, 2 + n_more) != 0) return -1;
  pt_layer_times t;
  profile_times_from_flops(&t, &L.model, 10.0);
  t.copy_bytes_per_s = 8e9;
  pt_auto_result r;
  spec_errors e = {0};
  CHECK(auto_search(&L.model, &t, 0, &r, &e) == 0, "%s: nothing fits: %s", device, e.msg);
  if (e.failed) goto out;
  const pt_auto_candidate *c = &r.c[0];
  CHECK(c->fits && c->stage_bytes[0] <= (int64_t)(share * (double)b0), "%s: no fit", device);
  CHECK(!near || c->step_s <= 1.05 * step0, "%s: %s steps %g s, over 5%% beyond 1F1B's %g s",
        device, c->schedule->name, c->step_s, step0);
  offloaded = c->offload[0];
  char pins[8][AUTO_OVERRIDE_MAX];
  int n = auto_overrides(&r, &L.spec, pins, 8);
  const char *again[24] = {dev, cap};
  for (int i = 0; i < n_more; i++) again[2 + i] = more[i];
  for (int i = 0; i < n; i++) again[2 + n_more + i] = pins[i];
  loaded P;
  if (load_gate(&P, again, 2 + n_more + n) == 0) { /* pinned, as a run plans it */
    pt_plan p;
    spec_errors pe = {0};
    CHECK(plan_build(&p, &P.model, &pe) == 0, "%s: the pinned plan: %s", device, pe.msg);
    for (int s = 0; !pe.failed && s < p.n_stages; s++)
      CHECK(p.mem[s].total == c->stage_bytes[s], "%s: stage %d plans %lld bytes, the search %lld",
            device, s, (long long)p.mem[s].total, (long long)c->stage_bytes[s]);
    if (!pe.failed) plan_free(&p);
    double step = 0, bubble = 0;
    CHECK(auto_predict(&P.model, &t, &step, &bubble, &pe) == 0, "%s", pe.msg);
    CHECK(fabs(step - c->step_s) <= 1e-9 * step, "%s: pinned step %g, searched %g", device, step,
          c->step_s);
    unload(&P);
  }
  printf("%s, stage 0 at %.2f of 1f1b's %lld bytes (%.2f ms): %s v%d ckpt %d offload %g, "
         "stage 0 %lld bytes, %.2f ms\n", device, share, (long long)b0, 1e3 * step0,
         c->schedule->name, c->v, c->ckpt, c->offload[0], (long long)c->stage_bytes[0],
         1e3 * c->step_s);
out:
  auto_result_free(&r);
  profile_times_free(&t);
  unload(&L);
  return offloaded;
}

static void test_third_of_1f1b(void) {
  const char *all[] = {"pipeline.schedule=auto", "pipeline.partition=auto",
                       "train.activation_checkpoint_interval=auto", "pipeline.offload=auto"};
  capped("emulated", 1.0 / 3, all, 4, 1);
  capped("gpu", 1.0 / 3, all, 4, 1);
  /* the schedule and split fixed, offload alone searched: it is what fits */
  const char *fixed[] = {"pipeline.schedule=1f1b", "pipeline.boundaries=[0, 3, 5, 7]",
                         "pipeline.offload=auto"};
  CHECK(capped("emulated", 0.8, fixed, 3, 0) > 0, "offload was not chosen");
  CHECK(capped("gpu", 0.8, fixed, 3, 0) > 0, "offload was not chosen");
}

/* pipeline.shard_optimizer: auto with 2 replicas: both tried, sharded wins (less optimizer
 * state, half the update), and the pin says so. */
static void test_shard_searched(void) {
  const char *over[] = {"pipeline.data_parallel=2", "pipeline.shard_optimizer=auto",
                        "pipeline.schedule=1f1b", "pipeline.boundaries=[0, 3, 5, 7]"};
  loaded L;
  if (load_gate(&L, over, 4) != 0) return;
  pt_layer_times t;
  profile_times_from_flops(&t, &L.model, 10.0);
  pt_auto_result r;
  spec_errors e = {0};
  CHECK(auto_wanted(&L.spec), "shard_optimizer: auto leaves nothing to the planner");
  CHECK(auto_search(&L.model, &t, 0, &r, &e) == 0, "%s", e.msg);
  CHECK(!e.failed && r.shard_auto && r.n == 2 && r.c[0].shard && !r.c[1].shard,
        "sharding not searched, or not chosen");
  CHECK(!e.failed && r.c[0].stage_bytes[0] < r.c[1].stage_bytes[0], "sharding saves nothing");
  char pins[8][AUTO_OVERRIDE_MAX];
  int n = e.failed ? 0 : auto_overrides(&r, &L.spec, pins, 8);
  CHECK(n == 1 && !strcmp(pins[0], "pipeline.shard_optimizer=true"), "pin: %s", n ? pins[0] : "");
  auto_result_free(&r);
  profile_times_free(&t);
  unload(&L);
}

int main(void) {
  unsetenv("PIPETRAIN_COPY_BYTES_PER_S");
  test_copy_time();
  test_third_of_1f1b();
  test_shard_searched();
  return test_summary("test_auto_offload");
}
