#include "engine/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "device/placement.h"
#include "observe/watchdog.h"

static int tag_act(int mb) { return 2 * mb; }
static int tag_grad(int mb) { return 2 * mb + 1; }

/* One group per tie key and replica, over the stages that hold a copy (split is collective:
 * every rank takes part for every key, with no color when it holds no copy). */
static void make_tie_groups(pt_pipeline *p) {
  const pt_model *m = &p->part.model;
  p->ties = pt_calloc((size_t)m->n_layers + 1, sizeof(pt_tie_group));
  for (int li = 0; li < m->n_layers; li++) {
    if (!m->layers[li].tie[0] || model_tie_owner(m, li) >= 0) continue; /* first owners only */
    int stages[64], n = plan_tie_stages(&p->plan, m, m->layers[li].tie, stages, 64);
    int mine = -1;
    for (int i = 0; i < n; i++) if (stages[i] == p->stage_id) mine = i;
    int color = n > 1 && mine >= 0 ? li * p->dp + p->replica : -1;
    pt_comm *c = comm_split(comm_world(), color, p->stage_id);
    if (color < 0) { comm_free(c); continue; }
    pt_tie_group *g = &p->ties[p->n_ties++];
    g->comm = c;
    g->tensor = -1;
    for (int t = 0; t < m->n_tensors; t++) { /* this stage's first copy of the weight */
      const pt_layer *L = &m->layers[m->tensors[t].layer];
      if (!strcmp(L->tie, m->layers[li].tie) && m->tensors[t].param == model_tied_param(L)) {
        g->tensor = t;
        break;
      }
    }
    if (g->tensor < 0) pt_fatal("tie '%s': no copy on stage %d", m->layers[li].tie, p->stage_id);
  }
}

/* The first owner's values win, even if the copies were initialised alike already. */
static void broadcast_ties(pt_pipeline *p) {
  pt_model *m = &p->part.model;
  for (int i = 0; i < p->n_ties; i++) { /* on the host copies, which still hold the init */
    const pt_tensor *t = &m->tensors[p->ties[i].tensor];
    comm_broadcast(p->ties[i].comm, m->host_params + t->offset, sizeof(float) * t->numel, 0);
  }
  model_to_device(m);
}

static void alloc_slots(pt_pipeline *p) {
  pt_part *q = &p->part;
  int S = p->slots;
  size_t BT = (size_t)q->B * q->T;
  const pt_layer *L0 = &q->model.layers[q->stage.first], *Ln = &q->model.layers[q->stage.last - 1];
  p->in_bytes = (L0->in_tokens ? 4 : 4 * (size_t)L0->in_dim) * BT;
  p->out_bytes = 4 * (size_t)Ln->out_dim * BT;
  p->dout = pt_calloc((size_t)S, sizeof(float *));
  p->din = pt_calloc((size_t)S, sizeof(float *));
  p->targets = pt_calloc((size_t)S, sizeof(void *));
  p->recv_act = pt_calloc((size_t)S, sizeof(pt_request));
  p->recv_grad = pt_calloc((size_t)S, sizeof(pt_request));
  p->send_act = pt_calloc((size_t)S, sizeof(pt_request));
  p->send_grad = pt_calloc((size_t)S, sizeof(pt_request));
  for (int s = 0; s < S; s++) {
    if (!p->is_last) p->dout[s] = device_alloc(q->model.dev, p->out_bytes);
    if (!p->is_first) p->din[s] = device_alloc(q->model.dev, p->in_bytes);
    if (p->is_last) p->targets[s] = pt_alloc_aligned(q->target_bytes); /* host */
  }
  if (p->is_last) p->dlogits = device_alloc(q->model.dev, p->out_bytes);
  /* data_fill writes inputs and targets together; the side this stage does not use lands here */
  if (!p->is_first && p->is_last)
    p->scratch_in = pt_alloc_aligned(4 * BT * (q->model.input_dim + 1));
  if (p->is_first && !p->is_last) p->scratch_tg = pt_alloc_aligned(q->target_bytes);
}

