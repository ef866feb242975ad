#include "engine/stage.h"
#include "engine/stage_store.h"
#include "engine/stage_offload.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "device/stats.h"

static size_t out_bytes(const pt_stage *st, int li) {
  return sizeof(float) * (size_t)st->B * st->T * st->m->layers[st->first + li].out_dim;
}

static size_t saved_bytes(const pt_stage *st, int li) {
  const pt_layer *L = &st->m->layers[st->first + li];
  return L->type->saved_bytes ? L->type->saved_bytes(L, st->B, st->T) : 0;
}

void *stage_alloc(pt_stage *st, size_t bytes) {
  st->bytes += bytes;
  return device_alloc(st->m->dev, bytes);
}

void *stage_alloc_sparse(pt_stage *st, size_t bytes, size_t touched) {
  size_t tracked;
  void *p = device_alloc_sparse(st->m->dev, bytes, touched, &tracked);
  st->bytes += tracked;
  return p;
}

void stage_release(pt_stage *st, void *p) {
  if (p) device_free(st->m->dev, p);
}

/* Workspace position j holds layers first+j, first+j+k, ...: size it for the largest of them. */
static void alloc_checkpoint_workspace(pt_stage *st) {
  st->ws_out = pt_calloc((size_t)st->ckpt, sizeof(float *));
  st->ws_saved = pt_calloc((size_t)st->ckpt, sizeof(void *));
  for (int j = 0; j < st->ckpt; j++) {
    size_t o = 0, s = 0;
    for (int li = j; li < st->n; li += st->ckpt) {
      if (!stage_kept(st, li) && out_bytes(st, li) > o) o = out_bytes(st, li);
      if (saved_bytes(st, li) > s) s = saved_bytes(st, li);
    }
    st->ws_out[j] = o ? stage_alloc(st, o) : NULL;
    st->ws_saved[j] = s ? stage_alloc(st, s) : NULL;
  }
}

static void alloc_workspace(pt_stage *st) {
  size_t max_in = 0, max_scratch = 0;
  for (int li = 0; li < st->n; li++) {
    const pt_layer *L = &st->m->layers[st->first + li];
    size_t sc = device_scratch_bytes(st->m->dev, L, st->B, st->T);
    size_t in = sizeof(float) * (size_t)st->B * st->T * L->in_dim;
    if (in > max_in) max_in = in;
    if (sc > max_scratch) max_scratch = sc;
  }
  st->scratch = stage_alloc(st, max_scratch);
  /* Input gradients ping-pong between two buffers wide enough for any layer's input; a packed
   * split backward also unpacks the stage's received output gradient there (the loss gradient
   * of the model's last layer is not moved: it is written over the logits, and a set keeps it
   * as float32), so the logits never need a gradient buffer of their own. */
  size_t gbytes = max_in;
  if (st->last < st->m->n_layers && out_bytes(st, st->n - 1) > gbytes)
    gbytes = out_bytes(st, st->n - 1);
  st->grad[0] = stage_alloc(st, gbytes);
  st->grad[1] = stage_alloc(st, gbytes);
  if (st->ckpt) alloc_checkpoint_workspace(st);
}

void stage_init(pt_stage *st, pt_model *m, int first, int last, int B, int T, int n_slots,
                int ckpt) {
  stage_init_offload(st, m, first, last, B, T, n_slots, ckpt, NULL);
}

