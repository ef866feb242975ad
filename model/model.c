#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/precision.h"

int model_tie_owner(const pt_model *m, int li) {
  const char *key = m->layers[li].tie;
  if (!key[0]) return -1;
  for (int j = 0; j < li; j++)
    if (strcmp(m->layers[j].tie, key) == 0) return j;
  return -1;
}

/* Index of the parameter a tie shares: "weight". */
int model_tied_param(const pt_layer *L) {
  for (int p = 0; p < L->n_params; p++)
    if (strcmp(L->params[p].name, "weight") == 0) return p;
  return -1;
}

static void check_tie(pt_model *m, int li, const spec_layer *sl, spec_errors *e) {
  int owner = model_tie_owner(m, li);
  pt_layer *L = &m->layers[li];
  if (L->tie[0] && model_tied_param(L) < 0)
    spec_error(e, sl->entry, 0, "layer %d (%s) has tie '%s' but no 'weight' parameter to share",
               li, L->type->name, L->tie);
  int tp = model_tied_param(L);
  int grouped = tp >= 0 && (L->params[tp].group_next || (tp > 0 && L->params[tp - 1].group_next));
  if (L->tie[0] && grouped)
    spec_error(e, sl->entry, 0, "layer %d (%s) has tie '%s' but its 'weight' is part of a "
               "parameter group, which cannot be shared", li, L->type->name, L->tie);
  if (owner < 0 || e->failed) return;
  const pt_param_desc *a = &m->layers[owner].params[model_tied_param(&m->layers[owner])];
  const pt_param_desc *b = &L->params[model_tied_param(L)];
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
  if (!same)
    spec_error(e, sl->entry, 0, "tie '%s': weight of layer %d (%s) does not have the shape of "
               "layer %d (%s)", L->tie, li, L->type->name, owner, m->layers[owner].type->name);
}

static void configure_layer(pt_model *m, int li, int *dim, int *tokens, spec_errors *e) {
  const spec_layer *sl = &m->spec->layers[li];
  pt_layer *L = &m->layers[li];
  L->type = layer_find(sl->type);
  if (!L->type) {
    char names[1024];
    layer_list_names(names, sizeof names);
    spec_error(e, sl->entry, 0, "unknown layer type '%s'; known types: %s (register custom "
               "types with layer_register())", sl->type, names);
    return;
  }
  L->index = li;
  snprintf(L->tie, sizeof L->tie, "%s", sl->tie);
  L->in_dim = *dim;
  L->in_tokens = *tokens;
  pt_layer_setup s = {.args = sl->args, .spec = m->spec, .in_dim = *dim, .in_tokens = *tokens};
  layer_settings_parse(L, &s, e);
  if (!e->failed) L->type->configure(L, &s, e);
  for (int p = 0; p < L->n_params && !e->failed; p++) /* 2^40 floats: 4 TiB in one tensor */
    if (L->params[p].numel < 0 || L->params[p].numel > ((int64_t)1 << 40))
      spec_error(e, sl->entry, 0, "layer %d (%s): parameter '%s' would hold more than 2^40 "
                 "elements; check model.dim, model.vocab and the layer's sizes", li,
                 sl->type, L->params[p].name);
  const char *known[PT_MAX_SETTINGS + 1] = {NULL};
  for (int k = 0; L->type->settings && L->type->settings[k].name && k < PT_MAX_SETTINGS; k++)
    known[k] = L->type->settings[k].name;
  spec_check_unused(sl->args, sl->type, known[0] ? known : NULL, e);
  check_tie(m, li, sl, e);
  *dim = L->out_dim;
  *tokens = 0;
}

static void check_loss(pt_model *m, spec_errors *e) {
  const pt_spec *s = m->spec;
  const pt_layer *last = &m->layers[m->n_layers - 1];
  spec_node *at = s->layers[m->n_layers - 1].entry;
  if (m->loss == LOSS_CROSS_ENTROPY && m->input_tokens && last->out_dim != s->vocab)
    spec_error(e, at, 0, "cross_entropy needs the last layer to output model.vocab (%lld) logits, "
               "but layer %d (%s) outputs %d", (long long)s->vocab, m->n_layers - 1,
               last->type->name, last->out_dim);
  if (m->loss == LOSS_CROSS_ENTROPY && !m->input_tokens && s->data.targets != 1)
    spec_error(e, at, 0, "cross_entropy on f32 records needs data.targets: 1 (the class id)");
  if (m->loss == LOSS_MSE && (m->input_tokens || last->out_dim != s->data.targets))
    spec_error(e, at, 0, "mse needs f32 data whose data.targets (%d) equals the last layer's "
               "output width (%d)", s->data.targets, last->out_dim);
}