static int check_layout(pt_pipeline *p, const pt_spec *spec, char *err, size_t errsz) {
  p->P = (int)spec->pipeline.stages;
  p->dp = (int)spec->pipeline.data_parallel;
  int world = comm_size(comm_world());
  if (world != p->P * p->dp) { /* every rank sees the same numbers; rank 0 will print */
    snprintf(err, errsz, "%s: pipeline.stages (%d) x pipeline.data_parallel (%d) = %d ranks, but "
             "this job has %d; run mpirun -np %d, or change the spec (--set pipeline.stages=...)",
             spec->path, p->P, p->dp, p->P * p->dp, world, p->P * p->dp);
    return -1;
  }
  return 0;
}

/* Under activation checkpointing a split schedule's I runs the fused backward (engine/stage.h),
 * so its weight gradients accumulate at B and I: those too must come in ascending micro-batch
 * order on every chunk, as the validator makes B and W come. The same answer on every rank. */
static int check_checkpoint_order(const pt_schedule *s, char *err, size_t errsz) {
  int *last = pt_calloc((size_t)s->n_chunks, sizeof(int)), bad = 0;
  for (int c = 0; c < s->n_chunks; c++) last[c] = -1;
  for (int r = 0; r < s->n_ranks && !bad; r++)
    for (int i = 0; i < s->n_acts[r] && !bad; i++) {
      const pt_action *a = &s->acts[r][i];
      if (a->kind != ACT_BACKWARD && a->kind != ACT_BACKWARD_INPUT) continue;
      bad = a->mb < last[a->chunk];
      if (bad)
        snprintf(err, errsz, "schedule %s: chunk %d runs the backward of micro-batch %d after "
                 "%d; with train.activation_checkpoint_interval the weight gradients accumulate "
                 "there and must come in ascending order (set the interval to 0, or pick "
                 "another schedule)", s->name, a->chunk, a->mb, last[a->chunk]);
      last[a->chunk] = a->mb;
    }
  free(last);
  return bad ? -1 : 0;
}

