#include "engine/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "device/placement.h"
#include "observe/watchdog.h"

static int seq_len(const pt_pipeline *p) {
  return p->model.input_tokens ? (int)p->spec->seq_len : 1;
}

static int tag_act(int mb) { return 2 * mb; }
static int tag_grad(int mb) { return 2 * mb + 1; }

/* One group per tie key and replica, over the stages that hold a copy (split is collective:
 * every rank takes part for every key, with no color when it holds no copy). */
static void make_tie_groups(pt_pipeline *p) {
  const pt_model *m = &p->model;
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
  for (int i = 0; i < p->n_ties; i++) { /* on the host copies, which still hold the init */
    const pt_tensor *t = &p->model.tensors[p->ties[i].tensor];
    comm_broadcast(p->ties[i].comm, p->model.host_params + t->offset, sizeof(float) * t->numel, 0);
  }
  model_to_device(&p->model);
}

static void alloc_slots(pt_pipeline *p) {
  int B = (int)p->spec->train.micro_batch_size, T = seq_len(p), S = p->slots;
  const pt_layer *L0 = &p->model.layers[p->stage.first], *Ln = &p->model.layers[p->stage.last - 1];
  p->in_bytes = (L0->in_tokens ? 4 : 4 * (size_t)L0->in_dim) * (size_t)B * T;
  p->out_bytes = 4 * (size_t)Ln->out_dim * B * T;
  p->dout = pt_calloc((size_t)S, sizeof(float *));
  p->din = pt_calloc((size_t)S, sizeof(float *));
  p->targets = pt_calloc((size_t)S, sizeof(void *));
  p->recv_act = pt_calloc((size_t)S, sizeof(pt_request));
  p->recv_grad = pt_calloc((size_t)S, sizeof(pt_request));
  p->send_act = pt_calloc((size_t)S, sizeof(pt_request));
  p->send_grad = pt_calloc((size_t)S, sizeof(pt_request));
  int tcols = p->model.input_tokens ? 1 : p->spec->data.targets;
  for (int s = 0; s < S; s++) {
    if (!p->is_last) p->dout[s] = device_alloc(p->model.dev, p->out_bytes);
    if (!p->is_first) p->din[s] = device_alloc(p->model.dev, p->in_bytes);
    if (p->is_last) p->targets[s] = pt_alloc_aligned(4 * (size_t)B * T * tcols); /* host */
  }
  p->target_bytes = 4 * (size_t)B * T * tcols;
  if (p->is_last) p->dlogits = device_alloc(p->model.dev, p->out_bytes);
  /* data_fill writes inputs and targets together; the side this stage does not use lands here */
  if (!p->is_first && p->is_last)
    p->scratch_in = pt_alloc_aligned(4 * (size_t)B * T * (p->model.input_dim + 1));
  if (p->is_first && !p->is_last) p->scratch_tg = pt_alloc_aligned(4 * (size_t)B * T * tcols);
}

static int check_layout(pt_pipeline *p, char *err, size_t errsz) {
  p->P = (int)p->spec->pipeline.stages;
  p->dp = (int)p->spec->pipeline.data_parallel;
  int world = comm_size(comm_world());
  if (world != p->P * p->dp) { /* every rank sees the same numbers; rank 0 will print */
    snprintf(err, errsz, "%s: pipeline.stages (%d) x pipeline.data_parallel (%d) = %d ranks, but "
             "this job has %d; run mpirun -np %d, or change the spec (--set pipeline.stages=...)",
             p->spec->path, p->P, p->dp, p->P * p->dp, world, p->P * p->dp);
    return -1;
  }
  return 0;
}