/* pt_layer.type_count: layers of each type, tallied over the distinct types (no more than the
 * registry holds). */
static int type_slot(const pt_layer_type **seen, int *n, const pt_layer_type *t) {
  for (int k = 0; k < *n; k++)
    if (seen[k] == t) return k;
  seen[*n] = t;
  return (*n)++;
}

static void count_types(pt_model *m) {
  const pt_layer_type *seen[PT_MAX_LAYER_TYPES];
  int count[PT_MAX_LAYER_TYPES] = {0}, n = 0;
  for (int li = 0; li < m->n_layers; li++) count[type_slot(seen, &n, m->layers[li].type)]++;
  for (int li = 0; li < m->n_layers; li++)
    m->layers[li].type_count = count[type_slot(seen, &n, m->layers[li].type)];
}

int model_configure(pt_model *m, const pt_spec *spec, spec_errors *e) {
  memset(m, 0, sizeof *m);
  layer_register_builtins();
  m->spec = spec;
  m->n_layers = spec->n_layers;
  m->layers = pt_calloc((size_t)spec->n_layers, sizeof(pt_layer));
  m->input_tokens = !spec_data_is_records(spec->data.format);
  m->input_dim = m->input_tokens ? 0 : spec->data.inputs;
  m->loss = spec->loss == SPEC_LOSS_MSE ? LOSS_MSE : LOSS_CROSS_ENTROPY;
  int dim = m->input_dim, tokens = m->input_tokens;
  for (int li = 0; li < m->n_layers && !e->failed; li++) configure_layer(m, li, &dim, &tokens, e);
  if (!e->failed) check_loss(m, e);
  if (!e->failed) count_types(m);
  if (!e->failed) spec_check_unused(spec->model, "model", NULL, e);
  if (e->failed) {
    for (int li = 0; li < m->n_layers; li++) layer_state_free(&m->layers[li]);
    free(m->layers);
    m->layers = NULL;
    return -1;
  }
  return 0;
}

static int64_t align16(int64_t n) { return (n + 15) & ~(int64_t)15; }

int model_holds_layer(const pt_model *m, int li) {
  for (int r = 0; r < m->n_ranges; r++)
    if (li >= m->ranges[r].first && li < m->ranges[r].last) return 1;
  return 0;
}

static int held_params(const pt_model *m) {
  int n = 0;
  for (int r = 0; r < m->n_ranges; r++)
    for (int li = m->ranges[r].first; li < m->ranges[r].last; li++) n += m->layers[li].n_params;
  return n;
}

/* The first layer this process holds with li's tie key (li itself when none comes before): it
 * stores the weight, later holders borrow it. Without the first owner, that is some later copy,
 * so a process holds one copy of each tied weight however many of its layers share it. */
static int first_held_copy(const pt_model *m, int li) {
  for (int j = 0; j < li; j++)
    if (!strcmp(m->layers[j].tie, m->layers[li].tie) && model_holds_layer(m, j)) return j;
  return li;
}

/* Appends layer li's stored tensors at *off; a tied weight an earlier held layer stores is
 * borrowed instead (it has no tensor, its gradient gets its own space after all tensors). */
static void plan_layer(pt_model *m, int li, int64_t *off) {
  pt_layer *L = &m->layers[li];
  int owner = model_tie_owner(m, li);
  for (int p = 0; p < L->n_params; p++) {
    int shared = owner >= 0 && p == model_tied_param(L);
    L->borrowed[p] = shared && first_held_copy(m, li) < li;
    if (L->borrowed[p]) continue;
    pt_tensor *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%d.%s", li, L->params[p].name);
    t->layer = li;
    t->param = p;
    t->offset = *off;
    t->numel = L->params[p].numel;
    t->decay = L->params[p].decay;
    t->tied_copy = shared;
    *off += layer_param_stride(L, p);
  }
}

/* Lays out the held layers' tensors in layer order: offsets into params/grads, then the
 * borrowed tied copies' gradients (in layer order too: model_tie_reduce_local folds them so). */
static void plan_storage(pt_model *m) {
  int cap = held_params(m);
  m->tensors = pt_calloc((size_t)cap + 1, sizeof(pt_tensor));
  m->tie_copies = pt_calloc((size_t)cap + 1, sizeof(pt_tie_copy));
  int64_t off = 0;
  for (int r = 0; r < m->n_ranges; r++)
    for (int li = m->ranges[r].first; li < m->ranges[r].last; li++) plan_layer(m, li, &off);
  m->n_floats = off;
  for (int r = 0; r < m->n_ranges; r++)
    for (int li = m->ranges[r].first; li < m->ranges[r].last; li++) {
      pt_layer *L = &m->layers[li];
      for (int p = 0; p < L->n_params; p++) {
        if (!L->borrowed[p]) continue;
        pt_tie_copy *c = &m->tie_copies[m->n_tie_copies++];
        *c = (pt_tie_copy){.layer = li, .param = p, .grad_offset = off,
                           .numel = L->params[p].numel};
        off += align16(c->numel);
      }
    }
  m->n_grad_floats = off;
}