static int build_plan(pt_pipeline *p, const pt_spec *spec, char *err, size_t errsz) {
  spec_errors e = {0};
  if (part_configure(&p->part, spec, err, errsz) != 0) return -1;
  if (plan_build(&p->plan, &p->part.model, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  if (schedule_build(&p->sched, spec->pipeline.schedule, p->P,
                     (int)spec->train.micro_batches) != 0 ||
      schedule_validate(&p->sched, err, errsz) != 0)
    pt_fatal("schedule %s: %s", spec->pipeline.schedule, err);
  if (spec->train.activation_checkpoint_interval > 0)
    return check_checkpoint_order(&p->sched, err, errsz);
  return 0;
}

/* All ranks agree whether any failed; the first failing rank keeps its message. */
static int agree_failure(pt_pipeline *p, int failed, char *err);

/* The local GPU this rank drives: pipeline.devices, else its node-local rank. One GPU per rank
 * unless the spec says how to share them (pipeline.devices, or comm.backend: mpi, which
 * stages through host memory and lets ranks share). A launcher that shows each rank only its
 * own GPU (CUDA_VISIBLE_DEVICES per rank) leaves GPU 0 for everyone. -1 with err. */
static int local_gpu(pt_pipeline *p, int on_gpu, char *err, size_t errsz) {
  const pt_spec *s = p->part.spec;
  int id = plan_device(&p->plan, p->rank, comm_local_rank()), n = device_gpu_count();
  int given = s->pipeline.devices != NULL, shared = s->comm_backend == SPEC_COMM_MPI;
  if (given || !on_gpu) return id;
  if (n == 1 && getenv("CUDA_VISIBLE_DEVICES")) return 0;
  if (shared) return n > 0 ? comm_local_rank() % n : id;
  return placement_check_gpus(comm_local_size(), n, given, err, errsz) == 0 ? id : -1;
}

/* This rank's device (pipeline.device; the GPU from local_gpu) and, on GPUs, the device
 * transport for activations and reductions (comm.backend), which the groups split afterwards
 * inherit. Collective. */
static int open_device(pt_pipeline *p, char *err, size_t errsz) {
  const pt_spec *s = p->part.spec;
  int first = plan_first_layer(&p->plan, p->stage_id), last = plan_end_layer(&p->plan, p->stage_id);
  spec_device kind = part_resolve_device(&p->part);
  int on_gpu = kind == SPEC_DEVICE_GPU, gpu = local_gpu(p, on_gpu, err, errsz);
  int failed = (on_gpu && gpu < 0) ||
               part_open_device(&p->part, kind, gpu, first, last, err, errsz) != 0;
  if (agree_failure(p, failed, err) != 0) return -1;
  pt_device *d = device_current();
  if (d->kind != DEV_GPU) return 0;
  int nccl = s->comm_backend != SPEC_COMM_MPI;
  failed = comm_use_device(nccl, device_stream(d), err, errsz) != 0;
  if (!failed && nccl) /* every built-in schedule passes; a new one must too (tests) */
    failed = schedule_check_rendezvous(&p->sched, err, errsz) != 0;
  return agree_failure(p, failed, err);
}

/* The groups: this replica's pipeline, this stage's data-parallel group; device transports
 * connect lazily, so the pipeline neighbours connect now rather than in step 1. Collective. */
static void make_groups(pt_pipeline *p) {
  p->pipe = comm_split(comm_world(), p->replica, p->stage_id);
  p->dp_comm = comm_split(comm_world(), p->stage_id, p->replica);
  int peers[2], n_peers = 0;
  if (!p->is_first) peers[n_peers++] = p->stage_id - 1;
  if (!p->is_last) peers[n_peers++] = p->stage_id + 1;
  comm_connect(p->pipe, peers, n_peers);
}

/* A stage this machine cannot hold is refused from the plan, not by the allocator; only the
 * end stages read data. All ranks agree on any failure, or the rest would hang. */
static int check_stage(pt_pipeline *p, char *err, size_t errsz) {
  char what[4200];
  snprintf(what, sizeof what, "%s: stage %d", p->part.spec->path, p->stage_id);
  int failed = part_check_memory(&p->part, p->plan.mem[p->stage_id].total, comm_local_size(),
                                 what, err, errsz) != 0;
  if (!failed && (p->is_first || p->is_last))
    failed = data_open(&p->part.data, p->part.spec, err, errsz) != 0;
  return agree_failure(p, failed, err);
}

int pipeline_init(pt_pipeline *p, const pt_spec *spec, char *err, size_t errsz) {
  memset(p, 0, sizeof *p);
  p->rank = comm_rank(comm_world());
  if (check_layout(p, spec, err, errsz) != 0 || build_plan(p, spec, err, errsz) != 0) {
    if (p->rank != 0) err[0] = '\0'; /* every rank fails alike: rank 0 says it once */
    return -1;
  }
  p->stage_id = plan_stage_of_rank(&p->plan, p->rank);
  p->replica = plan_replica_of_rank(&p->plan, p->rank);
  p->is_first = p->stage_id == 0;
  p->is_last = p->stage_id == p->P - 1;
  p->slots = p->sched.n_slots[p->stage_id];
  if (open_device(p, err, errsz) != 0) return -1;
  make_groups(p);
  if (check_stage(p, err, errsz) != 0) return -1;
  part_alloc(&p->part, plan_first_layer(&p->plan, p->stage_id),
             plan_end_layer(&p->plan, p->stage_id), p->slots);
  /* one chunk per rank: the stage is chunk stage_id */
  stage_alloc_stash(&p->part.stage, p->sched.n_w_pending[p->stage_id]);
  make_tie_groups(p);
  broadcast_ties(p);
  alloc_slots(p);
  return 0;
}

/* --- Actions ------------------------------------------------------------------------------ */

static int slot_of(const pt_pipeline *p, int mb) { return mb % p->slots; }

static int tracing(const pt_pipeline *p) { return trace_active(&p->trace, p->part.step + 1); }

/* What a wait is for, for the watchdog's message. */
static const char *wait_what(const pt_pipeline *p, const pt_request *r) {
  for (int s = 0; s < p->slots; s++) {
    if (r == &p->recv_act[s]) return "an activation";
    if (r == &p->recv_grad[s]) return "a gradient";
    if (r == &p->send_act[s]) return "an activation to be received";
    if (r == &p->send_grad[s]) return "a gradient to be received";
  }
  return "a message";
}

static int wait_peer(const pt_pipeline *p, const pt_request *r) {
  for (int s = 0; s < p->slots; s++) {
    if (r == &p->recv_act[s] || r == &p->send_grad[s]) return p->rank - 1;
    if (r == &p->recv_grad[s] || r == &p->send_act[s]) return p->rank + 1;
  }
  return -1;
}

/* Waits for a request; when the step is traced, the time blocked becomes a "wait" span. */
static void wait_for(pt_pipeline *p, pt_request *r, int mb) {
  if (!r->impl) return;
  double t0 = pt_now_s();
  watchdog_arm(wait_what(p, r), wait_peer(p, r), p->part.step + 1);
  comm_wait(r);
  watchdog_disarm(); /* only time spent blocked counts, never computation */
  if (tracing(p)) trace_add(&p->trace, "wait", "wait", mb, p->part.step + 1, t0, pt_now_s());
}

static void act_load(pt_pipeline *p, int mb) {
  int s = slot_of(p, mb);
  if (!p->is_first && !p->is_last) return;
  void *in = p->is_first ? stage_input_host(&p->part.stage, s) : p->scratch_in;
  void *tg = p->is_last ? p->targets[s] : p->scratch_tg;
  part_fill(&p->part, p->replica, mb, in, tg);
  if (p->is_first) stage_input_commit(&p->part.stage, s);
}

static void act_forward(pt_pipeline *p, int mb) {
  int s = slot_of(p, mb);
  wait_for(p, &p->recv_act[s], mb);
  wait_for(p, &p->send_act[s], mb); /* the slot's output still leaving for the next stage */
  double t0 = pt_now_s();
  stage_forward(&p->part.stage, s, p->part.B, p->part.T);
  p->step_compute_s += pt_now_s() - t0;
  if (++p->in_flight > p->peak_in_flight) p->peak_in_flight = p->in_flight;
}

/* B, or I when split: both start from the loss (last stage) or the received gradient and leave
 * the input gradient in the slot's send buffer. The slot stays in flight until its W. */
static void act_backward(pt_pipeline *p, int mb, int split) {
  int s = slot_of(p, mb);
  const float *dy = p->dout[s];
  if (!p->is_last) wait_for(p, &p->recv_grad[s], mb);
  if (!p->is_first) wait_for(p, &p->send_grad[s], mb);
  double t0 = pt_now_s();
  if (p->is_last) {
    p->loss +=
        part_compute_loss(&p->part, stage_output(&p->part.stage, s), p->targets[s], p->dlogits);
    dy = p->dlogits;
  }
  if (split) stage_backward_input(&p->part.stage, s, dy, !p->is_first, p->din[s]);
  else stage_backward(&p->part.stage, s, dy, !p->is_first, p->din[s]);
  p->step_compute_s += pt_now_s() - t0;
  if (!split) p->in_flight--;
}

/* W: the weight gradients from what the slot's I kept; releases the slot. */
static void act_backward_weight(pt_pipeline *p, int mb) {
  double t0 = pt_now_s();
  stage_backward_weight(&p->part.stage, slot_of(p, mb));
  p->step_compute_s += pt_now_s() - t0;
  p->in_flight--;
}

static void act_reduce_tied(pt_pipeline *p) {
  model_tie_reduce_local(&p->part.model);
  for (int i = 0; i < p->n_ties; i++) {
    const pt_tensor *t = &p->part.model.tensors[p->ties[i].tensor];
    comm_allreduce_sum_f32(p->ties[i].comm, p->part.model.grads + t->offset, (size_t)t->numel);
  }
}

static void wait_sends(pt_pipeline *p) {
  for (int s = 0; s < p->slots; s++) {
    wait_for(p, &p->send_act[s], -1);
    wait_for(p, &p->send_grad[s], -1);
  }
}

/* Global gradient norm: per-tensor sums of squares, gathered on stage 0 peer by peer (so a
 * missing stage is named by the watchdog) and added in global tensor order, stage after stage
 * (tied copies count once, on their first owner's stage); stage 0 broadcasts the result. */
static double global_norm(pt_pipeline *p) {
  int n = p->part.model.n_tensors, tag = PT_TAG_GRAD_NORM;
  double *mine = pt_calloc((size_t)n + 1, sizeof(double)), s = 0.0;
  grad_tensor_sumsq(&p->part.model, mine);
  int root = plan_rank(&p->plan, p->replica, 0);
  if (p->stage_id == 0) {
    for (int i = 0; i < n; i++) s += mine[i];
    for (int st = 1; st < p->P; st++) {
      int count = 0;
      pt_request q = {0};
      watchdog_arm("its gradient norm", plan_rank(&p->plan, p->replica, st), p->part.step + 1);
      comm_recv_async(p->pipe, &count, sizeof count, st, tag, &q), comm_wait(&q);
      double *theirs = pt_calloc((size_t)count + 1, sizeof(double));
      comm_recv_async(p->pipe, theirs, sizeof(double) * (size_t)count, st, tag, &q), comm_wait(&q);
      for (int i = 0; i < count; i++) s += theirs[i];
      free(theirs);
    }
  } else {
    pt_request q = {0};
    watchdog_arm("stage 0 to take the gradient norm", root, p->part.step + 1);
    comm_send_async(p->pipe, &n, sizeof n, 0, tag, &q), comm_wait(&q);
    comm_send_async(p->pipe, mine, sizeof(double) * (size_t)n, 0, tag, &q), comm_wait(&q);
  }
  watchdog_arm("the gradient norm from stage 0", p->stage_id == 0 ? -1 : root, p->part.step + 1);
  comm_broadcast(p->pipe, &s, sizeof s, 0);
  watchdog_disarm();
  free(mine);
  return sqrt(s);
}

/* The first layer whose output went non-finite is the lowest such index over all ranks. */
static void name_nonfinite(pt_pipeline *p) {
  uint64_t bad = p->part.stage.bad_layer >= 0 ? (uint64_t)p->part.stage.bad_layer : UINT64_MAX;
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
  double t0 = pt_now_s();
  p->nonfinite = part_update(&p->part, *norm, *lr); /* the same on every rank: the norm is */
  p->step_compute_s += pt_now_s() - t0;
  if (p->nonfinite) name_nonfinite(p);
}

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
      [ACT_OPTIMIZER] = {"optimizer", "optimizer"}};
  trace_add(&p->trace, span[a->kind].name, span[a->kind].cat, a->mb, p->part.step + 1, t0,
            pt_now_s());
}

