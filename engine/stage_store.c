/* engine/stage_store.c: bf16 storage at rest (engine/stage_store.h). */
#include "engine/stage_store.h"

#include <stdlib.h>

#include "core/error.h"
#include "engine/stage_offload.h"

static const pt_layer *layer_of(const pt_stage *st, int li) { return &st->m->layers[st->first + li]; }

static int64_t out_floats(const pt_stage *st, int li, int B, int T) {
  return (int64_t)B * T * layer_of(st, li)->out_dim;
}

static int parts_at(const pt_stage *st, int li, int B, int T, pt_saved_part *p) {
  const pt_layer *L = layer_of(st, li);
  return layer_saved_parts(L, layer_kernels(L), B, T, p);
}

/* A stage's last layer on the model's last stage gets the loss gradient, which is not rounded to
 * bf16: its dout stays float32 in the sets. Every other dout is an input gradient (rounded).
 * Where that layer reads it only through products (layer.h layer_dout_at_rest), the loss
 * writes it as bf16 straight to the logits' place at rest (store_loss_place), and a set gets
 * it unpacked from there: a set's float32 dout is what backward_weight reads, no buffer of the
 * stage's being as wide (the gradient buffers are the layers' inputs' width). */
static int dout_f32(const pt_stage *st, int li) { return stage_logits(st, li); }

static int dout_at_rest(const pt_stage *st, int li) {
  return stage_logits(st, li) && layer_dout_at_rest(layer_of(st, li), st->m->dev->k);
}

/* The model's logits of slot go to their place at rest straight from the head's product, as
 * bf16 alone (layer.h layer_out_by_product), and the loss reads them there (store_output). */
static int logits_alone(const pt_stage *st, int slot, int li) {
  return stage_logits(st, li) && st->out16[slot * st->n + li] &&
         layer_out_by_product(layer_of(st, li), st->m->dev->k);
}

static size_t dout_rest(const pt_stage *st, int li, int B, int T) {
  return ((size_t)out_floats(st, li, B, T) * (dout_f32(st, li) ? 4 : 2) + 63) & ~(size_t)63;
}

/* The table's activation copies (kernels.h activation_copies) forgotten: the working area they
 * stand for is about to be written, or to go. */
static void forget_copies(const pt_stage *st) {
  const pt_kernels *k = st->m->dev->k;
  if (k->activation_copies) k->activation_copies(k, NULL, 0);
}

/* Layer li's output is the model's logits, which the head's product writes at rest alone
 * (logits_alone) and the loss reads and overwrites there (dout_at_rest): on a table that does
 * both, no float of them is written while the stage trains, so their working buffer's floats
 * need no memory (store_alloc). */
static int logits_at_rest_only(const pt_stage *st, int li) {
  return dout_at_rest(st, li) && layer_out_by_product(layer_of(st, li), st->m->dev->k);
}

void store_alloc(pt_stage *st) {
  /* per parity, the largest kept output, and the largest with the floats anything writes */
  size_t wk[2] = {0, 0}, touched[2] = {0, 0}, ws = 0, n = (size_t)st->n_slots * st->n;
  st->out16 = pt_calloc(n, sizeof(void *));
  st->saved16 = pt_calloc(n, sizeof(void *));
  for (int li = 0; li < st->n; li++) {
    const pt_layer *L = layer_of(st, li);
    size_t ob = sizeof(float) * (size_t)out_floats(st, li, st->B, st->T);
    size_t sb = layer_saved_bytes(L, layer_kernels(L), st->B, st->T);
    size_t rest = st->ckpt ? 0 : layer_saved_rest_bytes(L, layer_kernels(L), st->B, st->T, 0);
    if (stage_kept(st, li) && ob > wk[li & 1]) wk[li & 1] = ob;
    if (stage_kept(st, li) && !logits_at_rest_only(st, li) && ob > touched[li & 1])
      touched[li & 1] = ob;
    if (st->ckpt == 0 && sb > ws) ws = sb;
    for (int s = 0; s < st->n_slots; s++) {
      if (stage_kept(st, li) && !stage_offload_pooled(st, OFFLOAD_OUTPUTS, li))
        st->out16[s * st->n + li] = stage_alloc(st, ob / 2);
      if (rest && !stage_offload_pooled(st, OFFLOAD_SAVED, li))
        st->saved16[s * st->n + li] = stage_alloc(st, rest);
    }
  }
  /* The logits' floats past the other layers' are only the range that names them (the table's
   * copies are found by their floats' address: kernels.h activation_copies): where the device
   * commits memory lazily, the fallbacks that do write them (a product without a bf16 result,
   * stage_output) get it then. */
  for (int p = 0; p < 2; p++)
    st->wk[p] = !wk[p]             ? NULL
                : touched[p] < wk[p] ? stage_alloc_sparse(st, wk[p], touched[p])
                                     : stage_alloc(st, wk[p]);
  st->wk_saved = ws ? stage_alloc(st, ws) : NULL;
  st->wk_tag[0] = st->wk_tag[1] = st->wk_saved_tag = -1;
  st->raw_tag = st->dout16_tag = -1;
}

