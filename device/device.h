/* device/device.h: where a process keeps its bulk tensors and runs its numerical work.
 *
 * A device is its kind's table (pt_device_ops: traits, memory operations, identity) plus the
 * kernel table (kernels/kernels.h) that computes on that memory; layers get the kernel table
 * through pt_io.k, the engine through the device_* calls. The kinds (device/registry.c):
 *   cpu       host memory and the CPU kernels (the default; host_backend.c)
 *   gpu       GPU memory and the CUDA kernels, on the rank's stream (GPU builds:
 *             cuda/gpu_backend.c)
 *   emulated  the CPU kernels on buffers kept apart from the host copies the rest of the
 *             program reads, with every transfer the gpu path makes: the gpu path's data
 *             movement, tested on any machine (same bits as cpu; host_backend.c)
 * Code outside device/ never asks which kind it has, only what the table answers.
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

typedef struct pt_device pt_device;

/* One optimizer update: kernels/kernels.h's, under the name the optimizer uses. */
typedef pt_update device_update;

/* What a kind of device is, known without its hardware: planning reads it for any kind
 * pipeline.device names, in any build (--plan of a gpu spec where no GPU backend was built). */
typedef struct {
  const char *name; /* pipeline.device's word for the kind (spec_device_names) */
  /* Device buffers are host memory itself: the host copies (model_to_host, the step statistics)
   * are the buffers, and transfers between them do nothing. cpu only. */
  int shares_host_memory;
  /* Host code may read and write device buffers directly: a layer's host code can run on them
   * (device_check_layers), comm sends them as they are, a copy between ranks of a node is a
   * memcpy (profile/measure.c). Where 0 the buffers travel by the device transport
   * (comm.backend: nccl, or mpi staging through host memory). */
  int host_addressable;
  /* Each rank opens one of the node's devices by id (pipeline.devices, else its node-local
   * rank), so counts and sharing are checked; 0: every rank has the one device. */
  int one_per_rank;
  /* pipeline.device: auto may pick it when one is usable (count > 0), in registry order. */
  int picked_by_auto;
  /* Binding a rank near it (device/placement.h) waits until it is open (a GPU's NUMA node);
   * 0: bind before allocating, so first touch puts memory near the cores. */
  int binds_after_open;
  /* train.precision runs in the GEMM units: tf32 needs no rounded operand copies and bf16 keeps
   * both operands whole, as bf16 (kernels/cuda/ops_linear.cu); 0: the CPU tables' float copies
   * of the weight and blocks of rows (kernels/cpu/kernels_cpu_precision.c). */
  int precision_in_gemm;
  /* Stashed activations may go to host memory (pipeline.offload, engine/stage_offload.h): the
   * kind's device memory is its own, and its table has the offload entries. 0 on the cpu. */
  int offloads;
  /* Offload copies run on a copy stream beside the compute (a GPU); 0: device_copy_async copies
   * when called, on the compute thread (the emulated device). What the planner's simulation of
   * the copies assumes (partition/auto_copies.c). */
  int copies_overlap;
} pt_device_traits;

/* A kind of device: its traits, how to find and open one, and everything that differs between
 * kinds once open (the ggml-backend pattern). One table per kind: cpu and emulated in
 * host_backend.c, gpu in cuda/gpu_backend.c; registry.c lists them. Entries marked optional may
 * be NULL, with the default named. */
