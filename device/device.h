/* device/device.h: where a process keeps its bulk tensors and runs its numerical work.
 *
 * A device is its memory operations plus the kernel table (kernels/kernels.h) that computes on
 * that memory; layers get the table through pt_io.k, the engine through the device_* calls.
 *   cpu       host memory and the CPU kernels (the default)
 *   gpu       GPU memory and the CUDA kernels, on the rank's stream (GPU builds: gpu_backend.c)
 *   emulated  the CPU kernels on buffers kept apart from the host copies the rest of the
 *             program reads, with every transfer the gpu path makes: the gpu path's data
 *             movement, tested on any machine (same bits as cpu)
 *
 * "Device buffers" are the model's parameters and gradients, the optimizer state and the
 * activations. Host code that reads tensors (checkpoints, gathers, tie checks) reads host
 * copies that model_to_host()/optimizer_to_host() refresh; on cpu those are the same buffers
 * and the transfers do nothing. Sizes are in bytes unless the name says floats (n).
 * Failures (out of device memory, a kernel error) end the job through pt_fatal.
 */
#ifndef PT_DEVICE_H
#define PT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/loss.h"
#include "layers/layer.h"

typedef enum { DEV_CPU, DEV_EMULATED, DEV_GPU } pt_device_kind;

typedef struct pt_device pt_device;

/* One optimizer update: kernels/kernels.h's, under the name the optimizer uses. */
typedef pt_update device_update;

/* A kind of device's memory operations; DEV_GPU's are in gpu_backend.c. */
typedef struct {
  void *(*alloc)(pt_device *d, size_t bytes);
  void (*free)(pt_device *d, void *p);
  void (*upload)(pt_device *d, void *dst, const void *src, size_t bytes);
  void (*download)(pt_device *d, void *dst, const void *src, size_t bytes);
  void (*zero)(pt_device *d, void *p, size_t bytes);
  void (*copy)(pt_device *d, void *dst, const void *src, size_t bytes); /* device to device */
  void (*sync)(pt_device *d); /* waits for everything queued (device_sync) */
  void (*upload_nowait)(pt_device *d, void *dst, const void *src, size_t bytes);
} pt_device_ops;

struct pt_device {
  pt_device_kind kind;
  const pt_device_ops *ops;
  const pt_kernels *k; /* the kernels on this memory: the CPU's for cpu and emulated */
  void *impl;          /* the kind's own state (DEV_GPU: its gpu_ctx and kernel table) */
};

/* The process-wide device: DEV_CPU until device_select(). */
pt_device *device_current(void);
/* Host memory and CPU kernels, whatever the current device (models only read on the host). */
pt_device *device_host(void);
/* What pipeline.device `kind` means, never SPEC_DEVICE_AUTO: auto is gpu when this build has
 * the GPU backend and a GPU is visible, else cpu (PIPETRAIN_AUTO_DEVICE=cpu|gpu|emulated
 * overrides); other kinds are returned as they are. The layers do not change the choice: a model with a layer that cannot
 * run on the GPU is refused there by device_check_layers, never moved to the CPU behind the
 * user's back (docs/layers.md). */
spec_device device_resolve(spec_device kind);
/* Makes `kind` (resolved as by device_resolve) the process-wide device. gpu:
 * opens local GPU `gpu_id`. 0, or -1 with err (no GPU backend in this build, no such GPU). */
int device_select(spec_device kind, int gpu_id, char *err, size_t errsz);
const char *device_name(const pt_device *d);
/* Makes d compute in precision p (train.precision, resolved once at load): its kernel table
 * becomes the table for p (kernels/kernels.h's pt_precision; the CPU's kernels_cpu_for, the
 * GPU's kernels_gpu_set_precision). Call after device_select, before any kernel runs. */
void device_set_precision(pt_device *d, spec_precision p);
/* The GPU's compute stream (cudaStream_t) for the device transport; NULL elsewhere. */
void *device_stream(pt_device *d);
/* The GPU's local id, PCI bus id ("0000:3b:00.0") and model name ("NVIDIA H100 80GB HBM3");
 * -1, "" and "" for other kinds. */
int device_gpu_id(const pt_device *d);
const char *device_pci_bus_id(const pt_device *d);
const char *device_gpu_name(const pt_device *d);
/* The device's float32 GEMM rate (FLOP/s) on n x n x n over about `seconds`: OpenBLAS on the
 * cpu kinds (its current thread count), cuBLAS on a GPU. The yardstick for MFU. */
double device_gemm_flops(pt_device *d, int n, double seconds);
/* Bytes of the device's own memory (a GPU's), or 0 when it uses the host's. */
size_t device_memory_bytes(const pt_device *d);
/* GPUs this process can use (0 without the GPU backend). */
int device_gpu_count(void);
/* Would device_select(kind) pick a GPU ("gpu", or "auto" with a GPU visible)? */
int device_wants_gpu(spec_device kind);
/* Host and device memory are one (cpu): no copies needed, host views alias device buffers. */
int device_is_host(const pt_device *d);

void *device_alloc(pt_device *d, size_t bytes); /* zeroed, 64-byte aligned, memory-tracked */
void device_free(pt_device *d, void *p);
void device_upload(pt_device *d, void *dst, const void *src, size_t bytes);
void device_download(pt_device *d, void *dst, const void *src, size_t bytes);
/* device_upload without waiting for the device: for small per-micro-batch copies (a GPU stages
 * them in pinned memory of its own, kernels/cuda/staging.h); src may be reused at once too. */
void device_upload_nowait(pt_device *d, void *dst, const void *src, size_t bytes);
void device_zero(pt_device *d, void *p, size_t bytes);
void device_copy(pt_device *d, void *dst, const void *src, size_t bytes); /* device to device */
/* Returns once the work queued on d has run (a GPU's stream): what a timer must wait for, as
 * kernels return before they finish there. Nothing to wait for on the host kinds. */
void device_sync(pt_device *d);
void device_add(pt_device *d, float *y, const float *x, int64_t n);   /* y = y + x */
void device_scale(pt_device *d, float *x, float s, int64_t n);        /* x *= s */
/* Sum of squares in double (cpu/emulated: element order, as grad_tensor_sumsq always did). */
double device_sumsq(pt_device *d, const float *x, int64_t n);
/* loss_forward_backward on a device y/dy; targets are on the host. */
double device_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy);
/* One optimizer update of n floats. */
void device_optimizer(pt_device *d, const device_update *u, float *w, const float *g, float *m,
                      float *v, int64_t n);
/* The same for many tensors at once: the pieces chunks[0..n_chunks) (device memory) of the
 * flat buffers (kernels.h's optimizer_chunks; u with decay). */
void device_optimizer_chunks(pt_device *d, const device_update *u, float *w, const float *g,
                             float *m, float *v, const pt_opt_chunk *chunks, int64_t n_chunks);
/* The kernel table a device of this kind computes with, for sizes only, before (or without) one
 * being opened: in GPU builds, when kind resolves to gpu, the GPU table's size entries
 * (kernels_gpu_sizing: call nothing else on it); the CPU's otherwise. */
const pt_kernels *device_kernels_for(spec_device kind);
/* pt_io.scratch bytes a layer needs at B x T with d's kernels (attention's differ). */
size_t device_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T);
/* 0, or -1 with err when some layer of [first, last) cannot run on d: on a gpu, a layer whose
 * type is not kernels_only (it runs host code). err names the layer's index and type and the
 * fix, in one line. */
int device_check_layers(pt_device *d, const pt_layer *layers, int first, int last, char *err,
                        size_t errsz);

#endif