void store_free(pt_stage *st) {
  forget_copies(st); /* the working area goes: no copies of it may outlive it */
  for (int i = 0; st->out16 && i < st->n_slots * st->n; i++) {
    stage_release(st, st->out16[i]);
    stage_release(st, st->saved16[i]);
  }
  stage_release(st, st->wk[0]);
  stage_release(st, st->wk[1]);
  stage_release(st, st->wk_saved);
  free(st->out16);
  free(st->saved16);
}

size_t store_set_bytes(const pt_stage *st, int li) {
  const pt_layer *L = layer_of(st, li);
  return dout_rest(st, li, st->B, st->T) +
         layer_saved_rest_bytes(L, layer_kernels(L), st->B, st->T, 1);
}

/* Which parts a layout at rest holds: the slot's (what forward writes) or a stash set's (what
 * only backward_input writes). */
static int in_layout(const pt_saved_part *p, int set) {
  return set ? p->writers == PT_SAVED_STASH : (p->writers & PT_SAVED_FORWARD) != 0;
}

/* What is done to a run of parts: rounded in place, moved to rest or back, or both of the first
 * two in one pass (the float32 parts of such a run are only moved: they are not rounded);
 * ROUND_SHARE and PACK_SHARE: kernels.h round_share_bf16, its floats rounded or unset. */
enum { ROUND, TO_REST, FROM_REST, ROUND_TO_REST, ROUND_SHARE, PACK_SHARE, UNSET };

/* Parts next to each other both in the area and at rest, of one kind, go in one call. */
typedef struct {
  float *f;
  char *r;
  int64_t n;
  int bf16;
} part_run;

static void run_flush(const pt_kernels *k, part_run *u, int op) {
  if (u->n == 0) return;
  if (op == ROUND) k->round_bf16(k, u->f, u->n);
  else if (op == UNSET) k->unset_f32(k, u->f, u->n);
  else if (op == ROUND_SHARE || op == PACK_SHARE)
    k->round_share_bf16(k, u->f, u->n, op == PACK_SHARE);
  else if (u->bf16 && op == ROUND_TO_REST)
    k->round_pack_bf16(k, (uint16_t *)u->r, u->f, u->n, NULL, 0);
  else if (u->bf16 && op == TO_REST) k->pack_bf16(k, (uint16_t *)u->r, u->f, u->n);
  else if (u->bf16) k->unpack_bf16(k, u->f, (const uint16_t *)u->r, u->n);
  else if (op != FROM_REST) k->copy(k, (float *)u->r, u->f, u->n);
  else k->copy(k, u->f, (const float *)u->r, u->n);
  u->n = 0;
}

static void run_add(const pt_kernels *k, part_run *u, float *f, char *r, int64_t n, int bf16,
                    int op) {
  int64_t width = u->bf16 ? 2 : 4;
  if (u->n && u->bf16 == bf16 && u->f + u->n == f &&
      (op == ROUND || op == ROUND_SHARE || op == PACK_SHARE || op == UNSET ||
       u->r + u->n * width == r)) {
    u->n += n;
    return;
  }
  run_flush(k, u, op);
  *u = (part_run){f, r, n, bf16};
}

_Static_assert(PT_MAX_SAVED_PARTS <= 32, "masks of parts (move_parts_but) are 32 bits");

