/* Per-layer times from a recorded trace: its chunks' medians spread over their layers by FLOPs
 * (see trace_times.h). */
#include "observe/trace_times.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "observe/trace_doc.h"
#include "observe/trace_medians.h"

/* What is left of a backward span after taking off the forward it re-ran, at the least: a
 * noisy trace must still give the planner a positive backward. */
#define RECOMPUTE_KEEP 0.01

typedef struct {
  double *f, *i, *w; /* [n_layers] each layer's share weights (see trace_times.h) */
} layer_weights;

static double at_least(double v, double floor) { return v > floor ? v : floor; }

static void weigh_layers(const pt_model *m, layer_weights *lw) {
  int T = m->input_tokens ? (int)m->spec->seq_len : 1; /* as the planner counts (plan.c) */
  lw->f = pt_calloc((size_t)m->n_layers, sizeof(double));
  lw->i = pt_calloc((size_t)m->n_layers, sizeof(double));
  lw->w = pt_calloc((size_t)m->n_layers, sizeof(double));
  for (int l = 0; l < m->n_layers; l++) {
    const pt_layer *L = &m->layers[l];
    pt_layer_cost c;
    layer_cost(L, T, &c);
    double outputs = (double)T * L->out_dim;
    double bwd_i = L->n_params > 0 ? c.bwd_flops / 2 : c.bwd_flops;
    lw->f[l] = at_least(c.fwd_flops, outputs);
    lw->i[l] = at_least(bwd_i, outputs);
    lw->w[l] = L->n_params > 0 ? c.bwd_flops / 2 : 0.0;
  }
}

/* total over layers [lo, hi): into a in proportion to wa, into b to wb (b may be NULL). */
static void spread(double total, const double *wa, const double *wb, double *a, double *b,
                   int lo, int hi) {
  double sum = 0.0;
  for (int l = lo; l < hi; l++) sum += wa[l] + (b ? wb[l] : 0.0);
  for (int l = lo; l < hi; l++) {
    a[l] = total * wa[l] / sum;
    if (b) b[l] = total * wb[l] / sum;
  }
}

static double sum_of(const double *v, int lo, int hi) {
  double s = 0.0;
  for (int l = lo; l < hi; l++) s += v[l];
  return s;
}

/* The backward medians k[] of chunk [lo, hi) over its layers' i and w. */
static void spread_backward(const double *k, int64_t checkpoint_interval, const layer_weights *lw,
                            pt_layer_times *t, int lo, int hi) {
  double w = k[TRACE_W] > 0 ? k[TRACE_W] : 0.0;
  if (k[TRACE_B] >= 0 || checkpoint_interval > 0) {
    /* fused: a B, or under checkpointing an I that is the whole backward (its W is empty) */
    double b = k[TRACE_B] >= 0 ? k[TRACE_B] : k[TRACE_I] + w;
    if (checkpoint_interval > 0) b = at_least(b - k[TRACE_F], RECOMPUTE_KEEP * b);
    spread(b, lw->i, lw->w, t->i, t->w, lo, hi);
  } else if (sum_of(lw->w, lo, hi) > 0) {
    spread(k[TRACE_I], lw->i, NULL, t->i, NULL, lo, hi);
    spread(w, lw->w, NULL, t->w, NULL, lo, hi);
  } else { /* no parameters: the W spans did the rest of I's work */
    spread(k[TRACE_I] + w, lw->i, NULL, t->i, NULL, lo, hi);
  }
}

static int spread_chunks(const pt_trace_layout *l, const pt_trace_medians *med,
                         const layer_weights *lw, const char *path, pt_layer_times *t, char *err,
                         size_t errsz) {
  for (int c = 0; c < l->n_chunks; c++) {
    const double *k = med->chunk + c * TRACE_KINDS;
    int lo = l->bounds[c], hi = l->bounds[c + 1];
    if (k[TRACE_F] < 0 || (k[TRACE_B] < 0 && k[TRACE_I] < 0))
      return pt_errorf(err, errsz, "%s: chunk %d (layers %d-%d, stage %d) has no %s span on "
                       "replica 0; record a trace of whole steps with pipe_train --trace", path,
                       c, lo, hi - 1, l->chunk_stage[c],
                       k[TRACE_F] < 0 ? "forward (F<mb>)" : "backward (B<mb> or I<mb>)");
    spread(k[TRACE_F], lw->f, NULL, t->f, NULL, lo, hi);
    spread_backward(k, l->checkpoint_interval, lw, t, lo, hi);
  }
  return 0;
}

/* Each stage's optimizer time over the layers of its chunks, by parameter count. */
static void spread_optimizer(const pt_trace_layout *l, const pt_trace_medians *med,
                             const pt_model *m, pt_layer_times *t) {
  double *params = pt_calloc((size_t)m->n_layers + 1, sizeof(double));
  double *stage_params = pt_calloc((size_t)l->n_stages, sizeof(double));
  for (int c = 0; c < l->n_chunks; c++)
    for (int li = l->bounds[c]; li < l->bounds[c + 1]; li++) {
      for (int p = 0; p < m->layers[li].n_params; p++)
        params[li] += (double)m->layers[li].params[p].numel;
      stage_params[l->chunk_stage[c]] += params[li];
    }
  for (int c = 0; c < l->n_chunks; c++) {
    int s = l->chunk_stage[c];
    if (med->opt[s] <= 0 || stage_params[s] <= 0) continue; /* no span, or nothing to update */
    for (int li = l->bounds[c]; li < l->bounds[c + 1]; li++)
      t->opt[li] = med->opt[s] * params[li] / stage_params[s];
  }
  free(params), free(stage_params);
}

static int to_layers(const pt_trace_layout *l, const pt_trace_medians *med, const pt_model *m,
                     const char *path, pt_layer_times *out, char *err, size_t errsz) {
  layer_weights lw;
  weigh_layers(m, &lw);
  profile_times_alloc(out, m->n_layers);
  int rc = spread_chunks(l, med, &lw, path, out, err, errsz);
  free(lw.f), free(lw.i), free(lw.w);
  if (rc != 0) {
    profile_times_free(out);
    return -1;
  }
  spread_optimizer(l, med, m, out);
  out->p2p_latency_s = PROFILE_P2P_LATENCY_S;
  out->p2p_bytes_per_s = PROFILE_P2P_BYTES_PER_S;
  snprintf(out->source, sizeof out->source, "trace %s (%d steps, %d micro-batches)", path,
           med->n_steps, l->micro_batches);
  return 0;
}

int trace_read_times(const char *path, const pt_model *m, pt_layer_times *out, char *err,
                     size_t errsz) {
  pt_trace_doc doc;
  pt_trace_layout layout = {0};
  pt_trace_medians med = {0};
  memset(out, 0, sizeof *out);
  if (trace_doc_open(&doc, path, err, errsz) != 0) return -1;
  int rc = trace_layout_read(doc.meta, path, &layout, err, errsz);
  if (rc == 0) rc = trace_layout_check(&layout, m, path, err, errsz);
  if (rc == 0) rc = trace_medians_read(&doc, &layout, path, &med, err, errsz);
  if (rc == 0) rc = to_layers(&layout, &med, m, path, out, err, errsz);
  trace_medians_free(&med);
  trace_layout_free(&layout);
  trace_doc_close(&doc);
  return rc;
}