void stage_init_offload(pt_stage *st, pt_model *m, int first, int last, int B, int T,
                        int n_slots, int ckpt, const stage_offload_plan *plan) {
  memset(st, 0, sizeof *st);
  st->m = m;
  st->first = first;
  st->last = last;
  st->n = last - first;
  st->B = B;
  st->T = T;
  st->n_slots = n_slots;
  /* a stage shorter than the interval is one segment: it keeps only its output per micro-batch
   * (switching checkpointing off there would make memory jump up for short stages) */
  st->ckpt = ckpt > st->n ? st->n : ckpt;
  st->ws_slot = -1;
  st->bad_layer = -1;
  st->packed = m->dev->k->pack_bf16 != NULL;
  if (plan) stage_offload_init(st, plan);
  const pt_layer *L0 = &m->layers[first];
  size_t in_bytes = L0->in_tokens ? sizeof(int32_t) * (size_t)B * T
                                  : sizeof(float) * (size_t)B * T * L0->in_dim;
  st->in_bytes = in_bytes;
  st->input = pt_calloc((size_t)n_slots, sizeof(void *));
  st->loss_check = pt_calloc((size_t)n_slots, sizeof(int32_t));
  st->out = pt_calloc((size_t)n_slots * st->n, sizeof(float *));
  st->saved = pt_calloc((size_t)n_slots * st->n, sizeof(void *));
  for (int s = 0; s < n_slots; s++) {
    st->input[s] = stage_alloc(st, in_bytes);
    for (int li = 0; li < st->n && !st->packed; li++) {
      if (stage_kept(st, li) && !stage_offload_pooled(st, OFFLOAD_OUTPUTS, li))
        st->out[s * st->n + li] = stage_alloc(st, out_bytes(st, li));
      if (st->ckpt == 0 && !stage_offload_pooled(st, OFFLOAD_SAVED, li))
        st->saved[s * st->n + li] = stage_alloc(st, saved_bytes(st, li));
    }
  }
  if (st->packed) store_alloc(st);
  if (st->offload) stage_offload_alloc(st);
  alloc_workspace(st);
  /* where the data loader writes: the slot itself on the cpu, else a host staging buffer */
  if (!device_shares_host_memory(m->dev)) st->input_host = pt_calloc(in_bytes + 64, 1);
}

void stage_free(pt_stage *st) {
  stage_offload_free(st); /* first: the slots' pointers into its frames go */
  for (int i = 0; i < st->n_slots; i++) stage_release(st, st->input[i]);
  for (int i = 0; i < st->n_slots * st->n; i++) {
    stage_release(st, st->out[i]);
    stage_release(st, st->saved[i]);
  }
  for (int j = 0; st->ws_out && j < st->ckpt; j++) {
    stage_release(st, st->ws_out[j]);
    stage_release(st, st->ws_saved[j]);
  }
  for (int i = 0; i < st->n_stash * st->n; i++) stage_release(st, st->stash[i]);
  if (st->packed) store_free(st);
  free(st->stash);
  free(st->stash_of);
  free(st->stash_used);
  free(st->ws_out);
  free(st->ws_saved);
  stage_release(st, st->scratch);
  stage_release(st, st->grad[0]);
  stage_release(st, st->grad[1]);
  for (int i = 0; st->docs && i < st->n_slots; i++) stage_release(st, st->docs[i]);
  free(st->docs);
  free(st->doc_count);
  free(st->input);
  free(st->loss_check);
  free(st->input_host);
  free(st->out);
  free(st->saved);
  memset(st, 0, sizeof *st);
}

void *stage_input(pt_stage *st, int slot) { return st->input[slot]; }

void *stage_input_host(pt_stage *st, int slot) {
  return st->input_host ? st->input_host : st->input[slot];
}

void stage_input_commit(pt_stage *st, int slot) {
  if (st->input_host) /* no wait: the loader may refill input_host at once */
    device_upload_nowait(st->m->dev, st->input[slot], st->input_host, st->in_bytes);
}

/* Where layer li's output and saved area are while it runs (engine/stage_store.h when packed). */
static float *layer_out(pt_stage *st, int slot, int li) {
  if (!stage_kept(st, li)) return st->ws_out[li % st->ckpt];
  return st->packed ? st->wk[li & 1] : st->out[slot * st->n + li];
}

static void *layer_saved(pt_stage *st, int slot, int li) {
  if (st->ckpt) return st->ws_saved[li % st->ckpt];
  return st->packed ? st->wk_saved : st->saved[slot * st->n + li];
}

static const void *layer_in(pt_stage *st, int slot, int li) {
  return li == 0 ? st->input[slot] : layer_out(st, slot, li - 1);
}

/* What layer li sees for the micro-batch in slot; dout and din only in backward. */
static pt_io layer_io(pt_stage *st, int slot, int li, const float *dout, float *din) {
  const int32_t *docs = st->docs ? st->docs[slot] : NULL;
  return (pt_io){.k = st->m->dev->k, .B = st->cur_B, .T = st->cur_T,
                 .in = layer_in(st, slot, li), .out = layer_out(st, slot, li),
                 .saved = layer_saved(st, slot, li), .scratch = st->scratch, .dout = dout,
                 .din = din, .doc_start = docs,
                 .positions = docs ? docs + (int64_t)st->B * st->T : NULL,
                 .documents = docs ? st->doc_count[slot] : 0};
}

