/* model/model.h: the layers of a spec, bound to contiguous parameter and gradient buffers.
 *
 * Every layer of the spec is configured (shapes flow from the data through all layers, no
 * allocation), so any process knows the whole model's shapes and costs. Storage is allocated
 * only for the layers this process runs: one range [first, last) (the sequential path's whole
 * model, a pipeline stage) or a set of ranges (the chunks of a rank that runs several virtual
 * stages). Parameters of every held layer live in one buffer `params` of n_floats floats (layer
 * order, each tensor or parameter group 64-byte aligned, a group's members back to back:
 * layer_param_stride), gradients at the same offsets in `grads`, so the optimizer and the
 * reductions see one buffer whatever the ranges. A tied weight is stored once
 * per process, by the first layer sharing it that the process holds (in any of its ranges):
 * later ones borrow its storage and keep their own gradient (pt_tie_copy). `tensors` lists
 * each stored tensor once, in layer order, named as in a PyTorch nn.Sequential state dict
 * ("<global layer index>.<param name>").
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
  int tied_copy; /* a tied weight whose first owner this process does not hold: counted there */
} pt_tensor;

/* Layers [first, last) of the spec. */
typedef struct {
  int first, last;
} pt_range;

/* A tied layer whose weight storage is borrowed from an earlier layer this process holds: its
 * gradient accumulates separately (at grad_offset) and model_tie_reduce_local() adds it to the
 * stored copy's (owner_tensor), in layer order, the order the sequential path adds copies in. */
typedef struct {
  int layer, param, owner_tensor;
  int64_t grad_offset, numel;
} pt_tie_copy;

typedef struct {
  const pt_spec *spec;
  pt_layer *layers;   /* all n_layers of the spec, configured */
  int n_layers;
  int first, last;    /* the span of the held ranges: first of the first, end of the last */
  pt_range *ranges;   /* the held ranges, ascending and disjoint */
  int n_ranges;
  int input_tokens;   /* layer 0 reads token ids */
  int input_dim;      /* features of layer 0's input (0 for tokens) */
  pt_loss_kind loss;
  pt_device *dev;        /* where params and grads live (device.h) */
  float *params, *grads; /* device buffers: what layers and the optimizer use */
  float *host_params;    /* host copy for checkpoints and gathers (== params on the cpu) */
  /* train.precision bf16 where the device's products read it (device_weight_copy_used): the
   * parameters as bf16, laid out like params (n_floats), registered with the kernel table
   * (kernels.h's weight_copy) so products read it instead of converting the weight. Always
   * pt_bf16_bits(params): written by model_to_device and by the optimizer's update in the same
   * pass; model_to_host checks it. NULL otherwise. */
  uint16_t *params_bf16;
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
/* The same for n ranges at once (ascending, disjoint, each non-empty; a fatal error otherwise):
 * one params and one grads buffer over all of them. With one range, model_alloc_on. */
void model_alloc_ranges(pt_model *m, const pt_range *ranges, int n, pt_device *dev);
/* Every layer on dev, zero-filled instead of initialised: for a caller about to overwrite every
 * parameter (pipe_convert --from-hf), which then calls model_to_device. */
void model_alloc_blank(pt_model *m, pt_device *dev);
/* Whether layer li is in one of the held ranges. */
int model_holds_layer(const pt_model *m, int li);
/* host_params <- params (before reading tensors on the host), and the way back (after writing
 * them there, e.g. loading a checkpoint). The transfers do nothing on the cpu, but every writer
 * of the parameters other than the optimizer must call model_to_device (on the cpu too): it
 * rewrites the bf16 weight copy. model_to_host ends the job when the copy does not match the
 * parameters (a writer that did not). */
void model_to_host(pt_model *m);
void model_to_device(pt_model *m);
/* Rewrites the bf16 weight copy of params [first, first + n) (nothing without one): for a
 * writer of those parameters on the device, e.g. a gather of other replicas' updates. */
void model_refresh_weight_copy(pt_model *m, int64_t first, int64_t n);
void model_zero_grads(pt_model *m);
/* Adds each borrowed tied copy's gradient into its owner's (layer order). */
void model_tie_reduce_local(pt_model *m);
/* The same for one copy (index in tie_copies), for callers that fold some keys themselves. */
void model_tie_fold(pt_model *m, int copy);
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
