/* partition/plan_comm.c: the comm part of each stage's memory where device buffers go over NCCL
 * (partition/memory.h: comm), from the plan's layout: who each stage exchanges with and what
 * it sums on the device. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "partition/plan.h"

/* The stages whose chunks border stage s's chunks, other than s itself. */
static int pipeline_peers(const pt_plan *p, int s) {
  int n = 0, *seen = pt_calloc((size_t)p->n_stages, sizeof(int));
  for (int c = 0; c < p->n_chunks; c++) {
    if (p->chunk_stage[c] != s) continue;
    for (int d = -1; d <= 1; d += 2) {
      int o = c + d, st = o >= 0 && o < p->n_chunks ? p->chunk_stage[o] : s;
      if (st != s && !seen[st]) seen[st] = 1, n++;
    }
  }
  free(seen);
  return n;
}

/* For each tie group over several stages that includes s (engine/pipeline_ties.c makes one per
 * key): the scratch of its chain sum (the tied weight) and its other holders as peers. */
static void tie_groups(const pt_plan *p, const pt_model *m, int s, int64_t *scratch,
                       int *peers) {
  int *stages = pt_calloc((size_t)p->n_stages, sizeof(int));
  for (int li = 0; li < m->n_layers; li++) {
    const pt_layer *L = &m->layers[li];
    if (!L->tie[0] || model_tie_owner(m, li) >= 0) continue; /* first owners only */
    int n = plan_tie_stages(p, m, L->tie, stages, p->n_stages), mine = 0, t = model_tied_param(L);
    for (int i = 0; i < n; i++) mine |= stages[i] == s;
    if (n < 2 || !mine || t < 0) continue;
    *scratch += 4 * ((L->params[t].numel + 15) & ~(int64_t)15);
    *peers += n - 1;
  }
  free(stages);
}

void plan_add_comm(pt_plan *p, const pt_model *m) {
  if (!memory_uses_nccl(m->spec)) return;
  int dp = p->data_parallel > 1;
  for (int s = 0; s < p->n_stages; s++) {
    pt_stage_memory *mm = &p->mem[s];
    int64_t scratch = dp ? mm->grads : 0; /* the data-parallel sum: all of the stage's */
    int ring = p->data_parallel > 2 ? 2 : 1; /* the chain's neighbours; sharded, every replica */
    if (m->spec->pipeline.shard_optimizer) ring = p->data_parallel - 1;
    int peers = pipeline_peers(p, s) + (dp ? ring : 0);
    tie_groups(p, m, s, &scratch, &peers);
    mm->comm_peers = peers;
    mm->comm = scratch + peers * memory_nccl_peer_bytes();
    mm->total += mm->comm;
  }
}
