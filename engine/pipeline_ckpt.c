/* Checkpoints and gathers of the pipelined engine (engine/pipeline.h). A checkpoint has one file
 * per chunk, written by the rank that runs it (replica 0), so its files follow the model's order
 * whatever the placement: chunk c's file holds layers [bounds[c], bounds[c + 1]), exactly what
 * a one-chunk-per-stage run of as many stages would write. A sharded optimizer's state is
 * assembled whole on replica 0 first (pipeline_shard_collect), so its checkpoints are the
 * unsharded run's. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "engine/pipeline_private.h"
#include "observe/watchdog.h"

int pipeline_load(pt_pipeline *p, const char *path, char *err, size_t errsz) {
  return pipeline_agree_failure(p, part_load(&p->part, path, err, errsz) != 0, err);
}

/* Every rank learns rank 0's verdict: also the barrier that keeps anyone from going on (or
 * exiting) before the manifest is down. Rank 0 may be waiting on another rank (the gather):
 * the others wait longer, so rank 0 names that one (observe/watchdog.h). */
static int agree_with_root(pt_pipeline *p, int ok, const char *what) {
  uint64_t v = (uint64_t)ok;
  watchdog_arm_relay(what, 0, p->part.step);
  comm_broadcast(comm_world(), &v, sizeof v, 0);
  watchdog_disarm();
  return (int)v;
}

enum { REC = 4 }; /* per chunk: model CRC and bytes, optimizer CRC and bytes */

/* Rank 0, once every rank reported (all: per rank, REC per chunk it runs, then its ok): the
 * manifest, or (when a chunk failed) the rollback. */
static int save_finish(pt_pipeline *p, const char *dir, const pt_spec_source *src,
                       const uint64_t *all, char *err, size_t errsz) {
  const pt_plan *pl = &p->plan;
  int C = pl->n_chunks, v = pl->virtual_stages, per_rank = REC * v + 1, ok = 1;
  int *seen = pt_calloc((size_t)p->P, sizeof(int)); /* chunks of each stage taken so far */
  ckpt_stage_files *files = pt_calloc((size_t)C, sizeof *files);
  for (int c = 0; c < C; c++) { /* replica 0's stage s is rank s; its chunks come ascending */
    int s = pl->chunk_stage[c];
    const uint64_t *r = all + (size_t)s * per_rank + REC * seen[s]++;
    snprintf(files[c].model_file, sizeof files[c].model_file, "model-s%03d.safetensors", c);
    snprintf(files[c].optim_file, sizeof files[c].optim_file, "optim-s%03d.safetensors", c);
    files[c].model_crc = (uint32_t)r[0], files[c].model_bytes = (int64_t)r[1];
    files[c].optim_crc = (uint32_t)r[2], files[c].optim_bytes = (int64_t)r[3];
  }
  for (int s = 0; s < p->P; s++) ok &= all[(size_t)s * per_rank + REC * v] != 0;
  ckpt_layout lay = {.n_chunks = C, .stages = p->P, .data_parallel = p->dp, .bounds = pl->bounds,
                     .chunk_stage = v > 1 ? pl->chunk_stage : NULL};
  if (ok && checkpoint_write_manifest(dir, &p->part.model, src, p->part.step, p->part.opt.t,
                                      &lay, files, err, errsz) != 0)
    ok = 0;
  if (ok) checkpoint_end_save(dir);
  else checkpoint_abort_save(dir);
  free(files), free(seen);
  return ok;
}

/* A test-only hook (tests/engine/stalled_wait.sh): PIPETRAIN_TEST_STALL_SAVE=RANK:SECONDS
 * makes that rank sleep in every save before it writes, as a hung filesystem would. */
static void test_stall_save(const pt_pipeline *p) {
  const char *v = getenv("PIPETRAIN_TEST_STALL_SAVE");
  int rank = -1, seconds = 0;
  if (v && sscanf(v, "%d:%d", &rank, &seconds) == 2 && rank == p->rank && seconds > 0)
    sleep((unsigned)seconds);
}

/* Replica 0 writes a file pair per chunk it runs (the optimizer state from opt); rec gets REC
 * numbers per chunk and ok (as doubles, for pipeline_gather_root: CRCs and byte counts are exact
 * in them). */
static int write_chunks(pt_pipeline *p, const char *dir, const pt_optimizer *opt, double *rec,
                        char *err, size_t errsz) {
  int ok = 1;
  test_stall_save(p);
  for (int i = 0; i < p->n_chunks && ok && p->replica == 0; i++) {
    const pt_chunk *k = &p->chunks[i];
    ckpt_stage_files f;
    memset(&f, 0, sizeof f);
    ok = checkpoint_write_stage(dir, &p->part.model, opt, k->id, k->first, k->last, &f, err,
                                errsz) == 0;
    double *r = rec + REC * i;
    r[0] = f.model_crc, r[1] = (double)f.model_bytes;
    r[2] = f.optim_crc, r[3] = (double)f.optim_bytes;
  }
  rec[REC * p->plan.virtual_stages] = ok;
  return ok;
}

