/* Tied weights in the pipelined engine (engine/pipeline.h): one group per tie key and replica
 * over the stages holding a copy; the gradient sum in layer order, the order the sequential
 * path folds the copies in (model_tie_reduce_local), so tied weights stay bitwise equal to it. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/pipeline_private.h"

/* Index of a stage in the key's ascending list of stages (its rank in the tie group). */
static int group_rank(const int *stages, int n, int stage) {
  for (int i = 0; i < n; i++)
    if (stages[i] == stage) return i;
  return -1;
}

/* This rank's copy of layer li's tied weight: -1 when it is the stored tensor itself, else its
 * index in the model's borrowed copies. */
static int local_copy(const pt_model *m, int li) {
  for (int i = 0; i < m->n_tie_copies; i++)
    if (m->tie_copies[i].layer == li) return i;
  return -1;
}

/* A chain that comm_allreduce_sum_f32 computes in the same order: the holders come in group
 * order, each once, and only the first holds more than one copy (they are folded before). */
static int chain_is_plain(const int *holder, int n) {
  for (int i = 1; i < n; i++)
    if (holder[i] < holder[i - 1] || (holder[i] == holder[i - 1] && holder[i] != 0)) return 0;
  return 1;
}

/* The copies of key (layer order), who holds each, and which are this rank's. */
static void list_copies(pt_pipeline *p, pt_tie_group *g, const char *key, const int *stages,
                        int n_stages) {
  const pt_model *m = &p->part.model;
  for (int li = 0; li < m->n_layers; li++) g->n_copies += !strcmp(m->layers[li].tie, key);
  g->holder = pt_calloc((size_t)g->n_copies, sizeof(int));
  g->local = pt_calloc((size_t)g->n_copies, sizeof(int));
  for (int li = 0, i = 0; li < m->n_layers; li++) {
    if (strcmp(m->layers[li].tie, key) != 0) continue;
    int st = plan_stage_of_layer(&p->plan, li);
    g->holder[i] = group_rank(stages, n_stages, st);
    g->local[i++] = st == p->stage_id ? local_copy(m, li) : -2;
  }
  g->plain = chain_is_plain(g->holder, g->n_copies);
}

/* This stage's stored copy of the key's weight: its first copy in layer order. */
static int stored_tensor(const pt_model *m, const char *key) {
  for (int t = 0; t < m->n_tensors; t++) {
    const pt_layer *L = &m->layers[m->tensors[t].layer];
    if (!strcmp(L->tie, key) && m->tensors[t].param == model_tied_param(L)) return t;
  }
  return -1;
}

static void make_group(pt_pipeline *p, pt_comm *c, const char *key, const int *stages, int n) {
  pt_model *m = &p->part.model;
  pt_tie_group *g = &p->ties[p->n_ties++];
  g->comm = c;
  g->tensor = stored_tensor(m, key);
  if (g->tensor < 0) pt_fatal("tie '%s': no copy on stage %d", key, p->stage_id);
  list_copies(p, g, key, stages, n);
  int me = comm_rank(c), first = 0;
  while (g->holder[first] != me) first++;
  if (!g->plain && first > 0 && g->holder[first - 1] != me) /* a sum arrives before my copy */
    g->partial = device_alloc(m->dev, sizeof(float) * (size_t)m->tensors[g->tensor].numel);
}

int pipeline_tie_table(const pt_pipeline *p, unsigned char *tie) {
  const pt_model *m = &p->part.model;
  int *stages = pt_calloc((size_t)p->P, sizeof(int)), n_groups = 0;
  for (int li = 0; li < m->n_layers; li++) {
    if (!m->layers[li].tie[0] || model_tie_owner(m, li) >= 0) continue; /* as make_ties */
    int n = plan_tie_stages(&p->plan, m, m->layers[li].tie, stages, p->P);
    for (int i = 0; n > 1 && i < n; i++) tie[(size_t)n_groups * (size_t)p->P + stages[i]] = 1;
    n_groups += n > 1;
  }
  free(stages);
  return n_groups;
}

void pipeline_make_ties(pt_pipeline *p) {
  const pt_model *m = &p->part.model;
  p->ties = pt_calloc((size_t)m->n_layers + 1, sizeof(pt_tie_group));
  int *stages = pt_calloc((size_t)p->P, sizeof(int));
  for (int li = 0; li < m->n_layers; li++) {
    if (!m->layers[li].tie[0] || model_tie_owner(m, li) >= 0) continue; /* first owners only */
    int n = plan_tie_stages(&p->plan, m, m->layers[li].tie, stages, p->P);
    int mine = group_rank(stages, n, p->stage_id);
    /* split is collective: every rank takes part for every key, with no color when it holds no
     * copy or the key's copies are all on one stage */
    int color = n > 1 && mine >= 0 ? li * p->dp + p->replica : -1;
    pt_comm *c = comm_split(comm_world(), color, p->stage_id);
    if (color < 0) comm_free(c);
    else make_group(p, c, m->layers[li].tie, stages, n);
  }
  free(stages);
}

