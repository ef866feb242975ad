#include "engine/eval.h"

#include <stdlib.h>

#include "core/error.h"
#include "data/data.h"
#include "engine/stage_offload.h"

const float *eval_stage_forward(pt_stage *st, int slot, int B, int T) {
  pt_stage keep = *st;
  st->check_finite = 0;
  const float *y = stage_forward(st, slot, B, T);
  if (st->offload) stage_offload_release(st, slot); /* no backward follows; y is not pooled */
  st->check_finite = keep.check_finite;
  st->ws_slot = -1; /* the checkpoint workspace now holds eval data: no slot's segment */
  st->check_seq = keep.check_seq, st->bad_layer = keep.bad_layer;
  st->cur_B = keep.cur_B, st->cur_T = keep.cur_T;
  return y;
}

void eval_loss_into(pt_part *p, device_stats *s, int i, float *y, const void *targets) {
  int F = p->model.layers[p->model.n_layers - 1].out_dim;
  device_loss_acc(p->model.dev, p->model.loss, y, targets, p->target_bytes, p->B * p->T, F,
                  1.0f, y, NULL, device_stats_double(s, i), NULL, 0);
}

double eval_loss_of(const pt_part *p, const double *replica_sums, int dp) {
  double total = 0.0;
  for (int d = 0; d < dp; d++) total += replica_sums[d];
  return total / ((double)p->spec->data.eval_batches * (double)p->G * (double)p->T);
}

double eval_sequential(pt_trainer *t) {
  pt_part *p = &t->part;
  int64_t K = p->spec->data.eval_batches, M = p->spec->train.micro_batches;
  int dp = (int)p->spec->pipeline.data_parallel;
  device_stats s;
  device_stats_init(&s, p->model.dev, (int)(dp * M), 0);
  double *sums = pt_calloc((size_t)dp, sizeof(double));
  for (int64_t i = 0; i < K; i++) {
    device_stats_reset(&s);
    for (int64_t d = 0; d < dp; d++)
      for (int64_t mb = 0; mb < M; mb++) {
        data_micro_batch(&p->eval_data, i, d, mb, p->T, stage_input_host(&p->stage, 0),
                         t->targets);
        stage_input_commit(&p->stage, 0);
        eval_stage_forward(&p->stage, 0, p->B, p->T);
        eval_loss_into(p, &s, (int)(d * M + mb), stage_loss_output(&p->stage, 0), t->targets);
      }
    device_stats_read(&s); /* one wait per eval batch */
    for (int64_t d = 0; d < dp; d++)
      for (int64_t mb = 0; mb < M; mb++)
        sums[d] += device_stats_double_value(&s, (int)(d * M + mb));
  }
  double loss = eval_loss_of(p, sums, dp);
  free(sums);
  device_stats_free(&s);
  return loss;
}