static int tensor_of(const pt_model *m, int layer, int param) {
  for (int i = 0; i < m->n_tensors; i++)
    if (m->tensors[i].layer == layer && m->tensors[i].param == param) return i;
  return -1;
}

/* Points the layers' views at params (the host copy while initialising, then the device's). */
static void bind_storage(pt_model *m, float *params) {
  for (int i = 0; i < m->n_tensors; i++) {
    pt_tensor *t = &m->tensors[i];
    m->layers[t->layer].w[t->param] = params + t->offset;
    m->layers[t->layer].g[t->param] = m->grads + t->offset;
  }
  for (int i = 0; i < m->n_tie_copies; i++) {
    pt_tie_copy *c = &m->tie_copies[i];
    pt_layer *L = &m->layers[c->layer], *O = &m->layers[first_held_copy(m, c->layer)];
    c->owner_tensor = tensor_of(m, O->index, model_tied_param(O));
    L->w[c->param] = O->w[model_tied_param(O)];
    L->g[c->param] = m->grads + c->grad_offset;
  }
}

void model_tie_fold(pt_model *m, int copy) {
  const pt_tie_copy *c = &m->tie_copies[copy];
  device_add(m->dev, m->grads + m->tensors[c->owner_tensor].offset, m->grads + c->grad_offset,
             c->numel);
}

void model_tie_reduce_local(pt_model *m) {
  for (int i = 0; i < m->n_tie_copies; i++) model_tie_fold(m, i);
}

/* A tied copy whose first owner this process does not hold must start from the owner's values:
 * run the owner's init on scratch storage and copy its weight. */
static void init_remote_tie(pt_model *m, pt_layer *L, uint64_t seed) {
  int owner = model_tie_owner(m, L->index);
  if (owner < 0 || model_holds_layer(m, owner)) return;
  pt_layer O = m->layers[owner];
  float *tmp[PT_MAX_PARAMS];
  for (int p = 0; p < O.n_params; p++) O.w[p] = tmp[p] = pt_calloc((size_t)O.params[p].numel, 4);
  layer_init_params(&O, seed);
  int pl = model_tied_param(L);
  memcpy(L->w[pl], O.w[model_tied_param(&O)], sizeof(float) * (size_t)L->params[pl].numel);
  for (int p = 0; p < O.n_params; p++) free(tmp[p]);
}

void model_alloc(pt_model *m, int first, int last) { model_alloc_on(m, first, last, device_current()); }

void model_alloc_on(pt_model *m, int first, int last, pt_device *dev) {
  pt_range r = {first, last};
  model_alloc_ranges(m, &r, 1, dev);
}

static void check_ranges(const pt_model *m, const pt_range *ranges, int n) {
  for (int i = 0; i < n; i++) {
    int lo = i ? ranges[i - 1].last : 0;
    if (ranges[i].first < lo || ranges[i].last <= ranges[i].first || ranges[i].last > m->n_layers)
      pt_fatal("model_alloc: layer range %d [%d, %d) is empty, out of order or past the %d "
               "layers", i, ranges[i].first, ranges[i].last, m->n_layers);
  }
  if (n < 1) pt_fatal("model_alloc: no layer range");
}

static void alloc_ranges(pt_model *m, const pt_range *ranges, int n, pt_device *dev, int init);

void model_alloc_ranges(pt_model *m, const pt_range *ranges, int n, pt_device *dev) {
  alloc_ranges(m, ranges, n, dev, 1);
}

void model_alloc_blank(pt_model *m, pt_device *dev) {
  pt_range all = {0, m->n_layers};
  alloc_ranges(m, &all, 1, dev, 0);
}