/* Moves the parts of layer li's saved area f that the layout (set: a stash set's, else a
 * slot's) keeps at rest in r (back to back, in part order), to r or back (op), but the parts of
 * the mask `but` (bit i: part i); only_rewritten: just the forward parts that backward_input
 * rewrites, at their places in r. */
static void move_parts_but(const pt_stage *st, int li, float *f, char *r, int set,
                           int only_rewritten, int op, uint32_t but) {
  const pt_kernels *k = st->m->dev->k;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  part_run u = {0};
  int n = parts_at(st, li, st->cur_B, st->cur_T, p);
  for (int i = 0; i < n; f += p[i].floats, i++) {
    if (!in_layout(&p[i], set)) continue;
    if (!(but >> i & 1) &&
        (!only_rewritten || p[i].writers == (PT_SAVED_FORWARD | PT_SAVED_STASH)))
      run_add(k, &u, f, r, p[i].floats, p[i].bf16, op);
    r += layer_saved_part_rest(&p[i]);
  }
  run_flush(k, &u, op);
}

static void move_parts(const pt_stage *st, int li, float *f, char *r, int set, int only_rewritten,
                       int op) {
  move_parts_but(st, li, f, r, set, only_rewritten, op, 0);
}

/* Rounds to bf16 the parts of layer li's saved area f that `writer` wrote and that may be bf16
 * (op ROUND, or ROUND_SHARE: their bits kept by the table as well, kernels.h; PACK_SHARE: only
 * kept), but those of `but` (bit i: part i). */
static void round_parts_but(const pt_stage *st, int li, float *f, int writer, int op,
                            uint32_t but) {
  const pt_kernels *k = st->m->dev->k;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  part_run u = {0};
  int n = parts_at(st, li, st->cur_B, st->cur_T, p);
  for (int i = 0; i < n; f += p[i].floats, i++)
    if (p[i].bf16 && (p[i].writers & writer) && !(but >> i & 1))
      run_add(k, &u, f, NULL, p[i].floats, 1, op);
  run_flush(k, &u, op);
}

static void round_parts(const pt_stage *st, int li, float *f, int writer, int op) {
  round_parts_but(st, li, f, writer, op, 0);
}

/* Layer li's parts backward_input writes that backward_weight reads only from the table's
 * copies (layer.h read_at_rest), bit i: part i. */
static uint32_t stash_at_rest(const pt_stage *st, int li) {
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  uint32_t held = 0;
  int n = parts_at(st, li, st->cur_B, st->cur_T, p);
  for (int i = 0; i < n; i++)
    if ((p[i].writers & PT_SAVED_STASH) && p[i].read_at_rest) held |= (uint32_t)1 << i;
  return held;
}

/* Layer li's stash parts that go to rest straight from backward_input (layer.h
 * backward_at_rest; kernels.h share_bf16_into), bit i: part i, with the parts (as parts_at),
 * each one's floats in the area f[] (from `area`, backward_input's saved area) and its place
 * at[]: with a set, the set's (a part only backward_input writes) or the slot's (one forward
 * writes too, rewritten); without one (backward_weight follows at once), NULL: room the table
 * keeps. None on a table that takes no places. */
static uint32_t stash_places(const pt_stage *st, int slot, int li, float *area, const void *set,
                             pt_saved_part *p, float **f, char **at) {
  const pt_kernels *k = st->m->dev->k;
  uint32_t mask = 0;
  int n = area && k->share_bf16_into ? parts_at(st, li, st->cur_B, st->cur_T, p) : 0;
  char *in_set = set ? (char *)set + dout_rest(st, li, st->cur_B, st->cur_T) : NULL;
  char *in_slot = set ? st->saved16[slot * st->n + li] : NULL;
  for (int i = 0; i < n; area += p[i].floats, i++) {
    int stash_only = in_layout(&p[i], 1);
    f[i] = area;
    at[i] = stash_only ? in_set : in_slot;
    if (p[i].backward_at_rest && (!set || at[i])) mask |= (uint32_t)1 << i;
    if (in_set && stash_only) in_set += layer_saved_part_rest(&p[i]);
    if (in_slot && in_layout(&p[i], 0)) in_slot += layer_saved_part_rest(&p[i]);
  }
  return mask;
}

/* Of stash_places' parts, those backward_input wrote or converted to their places (bit i: part
 * i): not rounded nor packed after it, their floats unset. */
