/* layers/layer.h: the layer API. A layer type is a table of functions registered by name.
 *
 * Tensors: float32, row-major. A layer's input is [B, T, in_dim] floats, or [B, T] int32 token
 * ids when in_tokens is set (the first layer of a language model); its output is
 * [B, T, out_dim] floats. B and T are given per call (T <= the model's seq_len).
 *
 * Parameters live in the model's contiguous parameter buffer; a layer sees them through the views
 * w[p] (values) and g[p] (gradients), with shapes from params[p]. Gradients ACCUMULATE (+=): the
 * engine zeroes them once per optimizer step, and tied copies in one process share storage.
 *
 * io's buffers and the parameter views are device memory (a GPU's on pipeline.device: gpu), so
 * a step does its arithmetic with the kernel table io->k (kernels/kernels.h), written once for
 * every device. A type whose steps do only that sets kernels_only (all built-in types); one with
 * loops of its own over those buffers runs only where they are host memory (cpu, emulated) and
 * is refused on a GPU (device_check_layers, device/device.h).
 *
 * A call's pt_io holds:
 *   k       the kernel table of the device the buffers below live on
 *   in      input of this micro-batch (read-only)
 *   out     output (written by forward; read-only afterwards; backward must not read it: the
 *           model's last layer gets its dout written over it, engine/stage.h stage_loss_gradient)
 *   saved   layer_saved_bytes(L, k, B, T) bytes, 64-byte aligned, private to this (layer,
 *           micro-batch); forward writes what backward needs, backward_input may stash there what
 *           backward_weight needs
 *   scratch scratch_bytes(k, B, T) bytes of temporaries, clobbered between calls
 *   dout    gradient of the loss w.r.t. out (backward only)
 *   din     gradient w.r.t. in, written (not accumulated) by backward_input; NULL when nobody
 *           needs it (token input, or the first layer of the model)
 *   doc_start, positions  with data.documents (data/data_pack.h), this micro-batch's document
 *           start and position of each token, [B,T] int32 on the device; NULL without: the
 *           attention masks across documents with doc_start, position embeddings and RoPE use
 *           positions
 * Order per micro-batch: forward, then backward_input, then backward_weight. The engine keeps in,
 * out, saved and dout intact from backward_input until backward_weight of the same micro-batch,
 * so zero-bubble schedules may run backward_weight later. forward must be deterministic: the
 * engine re-runs it for activation checkpointing and relies on bitwise-equal results.
 *
 * train.precision bf16 (engine/stage_store.c): between calls the engine keeps in, out and saved
 * of the micro-batches in flight elsewhere, packed, and hands each call float32 buffers holding
 * the same values (in and out are bf16 values already). The saved area is kept as its parts
 * (saved_parts): a part that may be bf16 is rounded to bf16 in place right after the step that
 * writes it (forward, or backward_input for a stash part), in every path, so what backward reads
 * does not depend on where it was kept. backward_input writes only the parts marked
 * PT_SAVED_STASH. A type without saved_parts keeps its whole area float32. On a table with
 * activation copies, backward gets the parts marked read_at_rest only as those copies (their
 * floats in saved are undefined then; pt_saved_part below says who may read them), and the
 * stash parts marked backward_at_rest go to rest straight from the kernels writing or reading
 * them in backward_input, not rounded (their floats undefined from there).
 */
#ifndef PT_LAYER_H
#define PT_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "layers/settings.h"
#include "spec/spec.h"

#define PT_MAX_PARAMS 24
#define PT_MAX_LAYER_TYPES 128 /* the registry's capacity */
#define PT_PARAM_NAME_MAX 48

typedef struct {
  char name[PT_PARAM_NAME_MAX]; /* state-dict suffix, e.g. "attn.qkv.weight" */
  int ndim;
  int64_t shape[4];
  int64_t numel; /* -1 when the product overflows (refused by model_configure) */
  int decay; /* weight decay applies: parameters of rank >= 2 */
  int group_next; /* the next parameter is stored right after this one (layer_add_param_group) */
} pt_param_desc;

