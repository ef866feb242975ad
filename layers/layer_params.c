#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "layers/builtin.h"
#include "layers/layer.h"

void *layer_state_alloc(pt_layer *L, size_t bytes) {
  free(L->state);
  L->state = pt_calloc(1, bytes);
  return L->state;
}

void layer_state_free(pt_layer *L) {
  free(L->state);
  L->state = NULL;
}

int layer_add_param(pt_layer *L, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                    int64_t d3) {
  if (L->n_params >= PT_MAX_PARAMS) return -1;
  pt_param_desc *p = &L->params[L->n_params];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  int64_t dims[4] = {d0, d1, d2, d3};
  p->ndim = ndim;
  p->numel = 1;
  for (int i = 0; i < ndim; i++) {
    p->shape[i] = dims[i];
    /* absurd sizes are the caller's to refuse (model_configure): -1, never an overflow */
    if (p->numel >= 0 && __builtin_mul_overflow(p->numel, dims[i], &p->numel)) p->numel = -1;
  }
  p->decay = ndim >= 2;
  return L->n_params++;
}

int layer_add_param_group(pt_layer *L, const pt_param_decl *members, int n) {
  if (n < 1 || L->n_params + n > PT_MAX_PARAMS) return -1;
  int first = L->n_params;
  for (int i = 0; i < n; i++) {
    const int64_t *d = members[i].shape;
    layer_add_param(L, members[i].name, members[i].ndim, d[0], d[1], d[2], d[3]);
    L->params[first + i].group_next = i + 1 < n;
  }
  return first;
}

int64_t layer_param_stride(const pt_layer *L, int p) {
  int64_t n = L->params[p].numel;
  if (L->params[p].group_next) return n;
  int64_t before = 0; /* floats of the group's earlier members: the group's end is aligned */
  for (int q = p - 1; q >= 0 && L->params[q].group_next; q--) before += L->params[q].numel;
  return ((before + n + 15) & ~(int64_t)15) - before;
}

void layer_check_groups(const pt_layer *L, float *const *v) {
  for (int p = 0; p + 1 < L->n_params; p++)
    if (L->params[p].group_next && v[p + 1] != v[p] + L->params[p].numel)
      pt_fatal("%s (layer %d): parameters '%s' and '%s' form one stacked tensor but are not "
               "adjacent in the buffer; place a layer's tensors with layer_param_stride",
               L->type->name, L->index, L->params[p].name, L->params[p + 1].name);
}

int layer_param_owned(const pt_layer *L, int p) { return !L->borrowed[p]; }

void layer_init_params(pt_layer *L, uint64_t seed) {
  if (L->type->init) L->type->init(L, seed);
}

const pt_kernels *layer_kernels(const pt_layer *L) { return L->k ? L->k : &kernels_cpu; }

int layer_dout_at_rest(const pt_layer *L, const pt_kernels *k) {
  if (!k) k = &kernels_cpu;
  return k->activation_copies && L->type->dout_read_at_rest && L->type->dout_read_at_rest(L);
}

int layer_in_at_rest(const pt_layer *L, const pt_kernels *k) {
  if (!k) k = &kernels_cpu;
  return k->activation_copies && L->type->in_read_at_rest;
}

int layer_out_by_product(const pt_layer *L, const pt_kernels *k) {
  if (!k) k = &kernels_cpu;
  return k->share_bf16_into && L->type->out_by_product && L->type->out_by_product(L);
}

/* saved_bytes reads the table from the layer itself (the engine sizes saved areas with it), so
 * asking about another table means asking a copy bound to that one. */
size_t layer_saved_bytes(const pt_layer *L, const pt_kernels *k, int B, int T) {
  if (!L->type->saved_bytes) return 0;
  pt_layer bound = *L;
  bound.k = k ? k : &kernels_cpu;
  return L->type->saved_bytes(&bound, B, T);
}

int layer_saved_parts(const pt_layer *L, const pt_kernels *k, int B, int T, pt_saved_part *parts) {
  k = k ? k : &kernels_cpu;
  int64_t floats = (int64_t)(layer_saved_bytes(L, k, B, T) / sizeof(float)), sum = 0;
  if (floats == 0) return 0;
  if (!L->type->saved_parts) {
    parts[0] = (pt_saved_part){.floats = floats, .writers = PT_SAVED_FORWARD | PT_SAVED_STASH};
    return 1;
  }
  int n = L->type->saved_parts(L, k, B, T, parts);
  for (int i = 0; i < n; i++) sum += parts[i].floats;
  if (n < 0 || n > PT_MAX_SAVED_PARTS || sum != floats)
    pt_fatal("layer type %s: saved_parts gives %d parts of %lld floats, saved_bytes %lld floats",
             L->type->name, n, (long long)sum, (long long)floats);
  /* a copy at rest: of a bf16 part forward alone writes, or the table's of a stash part */
  for (int i = 0; i < n; i++)
    if (parts[i].read_at_rest &&
        (!parts[i].bf16 ||
         (parts[i].writers != PT_SAVED_FORWARD && !(parts[i].writers & PT_SAVED_STASH))))
      pt_fatal("layer type %s: saved part %d is read_at_rest but not a bf16 part only forward "
               "writes, or one backward_input writes", L->type->name, i);
  /* backward_input's own reads at rest: of a stash part backward_weight reads there as well */
  for (int i = 0; i < n; i++)
    if (parts[i].backward_at_rest &&
        (!parts[i].read_at_rest || !(parts[i].writers & PT_SAVED_STASH)))
      pt_fatal("layer type %s: saved part %d is backward_at_rest but not a read_at_rest part "
               "backward_input writes", L->type->name, i);
  for (int i = 0; i < n; i++)
    if (parts[i].backward_reads &&
        (!parts[i].backward_at_rest || parts[i].writers != PT_SAVED_STASH))
      pt_fatal("layer type %s: saved part %d is backward_reads but not a backward_at_rest part "
               "only backward_input writes", L->type->name, i);
  return n;
}

