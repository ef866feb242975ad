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
 *   out     output (written by forward; read-only afterwards)
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
 */
#ifndef PT_LAYER_H
#define PT_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "spec/spec.h"

#define PT_MAX_PARAMS 16
#define PT_PARAM_NAME_MAX 48

typedef struct {
  char name[PT_PARAM_NAME_MAX]; /* state-dict suffix, e.g. "attn.qkv.weight" */
  int ndim;
  int64_t shape[4];
  int64_t numel; /* -1 when the product overflows (refused by model_configure) */
  int decay; /* weight decay applies: parameters of rank >= 2 */
} pt_param_desc;

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
} pt_io;

typedef struct pt_layer pt_layer;

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
  /* Reads arguments (marking them used; unknown ones are reported by the caller), sets out_dim
   * and declares parameters with layer_add_param(). Errors go to e with the node's position. */
  void (*configure)(pt_layer *L, const pt_layer_setup *s, spec_errors *e);
  /* Optional (NULL = 0 bytes): memory for pt_io.saved and pt_io.scratch at this B x T. Both may
   * depend on the kernel table the steps run with: saved on layer_kernels(L) (the attention's
   * saved state, attention_saved_floats), scratch on k (attention_scratch_floats). A saved area
   * is therefore only valid for the table that wrote it. The engine asks the model's layers
   * (L->k: the model's device); asking for another table goes through layer_saved_bytes. */
  size_t (*saved_bytes)(const pt_layer *L, int B, int T);
  size_t (*scratch_bytes)(const pt_layer *L, const pt_kernels *k, int B, int T);
  /* Optional (NULL: parameters start at zero). Fills the parameters that this layer owns
   * (layer_param_owned) from seed and L->index only; runs on the host, before the upload. */
  void (*init)(pt_layer *L, uint64_t seed);
  void (*forward)(pt_layer *L, const pt_io *io);
  void (*backward_input)(pt_layer *L, const pt_io *io);
  void (*backward_weight)(pt_layer *L, const pt_io *io);
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
  int64_t iarg[8];           /* type-specific integer settings, set by configure */
  double farg[4];            /* type-specific real settings */
  /* The kernel table the layer's steps run with, for the sizes that depend on it (saved_bytes):
   * model_alloc_ranges sets its device's; NULL (the CPU's) before. Read it with layer_kernels. */
  const pt_kernels *k;
};

/* --- Registry ----------------------------------------------------------------------------- */
/* Registers a type (the table must outlive the program). Re-registering a name replaces it, so a
 * user can override a built-in. Returns 0, or -1 with one line on stderr saying why: the name is
 * invalid, the registry is full, or a required function (configure, forward, backward_input,
 * backward_weight) is NULL. */
int layer_register(const pt_layer_type *type);
const pt_layer_type *layer_find(const char *name);
/* Comma-separated registered names, for error hints. */
void layer_list_names(char *out, size_t outsz);
void layer_register_builtins(void);

/* --- Helpers for layer implementations ---------------------------------------------------- */
/* Declares a parameter of up to 4 dims; decay is set for rank >= 2. Returns its index. */
int layer_add_param(pt_layer *L, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                    int64_t d3);
int layer_param_owned(const pt_layer *L, int p);
/* The type's init, or nothing when it has none (the storage is zeroed when allocated). */
void layer_init_params(pt_layer *L, uint64_t seed);
/* L->k, or the CPU's table when it is NULL. */
const pt_kernels *layer_kernels(const pt_layer *L);
/* pt_io.saved bytes at B x T for steps run with kernel table k (NULL: the CPU's), whatever L->k
 * says (L is not changed), 0 without saved_bytes. */
size_t layer_saved_bytes(const pt_layer *L, const pt_kernels *k, int B, int T);
/* pt_io.scratch bytes at B x T with kernel table k (NULL: the CPU's), 0 without scratch_bytes. */
size_t layer_scratch_bytes(const pt_layer *L, const pt_kernels *k, int B, int T);
/* Deterministic init of parameter p from (seed, L->index, p): normal(0, std) or a constant. */
void layer_init_normal(pt_layer *L, int p, uint64_t seed, float std);
void layer_init_const(pt_layer *L, int p, float value);
/* Default cost from parameters, saved_bytes and a FLOP count of 2*params per token forward. */
void layer_cost_default(const pt_layer *L, int T, pt_layer_cost *c);
void layer_cost(const pt_layer *L, int T, pt_layer_cost *c);
/* Number of layers of this type in the whole spec (e.g. for GPT-2's residual init scaling). */
int layer_count_type(const pt_spec *spec, const char *type);

#endif