static uint32_t stash_went(const pt_stage *st, int slot, int li, const pt_io *io,
                           const void *set) {
  const pt_kernels *k = st->m->dev->k;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  float *f[PT_MAX_SAVED_PARTS];
  char *at[PT_MAX_SAVED_PARTS];
  uint32_t mask = stash_places(st, slot, li, io->saved, set, p, f, at), went = 0;
  for (int i = 0; mask >> i; i++)
    if ((mask >> i & 1) && k->shared_into_done(k, f[i])) went |= (uint32_t)1 << i;
  return went;
}

/* wk[p] is about to hold tag's values: logits of another tag there, unrounded and not at rest
 * (store_after_forward), go to rest first (pack_bf16 rounds them on the way). */
static void claim_wk(pt_stage *st, int p, int tag) {
  int raw = st->raw_tag;
  if (raw < 0 || raw == tag || ((st->n - 1) & 1) != p) return;
  const pt_kernels *k = st->m->dev->k;
  k->pack_bf16(k, st->out16[raw], st->wk[p], out_floats(st, st->n - 1, st->cur_B, st->cur_T));
  st->raw_tag = -1;
}

static void need_out(pt_stage *st, int slot, int li) {
  int tag = slot * st->n + li;
  if (st->wk_tag[li & 1] == tag) return;
  const pt_kernels *k = st->m->dev->k;
  claim_wk(st, li & 1, tag);
  k->unpack_bf16(k, st->wk[li & 1], st->out16[tag], out_floats(st, li, st->cur_B, st->cur_T));
  st->wk_tag[li & 1] = tag;
}

/* Layer li's saved parts (returned, as parts_at) with each one's floats in the working area and
 * its place in slot's layout at rest (NULL: not kept there). slot's area at rest exists. */
static int part_places(const pt_stage *st, int slot, int li, pt_saved_part *p, float **f,
                       char **at) {
  float *fi = st->wk_saved;
  char *ai = st->saved16[slot * st->n + li];
  int n = parts_at(st, li, st->cur_B, st->cur_T, p);
  for (int i = 0; i < n; fi += p[i].floats, i++) {
    f[i] = fi;
    at[i] = in_layout(&p[i], 0) ? ai : NULL;
    if (at[i]) ai += layer_saved_part_rest(&p[i]);
  }
  return n;
}

/* The table's activation copies (kernels.h activation_copies): the parts of layer li's saved
 * area that only forward writes and that are bf16 at rest, whose copies at rest equal the
 * working area from their move to or from rest until the next forward or move (backward_input
 * writes other parts only, layer.h); so products and attention read them instead of converting.
 * Returns how many ranges r holds; *in: the parts in them (bit i: part i), *held: those of the
 * read_at_rest kind, which backward reads only there. li < 0: none (before a forward writes the
 * area). */
static int copy_ranges(const pt_stage *st, int slot, int li, pt_weight_range *r, uint32_t *in,
                       uint32_t *held) {
  int n = 0;
  *in = *held = 0;
  if (li < 0 || st->ckpt || !st->saved16[slot * st->n + li]) return 0;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  float *f[PT_MAX_SAVED_PARTS];
  char *at[PT_MAX_SAVED_PARTS];
  int parts = part_places(st, slot, li, p, f, at);
  for (int i = 0; i < parts; i++) {
    const uint16_t *c = (const uint16_t *)at[i];
    if (!at[i] || !p[i].bf16 || p[i].writers != PT_SAVED_FORWARD) continue;
    if (n && r[n - 1].base + r[n - 1].n == f[i] && r[n - 1].copy + r[n - 1].n == c)
      r[n - 1].n += p[i].floats;
    else if (n < PT_WEIGHT_COPY_RANGES)
      weight_range_put(&r[n++], f[i], c, p[i].floats);
    else
      continue; /* no room: converted from the float32 area, so unpacked */
    *in |= (uint32_t)1 << i;
    if (p[i].read_at_rest) *held |= (uint32_t)1 << i;
  }
  return n;
}

/* Layer li's parts both forward and backward_input write that are read_at_rest (layer.h: forward
 * reads nothing of them after the kernel writing them, which may write them to their place at
 * rest alone; backward_input gets them unpacked), bit i: part i, where slot's area goes to rest. */