void stage_enable_docs(pt_stage *st) {
  st->docs = pt_calloc((size_t)st->n_slots, sizeof(int32_t *));
  st->doc_count = pt_calloc((size_t)st->n_slots, sizeof(int));
  for (int s = 0; s < st->n_slots; s++)
    st->docs[s] = stage_alloc(st, sizeof(int32_t) * 2 * (size_t)st->B * st->T);
}

void stage_set_docs(pt_stage *st, int slot, const int32_t *doc_start, const int32_t *positions,
                    int B, int T) {
  size_t bytes = sizeof(int32_t) * (size_t)B * T;
  if (B > st->B || T > st->T)
    pt_fatal("documents of %dx%d exceed the stage's allocation %dx%d", B, T, st->B, st->T);
  int count = 0; /* a document starts where its start is the token itself */
  for (int64_t i = 0; i < (int64_t)B * T; i++) count += doc_start[i] == (int32_t)(i % T);
  st->doc_count[slot] = count;
  device_upload_nowait(st->m->dev, st->docs[slot], doc_start, bytes);
  device_upload_nowait(st->m->dev, st->docs[slot] + (int64_t)st->B * st->T, positions, bytes);
}

/* train.precision bf16: what one layer hands the next (its output forward, its input gradient
 * backward) is stored as bf16 values, so a stage boundary carries them losslessly as packed
 * bf16 and the pipelined run keeps the sequential run's bits. Other precisions: nothing. */
static void store_bf16(const pt_io *io, float *x, int features) {
  if (x && io->k->round_bf16) io->k->round_bf16(io->k, x, (int64_t)io->B * io->T * features);
}

/* Layer L's backward_input, then its input gradient din (NULL: none) rounded to bf16 values
 * (store_bf16): by the table as the norm writing din last writes it, where L's type says one
 * does (layers/layer.h din_by_norm; kernels.h round_when_written), else in a pass of its own.
 * Returns 1 when the table rounded it (store_ready_backward's din_rounded for the layer
 * before). */
static int backward_input_stored(pt_layer *L, const pt_io *io, float *din) {
  const pt_kernels *k = io->k;
  const int fused = din && k->round_when_written && L->type->din_by_norm; /* bf16 tables */
  if (fused) k->round_when_written(k, din, (int64_t)io->B * io->T * L->in_dim);
  L->type->backward_input(L, io);
  if (fused && k->round_when_written(k, NULL, 0)) return 1;
  store_bf16(io, din, L->in_dim);
  return 0;
}

/* Check k of the step (k = pass * n + li, increasing in time) raises the mark to
 * INT32_MAX - k: the largest mark is the earliest failure. Past INT32_MAX / n passes (never in
 * practice) the last pass's numbers are reused: a tie then names the lower layer. */
static int32_t check_value(const pt_stage *st, int li) {
  int64_t pass = st->check_seq, cap = (INT32_MAX - 1) / st->n - 1;
  return (int32_t)(INT32_MAX - ((pass < cap ? pass : cap) * st->n + li));
}

static void forward_range(pt_stage *st, int slot, int lo, int hi) {
  for (int li = lo; li < hi; li++) {
    pt_layer *L = &st->m->layers[st->first + li];
    if (st->packed) store_ready(st, slot, li, 0);
    pt_io io = layer_io(st, slot, li, NULL, NULL);
    L->type->forward(L, &io);
    int32_t v = st->check_finite ? check_value(st, li) : 0; /* > 0 when checked */
    int checked = 0;
    if (st->packed) /* rounds io.out (not the logits), checked in the same pass when kept */
      checked = store_after_forward(st, slot, li, &io, v ? st->finite_mark : NULL, v);
    else store_bf16(&io, io.out, L->out_dim);
    if (!v || checked) continue;
    if (st->packed && stage_logits(st, li)) { /* checked by the loss as it reads them rounded */
      if (v > st->loss_check[slot]) st->loss_check[slot] = v; /* a recomputation's is later */
    } else {
      device_finite_check(st->m->dev, st->finite_mark, v, io.out,
                          (int64_t)io.B * io.T * L->out_dim);
    }
  }
  st->check_seq++;
}

void stage_begin_step(pt_stage *st) {
  st->bad_layer = -1;
  st->check_seq = 0;
  memset(st->loss_check, 0, sizeof(int32_t) * (size_t)st->n_slots);
}

void stage_take_mark(pt_stage *st, int32_t mark) {
  st->bad_layer = mark > 0 ? st->first + (int)((INT32_MAX - mark) % st->n) : -1;
}