/* One member of a parameter group (layer_add_param_group): shape [d0, d1] for ndim 2. */
typedef struct {
  const char *name;
  int ndim;
  int64_t shape[4];
} pt_param_decl;

/* Estimates for the partitioner: no allocation, per sample of T tokens. */
typedef struct {
  int64_t param_bytes;
  int64_t saved_bytes;   /* kept from forward to backward, excluding the output itself */
  int64_t out_bytes;     /* the output activation */
  int64_t scratch_bytes; /* temporaries, per sample */
  double fwd_flops, bwd_flops;
} pt_layer_cost;

typedef struct {
  const pt_kernels *k;
  int B, T;
  const void *in;
  float *out;
  void *saved;
  void *scratch;
  const float *dout;
  float *din;
  const int32_t *doc_start; /* packed documents: [B,T] device int32, or NULL (plain causal) */
  const int32_t *positions; /* packed documents: [B,T] position in its document, or NULL (t) */
  int documents;            /* packed documents: how many doc_start holds, counted on the host
                               (kernels.h pt_attention_opts.documents); 0: not counted */
} pt_io;

typedef struct pt_layer pt_layer;

/* One part of a saved area (the type's saved_parts): the parts tile the area from its start, in
 * order, each `floats` long (its padding included). */
#define PT_SAVED_FORWARD 1 /* written by forward (read by backward_input and backward_weight) */
#define PT_SAVED_STASH 2   /* written by backward_input for backward_weight */
#define PT_MAX_SAVED_PARTS 32
typedef struct {
  int64_t floats;
  int bf16;    /* may be kept as bf16 under train.precision bf16 */
  int writers; /* PT_SAVED_FORWARD and/or PT_SAVED_STASH */
  /* 1 (bf16 parts only forward writes): backward_input and backward_weight read the part only
   * whole, as the x operand of linear_backward_weight (a product, kernels.h), as the x of a
   * norm's backward (layernorm_backward_input, rmsnorm_backward_input, their _residual ones,
   * their weight gradients), or as the qkv or o of an attention call whose table's
   * attention_reads_bf16 is 1 for the same arguments (B, T, d, H, KVH, opts), through no other
   * entry: no norm's dy, activation backward, rope,
   * elementwise or bias kernel, and no attention of a shape its in-house fallback runs (which
   * reads q|k|v and o as float32: soft-cap, the shapes cuDNN refuses). On a table with
   * activation_copies such a product reads the part's copy at rest, so engine/stage_store.c
   * leaves the part out of the float32 area backward gets: its floats there are undefined (NaN
   * on the emulated GPU, so a wrong declaration fails the GPU tests). Forward too, once it has
   * written the part, reads it only so: the kernel writing it may write its bf16 values
   * straight to its place at rest alone (a norm, swiglu, geglu, a linear_forward or
   * linear_forward_gelu product, such an attention's o; else the first product or attention
   * reading it converts it there: kernels.h share_bf16_into), the floats left undefined (NaN
   * on the emulated GPU as well); where forward reads its floats after that, forward_reads
   * below. Besides, backward may read it as the gu of swiglu_backward or geglu_backward.
   * 1 (bf16 parts backward_input writes, PT_SAVED_STASH among writers; of such a part, what
   * backward_input wrote): backward_weight reads it only as a product's operand, the dy of
   * linear_backward_weight's bias sum, or the dy of layernorm_backward_weight or
   * rmsnorm_backward_weight, through no other entry (no head norm's weight gradient, say).
   * Without a stash set (backward_weight right after backward_input) the engine then keeps
   * only its bits with the table (kernels.h round_share_bf16 unset), whose copy those entries
   * read: its floats are undefined from there (NaN on the emulated GPU) but where the table
   * has no room. With a stash set the part goes to rest as any other (the set's).
   * Of a part both write (PT_SAVED_FORWARD | PT_SAVED_STASH), 1 also promises of what forward
   * writes: nothing in forward reads it after the kernel writing it, so that kernel may write
   * its bf16 values straight to its place at rest alone (linear_forward_gelu's h, as a bf16
   * epilogue's aux), its floats left undefined; backward_input gets it unpacked as any part,
   * but where the part is backward_at_rest too: backward_input then reads forward's value only
   * as the h of linear_backward_input_gelu (its dh the part itself), which reads it from its
   * place at rest (the table's copy; its floats undefined) and writes dh there alone.
   * 0: the part is unpacked (the safe default).
   * layer_saved_parts refuses it on any other part. */
  int read_at_rest;
  /* 1 (read_at_rest parts only forward writes): forward reads the part's floats after the
   * kernel writing it (RoPE rotating q|k|v in place, SwiGLU or GeGLU reading gate|up, a norm
   * and a residual product reading GPT-2's x1): that kernel does not write it alone; a kernel
   * reading it after its last write converts it to its place at rest (the attention its q|k|v
   * operand, swiglu_forward or geglu_forward their gu, layernorm_forward its x, as they read
   * it), or its last writer writes its bits there too (rmsnorm_forward_residual's x1: the
   * Llama's h): kernels.h share_bf16_into. */
  int forward_reads;
  /* 1 (bf16 parts with PT_SAVED_STASH among writers and read_at_rest 1): backward_input too,
   * once it has written the part, reads it only whole, as a product's operand (kernels.h's
   * linear entries) or the qkv or o of an attention whose table's attention_reads_bf16 is 1,
   * through no other entry. On a table with activation_copies the engine then hands the part's
   * place at rest to the table before backward_input (kernels.h share_bf16_into): the stash
   * set's, the slot's for a part forward writes too, or room the table keeps where
   * backward_weight follows at once. The kernel writing a part only backward_input writes may
   * write its bf16 values there alone (an attention's dqkv, pt_attention_opts.shared), else the
   * first product reading the part converts it there; either way the engine neither rounds nor
   * packs it after, and its floats are undefined once backward_input returns (NaN on the
   * emulated GPU). 0: the part is rounded and packed after backward_input (the safe default).
   * layer_saved_parts refuses it on any other part. */
  int backward_at_rest;
  /* 1 (backward_at_rest parts only backward_input writes): backward_input reads the part's
   * floats as well (a norm's backward reading GPT-2's dx1 as its residual gradient or the dy a
   * product wrote, RoPE rotating the Llama's dqkv in place): its writers do not write it alone;
   * the first product reading it, or a norm's backward reading it as its dy
   * (layernorm_backward_input(_residual), rmsnorm_backward_input(_residual)), converts it to its
   * place at rest, the floats kept until backward_input returns (kernels.h share_bf16_into, not
   * alone); no product nor norm reads it before its last write, and no attention of
   * pt_attention_opts.shared writes it. Where neither reads it, it is packed after
   * backward_input as without backward_at_rest. */
  int backward_reads;
} pt_saved_part;