typedef struct {
  pt_device_traits is;
  int (*count)(void); /* usable devices of the kind on this node (the host kinds: 1) */
  /* Fills d (ops already set) for local device `id` (ignored where !one_per_rank): the kernel
   * table at fp32 and the kind's state. 0, or -1 with err. */
  int (*open)(pt_device *d, int id, char *err, size_t errsz);
  /* The kernel table's size entries before (or without) a device being opened: what planning
   * sizes saved state and scratch with (the GPU's: kernels_gpu_sizing, call nothing else). */
  const pt_kernels *sizing;
  /* The GEMM size whose rate is the MFU yardstick: large enough to keep the device busy. */
  int gemm_n;

  /* Memory: see the device_* calls of the same names. */
  void *(*alloc)(pt_device *d, size_t bytes);
  void (*free)(pt_device *d, void *p);
  /* Optional (NULL: alloc). device_alloc_sparse: memory committed only where touched. */
  void *(*alloc_sparse)(pt_device *d, size_t bytes, size_t touched, size_t *tracked);
  void (*upload)(pt_device *d, void *dst, const void *src, size_t bytes);
  void (*download)(pt_device *d, void *dst, const void *src, size_t bytes);
  void (*zero)(pt_device *d, void *p, size_t bytes);
  void (*copy)(pt_device *d, void *dst, const void *src, size_t bytes); /* device to device */
  void (*sync)(pt_device *d); /* waits for everything queued (device_sync) */
  void (*upload_nowait)(pt_device *d, void *dst, const void *src, size_t bytes);
  /* Activation offload (engine/stage_offload.h): all six where is.offloads, else NULL. See the
   * device_* calls of the same names. */
  void *(*pinned_alloc)(pt_device *d, size_t bytes);
  void (*pinned_free)(pt_device *d, void *p);
  void *(*event_new)(pt_device *d);
  void (*event_free)(pt_device *d, void *ev);
  void (*copy_async)(pt_device *d, void *dst, const void *src, size_t bytes, int to_device,
                     void *done);
  void (*wait_event)(pt_device *d, void *ev);

  /* Compute: the kernel table for precision p becomes d->k (device_set_precision). */
  void (*set_precision)(pt_device *d, pt_precision p);
  double (*gemm_flops)(pt_device *d, int n, double seconds); /* float32 GEMM FLOP/s */
  /* What computes, for reports: "cpu, OpenBLAS SkylakeX kernel, 4 thread(s)" (the kernel:
   * blas_kernel_describe), "gpu (NVIDIA H100 80GB HBM3)". */
  void (*describe)(const pt_device *d, char *buf, size_t size);

  /* Identity, all optional (the defaults: 0 bytes, id -1, "", "", no stream). */
  size_t (*memory_bytes)(const pt_device *d); /* its own memory, 0 when it uses the host's */
  /* of that, what it can still give: not held by this or any other process (CUDA contexts,
   * other jobs); unset: all of it */
  size_t (*memory_free)(const pt_device *d);
  int (*local_id)(const pt_device *d);         /* the node-local id it was opened with */
  const char *(*bus_id)(const pt_device *d);   /* PCI bus id, "0000:3b:00.0" */
  const char *(*model_name)(const pt_device *d); /* "NVIDIA H100 80GB HBM3" */
  void *(*stream)(pt_device *d); /* the queue its work runs on (a cudaStream_t) */

  /* Compute time on the device's clock, for a device that runs its work after the host queues
   * it (a GPU; optional, all four or none): device_span_begin's. */
  int64_t (*span_begin)(pt_device *d, int keep);
  void (*span_end)(pt_device *d);
  double (*spans_seconds)(pt_device *d);
  int (*span_times)(pt_device *d, int64_t ticket, double *t0, double *t1);
} pt_device_ops;

struct pt_device {
  const pt_device_ops *ops; /* its kind's table */
  const pt_kernels *k;      /* the kernels on this memory: the CPU's for cpu and emulated */
  void *impl;               /* the kind's own state (gpu: its gpu_ctx and kernel table) */
};

/* The process-wide device: the cpu until device_select(). */
pt_device *device_current(void);
/* Host memory and CPU kernels, whatever the current device (models only read on the host). */
pt_device *device_host(void);
/* What pipeline.device `kind` means, never SPEC_DEVICE_AUTO: auto is the first kind of the
 * registry (device/registry.c) with picked_by_auto and a usable device: gpu when this build
 * has the GPU backend and a GPU is visible, else cpu (PIPETRAIN_AUTO_DEVICE=cpu|gpu|emulated
 * overrides); other kinds are returned as they are. The layers do not change the choice: a model
 * with a layer that cannot run on the GPU is refused there by device_check_layers, never moved
 * to the CPU behind the user's back (docs/layers.md). */
spec_device device_resolve(spec_device kind);
/* The table of the kind `kind` resolves to, for its traits and sizes before a device is open.
 * Every kind pipeline.device names has one; one this build lacks can only refuse to open. */
const pt_device_ops *device_kind(spec_device kind);
/* Usable devices of the kind `kind` resolves to, on this node (0 where not built). */
int device_count(spec_device kind);
/* Makes `kind` (resolved as by device_resolve) the process-wide device, opening local device
 * `id` where the kind is one_per_rank (the device already open when it is that one: a device
 * lives as long as its process). 0, or -1 with err (not in this build, no such device). */