const float *stage_forward(pt_stage *st, int slot, int B, int T) {
  if (B > st->B || T > st->T)
    pt_fatal("micro-batch %dx%d exceeds the stage's allocation %dx%d", B, T, st->B, st->T);
  st->cur_B = B;
  st->cur_T = T;
  if (st->offload) stage_offload_before_forward(st, slot);
  forward_range(st, slot, 0, st->n);
  if (st->offload) stage_offload_after_forward(st, slot);
  if (st->ckpt) {
    st->ws_slot = slot;
    st->ws_seg = (st->n - 1) / st->ckpt;
  }
  return layer_out(st, slot, st->n - 1);
}

/* Backward over layers [lo, hi) in reverse; returns the gradient of layer lo's input. */
static float *backward_range(pt_stage *st, int slot, int lo, int hi, const float *dout,
                             int need_din, float *din_out) {
  float *din = NULL;
  int rounded = 0; /* dout is the din the table rounded (not the first layer's: the caller's) */
  for (int li = hi - 1; li >= lo; li--) {
    pt_layer *L = &st->m->layers[st->first + li];
    int want = (li > 0 || need_din) && !L->in_tokens;
    din = want ? (dout == st->grad[0] ? st->grad[1] : st->grad[0]) : NULL;
    if (want && li == 0 && din_out) din = din_out;
    if (st->packed) store_ready_backward(st, slot, li, dout, rounded);
    pt_io io = layer_io(st, slot, li, dout, din);
    if (st->packed) store_before_backward_input(st, slot, li, &io, NULL);
    rounded = backward_input_stored(L, &io, din);
    if (st->packed) store_after_backward_input(st, slot, li, &io, NULL);
    L->type->backward_weight(L, &io);
    dout = din;
  }
  return din;
}

float *stage_output(pt_stage *st, int slot) {
  if (st->packed) store_output(st, slot, 0);
  return layer_out(st, slot, st->n - 1);
}

float *stage_loss_output(pt_stage *st, int slot) {
  if (st->packed) store_output(st, slot, 1);
  return layer_out(st, slot, st->n - 1);
}

int32_t stage_loss_check(pt_stage *st, int slot) {
  int32_t v = st->loss_check[slot];
  st->loss_check[slot] = 0;
  return v;
}

/* The segment stage_backward starts with, recomputed here rather than there: the same forward
 * calls in the same place of the stage's work, before the loss instead of after it. Packed
 * (bf16 at rest): the buffer returned is the float32 working copy still tagged as the slot's
 * last output, and it keeps that tag once the loss has written the gradient over it, so the
 * backward that follows does not unpack the logits back over the gradient (a layer's backward
 * never reads its own output, layers/layer.h); the logits in it are unrounded where they were
 * not put to rest since their forward (stage_loss_output). */
uint16_t *stage_loss_gradient_bf16(pt_stage *st, int slot) {
  return st->packed ? store_loss_place(st, slot) : NULL;
}

float *stage_loss_gradient(pt_stage *st, int slot) {
  if (st->offload) stage_offload_before_backward(st, slot);
  int last = (st->n - 1) / (st->ckpt ? st->ckpt : 1);
  if (st->ckpt && (st->ws_slot != slot || st->ws_seg != last)) {
    forward_range(st, slot, last * st->ckpt, st->n);
    st->ws_slot = slot;
    st->ws_seg = last;
  }
  return stage_loss_output(st, slot);
}

const float *stage_backward(pt_stage *st, int slot, const float *dout, int need_din,
                            float *din_out) {
  if (st->offload) stage_offload_before_backward(st, slot);
  if (!st->ckpt) {
    dout = backward_range(st, slot, 0, st->n, dout, need_din, din_out);
    if (st->offload) stage_offload_release(st, slot);
    return dout;
  }
  for (int seg = (st->n - 1) / st->ckpt; seg >= 0; seg--) {
    int lo = seg * st->ckpt, hi = lo + st->ckpt < st->n ? lo + st->ckpt : st->n;
    if (st->ws_slot != slot || st->ws_seg != seg) forward_range(st, slot, lo, hi);
    st->ws_slot = slot;
    st->ws_seg = seg;
    dout = backward_range(st, slot, lo, hi, dout, need_din, din_out);
  }
  if (st->offload) stage_offload_release(st, slot);
  return dout;
}

/* --- Split backward ----------------------------------------------------------------------- */

static int has_weights(const pt_stage *st, int li) {
  return st->m->layers[st->first + li].n_params > 0;
}

