/* The pipelined engine's step (engine/pipeline.h): this rank's action list, each action on the
 * chunk it names, then the step-wide reductions and the optimizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/pipeline_private.h"
#include "engine/stage_offload.h"
#include "observe/watchdog.h"

/* Tags of the activation (grad 0) and gradient (grad 1) of mb crossing the boundary after chunk
 * b. Two messages between the same two ranks of the same kind and micro-batch cross boundaries
 * in different rounds (b / P): a loop puts boundary b on ranks b mod P -> b + 1 mod P, a V one
 * round down and one up. With one chunk per stage, b / P is 0: the tags are 2 mb (+ 1). */
static int tag_of(const pt_pipeline *p, int boundary, int mb, int grad) {
  return 2 * (mb + p->sched.n_micro * (boundary / p->P)) + grad;
}

static int slot_of(const pt_chunk *k, int mb) { return mb % k->slots; }

/* A chunk's message of `bytes` at model.seq_len (in_bytes, out_bytes) cut to this step's tokens
 * per sequence (train.seq_len_schedule): sender and receiver both compute cur_T from the step,
 * so the sizes agree with no shape message. */
static size_t step_bytes(const pt_pipeline *p, size_t bytes) {
  return bytes / (size_t)p->part.T * (size_t)p->part.cur_T;
}

static int tracing(const pt_pipeline *p) { return trace_active(&p->trace, p->part.step + 1); }

/* A request of this rank: its chunk and what it carries (0 activation in, 1 gradient in,
 * 2 activation out, 3 gradient out); -1 when it is none of the chunks' transfers. */
static int request_kind(const pt_pipeline *p, const pt_request *r, const pt_chunk **chunk) {
  for (int i = 0; i < p->n_chunks; i++) {
    const pt_chunk *k = &p->chunks[i];
    for (int s = 0; s < k->slots; s++) {
      const pt_request *mine[4] = {&k->recv_act[s], &k->recv_grad[s], &k->send_act[s],
                                   &k->send_grad[s]};
      for (int j = 0; j < 4; j++)
        if (r == mine[j]) return *chunk = k, j;
    }
  }
  return -1;
}

/* The watchdog's words for a wait, and the rank waited on: with several chunks per stage the
 * text names the chunk. */
static void arm_wait(pt_pipeline *p, const pt_request *r) {
  static const char *const what[4] = {"an activation", "a gradient",
                                      "an activation to be received", "a gradient to be received"};
  const pt_chunk *k = NULL;
  int kind = request_kind(p, r, &k), peer = -1;
  const char *text = kind >= 0 ? what[kind] : "a message";
  if (kind >= 0) {
    int stage = kind == 0 || kind == 3 ? k->prev_stage : k->next_stage;
    peer = plan_rank(&p->plan, p->replica, stage);
  }
  if (kind >= 0 && p->plan.virtual_stages > 1) {
    snprintf(p->wait_text, sizeof p->wait_text, "%s of chunk %d", text, k->id);
    text = p->wait_text;
  }
  watchdog_arm(text, peer, p->part.step + 1);
}

/* Waits for a request; when the step is traced, the time blocked becomes a "wait" span. */
static void wait_for(pt_pipeline *p, pt_request *r, int mb) {
  if (!r->impl) return;
  double t0 = pt_now_s();
  arm_wait(p, r);
  comm_wait(r);
  watchdog_disarm(); /* only time spent blocked counts, never computation */
  if (tracing(p)) trace_add(&p->trace, "wait", "wait", mb, p->part.step + 1, t0, pt_now_s());
}

/* train.precision bf16: a message of `bytes` float bytes travels as bf16 in half of them
 * (lossless: the stage stored bf16 values, engine/stage.c). */
static void unpack(pt_pipeline *p, void *dst, const uint16_t *wire, size_t bytes) {
  const pt_kernels *kt = p->part.model.dev->k;
  kt->unpack_bf16(kt, dst, wire, (int64_t)(bytes / sizeof(float)));
}