static void run_action(pt_pipeline *p, const pt_action *a, double *norm, double *lr) {
  int mb = a->mb, s = mb >= 0 ? slot_of(p, mb) : 0;
  int prev = p->stage_id - 1, next = p->stage_id + 1;
  switch (a->kind) {
  case ACT_RECV_ACT:
    comm_recv_async(p->pipe, stage_input(&p->part.stage, s), p->in_bytes, prev, tag_act(mb),
                    &p->recv_act[s]);
    break;
  case ACT_LOAD: act_load(p, mb); break;
  case ACT_FORWARD: act_forward(p, mb); break;
  case ACT_SEND_ACT:
    comm_send_async(p->pipe, stage_output(&p->part.stage, s), p->out_bytes, next, tag_act(mb),
                    &p->send_act[s]);
    break;
  case ACT_RECV_GRAD:
    comm_recv_async(p->pipe, p->dout[s], p->out_bytes, next, tag_grad(mb), &p->recv_grad[s]);
    break;
  case ACT_BACKWARD: act_backward(p, mb, 0); break;
  case ACT_BACKWARD_INPUT: act_backward(p, mb, 1); break;
  case ACT_BACKWARD_WEIGHT: act_backward_weight(p, mb); break;
  case ACT_SEND_GRAD:
    comm_send_async(p->pipe, p->din[s], p->in_bytes, prev, tag_grad(mb), &p->send_grad[s]);
    break;
  case ACT_REDUCE_TIED:
    watchdog_arm("the tied-weight gradient reduction", -1, p->part.step + 1);
    act_reduce_tied(p);
    watchdog_disarm();
    break;
  case ACT_REDUCE_DP:
    watchdog_arm("the data-parallel gradient reduction", -1, p->part.step + 1);
    if (p->dp > 1)
      comm_allreduce_sum_f32(p->dp_comm, p->part.model.grads, (size_t)p->part.model.n_floats);
    watchdog_disarm();
    break;
  case ACT_OPTIMIZER: act_optimizer(p, norm, lr); break;
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
    comm_send_async(comm_world(), mine, sizeof(double) * (size_t)n, 0, tag, &r);
    comm_wait(&r);
    watchdog_disarm();
    return;
  }
  memcpy(all, mine, sizeof(double) * (size_t)n);
  for (int r = 1; r < world; r++) {
    pt_request q = {0};
    watchdog_arm(what, r, p->part.step);
    comm_recv_async(comm_world(), all + (size_t)r * n, sizeof(double) * (size_t)n, r, tag, &q);
    comm_wait(&q);
    watchdog_disarm();
  }
}