int device_select(spec_device kind, int id, char *err, size_t errsz);
const char *device_name(const pt_device *d); /* its kind's name, "cpu", "emulated", "gpu" */
/* Makes d compute in precision p (train.precision, resolved once at load): its kernel table
 * becomes the table for p (kernels/kernels.h's pt_precision; the CPU's kernels_cpu_for, the
 * GPU's kernels_gpu_set_precision). Call after device_select, before any kernel runs. */
void device_set_precision(pt_device *d, spec_precision p);
/* How a run of precision p on a device of `kind` multiplies bf16 when that is the host's CPU
 * tables' business (kernels_cpu_bf16_products: "oneDNN avx512_core_bf16", "emulated"); NULL
 * where p is not bf16 or the kind's own GEMM has the precision (is.precision_in_gemm). */
const char *device_cpu_bf16_products(spec_device kind, spec_precision p);
/* Interposes a kernel table (instrumentation: bench_train's timing table,
 * kernels/kernels_timed.h): from the next device_select or device_set_precision on, the
 * device's table becomes wrap(table, arg), which must compute exactly as the table it is given
 * (a table forwarding to it). wrap may be handed a table it returned before (a kind whose
 * set_precision changes its table in place): it wraps what that one wraps again. NULL removes
 * it for later selections. Nothing else interposes: with none, the kinds' tables are used as
 * they are. */
typedef const pt_kernels *(*device_kernels_wrap)(const pt_kernels *table, void *arg);
void device_interpose_kernels(device_kernels_wrap wrap, void *arg);
/* d's queue (a GPU's cudaStream_t) for the device transport; NULL where it has none. */
void *device_stream(pt_device *d);
/* The device's local id, PCI bus id ("0000:3b:00.0") and model name ("NVIDIA H100 80GB HBM3");
 * -1, "" and "" for kinds without (the host kinds). */
int device_gpu_id(const pt_device *d);
const char *device_pci_bus_id(const pt_device *d);
const char *device_gpu_name(const pt_device *d);
/* The device's float32 GEMM rate (FLOP/s) on n x n x n over about `seconds`: OpenBLAS on the
 * cpu kinds (its current thread count), cuBLAS on a GPU. The yardstick for MFU. */
double device_gemm_flops(pt_device *d, int n, double seconds);
/* What computes on d, for reports (pt_device_ops.describe), into buf. */
void device_describe(const pt_device *d, char *buf, size_t size);
/* Bytes of the device's own memory (a GPU's), or 0 when it uses the host's. */
size_t device_memory_bytes(const pt_device *d);
/* Of those, the bytes free now: what every process on it (this one's context and buffers, other
 * jobs, other ranks sharing it) has not taken. device_memory_bytes where the kind cannot say. */
size_t device_memory_free(const pt_device *d);
/* Compute time as the device counts it. span_begin and span_end enclose work the caller queues
 * (not nested); device_spans_seconds returns the seconds of the spans the device has finished
 * since the last call (a GPU: without waiting for it; the rest count at a later call), or
 * host_s, the caller's host-clock figure, on a device whose work is done when its call
 * returns (the CPU kinds). keep (a traced action): the span is kept for device_span_times
 * under the ticket span_begin returns; -1: not kept, or a device whose work is done when its
 * call returns (the host's times around the call are the span's). */
int64_t device_span_begin(pt_device *d, int keep);
void device_span_end(pt_device *d);
double device_spans_seconds(pt_device *d, double host_s);
/* When the device ran kept span `ticket`, on the host's clock (pt_now_s, seconds): 1 and *t0,
 * *t1 once it has run, forgetting it; 0 while not yet (after device_sync every kept span reads
 * 1); -1 for a ticket not kept or read already. */
int device_span_times(pt_device *d, int64_t ticket, double *t0, double *t1);
/* d's traits (pt_device_traits): host copies are its buffers; host code may touch them. */
int device_shares_host_memory(const pt_device *d);
int device_host_addressable(const pt_device *d);
int device_offloads(const pt_device *d); /* its kind's offloads trait */

void *device_alloc(pt_device *d, size_t bytes); /* zeroed, 64-byte aligned, memory-tracked */
/* bytes of which the caller writes only the first `touched` (the rest an address range it
 * names but never reads or writes: a GPU's managed memory, its pages committed where first
 * touched). Not zeroed; freed with device_free. *tracked: the bytes counted in the memory
 * totals, touched where the device commits lazily (its kind's alloc_sparse), else bytes (as
 * device_alloc). */