static const void *pack(pt_pipeline *p, uint16_t *wire, const float *src, size_t bytes) {
  const pt_kernels *kt = p->part.model.dev->k;
  kt->pack_bf16(kt, wire, src, (int64_t)(bytes / sizeof(float)));
  return wire;
}

/* Chunk 0 reads the inputs, the last chunk the targets; a rank running both reads once for
 * each (data_micro_batch writes both halves; the unused one lands in scratch). */
static void act_load(pt_pipeline *p, pt_chunk *k, int mb) {
  int s = slot_of(k, mb);
  if (!k->is_first && !k->is_last) return;
  void *in = k->is_first ? stage_input_host(&k->stage, s) : k->scratch_in;
  void *tg = k->is_last ? k->targets[s] : k->scratch_tg;
  part_fill(&p->part, p->replica, mb, in, tg);
  if (k->is_first) stage_input_commit(&k->stage, s);
}

/* A span of this rank's compute: timed by the device where it keeps its own clock
 * (device_span_begin: a GPU runs the work after the host queues it) and by the host's, which
 * the step's end takes where it does not (device_spans_seconds). A traced step's spans are
 * kept by such a device, for the trace's track of what it ran when (trace_action). Returns the
 * host's start. */
static double compute_begin(pt_pipeline *p) {
  p->span_ticket = device_span_begin(p->part.model.dev, tracing(p));
  return pt_now_s();
}

static void compute_end(pt_pipeline *p, double t0) {
  device_span_end(p->part.model.dev);
  p->step_compute_s += pt_now_s() - t0;
}

static void act_forward(pt_pipeline *p, pt_chunk *k, int mb) {
  int s = slot_of(k, mb);
  wait_for(p, &k->recv_act[s], mb);
  wait_for(p, &k->send_act[s], mb); /* the slot's output still leaving for the next chunk */
  double t0 = compute_begin(p);
  size_t in_bytes = step_bytes(p, k->in_bytes);
  if (k->wire_act_in) unpack(p, stage_input(&k->stage, s), k->wire_act_in[s], in_bytes);
  if (k->prev >= 0) { /* the previous chunk's output, still held in its slot */
    pt_chunk *q = &p->chunks[k->prev];
    device_copy(p->part.model.dev, stage_input(&k->stage, s),
                stage_output(&q->stage, slot_of(q, mb)), in_bytes);
  }
  part_set_docs(&p->part, &k->stage, s, p->replica, mb);
  stage_offload_micro_batch(&k->stage, s, mb);
  stage_forward(&k->stage, s, p->part.B, p->part.cur_T);
  compute_end(p, t0);
  if (++p->in_flight > p->peak_in_flight) p->peak_in_flight = p->in_flight;
}

/* Where the backward of mb writes d loss / d input: the send slot, or straight into the
 * previous chunk's gradient slot when it runs here; NULL on chunk 0. */
static float *input_grad(pt_pipeline *p, pt_chunk *k, int mb) {
  if (k->prev >= 0) {
    pt_chunk *q = &p->chunks[k->prev];
    return q->dout[slot_of(q, mb)];
  }
  if (k->is_first) return NULL;
  wait_for(p, &k->send_grad[slot_of(k, mb)], mb);
  return k->din[slot_of(k, mb)];
}

/* B, or I when split: both start from the loss (last chunk) or the received gradient and leave
 * the input gradient where input_grad says. The slot stays in flight until its W. */
static void act_backward(pt_pipeline *p, pt_chunk *k, int mb, int split) {
  int s = slot_of(k, mb);
  const float *dy = k->dout[s];
  if (!k->is_last) wait_for(p, &k->recv_grad[s], mb);
  float *din = input_grad(p, k, mb);
  double t0 = compute_begin(p);
  if (k->wire_grad_in) unpack(p, k->dout[s], k->wire_grad_in[s], step_bytes(p, k->out_bytes));
  if (k->is_last) dy = part_compute_loss(&p->part, &k->stage, s, k->targets[s]); /* over them */
  if (split) stage_backward_input(&k->stage, s, dy, !k->is_first, din);
  else stage_backward(&k->stage, s, dy, !k->is_first, din);
  compute_end(p, t0);
  if (!split) p->in_flight--;
}

