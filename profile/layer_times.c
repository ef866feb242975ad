/* The pt_layer_times struct and its FLOP-count fallback (layer_times.h). */
#include "profile/layer_times.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* The four arrays share one block, so copies and frees handle it whole. */
void profile_times_alloc(pt_layer_times *t, int n_layers) {
  memset(t, 0, sizeof *t);
  size_t n = n_layers > 0 ? (size_t)n_layers : 0;
  t->n_layers = n_layers > 0 ? n_layers : 0;
  t->f = pt_calloc(4 * n, sizeof(double));
  t->i = t->f + n;
  t->w = t->i + n;
  t->opt = t->w + n;
  t->p2p_latency_s = PROFILE_P2P_LATENCY_S;
  t->p2p_bytes_per_s = PROFILE_P2P_BYTES_PER_S;
  t->copy_bytes_per_s = PROFILE_COPY_BYTES_PER_S;
}

void profile_times_free(pt_layer_times *t) {
  free(t->f);
  memset(t, 0, sizeof *t);
}

void profile_times_copy(pt_layer_times *dst, const pt_layer_times *src) {
  profile_times_alloc(dst, src->n_layers);
  size_t bytes = sizeof(double) * (size_t)dst->n_layers;
  if (bytes) {
    memcpy(dst->f, src->f, bytes);
    memcpy(dst->i, src->i, bytes);
    memcpy(dst->w, src->w, bytes);
    memcpy(dst->opt, src->opt, bytes);
  }
  dst->p2p_latency_s = src->p2p_latency_s;
  dst->p2p_bytes_per_s = src->p2p_bytes_per_s;
  dst->copy_bytes_per_s = src->copy_bytes_per_s;
  memcpy(dst->source, src->source, sizeof dst->source);
}

/* The tokens one micro-batch holds per sample, as the planner counts them (plan_layer_flops). */
int profile_tokens_per_sample(const pt_model *m) {
  return m->input_tokens ? (int)m->spec->seq_len : 1;
}

void profile_times_from_flops(pt_layer_times *t, const pt_model *m, double gflops) {
  profile_times_alloc(t, m->n_layers);
  int T = profile_tokens_per_sample(m);
  double B = (double)m->spec->train.micro_batch_size, rate = gflops * 1e9;
  for (int l = 0; l < m->n_layers; l++) {
    const pt_layer *L = &m->layers[l];
    pt_layer_cost c;
    layer_cost(L, T, &c);
    double bwd = B * c.bwd_flops / rate, params = 0;
    for (int p = 0; p < L->n_params; p++) params += (double)L->params[p].numel;
    t->f[l] = B * c.fwd_flops / rate;
    t->i[l] = L->n_params > 0 ? bwd / 2 : bwd;
    t->w[l] = L->n_params > 0 ? bwd / 2 : 0.0;
    t->opt[l] = 10.0 * params / rate;
  }
  snprintf(t->source, sizeof t->source, "flops at %.1f GFLOP/s", gflops);
}