/* The step's loss: each replica's last stage holds its sum; rank 0 adds them in replica order. */
static double gather_loss(pt_pipeline *p) {
  int world = p->P * p->dp;
  double *all = pt_calloc((size_t)world, sizeof(double)), mine = p->is_last ? p->loss : 0.0;
  pipeline_gather_root(p, &mine, 1, all, "the end-of-step loss");
  double loss = 0.0;
  for (int r = 0; r < p->dp; r++) loss += all[plan_rank(&p->plan, r, p->P - 1)];
  free(all);
  return loss;
}

int pipeline_step(pt_pipeline *p, pt_step_metrics *out) {
  double t0 = pt_now_s(), norm = 0.0, lr = 0.0;
  p->nonfinite = 0;
  p->part.stage.bad_layer = -1;
  model_zero_grads(&p->part.model);
  p->loss = 0.0;
  p->step_compute_s = 0.0;
  const pt_action *acts = p->sched.acts[p->stage_id];
  for (int i = 0; i < p->sched.n_acts[p->stage_id]; i++) {
    double a0 = pt_now_s();
    run_action(p, &acts[i], &norm, &lr);
    if (tracing(p)) trace_action(p, &acts[i], a0);
  }
  p->compute_s += p->step_compute_s;
  double loss = gather_loss(p);
  p->last_step_s = part_end_step(&p->part, t0, loss, lr, norm, out);
  p->total_s += p->last_step_s;
  return p->nonfinite;
}

