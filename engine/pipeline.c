/* The pipelined engine's set-up and tear-down (engine/pipeline.h): plan, schedule, device,
 * groups, this rank's chunks and their buffers. */
#include "engine/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/placement.h"
#include "engine/pipeline_private.h"

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

/* The plan placed the chunks from the same schedule; a mismatch is a bug, not bad input. */
static void check_same_placement(const pt_pipeline *p) {
  int same = p->plan.n_chunks == p->sched.n_chunks;
  for (int c = 0; same && c < p->plan.n_chunks; c++)
    same = p->plan.chunk_stage[c] == p->sched.chunk_rank[c];
  if (!same) pt_fatal("schedule %s: its chunk placement differs from the plan's", p->sched.name);
}

/* Activation and gradient tags grow with micro-batches and chunks per stage (pipeline_step.c);
 * they must stay below the tags of the other messages on the pipeline group. */
static int check_tags(const pt_pipeline *p, char *err, size_t errsz) {
  int64_t top = 2 * (int64_t)p->sched.n_micro * p->plan.virtual_stages;
  if (top < PT_TAG_GATHER_PARAMS) return 0;
  snprintf(err, errsz, "%s: %d micro-batches x %d chunks per stage are too many to tell the "
           "messages apart; use fewer than %lld micro-batches per step", p->part.spec->path,
           p->sched.n_micro, p->plan.virtual_stages,
           (long long)(PT_TAG_GATHER_PARAMS / (2 * p->plan.virtual_stages)));
  return -1;
}

static int build_plan(pt_pipeline *p, const pt_spec *spec, char *err, size_t errsz) {
  spec_errors e = {0};
  if (part_configure(&p->part, spec, err, errsz) != 0) return -1;
  if (plan_build(&p->plan, &p->part.model, &e) != 0) {
    snprintf(err, errsz, "%s", e.msg);
    return -1;
  }
  if (schedule_build_spec(&p->sched, spec, err, errsz) != 0 ||
      schedule_validate(&p->sched, err, errsz) != 0)
    pt_fatal("schedule %s: %s", spec->pipeline.schedule, err);
  check_same_placement(p);
  if (spec->train.activation_checkpoint_interval > 0 &&
      schedule_check_checkpoint_order(&p->sched, err, errsz) != 0)
    return -1;
  return check_tags(p, err, errsz);
}

/* The local GPU this rank drives: pipeline.devices, else its node-local rank. One GPU per rank
 * unless the spec says how to share them (pipeline.devices, or comm.backend: mpi, which
 * stages through host memory and lets ranks share). A launcher that shows each rank only its
 * own GPU (CUDA_VISIBLE_DEVICES per rank) leaves GPU 0 for everyone. -1 with err. */
static int local_gpu(pt_pipeline *p, spec_device kind, char *err, size_t errsz) {
  const pt_spec *s = p->part.spec;
  int id = plan_device(&p->plan, p->rank, comm_local_rank()), n = device_count(kind);
  int given = s->pipeline.devices != NULL, shared = s->comm_backend == SPEC_COMM_MPI;
  if (given || !device_kind(kind)->is.one_per_rank) return id;
  if (n == 1 && getenv("CUDA_VISIBLE_DEVICES")) return 0;
  if (shared) return n > 0 ? comm_local_rank() % n : id;
  return placement_check_gpus(comm_local_size(), n, given, err, errsz) == 0 ? id : -1;
}

/* Over NCCL one stream carries a rank's transfers in issue order, and with several chunks per
 * stage one chunk's sends can wait behind another's receive on both ranks (a deadlock): such
 * schedules need a stream per link (schedule/schedule_links.c), which the device transport does
 * not have. MPI, also staging GPU buffers, matches by tag and has no such order. */
static int refuse_nccl_chunks(const pt_pipeline *p, const comm_traits *t, char *err,
                              size_t errsz) {
  if (!t->in_order || p->plan.virtual_stages == 1 || p->P == 1) return 0;
  snprintf(err, errsz, "%s: %d chunks per stage (%s) over NCCL need a transport per link, which "
           "comm.backend: nccl does not have yet; set comm.backend: mpi (GPU buffers staged "
           "through host memory) or use one chunk per stage", p->part.spec->path,
           p->plan.virtual_stages, p->sched.name);
  return -1;
}

/* Over NCCL the schedule must finish under NCCL's rules with this layout's reductions (its tie
 * groups and replicas), each a rendezvous on a communicator of its own. */
static int check_nccl_schedule(const pt_pipeline *p, char *err, size_t errsz) {
  unsigned char *tie = pt_calloc((size_t)p->part.model.n_layers * (size_t)p->P + 1, 1);
  pt_sched_reductions red = {pipeline_tie_table(p, tie), tie, p->dp};
  int rc = schedule_check_rendezvous_in(&p->sched, &red, NULL, err, errsz);
  free(tie);
  return rc;
}