void *device_alloc_sparse(pt_device *d, size_t bytes, size_t touched, size_t *tracked);
void device_free(pt_device *d, void *p);
void device_upload(pt_device *d, void *dst, const void *src, size_t bytes);
void device_download(pt_device *d, void *dst, const void *src, size_t bytes);
/* device_upload without waiting for the device: for small per-micro-batch copies (a GPU stages
 * them in pinned memory of its own, kernels/cuda/staging.h); src may be reused at once too. */
void device_upload_nowait(pt_device *d, void *dst, const void *src, size_t bytes);
void device_zero(pt_device *d, void *p, size_t bytes);
/* Activation offload (engine/stage_offload.h), where the kind `kind` resolves to offloads
 * (device_kind_offloads, its trait: the emulated device and the gpu, not the cpu, whose device
 * memory is the host's). Pinned host memory (a GPU's cudaHostAlloc; plain host memory on the
 * emulated device), zeroed, not counted in the device's memory; events mark a point of the copy
 * stream (NULL where copies finish when called). device_copy_async copies bytes between device memory
 * and pinned host memory (to_device: host to device) on the device's copy stream, after all
 * work queued so far on its compute stream, and records `done` (an event or NULL) after it;
 * device_wait_event makes later compute work wait for ev (NULL: nothing). */
int device_kind_offloads(spec_device kind);
void *device_pinned_alloc(pt_device *d, size_t bytes);
void device_pinned_free(pt_device *d, void *p);
void *device_event_new(pt_device *d);
void device_event_free(pt_device *d, void *ev);
void device_copy_async(pt_device *d, void *dst, const void *src, size_t bytes, int to_device,
                       void *done);
void device_wait_event(pt_device *d, void *ev);
void device_copy(pt_device *d, void *dst, const void *src, size_t bytes); /* device to device */
/* Returns once the work queued on d has run (a GPU's stream): what a timer must wait for, as
 * kernels return before they finish there. Nothing to wait for on the host kinds. */
void device_sync(pt_device *d);
void device_add(pt_device *d, float *y, const float *x, int64_t n);   /* y = y + x */
/* Sum of squares in double (cpu/emulated: element order, as grad_tensor_sumsq always did). */
double device_sumsq(pt_device *d, const float *x, int64_t n);
/* loss_forward_backward on a device y/dy; targets are on the host. */
double device_loss(pt_device *d, pt_loss_kind kind, const float *y, const void *targets,
                   size_t target_bytes, int N, int F, float scale, float *dy);
/* One optimizer update of n floats; w16 NULL or the weights' bf16 copy, written in the same
 * pass (kernels.h's optimizer). */
void device_optimizer(pt_device *d, const device_update *u, float *w, uint16_t *w16,
                      const float *g, float *m, float *v, int64_t n);
/* The same for many tensors at once: the pieces chunks[0..n_chunks) (device memory) of the
 * flat buffers (kernels.h's optimizer_chunks; u with decay). */
void device_optimizer_chunks(pt_device *d, const device_update *u, float *w, uint16_t *w16,
                             const float *g, float *m, float *v, const pt_opt_chunk *chunks,
                             int64_t n_chunks);
/* The bf16 weight copy (kernels.h's weight_copy entry): whether d's kernel table reads one (a
 * bf16 table whose products take bf16 operands: the GPU's, the CPU's oneDNN one) and it is
 * wanted (PIPETRAIN_WEIGHT_COPY=off in the environment turns it off, for comparisons: the
 * results are the same bits either way); and the same for a device of kind `kind` computing in
 * precision p, before one is open (the plan's memory estimate). */
int device_weight_copy_used(const pt_device *d);
int device_kind_weight_copy_used(spec_device kind, spec_precision p);
/* The kernel table a device of this kind computes with, for sizes only, before (or without) one
 * being opened: device_kind(kind)->sizing (the GPU's kernels_gpu_sizing: call nothing else on
 * it; the CPU's where the GPU backend is not built). */
const pt_kernels *device_kernels_for(spec_device kind);
/* pt_io.scratch bytes a layer needs at B x T with d's kernels (attention's differ). */
size_t device_scratch_bytes(pt_device *d, const pt_layer *L, int B, int T);
/* 0, or -1 with err when some layer of [first, last) cannot run on d: where d is not
 * host_addressable (a gpu), a layer whose type is not kernels_only (it runs host code). err
 * names the layer's index and type and the fix, in one line. */
int device_check_layers(pt_device *d, const pt_layer *layers, int first, int last, char *err,
                        size_t errsz);

#endif