/* The first owner's values win, even if the copies were initialised alike already. */
void pipeline_broadcast_ties(pt_pipeline *p) {
  pt_model *m = &p->part.model;
  for (int i = 0; i < p->n_ties; i++) { /* on the host copies, which still hold the init */
    const pt_tensor *t = &m->tensors[p->ties[i].tensor];
    comm_broadcast(p->ties[i].comm, m->host_params + t->offset, sizeof(float) * t->numel,
                   p->ties[i].holder[0]);
  }
  model_to_device(m);
}

static int in_ordered_group(const pt_pipeline *p, int layer) {
  const pt_model *m = &p->part.model;
  for (int i = 0; i < p->n_ties; i++)
    if (!p->ties[i].plain && !strcmp(m->layers[m->tensors[p->ties[i].tensor].layer].tie,
                                     m->layers[layer].tie))
      return 1;
  return 0;
}

static float *copy_grad(pt_model *m, const pt_tie_group *g, int i) {
  return m->grads + (g->local[i] == -1 ? m->tensors[g->tensor].offset
                                        : m->tie_copies[g->local[i]].grad_offset);
}

static void chain_pass(pt_comm *c, float *buf, size_t n, int peer, int send) {
  pt_request r = {0};
  if (send) comm_send_async(c, buf, sizeof(float) * n, peer, PT_TAG_CHAIN_SUM, &r);
  else comm_recv_async(c, buf, sizeof(float) * n, peer, PT_TAG_CHAIN_SUM, &r);
  comm_wait(&r);
}

/* The last holder's total to every other holder, peer by peer (the buffer is on the device,
 * which only the point-to-point calls carry). */
static void chain_share(pt_tie_group *g, float *acc, size_t n) {
  int me = comm_rank(g->comm), last = g->holder[g->n_copies - 1], size = comm_size(g->comm);
  for (int peer = 0; peer < size && me == last; peer++)
    if (peer != last) chain_pass(g->comm, acc, n, peer, 1);
  if (me != last) chain_pass(g->comm, acc, n, last, 0);
}

/* The running sum visits the copies in layer order: a holder adds its copy to the sum it holds
 * or to the one it receives, and passes it on when the next copy is elsewhere. Every holder
 * keeps the sum in its stored tensor's gradient; the last one shares the total. */
static void ordered_chain(pt_pipeline *p, pt_tie_group *g) {
  pt_model *m = &p->part.model;
  float *acc = m->grads + m->tensors[g->tensor].offset;
  size_t n = (size_t)m->tensors[g->tensor].numel;
  int me = comm_rank(g->comm);
  for (int i = 1; i < g->n_copies; i++) {
    int from = g->holder[i - 1], to = g->holder[i];
    if (from == me && to != me) chain_pass(g->comm, acc, n, to, 1);
    if (to != me) continue;
    if (from != me && g->local[i] == -1) { /* my first copy: the sum so far, plus it */
      chain_pass(g->comm, g->partial, n, from, 0);
      device_add(m->dev, acc, g->partial, (int64_t)n);
      continue;
    }
    if (from != me) chain_pass(g->comm, acc, n, from, 0); /* mine already went into it */
    device_add(m->dev, acc, copy_grad(m, g, i), (int64_t)n);
  }
  chain_share(g, acc, n);
}

void pipeline_reduce_ties(pt_pipeline *p) {
  pt_model *m = &p->part.model;
  for (int i = 0; i < m->n_tie_copies; i++) /* layer order, as the sequential path */
    if (!in_ordered_group(p, m->tie_copies[i].layer)) model_tie_fold(m, i);
  for (int i = 0; i < p->n_ties; i++) {
    pt_tie_group *g = &p->ties[i];
    if (g->plain) {
      const pt_tensor *t = &m->tensors[g->tensor];
      comm_allreduce_sum_f32(g->comm, m->grads + t->offset, (size_t)t->numel);
    } else {
      ordered_chain(p, g);
    }
  }
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

void pipeline_free_ties(pt_pipeline *p) {
  for (int i = 0; i < p->n_ties; i++) {
    comm_free(p->ties[i].comm);
    free(p->ties[i].holder);
    free(p->ties[i].local);
    if (p->ties[i].partial) device_free(p->part.model.dev, p->ties[i].partial);
  }
  free(p->ties);
  p->ties = NULL, p->n_ties = 0;
}