/* This rank's device (pipeline.device; the GPU from local_gpu) and, where the host cannot
 * address its buffers (GPUs), the device transport for activations and reductions
 * (comm.backend), which the groups split afterwards inherit. Collective. */
static int open_device(pt_pipeline *p, char *err, size_t errsz) {
  const pt_spec *s = p->part.spec;
  pt_range *ranges = pt_calloc((size_t)p->plan.virtual_stages, sizeof *ranges);
  int n = plan_stage_ranges(&p->plan, p->stage_id, ranges);
  spec_device kind = part_resolve_device(&p->part);
  int gpu = local_gpu(p, kind, err, errsz);
  int failed = (device_kind(kind)->is.one_per_rank && gpu < 0) ||
               part_open_device(&p->part, kind, gpu, ranges, n, err, errsz) != 0;
  free(ranges);
  if (pipeline_agree_failure(p, failed, err) != 0) return -1;
  pt_device *d = device_current();
  if (device_host_addressable(d)) return 0; /* comm sends the buffers as they are */
  const comm_traits *t = comm_device_traits(s->comm_backend); /* NCCL's unless mpi */
  failed = refuse_nccl_chunks(p, t, err, errsz) != 0 ||
           comm_use_device(s->comm_backend, device_stream(d), err, errsz) != 0;
  /* every built-in schedule passes; a new one must too (tests) */
  if (!failed && (t->in_order || t->holds_sends))
    failed = check_nccl_schedule(p, err, errsz) != 0;
  return pipeline_agree_failure(p, failed, err);
}

/* The stages this rank exchanges activations with, ascending, each once. */
static int pipe_peers(const pt_pipeline *p, int *peers) {
  int n = 0;
  for (int s = 0; s < p->P; s++) {
    int linked = 0;
    for (int i = 0; i < p->n_chunks; i++)
      linked |= p->chunks[i].prev_stage == s || p->chunks[i].next_stage == s;
    if (linked) peers[n++] = s;
  }
  return n;
}

/* The groups: this replica's pipeline, this stage's data-parallel group; device transports
 * connect lazily, so the pipeline neighbours connect now rather than in step 1. Collective. */
static void make_groups(pt_pipeline *p) {
  p->pipe = comm_split(comm_world(), p->replica, p->stage_id);
  p->dp_comm = comm_split(comm_world(), p->stage_id, p->replica);
  int *peers = pt_calloc((size_t)p->P, sizeof(int)), n_peers = pipe_peers(p, peers);
  comm_connect(p->pipe, peers, n_peers);
  free(peers);
}

/* One rank's row of the node's GPU memory check. */
typedef struct {
  char bus[32]; /* its GPU's PCI bus id: ranks with another CUDA_VISIBLE_DEVICES still match */
  int rank, stage;
  int64_t need;
} gpu_need;

/* The ranks of this node on this rank's GPU, itself included (pipeline.devices may repeat an id
 * under comm.backend mpi): what they need together in *need and, where there are several, their
 * names in what ("x.yaml: ranks 0, 1 (stages 0, 1) on one GPU"). Returns how many. Collective
 * over the node; every rank has opened its GPU, so what the GPU has free afterwards excludes
 * their contexts, and none allocates its part before all have checked (pipeline_agree_failure). */
static int gpu_sharers(const pt_pipeline *p, int64_t *need, char *what, size_t whatsz) {
  int n = comm_local_size(), k = 0;
  gpu_need mine = {.rank = p->rank, .stage = p->stage_id, .need = *need}, *all;
  snprintf(mine.bus, sizeof mine.bus, "%s", device_pci_bus_id(device_current()));
  all = pt_calloc((size_t)n, sizeof *all);
  comm_node_allgather(&mine, sizeof mine, all);
  char ranks[2048] = "", stages[2048] = "";
  *need = 0;
  for (int i = 0; i < n; i++) {
    /* a GPU without a bus id (cudaDeviceGetPCIBusId failed) is taken as the rank's own */
    if (i != comm_local_rank() && (!mine.bus[0] || strcmp(all[i].bus, mine.bus) != 0)) continue;
    *need += all[i].need;
    size_t r = strlen(ranks), s = strlen(stages);
    snprintf(ranks + r, sizeof ranks - r, "%s%d", k ? ", " : "", all[i].rank);
    snprintf(stages + s, sizeof stages - s, "%s%d", k++ ? ", " : "", all[i].stage);
  }
  free(all);
  if (k > 1)
    snprintf(what, whatsz, "%s: ranks %s (stages %s) on one GPU", p->part.spec->path, ranks,
             stages);
  return k;
}