/* What configure gets: its spec entry's arguments, the model settings and the input it will see. */
typedef struct {
  spec_node *args;      /* this entry's argument map (repeat/tie already consumed) */
  const pt_spec *spec;  /* whole spec: model settings in spec->model, spec->vocab, ... */
  int in_dim;           /* features of the input (0 for token input) */
  int in_tokens;        /* the input is token ids */
} pt_layer_setup;

typedef struct pt_layer_type {
  const char *name;
  /* 1: forward, backward_input and backward_weight compute only through io->k, so the type runs
   * on every device (all built-in types). 0: they run host code on io's buffers: cpu and
   * emulated only. */
  int kernels_only;
  /* Optional: the type's spec arguments (layers/settings.h), a table ended by a NULL name. The
   * model builder parses the entry's arguments against it before configure, which reads them
   * with layer_setting_int/num/bool. NULL: the type takes no arguments, or reads s->args itself
   * with the spec_get_* accessors. */
  const pt_setting_decl *settings;
  /* Reads its settings and any other arguments (marking them used; unknown ones are reported by
   * the caller), sets out_dim and declares parameters with layer_add_param() and
   * layer_add_param_group(). Errors go to e with the node's position. */
  void (*configure)(pt_layer *L, const pt_layer_setup *s, spec_errors *e);
  /* Optional (NULL = 0 bytes): memory for pt_io.saved and pt_io.scratch at this B x T. Both may
   * depend on the kernel table the steps run with: saved on layer_kernels(L) (the attention's
   * saved state, attention_saved_floats), scratch on k (attention_scratch_floats). A saved area
   * is therefore only valid for the table that wrote it. The engine asks the model's layers
   * (L->k: the model's device); asking for another table goes through layer_saved_bytes. */
  size_t (*saved_bytes)(const pt_layer *L, int B, int T);
  /* Optional (NULL: one float32 part of both writers): the saved area at B x T with table k as
   * at most PT_MAX_SAVED_PARTS parts (pt_saved_part above) whose floats add up to saved_bytes;
   * returns how many. Lets train.precision bf16 keep activation-sized parts as bf16. */
  int (*saved_parts)(const pt_layer *L, const pt_kernels *k, int B, int T, pt_saved_part *parts);
  size_t (*scratch_bytes)(const pt_layer *L, const pt_kernels *k, int B, int T);
  /* Optional (NULL: parameters start at zero). Fills the parameters that this layer owns
   * (layer_param_owned) from seed and L->index only; runs on the host, before the upload. */
  void (*init)(pt_layer *L, uint64_t seed);
  void (*forward)(pt_layer *L, const pt_io *io);
  void (*backward_input)(pt_layer *L, const pt_io *io);
  void (*backward_weight)(pt_layer *L, const pt_io *io);
  /* Optional (NULL: 0). 1 when backward_input and backward_weight read io->dout only whole, as
   * the dy operand of linear products (kernels.h linear_backward_input, linear_backward_weight
   * without a bias): no bias, norm, activation or elementwise kernel reads its floats. On the
   * model's last layer, under bf16 on a table with activation_copies, the loss then writes its
   * gradient as bf16 alone (kernels.h loss_acc dy16; layer_dout_at_rest). */
  int (*dout_read_at_rest)(const pt_layer *L);
  /* Optional (NULL: 0). 1 when forward writes io->out whole in one call of linear_forward, its
   * last, and reads nothing of it after: under bf16 the stage may then hand the model's logits'
   * place at rest to the table alone (kernels.h share_bf16_into), so the product writes them as
   * bf16 only and the loss reads them there (layer_out_by_product). */
  int (*out_by_product)(const pt_layer *L);
  /* 1: backward_input's last write to io->din is one call of a norm's backward_input
   * (kernels.h layernorm_backward_input, rmsnorm_backward_input, their _residual ones) writing
   * its dx as the whole of din, nothing reading din after it. Under bf16 the stage then has the
   * table round din as that call writes it (kernels.h round_when_written) instead of in a pass
   * of its own after. 0: the safe default. */
  int din_by_norm;
  /* 1: backward_input and backward_weight read io->in, if at all, only through a norm's
   * backward (kernels.h layernorm_backward_input, layernorm_backward_weight, the rmsnorm ones,
   * their _residual ones) or as a product's operand, all of which read an activation copy where
   * the table holds one (kernels.h activation_copies). Under bf16 the stage then hands the
   * backward its input as the previous layer's output at rest, not unpacked to float32 first
   * (layer_in_at_rest). 0: the safe default. */
  int in_read_at_rest;
  /* Optional; NULL means the generic estimate from parameter count and saved_bytes. */
  void (*cost)(const pt_layer *L, int T, pt_layer_cost *c);
} pt_layer_type;