/* W: the weight gradients from what the slot's I kept; releases the slot. */
static void act_backward_weight(pt_pipeline *p, pt_chunk *k, int mb) {
  double t0 = compute_begin(p);
  stage_backward_weight(&k->stage, slot_of(k, mb));
  compute_end(p, t0);
  p->in_flight--;
}

static void wait_sends(pt_pipeline *p) {
  for (int i = 0; i < p->n_chunks; i++)
    for (int s = 0; s < p->chunks[i].slots; s++) {
      wait_for(p, &p->chunks[i].send_act[s], -1);
      wait_for(p, &p->chunks[i].send_grad[s], -1);
    }
}

/* hdr[1 + i]: how many of this rank's tensors belong to its i-th chunk (they come in layer
 * order, so each chunk's are one run); hdr[0]: all of them. */
static void tensor_runs(const pt_pipeline *p, int *hdr) {
  const pt_model *m = &p->part.model;
  hdr[0] = m->n_tensors;
  for (int i = 0; i < p->n_chunks; i++) {
    const pt_chunk *k = &p->chunks[i];
    hdr[1 + i] = 0;
    for (int t = 0; t < m->n_tensors; t++)
      hdr[1 + i] += m->tensors[t].layer >= k->first && m->tensors[t].layer < k->last;
  }
}

/* Stage 0: every stage's per-tensor sums (its own in sums[0]), added in global tensor order:
 * chunk after chunk, each chunk's run from the stage that ran it. */
static double add_in_chunk_order(const pt_pipeline *p, double **sums, int **hdr) {
  int *pos = pt_calloc((size_t)p->P, sizeof(int)), *seen = pt_calloc((size_t)p->P, sizeof(int));
  double s = 0.0;
  for (int c = 0; c < p->plan.n_chunks; c++) {
    int st = p->plan.chunk_stage[c], n = hdr[st][1 + seen[st]++];
    for (int i = 0; i < n; i++) s += sums[st][pos[st]++];
  }
  free(pos), free(seen);
  return s;
}

/* Stage 0 takes each stage's header and sums peer by peer (a missing stage is named by the
 * watchdog). */
static double gather_norm(pt_pipeline *p, double *mine, int *my_hdr) {
  int tag = PT_TAG_GRAD_NORM, v = p->plan.virtual_stages;
  double **sums = pt_calloc((size_t)p->P, sizeof(double *));
  int **hdr = pt_calloc((size_t)p->P, sizeof(int *));
  sums[0] = mine, hdr[0] = my_hdr;
  for (int st = 1; st < p->P; st++) {
    pt_request q = {0};
    hdr[st] = pt_calloc((size_t)v + 1, sizeof(int));
    watchdog_arm("its gradient norm", plan_rank(&p->plan, p->replica, st), p->part.step + 1);
    comm_recv_host_async(p->pipe, hdr[st], sizeof(int) * (size_t)(v + 1), st, tag, &q);
    comm_wait(&q);
    sums[st] = pt_calloc((size_t)hdr[st][0] + 1, sizeof(double));
    comm_recv_host_async(p->pipe, sums[st], sizeof(double) * (size_t)hdr[st][0], st, tag, &q);
    comm_wait(&q);
  }
  double s = add_in_chunk_order(p, sums, hdr);
  for (int st = 1; st < p->P; st++) free(sums[st]), free(hdr[st]);
  free(sums), free(hdr);
  return s;
}

/* The step's one wait for the device: this rank's per-tensor sums of squares into mine, the
 * losses and every chunk's first non-finite layer (its bad_layer) read with them. */
static void pipeline_read_step(pt_pipeline *p, double *mine) {
  pt_stage **stages = pt_calloc((size_t)p->n_chunks, sizeof(pt_stage *));
  for (int i = 0; i < p->n_chunks; i++) stages[i] = &p->chunks[i].stage;
  part_read_step(&p->part, stages, p->n_chunks, mine);
  free(stages);
}

