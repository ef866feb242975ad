/* The sharded optimizer of the pipelined engine (pipeline.shard_optimizer, ZeRO-1; see
 * engine/pipeline.h): the replicas of a stage split its parameter buffer by
 * optimizer_shard_end's rule, each keeping the optimizer state of its range only. The gradients
 * are summed by a reduce-scatter that adds in the chain's order (comm.h), so each owner's range
 * has the bits the unsharded all-reduce gives; each replica updates its range (the bf16 weight
 * copy with it); the ranges are then gathered. Checkpoints hold the whole state, reassembled on
 * replica 0 when saving and cut again when loading, so they load under any layout. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/pipeline_private.h"
#include "observe/watchdog.h"

void pipeline_shard_init(pt_pipeline *p) {
  const pt_spec *s = p->part.spec;
  p->sharded = p->part.opt.shards > 1;
  if (s->pipeline.shard_optimizer && p->dp == 1)
    pt_notice("pipeline.shard_optimizer has no effect with one data-parallel replica "
              "(pipeline.data_parallel 1): it keeps the whole optimizer state");
  if (!p->sharded) return;
  /* the chain's reduce-scatter leaves the whole sum on the last replica (comm.h) */
  p->grads_on_last = s->dp_reduce == SPEC_DP_REDUCE_CHAIN;
  p->shard_ends = pt_calloc((size_t)p->dp, sizeof(size_t));
  for (int r = 0; r < p->dp; r++)
    p->shard_ends[r] = (size_t)optimizer_shard_end(p->part.model.n_floats, p->dp, r);
}

void pipeline_shard_free(pt_pipeline *p) {
  free(p->shard_ends);
  p->shard_ends = NULL;
}

void pipeline_shard_reduce(pt_pipeline *p) {
  float *g = p->part.model.grads;
  size_t n = (size_t)p->part.model.n_floats;
  if (p->grads_on_last) comm_reduce_scatter_sum_f32(p->dp_comm, g, n, p->shard_ends);
  else comm_allreduce_sum_f32_unordered(p->dp_comm, g, n); /* comm.dp_reduce: allreduce */
}

/* Only the last replica holds every summed gradient after the chain's reduce-scatter: its
 * per-tensor sums of squares, the unsharded run's bits, go to the others. */
void pipeline_shard_norm_sums(pt_pipeline *p, double *sums, int n) {
  if (!p->grads_on_last) return;
  watchdog_arm("the gradient sums of squares from the last replica",
               plan_rank(&p->plan, p->dp - 1, p->stage_id), p->part.step + 1);
  comm_broadcast(p->dp_comm, sums, sizeof(double) * (size_t)n, p->dp - 1);
  watchdog_disarm();
}

void pipeline_shard_gather(pt_pipeline *p) {
  pt_model *m = &p->part.model;
  const pt_optimizer *o = &p->part.opt;
  watchdog_arm("the data-parallel parameter gather", -1, p->part.step + 1);
  comm_allgather_f32(p->dp_comm, m->params, (size_t)m->n_floats, p->shard_ends);
  watchdog_disarm();
  model_refresh_weight_copy(m, 0, o->lo); /* the ranges other replicas updated */
  model_refresh_weight_copy(m, o->lo + o->n_floats, m->n_floats - o->lo - o->n_floats);
}

/* Replica 0 receives every other replica's range (state on the host: optimizer_to_host ran)
 * into whole; the others send theirs. Peer by peer, so the watchdog names a missing one. */
void pipeline_shard_collect(pt_pipeline *p, pt_optimizer *whole) {
  pt_optimizer *o = &p->part.opt;
  float *bufs[2] = {o->host_m, o->host_v};
  if (p->replica != 0) {
    for (int b = 0; b < 2 && bufs[b]; b++) {
      pt_request r = {0};
      watchdog_arm("replica 0 to take the optimizer state", plan_rank(&p->plan, 0, p->stage_id),
                   p->part.step);
      comm_send_host_async(p->dp_comm, bufs[b], sizeof(float) * (size_t)o->n_floats, 0,
                           PT_TAG_SHARD_STATE, &r);
      comm_wait(&r);
      watchdog_disarm();
    }
    return;
  }
  optimizer_init_whole(whole, o);
  optimizer_shard_put(whole, o);
  float *into[2] = {whole->host_m, whole->host_v};
  for (int rep = 1; rep < p->dp; rep++) {
    int64_t lo = optimizer_shard_end(o->model_floats, p->dp, rep - 1);
    int64_t n = optimizer_shard_end(o->model_floats, p->dp, rep) - lo;
    for (int b = 0; b < 2 && into[b]; b++) {
      pt_request r = {0};
      watchdog_arm("its optimizer state", plan_rank(&p->plan, rep, p->stage_id), p->part.step);
      comm_recv_host_async(p->dp_comm, into[b] + lo, sizeof(float) * (size_t)n, rep,
                           PT_TAG_SHARD_STATE, &r);
      comm_wait(&r);
      watchdog_disarm();
    }
  }
}