static uint32_t rewritten_at_rest(const pt_stage *st, int slot, int li) {
  if (li < 0 || li >= st->n || st->ckpt || !st->saved16[slot * st->n + li]) return 0;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  uint32_t mask = 0;
  int n = parts_at(st, li, st->cur_B, st->cur_T, p);
  for (int i = 0; i < n; i++)
    if (p[i].bf16 && p[i].read_at_rest && p[i].writers == (PT_SAVED_FORWARD | PT_SAVED_STASH))
      mask |= (uint32_t)1 << i;
  return mask;
}

/* The floats of layer li's parts in `mask` (bit i: part i) left undefined: kernels.h unset_f32. */
static void unset_parts(const pt_stage *st, int li, uint32_t mask) {
  const pt_kernels *k = st->m->dev->k;
  if (!mask || !k->unset_f32) return;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  part_run u = {0};
  float *f = st->wk_saved;
  int n = parts_at(st, li, st->cur_B, st->cur_T, p);
  for (int i = 0; i < n; f += p[i].floats, i++)
    if (mask >> i & 1) run_add(k, &u, f, NULL, p[i].floats, 1, UNSET);
  run_flush(k, &u, UNSET);
}

/* Layer li's saved area back from rest for its backward, but the parts of `held` (copy_ranges:
 * read only at rest, layer.h read_at_rest, where the table reads them there): left unset. */
static void unpack_for_backward(pt_stage *st, int slot, int li, uint32_t held) {
  move_parts_but(st, li, st->wk_saved, st->saved16[slot * st->n + li], 0, 0, FROM_REST, held);
  unset_parts(st, li, held);
}

/* The parts of layer li the table holds copies of (`in`, copy_ranges': bf16, only forward
 * writes them), and those of rewritten_at_rest (in `in` and `held` too), go to rest straight
 * from the forward product or attention reading or writing them (kernels.h share_bf16_into;
 * `held`, the read_at_rest ones, may go there alone), so no pass of their own rounds and packs
 * them. Before the forward (after 0): handed to the table;
 * after it (after 1): returns those that went so (bit i: part i), their floats never rounded. */
static uint32_t into_rest(const pt_stage *st, int slot, int li, uint32_t in, uint32_t held,
                          int after) {
  const pt_kernels *k = st->m->dev->k;
  uint32_t done = 0;
  if (!in || !k->share_bf16_into) return 0;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  float *f[PT_MAX_SAVED_PARTS];
  char *at[PT_MAX_SAVED_PARTS];
  int n = part_places(st, slot, li, p, f, at);
  for (int i = 0; i < n; i++) {
    if (!(in >> i & 1)) continue;
    if (!after)
      k->share_bf16_into(k, f[i], p[i].floats, (uint16_t *)at[i],
                         (held >> i & 1) && !p[i].forward_reads);
    else if (k->shared_into_done(k, f[i])) done |= (uint32_t)1 << i;
  }
  return done;
}

/* For backward_input: the parts both write that it reads, as forward left them, only as the
 * GELU's input of linear_backward_input_gelu (layer.h read_at_rest and backward_at_rest), their
 * places at rest added to r[*n..) as copies, so they stay there (bit i: part i). */
static uint32_t gelu_input_ranges(const pt_stage *st, int slot, int li, pt_weight_range *r,
                                  int *n) {
  uint32_t mask = rewritten_at_rest(st, slot, li), held = 0;
  if (!mask) return 0;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  float *f[PT_MAX_SAVED_PARTS];
  char *at[PT_MAX_SAVED_PARTS];
  part_places(st, slot, li, p, f, at);
  for (int i = 0; mask >> i; i++)
    if ((mask >> i & 1) && p[i].backward_at_rest && at[i] && *n < PT_WEIGHT_COPY_RANGES) {
      weight_range_put(&r[(*n)++], f[i], (const uint16_t *)at[i], p[i].floats);
      held |= (uint32_t)1 << i;
    }
  return held;
}

/* Layer li's input, layer li - 1's output, for li's backward: where li's type reads it only
 * through kernels that read activation copies (layer.h in_read_at_rest), its bits at rest go to
 * r[*n] as its copy, its floats unset unless they are in the working buffer already; else (or
 * without room in r, or where backward reruns forward) unpacked there (need_out). */