/* Global gradient norm: per-tensor sums of squares, gathered on stage 0 and added in global
 * tensor order (tied copies count once, on their first owner's chunk: the others give 0); stage
 * 0 broadcasts the result. */
static double global_norm(pt_pipeline *p) {
  int n = p->part.model.n_tensors, tag = PT_TAG_GRAD_NORM, v = p->plan.virtual_stages;
  double *mine = pt_calloc((size_t)n + 1, sizeof(double)), s = 0.0;
  int *hdr = pt_calloc((size_t)v + 1, sizeof(int));
  pipeline_read_step(p, mine);
  if (p->sharded) pipeline_shard_norm_sums(p, mine, n);
  tensor_runs(p, hdr);
  int root = plan_rank(&p->plan, p->replica, 0);
  if (p->stage_id == 0) {
    s = gather_norm(p, mine, hdr);
  } else {
    pt_request q = {0};
    watchdog_arm("stage 0 to take the gradient norm", root, p->part.step + 1);
    comm_send_host_async(p->pipe, hdr, sizeof(int) * (size_t)(v + 1), 0, tag, &q), comm_wait(&q);
    comm_send_host_async(p->pipe, mine, sizeof(double) * (size_t)n, 0, tag, &q), comm_wait(&q);
  }
  watchdog_arm("the gradient norm from stage 0", p->stage_id == 0 ? -1 : root, p->part.step + 1);
  comm_broadcast(p->pipe, &s, sizeof s, 0);
  watchdog_disarm();
  free(mine), free(hdr);
  return sqrt(s);
}

/* The first layer whose output went non-finite is the lowest such index over all ranks. */
static void name_nonfinite(pt_pipeline *p) {
  uint64_t bad = UINT64_MAX;
  for (int i = 0; i < p->n_chunks; i++)
    if (p->chunks[i].stage.bad_layer >= 0 && (uint64_t)p->chunks[i].stage.bad_layer < bad)
      bad = (uint64_t)p->chunks[i].stage.bad_layer;
  comm_allreduce_min_u64(comm_world(), &bad, 1);
  int layer = bad == UINT64_MAX ? -1 : (int)bad;
  nonfinite_message(&p->part.model, p->part.step + 1, layer,
                    layer >= 0 ? plan_stage_of_layer(&p->plan, layer) : 0, p->part.error,
                    sizeof p->part.error);
}

static void act_optimizer(pt_pipeline *p, double *norm, double *lr) {
  wait_sends(p);
  *norm = global_norm(p);
  *lr = lr_at(&p->part.spec->train, p->part.step);
  double t0 = compute_begin(p);
  p->nonfinite = part_update(&p->part, *norm, *lr); /* the same on every rank: the norm is */
  compute_end(p, t0);
  if (p->sharded && !p->nonfinite) pipeline_shard_gather(p); /* the others' updated ranges */
  if (p->nonfinite) name_nonfinite(p);
}

/* A span per action, tagged with its chunk where a stage runs several. */
static void trace_action(pt_pipeline *p, const pt_action *a, double t0) {
  static const struct {
    const char *name, *cat; /* observe/trace.h */
  } span[ACT_KINDS] = {
      [ACT_RECV_ACT] = {"recv act", "receive"},
      [ACT_LOAD] = {"load", "load"},
      [ACT_FORWARD] = {"F", "forward"},
      [ACT_SEND_ACT] = {"send act", "send"},
      [ACT_RECV_GRAD] = {"recv grad", "receive"},
      [ACT_BACKWARD] = {"B", "backward"},
      [ACT_BACKWARD_INPUT] = {"I", "backward_input"},
      [ACT_BACKWARD_WEIGHT] = {"W", "backward_weight"},
      [ACT_SEND_GRAD] = {"send grad", "send"},
      [ACT_REDUCE_TIED] = {"tied grads", "allreduce"},
      [ACT_REDUCE_DP] = {"data-parallel grads", "allreduce"},
      [ACT_OPTIMIZER] = {"optimizer", "optimizer"},
      [ACT_FLUSH] = {"flush", "send"}};
  int chunk = p->plan.virtual_stages > 1 ? a->chunk : -1;
  trace_add_chunk(&p->trace, span[a->kind].name, span[a->kind].cat, a->mb, chunk,
                  p->part.step + 1, t0, pt_now_s());
  if (p->span_ticket >= 0)
    trace_add_device(&p->trace, span[a->kind].name, span[a->kind].cat, a->mb, chunk,
                     p->part.step + 1, p->span_ticket);
}