static void alloc_ranges(pt_model *m, const pt_range *ranges, int n, pt_device *dev, int init) {
  check_ranges(m, ranges, n);
  m->ranges = pt_calloc((size_t)n, sizeof *ranges);
  memcpy(m->ranges, ranges, sizeof *ranges * (size_t)n);
  m->n_ranges = n;
  m->first = ranges[0].first;
  m->last = ranges[n - 1].last;
  m->dev = dev;
  for (int li = 0; li < m->n_layers; li++) m->layers[li].k = dev->k; /* sizes saved areas */
  plan_storage(m);
  size_t pbytes = sizeof(float) * (size_t)m->n_floats;
  m->params = device_alloc(m->dev, pbytes);
  /* the host copy is not device memory: untracked, so measured peaks stay the device's */
  m->host_params = device_shares_host_memory(m->dev) ? m->params : pt_calloc((size_t)m->n_floats + 16, 4);
  m->grads = device_alloc(m->dev, sizeof(float) * (size_t)m->n_grad_floats);
  bind_storage(m, m->host_params); /* initialisation runs on the host */
  uint64_t seed = m->spec->train.seed;
  if (!init) memset(m->host_params, 0, sizeof(float) * (size_t)m->n_floats);
  for (int r = 0; r < n && init; r++)
    for (int li = ranges[r].first; li < ranges[r].last; li++) {
      layer_init_params(&m->layers[li], seed);
      init_remote_tie(m, &m->layers[li], seed);
    }
  bind_storage(m, m->params);
  if (device_weight_copy_used(m->dev)) {
    m->params_bf16 = device_alloc(m->dev, sizeof(uint16_t) * (size_t)m->n_floats);
    m->dev->k->weight_copy(m->dev->k, m->params, m->params_bf16, m->n_floats);
  }
  model_to_device(m);
}

/* The bf16 copy against the parameters just downloaded: a mismatch is a writer of the
 * parameters that skipped model_to_device, and products that read stale weights. */
static void check_weight_copy(const pt_model *m) {
  size_t bytes = sizeof(uint16_t) * (size_t)m->n_floats;
  int shared = device_shares_host_memory(m->dev);
  uint16_t *copy = shared ? m->params_bf16 : pt_calloc((size_t)m->n_floats + 1, sizeof *copy);
  if (copy != m->params_bf16) device_download(m->dev, copy, m->params_bf16, bytes);
  for (int i = 0; i < m->n_tensors; i++) {
    const pt_tensor *t = &m->tensors[i];
    for (int64_t j = t->offset; j < t->offset + t->numel; j++)
      if (copy[j] != pt_bf16_bits(m->host_params[j]))
        pt_fatal("the bf16 copy of parameter %s is stale at element %lld: the parameters were "
                 "written without model_to_device (please report this)", t->name,
                 (long long)(j - t->offset));
  }
  if (copy != m->params_bf16) free(copy);
}

void model_to_host(pt_model *m) {
  device_download(m->dev, m->host_params, m->params, sizeof(float) * (size_t)m->n_floats);
  if (m->params_bf16) check_weight_copy(m);
}

void model_to_device(pt_model *m) {
  device_upload(m->dev, m->params, m->host_params, sizeof(float) * (size_t)m->n_floats);
  model_refresh_weight_copy(m, 0, m->n_floats);
}

void model_refresh_weight_copy(pt_model *m, int64_t first, int64_t n) {
  if (m->params_bf16 && n > 0)
    m->dev->k->pack_bf16(m->dev->k, m->params_bf16 + first, m->params + first, n);
}

void model_zero_grads(pt_model *m) {
  device_zero(m->dev, m->grads, sizeof(float) * (size_t)m->n_grad_floats);
}

void model_free(pt_model *m) {
  if (m->host_params != m->params) free(m->host_params);
  if (m->params_bf16) {
    if (m->dev->k->weight_copy) m->dev->k->weight_copy(m->dev->k, m->params, NULL, 0);
    device_free(m->dev, m->params_bf16);
  }
  if (m->dev) {
    device_free(m->dev, m->params);
    device_free(m->dev, m->grads);
  }
  free(m->tensors);
  free(m->tie_copies);
  free(m->ranges);
  for (int li = 0; li < m->n_layers && m->layers; li++) layer_state_free(&m->layers[li]);
  free(m->layers);
  memset(m, 0, sizeof *m);
}

int64_t model_param_count(const pt_model *m) {
  int64_t n = 0;
  for (int li = 0; li < m->n_layers; li++) {
    const pt_layer *L = &m->layers[li];
    int tied_to_earlier = model_tie_owner(m, li) >= 0;
    for (int p = 0; p < L->n_params; p++)
      if (!(tied_to_earlier && p == model_tied_param(L))) n += L->params[p].numel;
  }
  return n;
}

const char *model_tensor_key(const pt_model *m, int i, char *out, size_t outsz) {
  const pt_tensor *t = &m->tensors[i];
  int owner = t->tied_copy ? model_tie_owner(m, t->layer) : -1;
  if (owner >= 0)
    snprintf(out, outsz, "%d.%s", owner, m->layers[t->layer].params[t->param].name);
  else
    snprintf(out, outsz, "%s", t->name);
  return out;
}

double model_flops_per_token(const pt_model *m) {
  const pt_spec *s = m->spec;
  int blocks = layer_count_type(s, "transformer_block");
  return 6.0 * (double)model_param_count(m) + 12.0 * blocks * (double)s->dim * (double)s->seq_len;
}
