/* data.eval on the pipelined engine (engine/eval.h): forward only, micro-batch by micro-batch.
 * Every rank walks the (batch, micro-batch, chunk) items of its replica in one global order and
 * does its own chunks' in turn: take the input (the eval file on chunk 0, the previous chunk's
 * output here, or a blocking receive from its stage), forward in the micro-batch's slot, then
 * the loss (last chunk) or a blocking send. Each transfer is met by the peer's next item in the
 * same order, so the walk cannot deadlock under any placement (loop or V), and nothing is in
 * flight when it ends. The training's buffers and requests are only borrowed: every send and
 * receive is complete before the next item starts. */
#include <stdlib.h>

#include "core/error.h"
#include "data/data.h"
#include "engine/eval.h"
#include "engine/pipeline_private.h"
#include "observe/watchdog.h"

/* pipeline_step.c's tag rule (a message of boundary b, micro-batch mb), for the activations. */
static int eval_tag(const pt_pipeline *p, int boundary, int mb) {
  return 2 * (mb + p->sched.n_micro * (boundary / p->P));
}

static void eval_wait(pt_pipeline *p, pt_request *r, const char *what, int stage) {
  watchdog_arm(what, plan_rank(&p->plan, p->replica, stage), p->part.step);
  comm_wait(r);
  watchdog_disarm();
}

/* Micro-batch mb of this replica's eval batch i from the eval file. */
static void eval_read(pt_pipeline *p, int64_t i, int mb, void *inputs, void *targets) {
  data_micro_batch(&p->part.eval_data, i, p->replica, mb, p->part.T, inputs, targets);
}

/* Chunk k's input for micro-batch mb of eval batch i, into slot s. */
static void eval_input(pt_pipeline *p, pt_chunk *k, int64_t i, int mb, int s) {
  const pt_kernels *kt = p->part.model.dev->k;
  if (k->is_first) {
    void *tg = k->is_last ? k->targets[s] : k->scratch_tg;
    eval_read(p, i, mb, stage_input_host(&k->stage, s), tg);
    stage_input_commit(&k->stage, s);
    return;
  }
  if (k->is_last) eval_read(p, i, mb, k->scratch_in, k->targets[s]);
  if (k->prev >= 0) {
    pt_chunk *q = &p->chunks[k->prev];
    device_copy(p->part.model.dev, stage_input(&k->stage, s),
                stage_output(&q->stage, mb % q->slots), k->in_bytes);
    return;
  }
  pt_request r = {0};
  size_t bytes = k->wire_act_in ? k->in_bytes / 2 : k->in_bytes;
  void *dst = k->wire_act_in ? (void *)k->wire_act_in[s] : stage_input(&k->stage, s);
  comm_recv_async(p->pipe, dst, bytes, k->prev_stage, eval_tag(p, k->id - 1, mb), &r);
  eval_wait(p, &r, "an eval activation", k->prev_stage);
  if (k->wire_act_in)
    kt->unpack_bf16(kt, stage_input(&k->stage, s), k->wire_act_in[s],
                    (int64_t)(k->in_bytes / sizeof(float)));
}

static void eval_output(pt_pipeline *p, pt_chunk *k, int mb, int s, device_stats *st) {
  if (k->is_last) {
    eval_loss_into(&p->part, st, mb, stage_loss_output(&k->stage, s), k->targets[s]);
    return;
  }
  if (k->next_stage < 0) return; /* the next chunk runs here and copies it */
  float *y = stage_output(&k->stage, s);
  const pt_kernels *kt = p->part.model.dev->k;
  const void *src = y;
  size_t bytes = k->out_bytes;
  if (k->wire_act_out) {
    kt->pack_bf16(kt, k->wire_act_out[s], y, (int64_t)(k->out_bytes / sizeof(float)));
    src = k->wire_act_out[s], bytes /= 2;
  }
  pt_request r = {0};
  comm_send_async(p->pipe, src, bytes, k->next_stage, eval_tag(p, k->id, mb), &r);
  comm_flush(p->pipe);
  eval_wait(p, &r, "an eval activation to be received", k->next_stage);
}

double pipeline_eval(pt_pipeline *p) {
  int64_t K = p->part.spec->data.eval_batches;
  int M = (int)p->part.spec->train.micro_batches;
  device_stats st;
  device_stats_init(&st, p->part.model.dev, M, 0);
  double mine = 0.0;
  for (int64_t i = 0; i < K; i++) {
    device_stats_reset(&st);
    for (int mb = 0; mb < M; mb++)
      for (int c = 0; c < p->n_chunks; c++) { /* ascending ids: the chain's order */
        pt_chunk *k = &p->chunks[c];
        int s = mb % k->slots;
        eval_input(p, k, i, mb, s);
        eval_stage_forward(&k->stage, s, p->part.B, p->part.T);
        eval_output(p, k, mb, s, &st);
      }
    if (!p->holds_last) continue;
    device_stats_read(&st); /* one wait per eval batch */
    for (int mb = 0; mb < M; mb++) mine += device_stats_double_value(&st, mb);
  }
  device_stats_free(&st);
  int world = p->P * p->dp, last = p->plan.chunk_stage[p->plan.n_chunks - 1];
  double *all = pt_calloc((size_t)world, sizeof(double));
  double *sums = pt_calloc((size_t)p->dp, sizeof(double));
  pipeline_gather_root(p, &mine, 1, all, "the eval loss");
  for (int d = 0; d < p->dp; d++) sums[d] = all[plan_rank(&p->plan, d, last)];
  double loss = p->rank == 0 ? eval_loss_of(&p->part, sums, p->dp) : 0.0;
  free(all), free(sums);
  return loss;
}