struct pt_layer {
  const pt_layer_type *type;
  int index;                 /* global index in the expanded spec */
  char tie[SPEC_NAME_MAX];   /* tie key or "" */
  int in_dim, out_dim, in_tokens;
  int n_params;
  pt_param_desc params[PT_MAX_PARAMS];
  float *w[PT_MAX_PARAMS];
  float *g[PT_MAX_PARAMS];
  int borrowed[PT_MAX_PARAMS]; /* storage belongs to an earlier tied layer: do not init */
  pt_layer_settings set;     /* values of type->settings; read with layer_setting_int/num/bool */
  int type_count;            /* layers of this type in the spec, set by model_configure after
                              every configure (GPT-2's residual init scaling) */
  /* The kernel table the layer's steps run with, for the sizes that depend on it (saved_bytes):
   * model_alloc_ranges sets its device's; NULL (the CPU's) before. Read it with layer_kernels. */
  const pt_kernels *k;
  /* What configure derived beyond settings and parameters, the type's own struct (llama_block:
   * its rotary table, layers/rope_freqs.h), from layer_state_alloc; read-only after configure
   * (a copy of the pt_layer shares it); layer_state_free releases it (model_free does). */
  void *state;
};

/* --- Registry ----------------------------------------------------------------------------- */
/* Registers a type (the table must outlive the program). Re-registering a name replaces it, so a
 * user can override a built-in. Returns 0, or -1 with one line on stderr saying why: the name is
 * invalid, the registry is full, or a required function (configure, forward, backward_input,
 * backward_weight) is NULL. */
