#include <string.h>

#include "partition/plan.h"

int plan_chunk_of_layer(const pt_plan *p, int layer) {
  int lo = 0, hi = p->n_chunks - 1;
  while (lo < hi) { /* bounds are increasing: binary search for the chunk containing layer */
    int mid = (lo + hi + 1) / 2;
    if (p->bounds[mid] <= layer) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

int plan_stage_of_layer(const pt_plan *p, int layer) {
  return p->chunk_stage[plan_chunk_of_layer(p, layer)];
}

int plan_first_layer(const pt_plan *p, int chunk) { return p->bounds[chunk]; }
int plan_end_layer(const pt_plan *p, int chunk) { return p->bounds[chunk + 1]; }

int plan_stage_chunks(const pt_plan *p, int stage, int *chunks) {
  int n = 0;
  for (int c = 0; c < p->n_chunks; c++)
    if (p->chunk_stage[c] == stage) chunks[n++] = c;
  return n;
}

int plan_stage_ranges(const pt_plan *p, int stage, pt_range *ranges) {
  int n = 0;
  for (int c = 0; c < p->n_chunks; c++)
    if (p->chunk_stage[c] == stage) ranges[n++] = (pt_range){p->bounds[c], p->bounds[c + 1]};
  return n;
}
int plan_rank(const pt_plan *p, int replica, int stage) { return replica * p->n_stages + stage; }
int plan_stage_of_rank(const pt_plan *p, int rank) { return rank % p->n_stages; }
int plan_replica_of_rank(const pt_plan *p, int rank) { return rank / p->n_stages; }

int plan_prev_rank(const pt_plan *p, int rank) {
  return plan_stage_of_rank(p, rank) == 0 ? -1 : rank - 1;
}

int plan_next_rank(const pt_plan *p, int rank) {
  return plan_stage_of_rank(p, rank) == p->n_stages - 1 ? -1 : rank + 1;
}

int plan_device(const pt_plan *p, int rank, int local_rank) {
  int d = p->devices[rank];
  return d >= 0 ? d : local_rank;
}

int plan_tie_stages(const pt_plan *p, const pt_model *m, const char *key, int *stages, int max) {
  int n = 0;
  for (int s = 0; s < p->n_stages && n < max; s++) {
    int holds = 0;
    for (int li = 0; li < m->n_layers && !holds; li++)
      holds = !strcmp(m->layers[li].tie, key) && plan_stage_of_layer(p, li) == s;
    if (holds) stages[n++] = s;
  }
  return n;
}