/* FNV-1a of the copy's bytes; the group's min and max must agree. */
void pipeline_check_ties(pt_pipeline *p) {
  if (p->n_ties > 0) model_to_host(&p->part.model);
  for (int i = 0; i < p->n_ties; i++) {
    const pt_tensor *t = &p->part.model.tensors[p->ties[i].tensor];
    const unsigned char *b = (const unsigned char *)(p->part.model.host_params + t->offset);
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (int64_t j = 0; j < 4 * t->numel; j++) h = (h ^ b[j]) * 1099511628211ull;
    lo = hi = h;
    comm_allreduce_min_u64(p->ties[i].comm, &lo, 1);
    comm_allreduce_max_u64(p->ties[i].comm, &hi, 1);
    if (lo != hi)
      pt_fatal("tied weight '%s' differs between the stages holding it after step %lld; the "
               "copies were not kept in sync (please report this)",
               p->part.model.layers[t->layer].tie, (long long)p->part.step);
  }
}

void pipeline_free(pt_pipeline *p) {
  wait_sends(p);
  for (int s = 0; s < p->slots; s++) {
    comm_wait(&p->recv_act[s]);
    comm_wait(&p->recv_grad[s]);
    device_free(p->part.model.dev, p->dout[s]);
    device_free(p->part.model.dev, p->din[s]);
    pt_free_aligned(p->targets[s]);
  }
  free(p->dout), free(p->din), free(p->targets);
  free(p->recv_act), free(p->recv_grad), free(p->send_act), free(p->send_grad);
  device_free(p->part.model.dev, p->dlogits);
  pt_free_aligned(p->scratch_in);
  pt_free_aligned(p->scratch_tg);
  for (int i = 0; i < p->n_ties; i++) comm_free(p->ties[i].comm);
  free(p->ties);
  comm_free(p->pipe);
  comm_free(p->dp_comm);
  trace_free(&p->trace);
  schedule_free(&p->sched);
  plan_free(&p->plan);
  part_free(&p->part);
  memset(p, 0, sizeof *p);
}