static void input_for_backward(pt_stage *st, int slot, int li, pt_weight_range *r, int *n) {
  if (li == 0 || !stage_kept(st, li - 1)) return;
  const pt_kernels *k = st->m->dev->k;
  const int p = (li - 1) & 1, tag = slot * st->n + li - 1;
  if (st->ckpt || *n >= PT_WEIGHT_COPY_RANGES || !layer_in_at_rest(layer_of(st, li), k)) {
    need_out(st, slot, li - 1);
    return;
  }
  const int64_t m = out_floats(st, li - 1, st->cur_B, st->cur_T);
  weight_range_put(&r[(*n)++], st->wk[p], st->out16[tag], m);
  if (st->wk_tag[p] == tag) return;
  claim_wk(st, p, tag);
  k->unset_f32(k, st->wk[p], m); /* so no float32 read of them passes the emulated GPU */
  st->wk_tag[p] = -1;
}

/* store_ready for layer li's backward: its input, its saved parts back from rest and the table's
 * copies of them, and d (NULL: none), dout's bits at rest, one more copy there: its floats are
 * unset then, or unpacked from d where the table has no room for it. for_input: backward_input
 * follows (gelu_input_ranges), not backward_weight. */
static void ready_with_dout(pt_stage *st, int slot, int li, const pt_weight_range *d,
                            int for_input) {
  const pt_kernels *k = st->m->dev->k;
  pt_weight_range r[PT_WEIGHT_COPY_RANGES];
  uint32_t in = 0, held = 0;
  int n = 0, tag = slot * st->n + li;
  /* no need_out(li): no layer's backward reads its own output (layer.h) */
  if (!st->ckpt && st->saved16[tag]) {
    /* the copies' ranges once: which parts stay at rest, then the table's set */
    n = k->activation_copies ? copy_ranges(st, slot, li, r, &in, &held) : 0;
    if (for_input && k->activation_copies) held |= gelu_input_ranges(st, slot, li, r, &n);
    if (st->wk_saved_tag != tag) unpack_for_backward(st, slot, li, held);
    st->wk_saved_tag = tag;
  }
  input_for_backward(st, slot, li, r, &n);
  if (d && n < PT_WEIGHT_COPY_RANGES) {
    r[n++] = *d;
    k->unset_f32(k, (float *)d->base, d->n);
  } else if (d) {
    k->unpack_bf16(k, (float *)d->base, d->copy, d->n);
  }
  /* none, else none of the layer before either (round_share_bf16) */
  if (k->activation_copies) k->activation_copies(k, r, n);
}

void store_ready(pt_stage *st, int slot, int li, int backward) {
  if (backward) {
    ready_with_dout(st, slot, li, NULL, 0);
    return;
  }
  if (li > 0 && stage_kept(st, li - 1)) need_out(st, slot, li - 1);
  if (li < st->n && stage_kept(st, li)) claim_wk(st, li & 1, slot * st->n + li);
  const pt_kernels *k = st->m->dev->k;
  pt_weight_range r[PT_WEIGHT_COPY_RANGES];
  uint32_t in = 0, held = 0;
  forget_copies(st); /* forward writes the area: no copies of it from here on */
  if (li < st->n && k->share_bf16_into) copy_ranges(st, slot, li, r, &in, &held);
  uint32_t rewritten = k->share_bf16_into ? rewritten_at_rest(st, slot, li) : 0;
  into_rest(st, slot, li, in | rewritten, held | rewritten, 0);
  if (li < st->n && logits_alone(st, slot, li))
    k->share_bf16_into(k, st->wk[li & 1], out_floats(st, li, st->cur_B, st->cur_T),
                       st->out16[slot * st->n + li], 1);
}