static int build_plan(pt_pipeline *p, char *err, size_t errsz) {
  spec_errors e = {0};
  if (model_configure(&p->model, p->spec, &e) != 0 || plan_build(&p->plan, &p->model, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  if (schedule_build(&p->sched, p->spec->pipeline.schedule, p->P,
                     (int)p->spec->train.micro_batches) != 0 ||
      schedule_validate(&p->sched, err, errsz) != 0)
    pt_fatal("schedule %s: %s", p->spec->pipeline.schedule, err);
  return 0;
}

/* All ranks agree whether any failed; the first failing rank keeps its message. */
static int agree_failure(pt_pipeline *p, int failed, char *err);

/* This rank's device (pipeline.device; the GPU from pipeline.devices or the node-local rank)
 * and, on GPUs, the device transport for activations and reductions (comm.backend), which
 * the groups split afterwards inherit. Collective. */
/* The local GPU this rank drives: pipeline.devices, else its node-local rank. One GPU per rank
 * unless the spec says how to share them (pipeline.devices, or comm.backend: mpi, which
 * stages through host memory and lets ranks share). A launcher that shows each rank only its
 * own GPU (CUDA_VISIBLE_DEVICES per rank) leaves GPU 0 for everyone. -1 with err. */
static int local_gpu(pt_pipeline *p, int on_gpu, char *err, size_t errsz) {
  const pt_spec *s = p->spec;
  int id = plan_device(&p->plan, p->rank, comm_local_rank()), n = device_gpu_count();
  int given = s->pipeline.devices != NULL, shared = s->comm_backend == SPEC_COMM_MPI;
  if (given || !on_gpu) return id;
  if (n == 1 && getenv("CUDA_VISIBLE_DEVICES")) return 0;
  if (shared) return n > 0 ? comm_local_rank() % n : id;
  return placement_check_gpus(comm_local_size(), n, given, err, errsz) == 0 ? id : -1;
}

static int open_device(pt_pipeline *p, char *err, size_t errsz) {
  const pt_spec *s = p->spec;
  int first = plan_first_layer(&p->plan, p->stage_id), last = plan_end_layer(&p->plan, p->stage_id);
  const char *kind = device_resolve(spec_device_names[s->pipeline.device], p->model.layers, p->model.n_layers);
  int on_gpu = !strcmp(kind, "gpu"), gpu = local_gpu(p, on_gpu, err, errsz);
  int failed = on_gpu && gpu < 0;
  failed = failed || device_select(kind, gpu, err, errsz) != 0 ||
           device_check_layers(device_current(), p->model.layers, first, last, err, errsz) != 0;
  if (agree_failure(p, failed, err) != 0) return -1;
  pt_device *d = device_current();
  if (d->kind != DEV_GPU) return 0;
  int nccl = s->comm_backend != SPEC_COMM_MPI;
  failed = comm_use_device(nccl, device_stream(d), err, errsz) != 0;
  if (!failed && nccl) /* every built-in schedule passes; a new one must too (tests) */
    failed = schedule_check_rendezvous(&p->sched, err, errsz) != 0;
  return agree_failure(p, failed, err);
}

int pipeline_init(pt_pipeline *p, const pt_spec *spec, char *err, size_t errsz) {
  memset(p, 0, sizeof *p);
  p->spec = spec;
  p->rank = comm_rank(comm_world());
  if (check_layout(p, err, errsz) != 0 || build_plan(p, err, errsz) != 0) {
    if (p->rank != 0) err[0] = '\0'; /* every rank fails alike: rank 0 says it once */
    return -1;
  }
  p->stage_id = plan_stage_of_rank(&p->plan, p->rank);
  p->replica = plan_replica_of_rank(&p->plan, p->rank);
  p->is_first = p->stage_id == 0;
  p->is_last = p->stage_id == p->P - 1;
  p->slots = p->sched.n_slots[p->stage_id];
  if (open_device(p, err, errsz) != 0) return -1;
  p->pipe = comm_split(comm_world(), p->replica, p->stage_id);
  p->dp_comm = comm_split(comm_world(), p->stage_id, p->replica);
  int peers[2], n_peers = 0; /* device transports connect lazily: pay for it now, not in step 1 */
  if (!p->is_first) peers[n_peers++] = p->stage_id - 1;
  if (!p->is_last) peers[n_peers++] = p->stage_id + 1;
  comm_connect(p->pipe, peers, n_peers);
  /* a stage this machine cannot hold is refused from the plan, not by the allocator; only the
   * end stages read data; all ranks agree on any failure, or the rest would hang */
  char what[4200];
  snprintf(what, sizeof what, "%s: stage %d", spec->path, p->stage_id);
  int64_t need = p->plan.mem[p->stage_id].total, gpu_bytes = (int64_t)device_memory_bytes(device_current());
  int failed = (gpu_bytes > 0 ? memory_check_device(need, gpu_bytes, what, err, errsz)
                              : memory_check_fits(need, comm_local_size(), what, err, errsz)) != 0;
  if (!failed && (p->is_first || p->is_last)) failed = data_open(&p->data, spec, err, errsz) != 0;
  if (agree_failure(p, failed, err) != 0) return -1;
  int first = plan_first_layer(&p->plan, p->stage_id), last = plan_end_layer(&p->plan, p->stage_id);
  model_alloc(&p->model, first, last);
  make_tie_groups(p);
  broadcast_ties(p);
  stage_init(&p->stage, &p->model, first, last, (int)spec->train.micro_batch_size, seq_len(p),
             p->slots, (int)spec->train.activation_checkpoint_interval);
  p->stage.check_finite = spec->train.on_nonfinite == SPEC_NONFINITE_ABORT;
  optimizer_init(&p->opt, &spec->train, p->model.n_floats);
  alloc_slots(p);
  return 0;
}

/* --- Actions ------------------------------------------------------------------------------ */

static int slot_of(const pt_pipeline *p, int mb) { return mb % p->slots; }

static int tracing(const pt_pipeline *p) { return trace_active(&p->trace, p->step + 1); }

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
  watchdog_arm(wait_what(p, r), wait_peer(p, r), p->step + 1);
  comm_wait(r);
  watchdog_disarm(); /* only time spent blocked counts, never computation */
  if (tracing(p)) trace_add(&p->trace, "wait", "wait", mb, p->step + 1, t0, pt_now_s());
}

static void act_load(pt_pipeline *p, int mb) {
  const spec_train *c = &p->spec->train;
  int B = (int)c->micro_batch_size, s = slot_of(p, mb);
  int64_t G = p->dp * c->micro_batches * B, j0 = ((int64_t)p->replica * c->micro_batches + mb) * B;
  if (!p->is_first && !p->is_last) return;
  void *in = p->is_first ? stage_input_host(&p->stage, s) : p->scratch_in;
  void *tg = p->is_last ? p->targets[s] : p->scratch_tg;
  data_fill(&p->data, p->step, G, j0, B, seq_len(p), in, tg, p->model.loss == LOSS_CROSS_ENTROPY);
  if (p->is_first) stage_input_commit(&p->stage, s);
}

static void act_forward(pt_pipeline *p, int mb) {
  int s = slot_of(p, mb);
  wait_for(p, &p->recv_act[s], mb);
  wait_for(p, &p->send_act[s], mb); /* the slot's output still leaving for the next stage */
  double t0 = pt_now_s();
  stage_forward(&p->stage, s, (int)p->spec->train.micro_batch_size, seq_len(p));
  p->step_compute_s += pt_now_s() - t0;
  if (++p->in_flight > p->peak_in_flight) p->peak_in_flight = p->in_flight;
}

static void act_backward(pt_pipeline *p, int mb) {
  int s = slot_of(p, mb), B = (int)p->spec->train.micro_batch_size, T = seq_len(p);
  const float *dy = p->dout[s];
  if (!p->is_last) wait_for(p, &p->recv_grad[s], mb);
  if (!p->is_first) wait_for(p, &p->send_grad[s], mb);
  double t0 = pt_now_s();
  if (p->is_last) {
    const spec_train *c = &p->spec->train;
    double G = (double)(p->dp * c->micro_batches * B);
    float scale = (float)(1.0 / (G * T));
    int F = p->model.layers[p->model.n_layers - 1].out_dim;
    p->loss += device_loss(p->model.dev, p->model.loss, stage_output(&p->stage, s), p->targets[s],
                           p->target_bytes, B * T, F, scale, p->dlogits) * scale;
    dy = p->dlogits;
  }
  stage_backward(&p->stage, s, dy, !p->is_first, p->din[s]);
  p->step_compute_s += pt_now_s() - t0;
  p->in_flight--;
}

static void act_reduce_tied(pt_pipeline *p) {
  model_tie_reduce_local(&p->model);
  for (int i = 0; i < p->n_ties; i++) {
    const pt_tensor *t = &p->model.tensors[p->ties[i].tensor];
    comm_allreduce_sum_f32(p->ties[i].comm, p->model.grads + t->offset, (size_t)t->numel);
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
  int n = p->model.n_tensors, tag = PT_TAG_GRAD_NORM;
  double *mine = pt_calloc((size_t)n + 1, sizeof(double)), s = 0.0;
  grad_tensor_sumsq(&p->model, mine);
  int root = plan_rank(&p->plan, p->replica, 0);
  if (p->stage_id == 0) {
    for (int i = 0; i < n; i++) s += mine[i];
    for (int st = 1; st < p->P; st++) {
      int count = 0;
      pt_request q = {0};
      watchdog_arm("its gradient norm", plan_rank(&p->plan, p->replica, st), p->step + 1);
      comm_recv_async(p->pipe, &count, sizeof count, st, tag, &q), comm_wait(&q);
      double *theirs = pt_calloc((size_t)count + 1, sizeof(double));
      comm_recv_async(p->pipe, theirs, sizeof(double) * (size_t)count, st, tag, &q), comm_wait(&q);
      for (int i = 0; i < count; i++) s += theirs[i];
      free(theirs);
    }
  } else {
    pt_request q = {0};
    watchdog_arm("stage 0 to take the gradient norm", root, p->step + 1);
    comm_send_async(p->pipe, &n, sizeof n, 0, tag, &q), comm_wait(&q);
    comm_send_async(p->pipe, mine, sizeof(double) * (size_t)n, 0, tag, &q), comm_wait(&q);
  }
  watchdog_arm("the gradient norm from stage 0", p->stage_id == 0 ? -1 : root, p->step + 1);
  comm_broadcast(p->pipe, &s, sizeof s, 0);
  watchdog_disarm();
  free(mine);
  return sqrt(s);
}

/* Every rank has the same norm, so every rank takes the same branch. The first layer whose
 * output went non-finite is the lowest such index over all ranks. */
static void decide_nonfinite(pt_pipeline *p) {
  p->nonfinite = p->spec->train.on_nonfinite == SPEC_NONFINITE_SKIP ? 1 : -1;
  p->skipped += p->nonfinite > 0;
  uint64_t bad = p->stage.bad_layer >= 0 ? (uint64_t)p->stage.bad_layer : UINT64_MAX;
  comm_allreduce_min_u64(comm_world(), &bad, 1);
  int layer = bad == UINT64_MAX ? -1 : (int)bad;
  nonfinite_message(&p->model, p->step + 1, layer,
                    layer >= 0 ? plan_stage_of_layer(&p->plan, layer) : 0, p->error,
                    sizeof p->error);
}

static void act_optimizer(pt_pipeline *p, double *norm, double *lr) {
  wait_sends(p);
  *norm = global_norm(p);
  *lr = lr_at(&p->spec->train, p->step);
  if (!isfinite(*norm)) { /* nothing of this step reaches the weights or the optimizer state */
    decide_nonfinite(p);
    return;
  }
  grad_clip(&p->model, *norm, p->spec->train.grad_clip);
  double t0 = pt_now_s();
  optimizer_step(&p->opt, &p->model, *lr);
  p->step_compute_s += pt_now_s() - t0;
}

static void trace_action(pt_pipeline *p, const pt_action *a, double t0) {
  static const char *const names[] = {"recv act",  "load", "F", "send act", "recv grad", "B",
                                      "send grad", "tied grads", "data-parallel grads",
                                      "optimizer"};
  static const char *const cats[] = {"receive", "load", "forward", "send", "receive",
                                     "backward", "send", "allreduce", "allreduce", "optimizer"};
  trace_add(&p->trace, names[a->kind], cats[a->kind], a->mb, p->step + 1, t0, pt_now_s());
}

static void run_action(pt_pipeline *p, const pt_action *a, double *norm, double *lr) {
  int mb = a->mb, s = mb >= 0 ? slot_of(p, mb) : 0;
  int prev = p->stage_id - 1, next = p->stage_id + 1;
  switch (a->kind) {
  case ACT_RECV_ACT:
    comm_recv_async(p->pipe, stage_input(&p->stage, s), p->in_bytes, prev, tag_act(mb), &p->recv_act[s]);
    break;
  case ACT_LOAD: act_load(p, mb); break;
  case ACT_FORWARD: act_forward(p, mb); break;
  case ACT_SEND_ACT:
    comm_send_async(p->pipe, stage_output(&p->stage, s), p->out_bytes, next, tag_act(mb), &p->send_act[s]);
    break;
  case ACT_RECV_GRAD:
    comm_recv_async(p->pipe, p->dout[s], p->out_bytes, next, tag_grad(mb), &p->recv_grad[s]);
    break;
  case ACT_BACKWARD: act_backward(p, mb); break;
  case ACT_SEND_GRAD:
    comm_send_async(p->pipe, p->din[s], p->in_bytes, prev, tag_grad(mb), &p->send_grad[s]);
    break;
  case ACT_REDUCE_TIED:
    watchdog_arm("the tied-weight gradient reduction", -1, p->step + 1);
    act_reduce_tied(p);
    watchdog_disarm();
    break;
  case ACT_REDUCE_DP:
    watchdog_arm("the data-parallel gradient reduction", -1, p->step + 1);
    if (p->dp > 1) comm_allreduce_sum_f32(p->dp_comm, p->model.grads, (size_t)p->model.n_floats);
    watchdog_disarm();
    break;
  case ACT_OPTIMIZER: act_optimizer(p, norm, lr); break;
  case ACT_BACKWARD_INPUT: /* split backward: pipe_train refuses such schedules for now */
  case ACT_BACKWARD_WEIGHT: pt_fatal("schedule %s: I/W are not run yet", p->sched.name);
  }
}

/* Rank 0 receives n doubles from every rank into all[rank * n ...], one peer at a time, so a
 * missing rank is named by the watchdog (a collective could not say who is missing). */
void pipeline_gather_root(pt_pipeline *p, const double *mine, int n, double *all,
                          const char *what) {
  int world = p->P * p->dp, tag = PT_TAG_GATHER_ROOT;
  if (p->rank != 0) {
    pt_request r = {0};
    watchdog_arm(what, 0, p->step);
    comm_send_async(comm_world(), mine, sizeof(double) * (size_t)n, 0, tag, &r);
    comm_wait(&r);
    watchdog_disarm();
    return;
  }
  memcpy(all, mine, sizeof(double) * (size_t)n);
  for (int r = 1; r < world; r++) {
    pt_request q = {0};
    watchdog_arm(what, r, p->step);
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
  const spec_train *c = &p->spec->train;
  double t0 = pt_now_s(), norm = 0.0, lr = 0.0;
  p->nonfinite = 0;
  p->stage.bad_layer = -1;
  model_zero_grads(&p->model);
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
  p->step++;
  double dt = pt_now_s() - t0;
  p->total_s += dt;
  int64_t tokens = p->dp * c->micro_batches * c->micro_batch_size * seq_len(p);
  *out = (pt_step_metrics){.step = p->step, .steps = c->steps, .loss = loss, .lr = lr,
                           .grad_norm = norm, .tokens_per_s = (double)tokens / dt,
                           .step_ms = dt * 1e3, .mfu = -1.0, .skipped_steps = p->skipped};
  p->last_step_s = dt;
  return p->nonfinite;
}

/* FNV-1a of the copy's bytes; the group's min and max must agree. */
void pipeline_check_ties(pt_pipeline *p) {
  if (p->n_ties > 0) model_to_host(&p->model);
  for (int i = 0; i < p->n_ties; i++) {
    const pt_tensor *t = &p->model.tensors[p->ties[i].tensor];
    const unsigned char *b = (const unsigned char *)(p->model.host_params + t->offset);
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (int64_t j = 0; j < 4 * t->numel; j++) h = (h ^ b[j]) * 1099511628211ull;
    lo = hi = h;
    comm_allreduce_min_u64(p->ties[i].comm, &lo, 1);
    comm_allreduce_max_u64(p->ties[i].comm, &hi, 1);
    if (lo != hi)
      pt_fatal("tied weight '%s' differs between the stages holding it after step %lld; the "
               "copies were not kept in sync (please report this)",
               p->model.layers[t->layer].tie, (long long)p->step);
  }
}

void pipeline_free(pt_pipeline *p) {
  wait_sends(p);
  for (int s = 0; s < p->slots; s++) {
    comm_wait(&p->recv_act[s]);
    comm_wait(&p->recv_grad[s]);
    device_free(p->model.dev, p->dout[s]);
    device_free(p->model.dev, p->din[s]);
    pt_free_aligned(p->targets[s]);
  }
  free(p->dout), free(p->din), free(p->targets);
  free(p->recv_act), free(p->recv_grad), free(p->send_act), free(p->send_grad);
  device_free(p->model.dev, p->dlogits);
  pt_free_aligned(p->scratch_in);
  pt_free_aligned(p->scratch_tg);
  for (int i = 0; i < p->n_ties; i++) comm_free(p->ties[i].comm);
  free(p->ties);
  comm_free(p->pipe);
  comm_free(p->dp_comm);
  trace_free(&p->trace);
  stage_free(&p->stage);
  optimizer_free(&p->opt);
  schedule_free(&p->sched);
  plan_free(&p->plan);
  model_free(&p->model);
  data_close(&p->data);
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
  pt_checkpoint c;
  int failed = checkpoint_open(&c, path, err, errsz) != 0;
  if (!failed) {
    failed = checkpoint_load(&c, &p->model, &p->opt, err, errsz) != 0;
    p->step = c.step;
    model_to_device(&p->model);
    optimizer_to_device(&p->opt);
    checkpoint_close(&c);
  }
  return agree_failure(p, failed, err);
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
  if (ok && checkpoint_write_manifest(dir, &p->model, src, p->step, p->opt.t, p->P, p->dp,
                                      p->plan.bounds, files, err, errsz) != 0)
    ok = 0;
  if (ok) checkpoint_end_save(dir);
  else checkpoint_abort_save(dir);
  free(files);
  return ok;
}

int pipeline_save(pt_pipeline *p, const char *dir, const pt_spec_source *src, char *err,
                  size_t errsz) {
  err[0] = '\0';
  model_to_host(&p->model);
  optimizer_to_host(&p->opt);
  int ok = p->rank != 0 || checkpoint_begin_save(dir, err, errsz) == 0;
  if (!agree_with_root(p, ok)) return -1;
  ckpt_stage_files mine;
  memset(&mine, 0, sizeof mine);
  int first = plan_first_layer(&p->plan, p->stage_id), end = plan_end_layer(&p->plan, p->stage_id);
  ok = p->replica != 0 ||
       checkpoint_write_stage(dir, &p->model, &p->opt, p->stage_id, first, end, &mine, err,
                              errsz) == 0;
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

void pipeline_gather(pt_pipeline *p, const char *path) {
  int tag = PT_TAG_GATHER_PARAMS;
  if (p->replica == 0 && p->stage_id > 0) {
    pt_request r = {0};
    model_to_host(&p->model);
    comm_send_async(p->pipe, p->model.host_params, sizeof(float) * (size_t)p->model.n_floats, 0,
                    tag, &r);
    comm_wait(&r);
  }
  if (p->rank == 0) {
    pt_model whole;
    spec_errors e = {0};
    if (model_configure(&whole, p->spec, &e) != 0) pt_fatal("%s", e.msg);
    model_alloc_on(&whole, 0, whole.n_layers, device_host());
    model_to_host(&p->model);
    copy_into(&whole, &p->model);
    for (int s = 1; s < p->P; s++) { /* a stage's layout is known from its layer range */
      pt_model part;
      if (model_configure(&part, p->spec, &e) != 0) pt_fatal("%s", e.msg);
      model_alloc_on(&part, plan_first_layer(&p->plan, s), plan_end_layer(&p->plan, s), device_host());
      pt_request r = {0};
      comm_recv_async(p->pipe, part.params, sizeof(float) * (size_t)part.n_floats, s, tag, &r);
      comm_wait(&r);
      copy_into(&whole, &part);
      model_free(&part);
    }
    char err[1024];
    if (checkpoint_write_sequential(&whole, NULL, path, p->step, err, sizeof err) != 0)
      pt_fatal("--gather: %s", err);
    model_free(&whole);
  }
  comm_barrier(comm_world());
}
