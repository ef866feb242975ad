/* model/model.h: the layers of a spec, bound to contiguous parameter and gradient buffers.
 *
 * Every layer of the spec is configured (shapes flow from the data through all layers, no
 * allocation), so any process knows the whole model's shapes and costs. Storage is allocated
 * only for the slice [first, last) this process runs: the sequential path uses the whole range,
 * a pipeline stage its own. Parameters of the slice live in one buffer `params` of n_floats
 * floats (each tensor 64-byte aligned), gradients at the same offsets in `grads`. A tied weight
 * whose first owner is in the slice is stored once: later owners borrow its storage, so their
 * gradients add up in place. `tensors` lists each stored tensor once, named as in a PyTorch
 * nn.Sequential state dict ("<global layer index>.<param name>").
 */
#ifndef PT_MODEL_H
#define PT_MODEL_H

#include <stdint.h>

#include "layers/layer.h"
#include "spec/spec.h"
#include "device/device.h"
#include "kernels/loss.h"

typedef struct {
  char name[SPEC_NAME_MAX + PT_PARAM_NAME_MAX + 16];
  int layer, param; /* owner */
  int64_t offset, numel;
  int decay;
  int tied_copy; /* a tied weight whose first owner is in another slice: counted there */
} pt_tensor;

/* A tied layer whose weight storage is borrowed from an earlier layer of the same slice: its
 * gradient accumulates separately (at grad_offset) and model_tie_reduce_local() adds it to the
 * owner's, in layer order, the same order a pipeline sums copies held by different stages. */
typedef struct {
  int layer, param, owner_tensor;
  int64_t grad_offset, numel;
} pt_tie_copy;

typedef struct {
  const pt_spec *spec;
  pt_layer *layers;   /* all n_layers of the spec, configured */
  int n_layers;
  int first, last;    /* the slice with storage */
  int input_tokens;   /* layer 0 reads token ids */
  int input_dim;      /* features of layer 0's input (0 for tokens) */
  pt_loss_kind loss;
  pt_device *dev;        /* where params and grads live (device.h) */
  float *params, *grads; /* device buffers: what layers and the optimizer use */
  float *host_params;    /* host copy for checkpoints and gathers (== params on the cpu) */
  int64_t n_floats;      /* parameters (and the optimizer's view of the gradients) */
  int64_t n_grad_floats; /* n_floats plus the gradients of borrowed tied copies */
  pt_tensor *tensors;
  int n_tensors;
  pt_tie_copy *tie_copies;
  int n_tie_copies;
} pt_model;

/* Configures every layer and checks the chain (input kinds, tie shapes, loss vs output, unknown
 * arguments and model keys). Returns 0 or -1 with e set; allocates nothing on failure. */
int model_configure(pt_model *m, const pt_spec *spec, spec_errors *e);
/* Allocates and binds storage for layers [first, last) on the current device and initialises it
 * from train.seed. */
void model_alloc(pt_model *m, int first, int last);
/* The same on a given device (e.g. device_host() for a model only read on the host). */
void model_alloc_on(pt_model *m, int first, int last, pt_device *dev);
/* host_params <- params (before reading tensors on the host), and the way back (after writing
 * them there, e.g. loading a checkpoint). Nothing to do on the cpu. */
void model_to_host(pt_model *m);
void model_to_device(pt_model *m);
void model_zero_grads(pt_model *m);
/* Adds each borrowed tied copy's gradient into its owner's (layer order). */
void model_tie_reduce_local(pt_model *m);
/* Index in m->layers of the first layer sharing layer li's tie key, or -1. */
int model_tie_owner(const pt_model *m, int li);
/* Index of the parameter a tie shares ("weight"), or -1. */
int model_tied_param(const pt_layer *L);
void model_free(pt_model *m);
/* The name tensor i is stored under: its own, or for a tied copy its first owner's (one tensor,
 * one name, whatever stage holds it). Returns out. */
const char *model_tensor_key(const pt_model *m, int i, char *out, size_t outsz);
/* Model FLOPs per token: 6 * params + 12 * blocks * dim * seq_len (blocks: transformer_block
 * layers), the usual estimate used for throughput and MFU. */
double model_flops_per_token(const pt_model *m);
/* Parameter count of the whole model (tied weights counted once). */
int64_t model_param_count(const pt_model *m);

#endif
