#include "engine/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "partition/memory.h"

/* Refuses, with the numbers, a model this machine cannot hold, before allocating any of it. */
static int check_fits(pt_trainer *t, char *err, size_t errsz) {
  pt_part *p = &t->part;
  pt_stage_memory mem;
  memory_estimate_stage(&p->model, 0, p->model.n_layers, 1, &mem);
  char what[4200];
  snprintf(what, sizeof what, "%s: the model", p->spec->path);
  return part_check_memory(p, mem.total, 1, what, err, errsz);
}

int trainer_init(pt_trainer *t, const pt_spec *spec, char *err, size_t errsz) {
  memset(t, 0, sizeof *t);
  pt_part *p = &t->part;
  if (part_configure(p, spec, err, errsz) != 0) return -1;
  int n = p->model.n_layers;
  pt_range all = {0, n};
  if (part_open_device(p, part_resolve_device(p), 0, &all, 1, err, errsz) != 0 ||
      check_fits(t, err, errsz) != 0 || data_open(&p->data, spec, err, errsz) != 0 ||
      data_open_eval(&p->eval_data, spec, err, errsz) != 0) {
    part_free(p);
    return -1;
  }
  part_alloc(p, 0, n, 1);
  pt_model *m = &p->model;
  if (spec->pipeline.data_parallel > 1)
    t->grad_total = device_alloc(m->dev, sizeof(float) * (size_t)m->n_floats);
  t->targets = pt_calloc(p->target_bytes, 1);
  return 0;
}

void trainer_free(pt_trainer *t) {
  if (t->part.model.dev)
    device_free(t->part.model.dev, t->grad_total);
  part_free(&t->part);
  free(t->targets);
  memset(t, 0, sizeof *t);
}

/* One replica's micro-batches: gradients accumulate into the model's buffers, tied copies
 * are folded into their owners; returns the replica's loss (micro-batches summed in order). */
static void accumulate_replica(pt_trainer *t, int64_t replica) {
  pt_part *p = &t->part;
  model_zero_grads(&p->model);
  for (int64_t mb = 0; mb < p->spec->train.micro_batches; mb++) {
    part_fill(p, replica, mb, stage_input_host(&p->stage, 0), t->targets);
    stage_input_commit(&p->stage, 0);
    part_set_docs(p, &p->stage, 0, replica, mb);
    stage_forward(&p->stage, 0, p->B, p->cur_T);
    float *dy = part_compute_loss(p, &p->stage, 0, t->targets); /* over the logits */
    stage_backward(&p->stage, 0, dy, 0, NULL);
  }
  model_tie_reduce_local(&p->model);
}

/* The whole global batch. Replicas are reduced exactly as the pipeline reduces them: each
 * replica's gradient separately, then summed in replica order ((g0 + g1) + g2) ... */
static void accumulate_step(pt_trainer *t) {
  pt_model *m = &t->part.model;
  int64_t dp = t->part.spec->pipeline.data_parallel;
  size_t bytes = sizeof(float) * (size_t)m->n_floats;
  for (int64_t r = 0; r < dp; r++) {
    accumulate_replica(t, r);
    if (dp == 1) break;
    if (r == 0) device_copy(m->dev, t->grad_total, m->grads, bytes);
    else device_add(m->dev, t->grad_total, m->grads, m->n_floats);
  }
  if (dp > 1) device_copy(m->dev, m->grads, t->grad_total, bytes);
}

/* The step's loss: each replica's micro-batches summed in order, then the replicas in order
 * (the sums the pipeline makes). Its norm: the per-tensor sums added in tensor order
 * (grad_sumsq's). One wait for the device, here, for both and the finiteness marks. */
static double step_numbers(pt_trainer *t, double *norm) {
  pt_part *p = &t->part;
  int64_t dp = p->spec->pipeline.data_parallel, M = p->spec->train.micro_batches;
  double *per = pt_calloc((size_t)p->model.n_tensors + 1, sizeof(double)), s = 0.0, loss = 0.0;
  pt_stage *stage = &p->stage;
  part_read_step(p, &stage, 1, per);
  for (int i = 0; i < p->model.n_tensors; i++) s += per[i];
  free(per);
  *norm = sqrt(s);
  for (int64_t r = 0; r < dp; r++) loss += part_losses(p, (int)(r * M), (int)((r + 1) * M));
  return loss;
}

int trainer_step(pt_trainer *t, pt_step_metrics *out) {
  pt_part *p = &t->part;
  double t0 = pt_now_s(), norm = 0.0;
  part_begin_step(p);
  stage_begin_step(&p->stage);
  accumulate_step(t);
  double loss = step_numbers(t, &norm);
  double lr = lr_at(&p->spec->train, p->step);
  int status = part_update(p, norm, lr);
  if (status < 0)
    nonfinite_message(&p->model, p->step + 1, p->stage.bad_layer, 0, p->error, sizeof p->error);
  part_end_step(p, t0, loss, lr, norm, out);
  return status;
}

int trainer_load(pt_trainer *t, const char *path, char *err, size_t errsz) {
  return part_load(&t->part, path, err, errsz);
}

int trainer_save(pt_trainer *t, const char *dir, const pt_spec_source *src, char *err,
                 size_t errsz) {
  pt_part *p = &t->part;
  ckpt_stage_files files;
  int n = p->model.n_layers, bounds[2] = {0, n};
  ckpt_layout lay = {.n_chunks = 1, .stages = 1, .data_parallel = 1, .bounds = bounds};
  model_to_host(&p->model);
  optimizer_to_host(&p->opt);
  if (checkpoint_begin_save(dir, err, errsz) != 0) return -1;
  if (checkpoint_write_stage(dir, &p->model, &p->opt, 0, 0, n, &files, err, errsz) != 0 ||
      checkpoint_write_manifest(dir, &p->model, src, p->step, p->opt.t, &lay, &files, err,
                                errsz) != 0) {
    checkpoint_abort_save(dir);
    return -1;
  }
  checkpoint_end_save(dir);
  return 0;
}

void trainer_gather(pt_trainer *t, const char *path, const char *what) {
  char err[1024];
  model_to_host(&t->part.model);
  if (checkpoint_write_sequential(&t->part.model, NULL, path, t->part.step, err, sizeof err) != 0)
    pt_fatal("%s: %s", what, err);
}