/* --- Checkpoints -------------------------------------------------------------------------- */

/* All ranks agree whether any failed; the first failing rank keeps its message. */
static int agree_failure(pt_pipeline *p, int failed, char *err) {
  int first = comm_first_failed(comm_world(), failed);
  if (first < 0) return 0;
  if (p->rank != first) err[0] = '\0'; /* one rank prints the one error line */
  return -1;
}

int pipeline_load(pt_pipeline *p, const char *path, char *err, size_t errsz) {
  return agree_failure(p, part_load(&p->part, path, err, errsz) != 0, err);
}

/* Every rank learns rank 0's verdict: also the barrier that keeps anyone from going on (or
 * exiting) before the manifest is down. */
static int agree_with_root(pt_pipeline *p, int ok) {
  uint64_t v = (uint64_t)ok;
  comm_broadcast(comm_world(), &v, sizeof v, 0);
  return (int)v;
}

/* Rank 0, once every stage reported: the manifest, or (when a stage failed) the rollback. */
static int save_finish(pt_pipeline *p, const char *dir, const pt_spec_source *src,
                       const uint64_t *all, char *err, size_t errsz) {
  ckpt_stage_files *files = pt_calloc((size_t)p->P, sizeof *files);
  int ok = 1;
  for (int s = 0; s < p->P; s++) { /* replica 0's stage s is rank s */
    snprintf(files[s].model_file, sizeof files[s].model_file, "model-s%03d.safetensors", s);
    snprintf(files[s].optim_file, sizeof files[s].optim_file, "optim-s%03d.safetensors", s);
    files[s].model_crc = (uint32_t)all[5 * s], files[s].model_bytes = (int64_t)all[5 * s + 1];
    files[s].optim_crc = (uint32_t)all[5 * s + 2], files[s].optim_bytes = (int64_t)all[5 * s + 3];
    ok &= all[5 * s + 4] != 0;
  }
  if (ok && checkpoint_write_manifest(dir, &p->part.model, src, p->part.step, p->part.opt.t, p->P,
                                      p->dp, p->plan.bounds, files, err, errsz) != 0)
    ok = 0;
  if (ok) checkpoint_end_save(dir);
  else checkpoint_abort_save(dir);
  free(files);
  return ok;
}

