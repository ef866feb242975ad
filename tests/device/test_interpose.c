/* device_interpose_kernels (device/device.h) with the timing table (kernels/kernels_timed.h):
 * the device computes through the interposed table from device_select and device_set_precision
 * on (the precision's table inside it), a training run through it gives the same losses bit for
 * bit as one without, every kernel category of a GPT step is tallied, and removing the hook
 * gives the kinds' own tables back. */
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "engine/train.h"
#include "kernels/kernels_timed.h"
#include "test_util.h"

static pt_kernels_timed g_timed;

static const pt_kernels *wrap(const pt_kernels *table, void *arg) {
  return kernels_timed_wrap(arg, table);
}

/* Three steps' losses of the gates' model on the cpu with `precision`; the device's table is
 * left in *k. */
static void train(const char *precision, double loss[3], const pt_kernels **k) {
  const char *over[] = {precision, "pipeline.device=cpu", "train.micro_batches=2"};
  pt_spec s;
  spec_errors e = {0};
  if (spec_load("tests/pipeline/gate.yaml", over, 3, &s, &e) != 0) pt_fatal("spec: %s", e.msg);
  pt_trainer t;
  char err[1024];
  if (trainer_init(&t, &s, err, sizeof err) != 0) pt_fatal("trainer: %s", err);
  for (int i = 0; i < 3; i++) {
    pt_step_metrics m;
    trainer_step(&t, &m);
    loss[i] = m.loss;
  }
  *k = device_current()->k;
  trainer_free(&t);
  spec_free(&s);
}

int main(void) {
  double plain[3], timed[3];
  const pt_kernels *k;
  train("train.precision=fp32", plain, &k);
  CHECK(k == &kernels_cpu, "no hook: the cpu table itself");

  device_interpose_kernels(wrap, &g_timed);
  train("train.precision=fp32", timed, &k);
  CHECK(k == &g_timed.table && g_timed.inner == &kernels_cpu, "the timing table wraps kernels_cpu");
  CHECK(!memcmp(plain, timed, sizeof plain), "losses through the timing table: %.17g vs %.17g",
        timed[2], plain[2]);
  pt_kernel_tally cat[PT_KCAT_COUNT];
  kernels_timed_by_category(&g_timed, cat);
  for (int c = 0; c < PT_KCAT_COUNT; c++)
    CHECK(cat[c].calls > 0 && cat[c].work > 0, "%s: %lld calls, work %g",
          kernels_timed_category_name((pt_kernel_category)c), (long long)cat[c].calls,
          cat[c].work);

  train("train.precision=bf16", timed, &k);
  CHECK(k == &g_timed.table && g_timed.inner == kernels_cpu_for(PT_PRECISION_BF16) &&
            k->precision == PT_PRECISION_BF16 && k->round_bf16,
        "set_precision: the bf16 table inside the timing table");

  device_interpose_kernels(NULL, NULL);
  train("train.precision=fp32", timed, &k);
  CHECK(k == &kernels_cpu && !memcmp(plain, timed, sizeof plain), "hook removed");
  return test_summary("interpose");
}