static int span_times(void *dev, int64_t ticket, double *t0, double *t1) {
  return device_span_times(dev, ticket, t0, t1);
}

void pipeline_trace_resolve(pt_pipeline *p) {
  if (p->trace.enabled) trace_resolve(&p->trace, span_times, p->part.model.dev);
}

static void reduce_dp(pt_pipeline *p) {
  watchdog_arm("the data-parallel gradient reduction", -1, p->part.step + 1);
  float *g = p->part.model.grads;
  size_t n = (size_t)p->part.model.n_floats;
  if (p->sharded)
    pipeline_shard_reduce(p); /* each range summed onto its owner (pipeline_shard.c) */
  else if (p->dp > 1 && p->part.spec->dp_reduce == SPEC_DP_REDUCE_ALLREDUCE)
    comm_allreduce_sum_f32_unordered(p->dp_comm, g, n); /* faster, not bitwise (comm.h) */
  else if (p->dp > 1)
    comm_allreduce_sum_f32(p->dp_comm, g, n);
  watchdog_disarm();
}

/* A transfer of chunk k: post the receive or start the send of mb's slot. */
static void transfer(pt_pipeline *p, pt_chunk *k, pt_action_kind kind, int mb) {
  int s = slot_of(k, mb);
  size_t in_bytes = step_bytes(p, k->in_bytes), out_bytes = step_bytes(p, k->out_bytes);
  size_t in = k->wire_act_in ? in_bytes / 2 : in_bytes;
  size_t out = k->wire_act_out ? out_bytes / 2 : out_bytes;
  switch (kind) {
  case ACT_RECV_ACT: {
    void *dst = k->wire_act_in ? (void *)k->wire_act_in[s] : stage_input(&k->stage, s);
    comm_recv_async(p->pipe, dst, in, k->prev_stage, tag_of(p, k->id - 1, mb, 0),
                    &k->recv_act[s]);
    break;
  }
  case ACT_SEND_ACT: {
    const void *src = stage_output(&k->stage, s);
    if (k->wire_act_out) src = pack(p, k->wire_act_out[s], src, out_bytes);
    comm_send_async(p->pipe, src, out, k->next_stage, tag_of(p, k->id, mb, 0), &k->send_act[s]);
    break;
  }
  case ACT_RECV_GRAD: {
    void *dst = k->wire_grad_in ? (void *)k->wire_grad_in[s] : k->dout[s];
    comm_recv_async(p->pipe, dst, out, k->next_stage, tag_of(p, k->id, mb, 1), &k->recv_grad[s]);
    break;
  }
  default: { /* ACT_SEND_GRAD */
    const void *src = k->din[s];
    if (k->wire_grad_out) src = pack(p, k->wire_grad_out[s], src, in_bytes);
    comm_send_async(p->pipe, src, in, k->prev_stage, tag_of(p, k->id - 1, mb, 1),
                    &k->send_grad[s]);
  }
  }
}