/* A stage this machine cannot hold is refused from the plan, not by the allocator (on a GPU,
 * with the stages sharing it); only the ranks running an end chunk read data (every rank with
 * data.documents: each stage computes its micro-batches' document starts and positions from
 * it). All ranks agree on any failure, or the rest would hang. */
static int check_stage(pt_pipeline *p, char *err, size_t errsz) {
  char what[4200];
  int64_t need = p->plan.mem[p->stage_id].total;
  int sharers = comm_local_size();
  snprintf(what, sizeof what, "%s: stage %d", p->part.spec->path, p->stage_id);
  if (device_memory_bytes(device_current()) > 0)
    sharers = gpu_sharers(p, &need, what, sizeof what);
  int failed = part_check_memory(&p->part, need, sharers, what, err, errsz) != 0;
  if (!failed && (p->holds_first || p->holds_last || p->part.spec->data.documents))
    failed = data_open(&p->part.data, p->part.spec, err, errsz) != 0 ||
             data_open_eval(&p->part.eval_data, p->part.spec, err, errsz) != 0;
  return pipeline_agree_failure(p, failed, err);
}

/* Where chunk c's neighbour c + dir runs: on this rank (its index in chunks, *local), on
 * another stage (*remote), or nowhere (both -1: c is an end chunk). */
static void neighbour(const pt_pipeline *p, int c, int dir, int *local, int *remote) {
  int other = c + dir, C = p->plan.n_chunks;
  *local = *remote = -1;
  if (other < 0 || other >= C) return;
  if (p->plan.chunk_stage[other] == p->stage_id) *local = p->chunk_at[other];
  else *remote = p->plan.chunk_stage[other];
}

/* This rank's chunks from the plan, ascending, and where their neighbours run. */
static void layout_chunks(pt_pipeline *p) {
  int C = p->plan.n_chunks, *ids = pt_calloc((size_t)C, sizeof(int));
  p->n_chunks = plan_stage_chunks(&p->plan, p->stage_id, ids);
  p->chunks = pt_calloc((size_t)p->n_chunks, sizeof(pt_chunk));
  p->chunk_at = pt_calloc((size_t)C, sizeof(int));
  for (int c = 0; c < C; c++) p->chunk_at[c] = -1;
  for (int i = 0; i < p->n_chunks; i++) p->chunk_at[ids[i]] = i;
  for (int i = 0; i < p->n_chunks; i++) {
    pt_chunk *k = &p->chunks[i];
    k->id = ids[i];
    k->first = plan_first_layer(&p->plan, k->id);
    k->last = plan_end_layer(&p->plan, k->id);
    k->slots = p->sched.n_slots[k->id];
    k->is_first = k->id == 0;
    k->is_last = k->id == C - 1;
    neighbour(p, k->id, -1, &k->prev, &k->prev_stage);
    neighbour(p, k->id, 1, &k->next, &k->next_stage);
    p->holds_first |= k->is_first;
    p->holds_last |= k->is_last;
  }
  free(ids);
}

/* bf16: the packed messages of each slot, to and from the chunk's remote neighbours. */
static void alloc_wire_buffers(pt_pipeline *p, pt_chunk *k) {
  pt_device *d = p->part.model.dev;
  size_t S = (size_t)k->slots;
  if (k->prev_stage >= 0) {
    k->wire_act_in = pt_calloc(S, sizeof(uint16_t *));
    k->wire_grad_out = pt_calloc(S, sizeof(uint16_t *));
  }
  if (k->next_stage >= 0) {
    k->wire_act_out = pt_calloc(S, sizeof(uint16_t *));
    k->wire_grad_in = pt_calloc(S, sizeof(uint16_t *));
  }
  for (size_t s = 0; s < S; s++) {
    if (k->wire_act_in) k->wire_act_in[s] = device_alloc(d, k->in_bytes / 2);
    if (k->wire_grad_out) k->wire_grad_out[s] = device_alloc(d, k->in_bytes / 2);
    if (k->wire_act_out) k->wire_act_out[s] = device_alloc(d, k->out_bytes / 2);
    if (k->wire_grad_in) k->wire_grad_in[s] = device_alloc(d, k->out_bytes / 2);
  }
}

static void free_wire(pt_device *d, uint16_t **w, int slots) {
  for (int s = 0; w && s < slots; s++) device_free(d, w[s]);
  free(w);
}

/* A chunk's transfer buffers: gradient slots, targets at the end (the loss gradient goes over
 * the logits, stage_loss_gradient), and the half of a sample data_micro_batch writes that this
 * chunk does not use. */