int layer_register(const pt_layer_type *type);
const pt_layer_type *layer_find(const char *name);
/* The i-th registered type in registration order (the built-ins first once registered), NULL
 * past the end: for walking the registry (tests, docs). */
const pt_layer_type *layer_type_at(int i);
/* Comma-separated registered names, for error hints. */
void layer_list_names(char *out, size_t outsz);
void layer_register_builtins(void);

/* --- Settings (layers/settings.h) -------------------------------------------------------- */
/* Parses s->args against L->type->settings into L->set (nothing without a table). Errors go to
 * e at the value (or the entry, for a missing required key). */
void layer_settings_parse(pt_layer *L, const pt_layer_setup *s, spec_errors *e);
/* A setting's value by name. A name the type does not declare, or of another kind, is a bug in
 * the layer: pt_fatal. */
int64_t layer_setting_int(const pt_layer *L, const char *name);
double layer_setting_num(const pt_layer *L, const char *name);
int layer_setting_bool(const pt_layer *L, const char *name);
/* "name value, ..." for the settings the spec set to other than their default (L->set.changed;
 * required ones always), "" for none. Returns out. */
const char *layer_settings_describe(const pt_layer *L, char *out, size_t outsz);
/* The type's settings as rows of the markdown table in docs/spec.md, one each: type (on the
 * first row only), name, kind, default, range, doc. "" for a type without settings. */
const char *layer_settings_doc(const pt_layer_type *t, char *out, size_t outsz);

/* --- Helpers for layer implementations ---------------------------------------------------- */
/* Declares a parameter of up to 4 dims; decay is set for rank >= 2. Returns its index. */
int layer_add_param(pt_layer *L, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                    int64_t d3);
/* Declares n parameters stored back to back, in this order and with no padding between them, so
 * a step may use w[first] (and g[first]) as one stacked tensor of all of them: q|k|v as one
 * [(H + 2 KVH) hd, dim] matrix. Each keeps its own name and shape (state dict, checkpoints). A
 * group starts 64-byte aligned like any tensor; a member cannot be tied. Returns the index of
 * the first, or -1 when they do not fit in PT_MAX_PARAMS. */