/* Every rank's records reach rank 0 one rank at a time, so a rank that stalls in its writes
 * is named (observe/watchdog.h); rank 0 writes the manifest, and everyone learns the verdict. */
int pipeline_save(pt_pipeline *p, const char *dir, const pt_spec_source *src, char *err,
                  size_t errsz) {
  err[0] = '\0';
  model_to_host(&p->part.model);
  optimizer_to_host(&p->part.opt);
  int ok = p->rank != 0 || checkpoint_begin_save(dir, err, errsz) == 0;
  if (!agree_with_root(p, ok, "rank 0 to begin the checkpoint save")) return -1;
  int per_rank = REC * p->plan.virtual_stages + 1, world = p->P * p->dp;
  double *rec = pt_calloc((size_t)per_rank, sizeof(double));
  pt_optimizer whole; /* sharded: the replicas' ranges, assembled on replica 0 */
  memset(&whole, 0, sizeof whole);
  if (p->sharded) pipeline_shard_collect(p, &whole);
  write_chunks(p, dir, p->sharded ? &whole : &p->part.opt, rec, err, errsz);
  optimizer_free(&whole);
  double *all = pt_calloc((size_t)per_rank * (size_t)world, sizeof(double));
  pipeline_gather_root(p, rec, per_rank, all, "the checkpoint save's files");
  ok = 1;
  if (p->rank == 0) {
    uint64_t *u = pt_calloc((size_t)per_rank * (size_t)world, sizeof(uint64_t));
    for (size_t i = 0; i < (size_t)per_rank * (size_t)world; i++) /* -1: a failed write */
      u[i] = all[i] < 0 ? UINT64_MAX : (uint64_t)all[i];
    ok = save_finish(p, dir, src, u, err, errsz);
    free(u);
  }
  free(rec), free(all);
  return agree_with_root(p, ok, "rank 0 to finish the checkpoint save") ? 0 : -1;
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

/* Rank 0: its own weights and every other stage's (replica 0) into one whole model on the host,
 * then the file. A stage's buffer layout is known from its chunks' layer ranges. */
static void gather_whole(pt_pipeline *p, const char *path, const char *what, int tag) {
  pt_model whole;
  spec_errors e = {0};
  if (model_configure(&whole, p->part.spec, &e) != 0) pt_fatal("%s", e.msg);
  model_alloc_on(&whole, 0, whole.n_layers, device_host());
  model_to_host(&p->part.model);
  copy_into(&whole, &p->part.model);
  pt_range *ranges = pt_calloc((size_t)p->plan.virtual_stages, sizeof *ranges);
  for (int s = 1; s < p->P; s++) {
    pt_model part;
    if (model_configure(&part, p->part.spec, &e) != 0) pt_fatal("%s", e.msg);
    int n = plan_stage_ranges(&p->plan, s, ranges);
    model_alloc_ranges(&part, ranges, n, device_host());
    pt_request r = {0};
    watchdog_arm("a stage's weights for --gather", s, p->part.step);
    comm_recv_host_async(p->pipe, part.params, sizeof(float) * (size_t)part.n_floats, s, tag, &r);
    comm_wait(&r);
    watchdog_disarm();
    copy_into(&whole, &part);
    model_free(&part);
  }
  free(ranges);
  char err[1024];
  if (checkpoint_write_sequential(&whole, NULL, path, p->part.step, err, sizeof err) != 0)
    pt_fatal("%s: %s", what, err);
  model_free(&whole);
}

void pipeline_gather(pt_pipeline *p, const char *path, const char *what) {
  int tag = PT_TAG_GATHER_PARAMS;
  pt_model *m = &p->part.model;
  if (p->replica == 0 && p->stage_id > 0) {
    pt_request r = {0};
    model_to_host(m);
    watchdog_arm("rank 0 to take this stage's weights for --gather", 0, p->part.step);
    comm_send_host_async(p->pipe, m->host_params, sizeof(float) * (size_t)m->n_floats, 0, tag,
                         &r);
    comm_wait(&r);
    watchdog_disarm();
  }
  if (p->rank == 0) gather_whole(p, path, what, tag);
  watchdog_arm_relay("rank 0 to write --gather", 0, p->part.step);
  comm_barrier(comm_world());
  watchdog_disarm();
}