void store_ready_backward(pt_stage *st, int slot, int li, const float *dout, int din_rounded) {
  const pt_kernels *k = st->m->dev->k;
  int tag = slot * st->n + li;
  int64_t m = out_floats(st, li, st->cur_B, st->cur_T);
  if (st->dout16_tag == tag) { /* the loss wrote dout's bits at rest (store_loss_place) alone */
    pt_weight_range d;
    weight_range_put(&d, dout, st->out16[tag], m);
    st->dout16_tag = -1;
    st->wk_tag[li & 1] = -1; /* its floats, the logits the loss read, are not kept */
    ready_with_dout(st, slot, li, &d, 1);
    return;
  }
  ready_with_dout(st, slot, li, NULL, 1);
  if (din_rounded && k->din_copy && k->din_copy(k, dout, m)) return; /* its bits as written */
  /* nothing writes dout until the next layer's store_ready: backward_input and a backward_weight
   * that follows at once may read one conversion of it */
  if (k->share_bf16) k->share_bf16(k, dout, m, !dout_f32(st, li)); /* rounded but the loss's */
}

void store_before_backward_input(pt_stage *st, int slot, int li, const pt_io *io,
                                 const void *set) {
  const pt_kernels *k = st->m->dev->k;
  pt_saved_part p[PT_MAX_SAVED_PARTS];
  float *f[PT_MAX_SAVED_PARTS];
  char *at[PT_MAX_SAVED_PARTS];
  uint32_t mask = stash_places(st, slot, li, io->saved, set, p, f, at);
  /* alone: backward_input reads the part only as it wrote it (one forward writes too, GPT-2's
   * h, it reads first as the GELU's input, from its copy at rest: gelu_input_ranges); but
   * where it reads the floats too (layer.h backward_reads), whose first reader converts it */
  for (int i = 0; mask >> i; i++)
    if (mask >> i & 1)
      k->share_bf16_into(k, f[i], p[i].floats, (uint16_t *)at[i], !p[i].backward_reads);
}

uint16_t *store_loss_place(pt_stage *st, int slot) {
  if (!dout_at_rest(st, st->n - 1)) return NULL;
  int tag = slot * st->n + st->n - 1;
  st->dout16_tag = tag; /* for the backward that follows at once */
  return st->out16[tag];
}

/* For the loss of slot: its logits at rest, not in their working buffer (the head's product
 * wrote them there alone, or they went to rest to make room), are read there, as the buffer's
 * activation copy (kernels.h loss_acc), not unpacked. The buffer keeps the slot's tag, as held
 * logits do (store_output): the loss may write its gradient over it. */
static int loss_reads_rest(pt_stage *st, int slot) {
  const pt_kernels *k = st->m->dev->k;
  const int li = st->n - 1, p = li & 1, tag = slot * st->n + li;
  if (!k->activation_copies || !stage_logits(st, li) || !st->out16[tag] ||
      st->wk_tag[p] == tag)
    return 0;
  claim_wk(st, p, tag);
  pt_weight_range r;
  weight_range_put(&r, st->wk[p], st->out16[tag], out_floats(st, li, st->cur_B, st->cur_T));
  k->activation_copies(k, &r, 1);
  k->unset_f32(k, st->wk[p], r.n); /* so no float32 read of them passes the emulated GPU */
  st->wk_tag[p] = tag;
  return 1;
}

void store_output(pt_stage *st, int slot, int for_loss) {
  if (for_loss && loss_reads_rest(st, slot)) return;
  store_ready(st, slot, st->n, 0); /* the last layer's output as "input" of layer n */
  int tag = slot * st->n + st->n - 1;
  if (st->raw_tag != tag) return;
  st->raw_tag = -1; /* a loss's gradient replaces the logits; any other reader gets them kept */
  if (!for_loss) {
    const pt_kernels *k = st->m->dev->k;
    k->round_pack_bf16(k, st->out16[tag], st->wk[(st->n - 1) & 1],
                       out_floats(st, st->n - 1, st->cur_B, st->cur_T), NULL, 0);
  }
}