static void run_action(pt_pipeline *p, const pt_action *a, double *norm, double *lr) {
  pt_chunk *k = a->mb >= 0 ? pipeline_chunk(p, a->chunk) : NULL;
  if (a->mb >= 0 && !k)
    pt_fatal("schedule %s: stage %d has an action of chunk %d, which runs on stage %d",
             p->sched.name, p->stage_id, a->chunk, p->plan.chunk_stage[a->chunk]);
  switch (a->kind) {
  case ACT_RECV_ACT:
  case ACT_SEND_ACT:
  case ACT_RECV_GRAD:
  case ACT_SEND_GRAD: transfer(p, k, a->kind, a->mb); break;
  case ACT_LOAD: act_load(p, k, a->mb); break;
  case ACT_FORWARD: act_forward(p, k, a->mb); break;
  case ACT_BACKWARD: act_backward(p, k, a->mb, 0); break;
  case ACT_BACKWARD_INPUT: act_backward(p, k, a->mb, 1); break;
  case ACT_BACKWARD_WEIGHT: act_backward_weight(p, k, a->mb); break;
  case ACT_REDUCE_TIED:
    watchdog_arm("the tied-weight gradient reduction", -1, p->part.step + 1);
    pipeline_reduce_ties(p);
    watchdog_disarm();
    break;
  case ACT_REDUCE_DP: reduce_dp(p); break;
  case ACT_OPTIMIZER: act_optimizer(p, norm, lr); break;
  case ACT_FLUSH: comm_flush(p->pipe); break; /* the sends NCCL holds go out (comm.h) */
  }
}

/* Rank 0 receives n doubles from every rank into all[rank * n ...], one peer at a time, so a
 * missing rank is named by the watchdog (a collective could not say who is missing). */
void pipeline_gather_root(pt_pipeline *p, const double *mine, int n, double *all,
                          const char *what) {
  int world = p->P * p->dp, tag = PT_TAG_GATHER_ROOT;
  if (p->rank != 0) {
    pt_request r = {0};
    watchdog_arm(what, 0, p->part.step);
    comm_send_host_async(comm_world(), mine, sizeof(double) * (size_t)n, 0, tag, &r);
    comm_wait(&r);
    watchdog_disarm();
    return;
  }
  memcpy(all, mine, sizeof(double) * (size_t)n);
  for (int r = 1; r < world; r++) {
    pt_request q = {0};
    watchdog_arm(what, r, p->part.step);
    comm_recv_host_async(comm_world(), all + (size_t)r * n, sizeof(double) * (size_t)n, r, tag,
                         &q);
    comm_wait(&q);
    watchdog_disarm();
  }
}

/* The step's loss: each replica's last chunk holds its sum; rank 0 adds them in replica order. */
static double gather_loss(pt_pipeline *p) {
  int world = p->P * p->dp, last = p->plan.chunk_stage[p->plan.n_chunks - 1];
  double *all = pt_calloc((size_t)world, sizeof(double));
  double mine = p->holds_last ? part_losses(&p->part, 0, p->part.n_losses) : 0.0;
  pipeline_gather_root(p, &mine, 1, all, "the end-of-step loss");
  double loss = 0.0;
  for (int r = 0; r < p->dp; r++) loss += all[plan_rank(&p->plan, r, last)];
  free(all);
  return loss;
}

int pipeline_step(pt_pipeline *p, pt_step_metrics *out) {
  double t0 = pt_now_s(), norm = 0.0, lr = 0.0;
  p->nonfinite = 0;
  part_begin_step(&p->part);
  for (int i = 0; i < p->n_chunks; i++) stage_begin_step(&p->chunks[i].stage);
  model_zero_grads(&p->part.model);
  p->step_compute_s = 0.0;
  const pt_action *acts = p->sched.acts[p->stage_id];
  for (int i = 0; i < p->sched.n_acts[p->stage_id]; i++) {
    double a0 = pt_now_s();
    pipeline_offload_prefetch(p, acts, p->sched.n_acts[p->stage_id], i);
    p->span_ticket = -1;
    run_action(p, &acts[i], &norm, &lr);
    if (tracing(p)) trace_action(p, &acts[i], a0);
    pipeline_offload_trace(p);
  }
  /* a GPU's own count of its spans (those finished by now), not the host's queueing */
  p->step_compute_s = device_spans_seconds(p->part.model.dev, p->step_compute_s);
  p->compute_s += p->step_compute_s;
  pipeline_trace_resolve(p); /* the device's spans run by now; their events freed */
  double loss = gather_loss(p);
  p->last_step_s = part_end_step(&p->part, t0, loss, lr, norm, out);
  p->total_s += p->last_step_s;
  return p->nonfinite;
}