void stage_alloc_stash(pt_stage *st, int n_sets) {
  if (st->ckpt || n_sets <= 0) return; /* checkpointing: I is the fused backward */
  st->n_stash = n_sets;
  st->stash = pt_calloc((size_t)n_sets * st->n, sizeof(float *));
  st->stash_used = pt_calloc((size_t)n_sets, 1);
  st->stash_of = pt_calloc((size_t)st->n_slots, sizeof(int));
  for (int s = 0; s < st->n_slots; s++) st->stash_of[s] = -1;
  for (int set = 0; set < n_sets; set++)
    for (int li = 0; li < st->n; li++)
      if (has_weights(st, li))
        st->stash[set * st->n + li] =
            stage_alloc(st, st->packed ? store_set_bytes(st, li) : out_bytes(st, li));
}

/* Any free set will do: they are alike, and which one holds a dout changes no result. */
static float **take_stash(pt_stage *st, int slot) {
  if (!st->stash) pt_fatal("split backward on a stage without dout sets (stage_alloc_stash)");
  if (st->stash_of[slot] >= 0)
    pt_fatal("slot %d: backward_input twice without backward_weight", slot);
  for (int set = 0; set < st->n_stash; set++)
    if (!st->stash_used[set]) {
      st->stash_used[set] = 1;
      st->stash_of[slot] = set;
      return &st->stash[set * st->n];
    }
  pt_fatal("more than %d micro-batches between backward_input and backward_weight on layers "
           "%d..%d: the schedule holds more than its w_pending count", st->n_stash, st->first,
           st->last - 1);
}

/* The input gradient of layer li goes straight into layer li-1's kept dout where it has one,
 * into the caller's buffer for the stage input, else into the ping-pong buffer dout is not in. */
static float *input_grad_buffer(pt_stage *st, float **keep, int li, const float *dout,
                                float *din_out) {
  if (li == 0 && din_out) return din_out;
  if (li > 0 && keep[li - 1] && !st->packed) return keep[li - 1]; /* packed: kept after */
  return dout == st->grad[0] ? st->grad[1] : st->grad[0];
}

const float *stage_backward_input(pt_stage *st, int slot, const float *dout, int need_din,
                                  float *din_out) {
  if (st->ckpt) return stage_backward(st, slot, dout, need_din, din_out);
  if (st->offload) stage_offload_before_backward(st, slot);
  float **keep = take_stash(st, slot), *din = NULL;
  if (keep[st->n - 1] && !st->packed) { /* the caller's buffer may be reused before W */
    const pt_layer *L = &st->m->layers[st->last - 1];
    device_copy(st->m->dev, keep[st->n - 1], dout,
                sizeof(float) * (size_t)st->cur_B * st->cur_T * L->out_dim);
    dout = keep[st->n - 1];
  }
  int rounded = 0; /* as backward_range's */
  for (int li = st->n - 1; li >= 0; li--) {
    pt_layer *L = &st->m->layers[st->first + li];
    int want = (li > 0 || need_din) && !L->in_tokens;
    din = want ? input_grad_buffer(st, keep, li, dout, din_out) : NULL;
    if (st->packed) store_ready_backward(st, slot, li, dout, rounded);
    pt_io io = layer_io(st, slot, li, dout, din);
    if (st->packed) store_before_backward_input(st, slot, li, &io, keep[li]);
    rounded = backward_input_stored(L, &io, din);
    if (st->packed) store_after_backward_input(st, slot, li, &io, keep[li]);
    if (!keep[li]) L->type->backward_weight(L, &io); /* no parameters: nothing to defer */
    dout = din;
  }
  return din;
}

void stage_backward_weight(pt_stage *st, int slot) {
  if (st->ckpt) return; /* the weight gradients were taken in stage_backward_input */
  int set = st->stash_of ? st->stash_of[slot] : -1;
  if (set < 0) pt_fatal("slot %d: backward_weight without its backward_input", slot);
  float **keep = &st->stash[set * st->n];
  for (int li = st->n - 1; li >= 0; li--) { /* the fused path's order: tied copies add alike */
    if (!keep[li]) continue;
    pt_layer *L = &st->m->layers[st->first + li];
    const float *dout = st->packed ? store_before_backward_weight(st, slot, li, keep[li]) : keep[li];
    pt_io io = layer_io(st, slot, li, dout, NULL);
    L->type->backward_weight(L, &io);
  }
  st->stash_used[set] = 0;
  st->stash_of[slot] = -1;
  if (st->offload) stage_offload_release(st, slot);
}