int pipeline_save(pt_pipeline *p, const char *dir, const pt_spec_source *src, char *err,
                  size_t errsz) {
  err[0] = '\0';
  model_to_host(&p->part.model);
  optimizer_to_host(&p->part.opt);
  int ok = p->rank != 0 || checkpoint_begin_save(dir, err, errsz) == 0;
  if (!agree_with_root(p, ok)) return -1;
  ckpt_stage_files mine;
  memset(&mine, 0, sizeof mine);
  int first = plan_first_layer(&p->plan, p->stage_id), end = plan_end_layer(&p->plan, p->stage_id);
  ok = p->replica != 0 ||
       checkpoint_write_stage(dir, &p->part.model, &p->part.opt, p->stage_id, first, end, &mine,
                              err, errsz) == 0;
  uint64_t rec[5] = {mine.model_crc, (uint64_t)mine.model_bytes, mine.optim_crc,
                     (uint64_t)mine.optim_bytes, (uint64_t)ok};
  uint64_t *all = pt_calloc(5 * (size_t)(p->P * p->dp), sizeof(uint64_t));
  comm_allgather_u64(comm_world(), rec, 5, all);
  if (p->rank == 0) ok = save_finish(p, dir, src, all, err, errsz);
  free(all);
  return agree_with_root(p, ok) ? 0 : -1;
}

/* Copies every tensor a stage model holds (not tied copies) into the whole model, by name. */
static void copy_into(pt_model *whole, const pt_model *part) {
  for (int i = 0; i < part->n_tensors; i++) {
    const pt_tensor *t = &part->tensors[i];
    if (t->tied_copy) continue;
    for (int j = 0; j < whole->n_tensors; j++)
      if (!strcmp(whole->tensors[j].name, t->name)) {
        memcpy(whole->host_params + whole->tensors[j].offset, part->host_params + t->offset,
               sizeof(float) * (size_t)t->numel);
        break;
      }
  }
}

/* Rank 0: its own stage and every other stage's weights (replica 0) into one whole model on the
 * host, then the file. */
static void gather_whole(pt_pipeline *p, const char *path, int tag) {
  pt_model whole;
  spec_errors e = {0};
  if (model_configure(&whole, p->part.spec, &e) != 0) pt_fatal("%s", e.msg);
  model_alloc_on(&whole, 0, whole.n_layers, device_host());
  model_to_host(&p->part.model);
  copy_into(&whole, &p->part.model);
  for (int s = 1; s < p->P; s++) { /* a stage's layout is known from its layer range */
    pt_model part;
    if (model_configure(&part, p->part.spec, &e) != 0) pt_fatal("%s", e.msg);
    model_alloc_on(&part, plan_first_layer(&p->plan, s), plan_end_layer(&p->plan, s),
                   device_host());
    pt_request r = {0};
    comm_recv_async(p->pipe, part.params, sizeof(float) * (size_t)part.n_floats, s, tag, &r);
    comm_wait(&r);
    copy_into(&whole, &part);
    model_free(&part);
  }
  char err[1024];
  if (checkpoint_write_sequential(&whole, NULL, path, p->part.step, err, sizeof err) != 0)
    pt_fatal("--gather: %s", err);
  model_free(&whole);
}

void pipeline_gather(pt_pipeline *p, const char *path) {
  int tag = PT_TAG_GATHER_PARAMS;
  pt_model *m = &p->part.model;
  if (p->replica == 0 && p->stage_id > 0) {
    pt_request r = {0};
    model_to_host(m);
    comm_send_async(p->pipe, m->host_params, sizeof(float) * (size_t)m->n_floats, 0, tag, &r);
    comm_wait(&r);
  }
  if (p->rank == 0) gather_whole(p, path, tag);
  comm_barrier(comm_world());
}
