/* device/cuda/layers_gpu.h: the built-in layer types on the GPU.
 *
 * A GPU table gives a layer type's forward, backward_input and backward_weight on device
 * buffers, with the same pt_io contract as layers/layer.h (the saved area has the CPU type's
 * saved_bytes() and the same layout, so either kind of device can recompute or resume a
 * micro-batch's state). scratch_bytes may ask for more than the CPU's (NULL: the CPU size).
 * A layer type without a table cannot run on a GPU: device_check_layers() says which.
 */
#ifndef PT_LAYERS_GPU_H
#define PT_LAYERS_GPU_H

#include <stddef.h>

#include "layers/layer.h"
#include "kernels/cuda/gpu.h"

typedef struct {
  const pt_layer_type *type; /* the CPU type these kernels belong to */
  void (*forward)(gpu_ctx *g, pt_layer *L, const pt_io *io);
  void (*backward_input)(gpu_ctx *g, pt_layer *L, const pt_io *io);
  void (*backward_weight)(gpu_ctx *g, pt_layer *L, const pt_io *io);
  size_t (*scratch_bytes)(const pt_layer *L, int B, int T);
} pt_layer_gpu;

/* The GPU table of a layer type, or NULL (a type without GPU kernels). */
const pt_layer_gpu *layer_gpu_find(const pt_layer_type *type);

#endif
