#include "engine/part.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "core/clock.h"
#include "core/error.h"
#include "kernels/loss.h"
#include "partition/memory.h"

_Static_assert(DATA_TARGET_IGNORE == LOSS_IGNORE, "the data's ignored target is the loss's");

int part_configure(pt_part *p, const pt_spec *spec, char *err, size_t errsz) {
  memset(p, 0, sizeof *p);
  p->spec = spec;
  data_init(&p->data, spec); /* the geometry; data_open maps the file where it is read */
  spec_errors e = {0};
  if (model_configure(&p->model, spec, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  p->B = (int)spec->train.micro_batch_size;
  p->T = p->model.input_tokens ? (int)spec->seq_len : 1;
  p->cur_T = p->T;
  p->G = spec->pipeline.data_parallel * spec->train.micro_batches * p->B;
  int tcols = p->model.input_tokens ? 1 : spec->data.targets;
  p->target_bytes = sizeof(float) * (size_t)p->B * p->T * tcols;
  p->loss_scale = (float)(1.0 / ((double)p->G * p->T)); /* part_begin_step sets each step's */
  return 0;
}

spec_device part_resolve_device(const pt_part *p) {
  return device_resolve(p->spec->pipeline.device);
}

/* A GPU's bytes in use by every process (total - free), 0 for devices without their own. */
static int64_t gpu_used_bytes(const pt_device *d) {
  size_t total = device_memory_bytes(d);
  return total > 0 ? (int64_t)total - (int64_t)device_memory_free(d) : 0;
}

int part_open_device(pt_part *p, spec_device kind, int gpu, const pt_range *ranges, int n,
                     char *err, size_t errsz) {
  if (device_select(kind, gpu, err, errsz) != 0) return -1;
  p->gpu_used_open = gpu_used_bytes(device_current());
  device_set_precision(device_current(), p->spec->train.precision);
  for (int i = 0; i < n; i++)
    if (device_check_layers(device_current(), p->model.layers, ranges[i].first, ranges[i].last,
                            err, errsz) != 0)
      return -1;
  return 0;
}

int part_check_memory(const pt_part *p, int64_t need, int sharers, const char *what, char *err,
                      size_t errsz) {
  const pt_device *d = device_current();
  int64_t gpu_bytes = (int64_t)device_memory_bytes(d);
  return gpu_bytes > 0 ? memory_check_device(need, (int64_t)device_memory_free(d), gpu_bytes,
                                             sharers, what, err, errsz)
                       : memory_check_fits(need, sharers, what, err, errsz);
}

/* Slots for every tensor's sum of squares and every micro-batch a step computes the loss of
 * here (at most all replicas' when one process runs them all), a mark per executor. */
static void alloc_stats(pt_part *p, int n_executors) {
  const spec_train *c = &p->spec->train;
  p->n_loss_slots = (int)(p->spec->pipeline.data_parallel * c->micro_batches);
  device_stats_init(&p->stats, device_current(), p->model.n_tensors + p->n_loss_slots,
                    n_executors);
}

void part_alloc_ranges(pt_part *p, const pt_range *ranges, int n, int shard, int shards) {
  model_alloc_ranges(&p->model, ranges, n, device_current());
  optimizer_init_shard(&p->opt, &p->spec->train, p->model.n_floats, shard, shards);
  alloc_stats(p, n);
}

void part_stage_init(pt_part *p, pt_stage *st, int first, int last, int slots) {
  part_stage_init_offload(p, st, first, last, slots, NULL);
}

void part_stage_init_offload(pt_part *p, pt_stage *st, int first, int last, int slots,
                             const struct stage_offload_plan *offload) {
  const spec_train *c = &p->spec->train;
  stage_init_offload(st, &p->model, first, last, p->B, p->T, slots,
                     (int)c->activation_checkpoint_interval, offload);
  st->check_finite = c->on_nonfinite == SPEC_NONFINITE_ABORT;
  st->finite_mark = device_stats_mark(&p->stats, p->n_marks++);
  part_enable_docs(p, st);
}

void part_alloc(pt_part *p, int first, int last, int slots) {
  pt_range r = {first, last};
  model_alloc_ranges(&p->model, &r, 1, device_current());
  alloc_stats(p, 1);
  part_stage_init(p, &p->stage, first, last, slots);
  optimizer_init(&p->opt, &p->spec->train, p->model.n_floats);
}

void part_free(pt_part *p) {
  device_stats_free(&p->stats);
  stage_free(&p->stage);
  optimizer_free(&p->opt);
  model_free(&p->model);
  data_close(&p->data);
  free(p->doc_host);
  data_close(&p->eval_data);
  memset(p, 0, sizeof *p);
}

void part_fill(pt_part *p, int64_t replica, int64_t mb, void *inputs, void *targets) {
  data_micro_batch(&p->data, p->step, replica, mb, p->cur_T, inputs, targets);
}

static float loss_scale(const pt_part *p) { return p->loss_scale; }

/* Every rank (and the sequential run) divides by the same count (data_step_targets). */
static float step_loss_scale(const pt_part *p) {
  int64_t real = data_step_targets(&p->data, p->step, p->cur_T);
  if (real == 0)
    pt_fail_input("%s: step %lld's global batch of packed documents has no target to predict "
                  "(only padding and document ends); use longer documents or a larger batch",
                  p->spec->data.path, (long long)p->step + 1);
  return (float)(1.0 / (double)real);
}

void part_begin_step(pt_part *p) {
  device_stats_reset(&p->stats);
  p->cur_T = p->model.input_tokens ? (int)spec_seq_len_at(p->spec, p->step) : 1;
  p->n_losses = 0;
  p->loss_scale = step_loss_scale(p);
}

void part_enable_docs(pt_part *p, pt_stage *st) {
  if (!p->spec->data.documents || !p->model.input_tokens) return;
  if (!p->doc_host) p->doc_host = pt_calloc(2 * (size_t)p->B * p->T, sizeof(int32_t));
  stage_enable_docs(st);
}

void part_set_docs(pt_part *p, pt_stage *st, int slot, int64_t replica, int64_t mb) {
  if (!st->docs) return;
  int64_t n = (int64_t)p->B * p->T;
  data_micro_batch_docs(&p->data, p->step, replica, mb, p->doc_host, p->doc_host + n);
  stage_set_docs(st, slot, p->doc_host, p->doc_host + n, p->B, p->T);
}

float *part_compute_loss(pt_part *p, pt_stage *st, int slot, const void *targets) {
  int F = p->model.layers[p->model.n_layers - 1].out_dim;
  if (p->n_losses >= p->n_loss_slots)
    pt_fatal("a step computed more than %d losses on one process", p->n_loss_slots);
  double *sum = device_stats_double(&p->stats, p->model.n_tensors + p->n_losses++);
  size_t bytes = p->target_bytes / (size_t)p->T * (size_t)p->cur_T; /* [B, cur_T] of them */
  float *y = stage_loss_gradient(st, slot); /* the gradient goes over the logits */
  uint16_t *y16 = stage_loss_gradient_bf16(st, slot); /* or as bf16 only, at rest */
  int32_t check = stage_loss_check(st, slot);
  device_loss_acc(p->model.dev, p->model.loss, y, targets, bytes, p->B * p->cur_T, F,
                  loss_scale(p), y, y16, sum, check ? st->finite_mark : NULL, check);
  return y;
}

double part_losses(pt_part *p, int from, int to) {
  device_stats_read(&p->stats);
  double loss = 0.0, scale = loss_scale(p);
  for (int i = from; i < to; i++)
    loss += device_stats_double_value(&p->stats, p->model.n_tensors + i) * scale;
  return loss;
}

void part_read_step(pt_part *p, pt_stage *const *stages, int n_stages, double *out) {
  grad_tensor_sumsq_into(&p->model, device_stats_double(&p->stats, 0));
  device_stats_read(&p->stats);
  for (int i = 0; i < p->model.n_tensors; i++) out[i] = device_stats_double_value(&p->stats, i);
  const int32_t *marks = (const int32_t *)((const double *)p->stats.dev + p->stats.n_doubles);
  for (int i = 0; i < n_stages; i++) /* the executor's mark is its own slot of the buffer */
    stage_take_mark(stages[i], device_stats_mark_value(&p->stats,
                                                       (int)(stages[i]->finite_mark - marks)));
}

int part_update(pt_part *p, double norm, double lr) {
  const spec_train *c = &p->spec->train;
  if (!isfinite(norm)) { /* nothing of this step reaches the weights or the optimizer state */
    int status = c->on_nonfinite == SPEC_NONFINITE_SKIP ? 1 : -1;
    p->skipped += status > 0;
    return status;
  }
  optimizer_step(&p->opt, &p->model, lr, grad_clip_factor(norm, c->grad_clip));
  return 0;
}

double part_end_step(pt_part *p, double t0, double loss, double lr, double norm,
                     pt_step_metrics *out) {
  p->step++;
  double dt = pt_now_s() - t0;
  *out = (pt_step_metrics){.step = p->step, .steps = p->spec->train.steps, .loss = loss,
                           .lr = lr, .grad_norm = norm, .tokens_per_s = (double)(p->G * p->cur_T) / dt,
                           .step_ms = dt * 1e3, .mfu = -1.0, .skipped_steps = p->skipped,
                           .seq_len = p->spec->train.seq_start > 0 ? p->cur_T : 0};
  int64_t grown = gpu_used_bytes(device_current()) - p->gpu_used_open;
  if (grown > p->gpu_grown) p->gpu_grown = grown;
  return dt;
}

int part_load(pt_part *p, const char *path, char *err, size_t errsz) {
  pt_checkpoint c;
  if (checkpoint_open(&c, path, err, errsz) != 0) return -1;
  pt_optimizer whole; /* a shard reads the whole state, then keeps its range */
  int sharded = p->opt.shards > 1;
  if (sharded) optimizer_init_whole(&whole, &p->opt);
  int rc = checkpoint_load(&c, &p->model, sharded ? &whole : &p->opt, err, errsz);
  if (rc == 0 && sharded) optimizer_shard_take(&p->opt, &whole);
  if (sharded) optimizer_free(&whole);
  if (rc == 0) p->step = c.step, model_to_device(&p->model), optimizer_to_device(&p->opt);
  checkpoint_close(&c);
  return rc;
}