static void alloc_chunk_buffers(pt_pipeline *p, pt_chunk *k) {
  pt_part *q = &p->part;
  int S = k->slots;
  size_t BT = (size_t)q->B * q->T;
  const pt_layer *L0 = &q->model.layers[k->first], *Ln = &q->model.layers[k->last - 1];
  k->in_bytes = (L0->in_tokens ? 4 : 4 * (size_t)L0->in_dim) * BT;
  k->out_bytes = 4 * (size_t)Ln->out_dim * BT;
  k->dout = pt_calloc((size_t)S, sizeof(float *));
  k->din = pt_calloc((size_t)S, sizeof(float *));
  k->targets = pt_calloc((size_t)S, sizeof(void *));
  k->recv_act = pt_calloc((size_t)S, sizeof(pt_request));
  k->recv_grad = pt_calloc((size_t)S, sizeof(pt_request));
  k->send_act = pt_calloc((size_t)S, sizeof(pt_request));
  k->send_grad = pt_calloc((size_t)S, sizeof(pt_request));
  for (int s = 0; s < S; s++) {
    if (!k->is_last) k->dout[s] = device_alloc(q->model.dev, k->out_bytes);
    if (k->prev_stage >= 0) k->din[s] = device_alloc(q->model.dev, k->in_bytes);
    if (k->is_last) k->targets[s] = pt_alloc_aligned(q->target_bytes); /* host */
  }
  if (q->model.dev->k->pack_bf16) alloc_wire_buffers(p, k);
  if (!k->is_first && k->is_last)
    k->scratch_in = pt_alloc_aligned(4 * BT * (q->model.input_dim + 1));
  if (k->is_first && !k->is_last) k->scratch_tg = pt_alloc_aligned(q->target_bytes);
}

/* Parameters of all the rank's chunks in one buffer, then one executor per chunk, with the dout
 * sets a split schedule holds between the chunk's I and W. */
static void alloc_chunks(pt_pipeline *p) {
  pt_range *ranges = pt_calloc((size_t)p->n_chunks, sizeof *ranges);
  for (int i = 0; i < p->n_chunks; i++)
    ranges[i] = (pt_range){p->chunks[i].first, p->chunks[i].last};
  int shards = p->part.spec->pipeline.shard_optimizer ? p->dp : 1; /* ranges of the state */
  part_alloc_ranges(&p->part, ranges, p->n_chunks, shards > 1 ? p->replica : 0, shards);
  pipeline_shard_init(p);
  free(ranges);
  for (int i = 0; i < p->n_chunks; i++) {
    pt_chunk *k = &p->chunks[i];
    pipeline_offload_init(p, k);
    stage_alloc_stash(&k->stage, p->sched.n_w_pending[k->id]);
  }
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
  layout_chunks(p);
  if (open_device(p, err, errsz) != 0) return -1;
  make_groups(p);
  if (check_stage(p, err, errsz) != 0) return -1;
  alloc_chunks(p);
  pipeline_make_ties(p);
  pipeline_broadcast_ties(p);
  for (int i = 0; i < p->n_chunks; i++) alloc_chunk_buffers(p, &p->chunks[i]);
  return 0;
}

/* Sends still in flight must finish before their buffers go (and before MPI_Finalize). */
static void free_chunk(pt_pipeline *p, pt_chunk *k) {
  pt_device *d = p->part.model.dev;
  for (int s = 0; s < k->slots && k->recv_act; s++) {
    comm_wait(&k->send_act[s]);
    comm_wait(&k->send_grad[s]);
    comm_wait(&k->recv_act[s]);
    comm_wait(&k->recv_grad[s]);
    device_free(d, k->dout[s]);
    device_free(d, k->din[s]);
    pt_free_aligned(k->targets[s]);
  }
  free(k->dout), free(k->din), free(k->targets);
  free_wire(d, k->wire_act_in, k->slots), free_wire(d, k->wire_grad_out, k->slots);
  free_wire(d, k->wire_act_out, k->slots), free_wire(d, k->wire_grad_in, k->slots);
  free(k->recv_act), free(k->recv_grad), free(k->send_act), free(k->send_grad);
  pt_free_aligned(k->scratch_in);
  pt_free_aligned(k->scratch_tg);
  stage_free(&k->stage);
}

void pipeline_free(pt_pipeline *p) {
  for (int i = 0; i < p->n_chunks; i++) free_chunk(p, &p->chunks[i]);
  free(p->chunks);
  free(p->chunk_at);
  pipeline_free_ties(p);
  pipeline_shard_free(p);
  comm_free(p->pipe);
  comm_free(p->dp_comm);
  trace_free(&p->trace);
  schedule_free(&p->sched);
  plan_free(&p->plan);
  part_free(&p->part);
  memset(p, 0, sizeof *p);
}

int pipeline_agree_failure(pt_pipeline *p, int failed, char *err) {
  int first = comm_first_failed(comm_world(), failed);
  if (first < 0) return 0;
  if (p->rank != first) err[0] = '\0'; /* one rank prints the one error line */
  return -1;
}