int layer_add_param_group(pt_layer *L, const pt_param_decl *members, int n);
/* Floats from parameter p's start to the next one's in a buffer laid out like the model's:
 * numel inside a group; after a lone tensor or a group's last member, up to the next multiple
 * of 16 floats (64 bytes) from the group's start. Whoever binds w[] and g[] (model/model.c,
 * test rigs) places tensors with it. */
int64_t layer_param_stride(const pt_layer *L, int p);
/* pt_fatal unless every group's members are adjacent in v (L->w or L->g): for steps that use a
 * group as one tensor, against a caller that bound the views apart. */
void layer_check_groups(const pt_layer *L, float *const *v);
int layer_param_owned(const pt_layer *L, int p);
/* L->state, zeroed, of bytes (once per configure); layer_state_free frees it. */
void *layer_state_alloc(pt_layer *L, size_t bytes);
void layer_state_free(pt_layer *L);
/* The type's init, or nothing when it has none (the storage is zeroed when allocated). */
void layer_init_params(pt_layer *L, uint64_t seed);
/* L->k, or the CPU's table when it is NULL. */
const pt_kernels *layer_kernels(const pt_layer *L);
/* pt_io.saved bytes at B x T for steps run with kernel table k (NULL: the CPU's), whatever L->k
 * says (L is not changed), 0 without saved_bytes. */
size_t layer_saved_bytes(const pt_layer *L, const pt_kernels *k, int B, int T);
/* The saved area at B x T with table k (NULL: the CPU's) as parts (the type's saved_parts, else
 * one float32 part of both writers; none without a saved area); returns how many. pt_fatal when
 * the type's parts do not add up to its saved_bytes. */
int layer_saved_parts(const pt_layer *L, const pt_kernels *k, int B, int T, pt_saved_part *parts);
/* Bytes a part takes at rest under bf16 storage: 2 or 4 per float, rounded up to 64. */
size_t layer_saved_part_rest(const pt_saved_part *p);
/* Bytes at rest under bf16 storage of the parts forward writes (stash 0), or of those only
 * backward_input writes (stash 1). */
size_t layer_saved_rest_bytes(const pt_layer *L, const pt_kernels *k, int B, int T, int stash);
/* 1 when the loss may hand L's backward its gradient as bf16 alone (the type's dout_read_at_rest
 * says 1 and table k, NULL the CPU's, has activation_copies): engine/stage_store.c asks. */
int layer_dout_at_rest(const pt_layer *L, const pt_kernels *k);
/* 1 when L's backward may get its input as an activation copy alone (the type's in_read_at_rest
 * says 1 and table k, NULL the CPU's, has activation_copies): engine/stage_store.c asks. */
int layer_in_at_rest(const pt_layer *L, const pt_kernels *k);
/* 1 when table k (NULL: the CPU's) may have L's forward write its output to a place at rest
 * alone (the type's out_by_product says 1, and k has share_bf16_into): engine/stage_store.c asks
 * of the model's logits. */
int layer_out_by_product(const pt_layer *L, const pt_kernels *k);
/* pt_io.scratch bytes at B x T with kernel table k (NULL: the CPU's), 0 without scratch_bytes. */
size_t layer_scratch_bytes(const pt_layer *L, const pt_kernels *k, int B, int T);
/* Deterministic init of parameter p from (seed, L->index, p): normal(0, std) or a constant. */
void layer_init_normal(pt_layer *L, int p, uint64_t seed, float std);
void layer_init_const(pt_layer *L, int p, float value);
/* Default cost from parameters, saved_bytes and a FLOP count of 2*params per token forward. */
void layer_cost_default(const pt_layer *L, int T, pt_layer_cost *c);
void layer_cost(const pt_layer *L, int T, pt_layer_cost *c);
/* Number of layers of this type in the whole spec. */
int layer_count_type(const pt_spec *spec, const char *type);

#endif