int store_after_forward(pt_stage *st, int slot, int li, const pt_io *io, int32_t *mark,
                        int32_t value) {
  const pt_kernels *k = st->m->dev->k;
  int tag = slot * st->n + li;
  int64_t n_out = out_floats(st, li, io->B, io->T);
  int checked = 0;
  if (logits_alone(st, slot, li) && k->shared_into_done(k, io->out)) {
    st->wk_tag[li & 1] = -1; /* at rest only (store_ready), the loss reads them there */
  } else if (stage_logits(st, li)) { /* left as they are: the loss rounds them as it reads them */
    st->wk_tag[li & 1] = st->raw_tag = tag;
  } else if (stage_kept(st, li)) {
    k->round_pack_bf16(k, st->out16[tag], io->out, n_out, mark, value);
    st->wk_tag[li & 1] = tag;
    checked = mark != NULL;
  } else {
    k->round_bf16(k, io->out, n_out);
  }
  if (st->ckpt || !st->saved16[tag]) {
    if (io->saved) round_parts(st, li, io->saved, PT_SAVED_FORWARD, ROUND);
    return checked;
  }
  /* the copies' ranges once: which parts went to rest straight, then the table's set */
  pt_weight_range r[PT_WEIGHT_COPY_RANGES];
  uint32_t in = 0, held = 0;
  int n = k->activation_copies ? copy_ranges(st, slot, li, r, &in, &held) : 0;
  uint32_t rewritten = k->share_bf16_into ? rewritten_at_rest(st, slot, li) : 0;
  uint32_t into = into_rest(st, slot, li, in | rewritten, held | rewritten, 1);
  move_parts_but(st, li, io->saved, st->saved16[tag], 0, 0, ROUND_TO_REST, into);
  unset_parts(st, li, into); /* so no float32 read of them passes the emulated GPU's tests */
  /* the area holds the layer's values but those: a backward right after unpacks them */
  st->wk_saved_tag = into ? -1 : tag;
  if (k->activation_copies) k->activation_copies(k, r, n);
  return checked;
}

void store_after_backward_input(pt_stage *st, int slot, int li, const pt_io *io, void *set) {
  const pt_kernels *k = st->m->dev->k;
  st->wk_saved_tag = -1; /* backward_input rewrote parts of it */
  if (!set) { /* backward_weight follows at once: its products read the parts' bits kept */
    if (!io->saved) return;
    if (!k->round_share_bf16) {
      round_parts(st, li, io->saved, PT_SAVED_STASH, ROUND);
      return;
    }
    /* those it reads only there not even rounded: their floats unset (kernels.h); those the
     * table holds already (stash_went: held ones) not packed either, left out by the table in
     * the run (round_share_bf16), which stays one launch */
    uint32_t held = stash_at_rest(st, li), went = stash_went(st, slot, li, io, NULL);
    round_parts_but(st, li, io->saved, PT_SAVED_STASH, ROUND_SHARE, held);
    round_parts_but(st, li, io->saved, PT_SAVED_STASH, PACK_SHARE, ~held);
    if (went) round_parts_but(st, li, io->saved, PT_SAVED_STASH, UNSET, ~went);
    return;
  }
  int64_t m = out_floats(st, li, io->B, io->T);
  if (dout_at_rest(st, li)) k->unpack_bf16(k, set, st->out16[slot * st->n + li], m);
  else if (dout_f32(st, li)) k->copy(k, set, io->dout, m);
  else k->pack_bf16(k, set, io->dout, m);
  if (!io->saved) return;
  /* every part backward_input writes goes to rest: the set's, or the slot's when forward's;
   * but those backward_input put there itself (stash_went), whose floats are left unset */
  uint32_t went = stash_went(st, slot, li, io, set);
  move_parts_but(st, li, io->saved, (char *)set + dout_rest(st, li, io->B, io->T), 1, 0,
                 ROUND_TO_REST, went);
  move_parts_but(st, li, io->saved, st->saved16[slot * st->n + li], 0, 1, ROUND_TO_REST, went);
  if (went) round_parts_but(st, li, io->saved, PT_SAVED_STASH, UNSET, ~went);
}

const float *store_before_backward_weight(pt_stage *st, int slot, int li, const void *set) {
  const pt_kernels *k = st->m->dev->k;
  store_ready(st, slot, li, 1);
  int64_t m = out_floats(st, li, st->cur_B, st->cur_T);
  const float *dout = dout_f32(st, li) ? set : st->grad[0]; /* the loss gradient is read there */
  if (!dout_f32(st, li)) k->unpack_bf16(k, st->grad[0], set, m);
  if (st->wk_saved) {
    move_parts(st, li, st->wk_saved, (char *)set + dout_rest(st, li, st->cur_B, st->cur_T), 1, 0,
               FROM_REST);
    st->wk_saved_tag = -1;
  }
  return dout;
}
