#include "engine/train.h"

#include "partition/memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"

static int seq_len_of(const pt_trainer *t) { return t->model.input_tokens ? (int)t->spec->seq_len : 1; }

int trainer_init(pt_trainer *t, const pt_spec *spec, char *err, size_t errsz) {
  memset(t, 0, sizeof *t);
  t->spec = spec;
  spec_errors e = {0};
  if (model_configure(&t->model, spec, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  const char *kind = device_resolve(spec_device_names[spec->pipeline.device], t->model.layers, t->model.n_layers);
  if (device_select(kind, 0, err, errsz) != 0 ||
      device_check_layers(device_current(), t->model.layers, 0, t->model.n_layers, err,
                          errsz) != 0) {
    model_free(&t->model);
    return -1;
  }
  pt_stage_memory mem; /* refuse, with the numbers, a model this machine cannot hold */
  memory_estimate_stage(&t->model, 0, t->model.n_layers, 1, &mem);
  char what[4200];
  snprintf(what, sizeof what, "%s: the model", spec->path);
  int64_t gpu_bytes = (int64_t)device_memory_bytes(device_current());
  if ((gpu_bytes > 0 ? memory_check_device(mem.total, gpu_bytes, what, err, errsz)
                     : memory_check_fits(mem.total, 1, what, err, errsz)) != 0 ||
      data_open(&t->data, spec, err, errsz) != 0) {
    model_free(&t->model);
    return -1;
  }
  pt_model *m = &t->model;
  int B = (int)spec->train.micro_batch_size, T = seq_len_of(t);
  model_alloc(m, 0, m->n_layers);
  stage_init(&t->stage, m, 0, m->n_layers, B, T, 1,
             (int)spec->train.activation_checkpoint_interval);
  t->stage.check_finite = spec->train.on_nonfinite == SPEC_NONFINITE_ABORT;
  optimizer_init(&t->opt, &spec->train, m->n_floats);
  if (spec->pipeline.data_parallel > 1)
    t->grad_total = device_alloc(m->dev, sizeof(float) * (size_t)m->n_floats);
  int F = m->layers[m->n_layers - 1].out_dim;
  int tcols = m->input_tokens ? 1 : spec->data.targets;
  t->target_bytes = sizeof(float) * (size_t)B * T * tcols;
  t->targets = pt_calloc(t->target_bytes, 1);
  t->dlogits = device_alloc(m->dev, sizeof(float) * (size_t)B * T * F);
  return 0;
}

void trainer_free(pt_trainer *t) {
  stage_free(&t->stage);
  optimizer_free(&t->opt);
  if (t->model.dev) device_free(t->model.dev, t->dlogits), device_free(t->model.dev, t->grad_total);
  model_free(&t->model);
  data_close(&t->data);
  free(t->targets);
  memset(t, 0, sizeof *t);
}

/* One replica's micro-batches: gradients accumulate into the model's buffers, tied copies
 * are folded into their owners; returns the replica's loss (micro-batches summed in order). */
static double accumulate_replica(pt_trainer *t, int64_t replica) {
  const spec_train *c = &t->spec->train;
  pt_model *m = &t->model;
  int B = (int)c->micro_batch_size, T = seq_len_of(t);
  int64_t G = t->spec->pipeline.data_parallel * c->micro_batches * B;
  int F = m->layers[m->n_layers - 1].out_dim;
  float scale = (float)(1.0 / ((double)G * T));
  double loss = 0.0;
  model_zero_grads(m);
  for (int64_t mb = 0; mb < c->micro_batches; mb++) {
    int64_t j0 = (replica * c->micro_batches + mb) * B;
    data_fill(&t->data, t->step, G, j0, B, T, stage_input_host(&t->stage, 0), t->targets,
              m->loss == LOSS_CROSS_ENTROPY);
    stage_input_commit(&t->stage, 0);
    const float *y = stage_forward(&t->stage, 0, B, T);
    loss += device_loss(m->dev, m->loss, y, t->targets, t->target_bytes, B * T, F, scale,
                        t->dlogits) * scale;
    stage_backward(&t->stage, 0, t->dlogits, 0, NULL);
  }
  model_tie_reduce_local(m);
  return loss;
}

/* The whole global batch. Replicas are reduced exactly as the pipeline reduces them: each
 * replica's gradient separately, then summed in replica order ((g0 + g1) + g2) ... */
static double accumulate_step(pt_trainer *t) {
  pt_model *m = &t->model;
  int64_t dp = t->spec->pipeline.data_parallel;
  double loss = 0.0;
  for (int64_t r = 0; r < dp; r++) {
    loss += accumulate_replica(t, r);
    if (dp == 1) break;
    if (r == 0) device_copy(m->dev, t->grad_total, m->grads, sizeof(float) * (size_t)m->n_floats);
    else device_add(m->dev, t->grad_total, m->grads, m->n_floats);
  }
  if (dp > 1) device_copy(m->dev, m->grads, t->grad_total, sizeof(float) * (size_t)m->n_floats);
  return loss;
}

int trainer_step(pt_trainer *t, pt_step_metrics *out) {
  const spec_train *c = &t->spec->train;
  double t0 = pt_now_s();
  t->stage.bad_layer = -1;
  double loss = accumulate_step(t);
  double norm = sqrt(grad_sumsq(&t->model));
  double lr = lr_at(c, t->step);
  int status = 0;
  if (!isfinite(norm)) { /* nothing of this step reaches the weights or the optimizer state */
    status = c->on_nonfinite == SPEC_NONFINITE_SKIP ? 1 : -1;
    if (status < 0) nonfinite_message(&t->model, t->step + 1, t->stage.bad_layer, 0, t->error, sizeof t->error);
    t->skipped += status > 0;
  } else {
    grad_clip(&t->model, norm, c->grad_clip);
    optimizer_step(&t->opt, &t->model, lr);
  }
  t->step++;
  double dt = pt_now_s() - t0;
  int64_t tokens = t->spec->pipeline.data_parallel * c->micro_batches * c->micro_batch_size *
                   seq_len_of(t);
  *out = (pt_step_metrics){.step = t->step, .steps = c->steps, .loss = loss, .lr = lr,
                           .grad_norm = norm, .tokens_per_s = (double)tokens / dt,
                           .step_ms = dt * 1e3, .mfu = -1.0, .skipped_steps = t->skipped};
  return status;
}

double train_flops_per_token(const pt_trainer *t) { return model_flops_per_token(&t->model); }

int trainer_load(pt_trainer *t, const char *path, char *err, size_t errsz) {
  pt_checkpoint c;
  if (checkpoint_open(&c, path, err, errsz) != 0) return -1;
  int rc = checkpoint_load(&c, &t->model, &t->opt, err, errsz);
  if (rc == 0) t->step = c.step, model_to_device(&t->model), optimizer_to_device(&t->opt);
  checkpoint_close(&c);
  return rc;
}

int trainer_save(pt_trainer *t, const char *dir, const pt_spec_source *src, char *err,
                 size_t errsz) {
  ckpt_stage_files files;
  int bounds[2] = {0, t->model.n_layers};
  model_to_host(&t->model);
  optimizer_to_host(&t->opt);
  if (checkpoint_begin_save(dir, err, errsz) != 0) return -1;
  if (checkpoint_write_stage(dir, &t->model, &t->opt, 0, 0, t->model.n_layers, &files, err,
                             errsz) != 0 ||
      checkpoint_write_manifest(dir, &t->model, src, t->step, t->opt.t, 1, 1, bounds, &files,
                                err, errsz) != 0) {
    checkpoint_abort_save(dir);
    return -1;
  }
  checkpoint_end_save(dir);
  return 0;
}