size_t layer_saved_part_rest(const pt_saved_part *p) {
  return ((size_t)p->floats * (p->bf16 ? 2 : 4) + 63) & ~(size_t)63;
}

size_t layer_saved_rest_bytes(const pt_layer *L, const pt_kernels *k, int B, int T, int stash) {
  pt_saved_part parts[PT_MAX_SAVED_PARTS];
  int n = layer_saved_parts(L, k, B, T, parts);
  size_t b = 0;
  for (int i = 0; i < n; i++)
    if (stash ? parts[i].writers == PT_SAVED_STASH : (parts[i].writers & PT_SAVED_FORWARD))
      b += layer_saved_part_rest(&parts[i]);
  return b;
}

size_t layer_scratch_bytes(const pt_layer *L, const pt_kernels *k, int B, int T) {
  if (!L->type->scratch_bytes) return 0;
  return L->type->scratch_bytes(L, k ? k : &kernels_cpu, B, T);
}

/* splitmix64: a counter-based generator, so element i of a parameter is the same value whatever
 * process or stage computes it. */
static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static double uniform01(uint64_t key, uint64_t i) {
  /* 53 random bits in (0, 1]: never 0, so log() below is finite */
  return ((mix64(key ^ mix64(i)) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

void layer_init_normal(pt_layer *L, int p, uint64_t seed, float std) {
  if (L->borrowed[p]) return;
  uint64_t key = mix64(mix64(seed) ^ ((uint64_t)L->index << 8) ^ (uint64_t)p);
  float *w = L->w[p];
  for (int64_t i = 0; i < L->params[p].numel; i++) {
    double u1 = uniform01(key, 2 * (uint64_t)i), u2 = uniform01(key, 2 * (uint64_t)i + 1);
    w[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
  }
}

void layer_init_const(pt_layer *L, int p, float value) {
  if (L->borrowed[p]) return;
  for (int64_t i = 0; i < L->params[p].numel; i++) L->w[p][i] = value;
}

void layer_cost_default(const pt_layer *L, int T, pt_layer_cost *c) {
  memset(c, 0, sizeof *c);
  int64_t n = 0;
  for (int p = 0; p < L->n_params; p++) n += L->params[p].numel;
  c->param_bytes = n * (int64_t)sizeof(float);
  c->saved_bytes = L->type->saved_bytes ? (int64_t)L->type->saved_bytes(L, 1, T) : 0;
  c->scratch_bytes = (int64_t)layer_scratch_bytes(L, L->k, 1, T);
  c->out_bytes = (int64_t)T * L->out_dim * (int64_t)sizeof(float);
  c->fwd_flops = 2.0 * (double)n * T;
  c->bwd_flops = 2.0 * c->fwd_flops;
}

void layer_cost(const pt_layer *L, int T, pt_layer_cost *c) {
  if (L->type->cost)
    L->type->cost(L, T, c);
  else
    layer_cost_default(L, T, c);
}

int layer_count_type(const pt_spec *spec, const char *type) {
  int n = 0;
  for (int i = 0; i < spec->n_layers; i++) n += strcmp(spec->layers[i].type, type) == 0;
  return n;
}

int64_t layer_require_model_int(const pt_layer_setup *s, int64_t value, const char *key,
                                const char *layer, spec_errors *e) {
  if (value <= 0)
    spec_error(e, s->args, 0, "layer '%s' needs model.%s; add it to the model: section", layer,
               key);
  return value;
}

void layer_expect_features(const pt_layer_setup *s, int64_t dim, const char *layer,
                           spec_errors *e) {
  if (s->in_tokens)
    spec_error(e, s->args, 0, "layer '%s' takes float features but its input is token ids; "
               "put an embedding before it", layer);
  else if (s->in_dim != dim)
    spec_error(e, s->args, 0, "layer '%s' expects %lld input features but the previous layer "
               "gives %d", layer, (long long)dim, s->in_dim);
}
