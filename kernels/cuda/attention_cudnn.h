/* kernels/cuda/attention_cudnn.h: causal grouped-query attention on bf16 operands by a library
 * (cuDNN's fused scaled-dot-product attention), behind one C seam. CMake picks the one file that
 * implements it (docs/gpu.md, "Attention"):
 *   attention_cudnn.cpp      real CUDA with cuDNN and the cudnn-frontend headers found
 *   attention_cudnn_emu.cpp  the CUDA emulator: the in-house fused float32 kernels
 *                            (ops_cuda.h) on the bf16 operands, results rounded to bf16
 *   attention_cudnn_off.c    real CUDA without them: every shape refused
 * The caller (attention_bf16.c) keeps one plan per shape and falls back to the in-house kernels
 * when a plan is refused.
 *
 * Layouts, as kernels/kernels.h's attention entries but bf16 (uint16_t bit patterns) where
 * noted: qkv[B,T,(H + 2*KVH)*hd] = q | k | v (read with strides, no copy), o[B,T,H*hd], the
 * log-sum-exp of each row of scaled scores lse[B,H,T] float32 (natural log, as the in-house
 * kernels save it), dqkv like qkv. Causal (banded by the shape's window), the shape's scale,
 * query head h reads kv head h / (H/KVH). Every pointer is device memory of the plan's
 * gpu_ctx; calls are queued on its stream and return at once. Backward is deterministic (same
 * inputs, same bits).
 */
#ifndef PT_ATTENTION_CUDNN_H
#define PT_ATTENTION_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
/* gpu.h has no extern "C" of its own: the CUDA headers first, then gpu.h inside the block (as
 * ops_cuda.h does), so C++ callers see pt_fatal and the checks by their C names. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
extern "C" {
#endif

#include "kernels/cuda/gpu.h"

/* window: kernels.h's sliding window (0: none, else below T), cuDNN's diagonal band left bound
 * (keys s > t - window); scale: the scores' scale (1/sqrt(hd) unless kernels.h's opts set
 * another). Soft-capping has no equivalent in cuDNN's SDPA: attention_bf16.c never asks.
 * seqs: 0 for whole rows (B sequences of T); > 0 for packed documents: the B*T tokens are up to
 * seqs sequences, each a document, given per call by a ragged table (below), each sequence
 * causal from its own first token (cuDNN's padding mask, ragged offsets and ragged stats). */
typedef struct {
  int B, T, H, KVH, hd, window;
  float scale;
  int seqs;
} attention_cudnn_shape;

/* The ragged table of a packed-documents shape: device int32, four arrays of
 * attention_cudnn_ragged_stride(seqs) each (16-byte aligned, as every tensor given cuDNN):
 *   [0]  seq_len[seqs]      tokens of sequence j (0 for a slot past the last document)
 *   [1]  off_qkv[seqs + 1]  element offset of its first token in qkv and dqkv (token * row)
 *   [2]  off_o[seqs + 1]    the same in o and dout (token * H * hd)
 *   [3]  off_lse[seqs + 1]  the same in lse (token * H: lse is [token, head] here)
 * Sequences in token order, slots past the last and index seqs at the end (B*T tokens).
 * cuda_op_attention_ragged (ops_cuda.h) builds it from kernels.h's doc_start. */
static inline int64_t attention_cudnn_ragged_stride(int seqs) {
  return ((int64_t)seqs + 4) / 4 * 4;
}

/* The built forward and backward of one shape (opaque). */
typedef struct attention_cudnn_plan attention_cudnn_plan;

/* Which implementation this build has: "cudnn <version>", "emulator substitute", or
 * "none (<why>)". Static text. */
const char *attention_cudnn_backend(void);
/* Builds the forward and backward graphs of shape s for g (the slow part: once per shape).
 * NULL when the library refuses the shape or is absent, with the reason in why (a notice for
 * the caller to print; never fatal). */
attention_cudnn_plan *attention_cudnn_plan_build(gpu_ctx *g, const attention_cudnn_shape *s,
                                                 char *why, size_t whysz);
/* Device bytes of workspace forward and backward need (the larger of the two). */
size_t attention_cudnn_plan_workspace(const attention_cudnn_plan *p);
void attention_cudnn_plan_free(attention_cudnn_plan *p);
/* o (bf16), lse (float32) from qkv (bf16); workspace: plan_workspace bytes (NULL when 0);
 * ragged: the table above for a shape with seqs > 0, else NULL. lse's B*H*T floats are
 * [B,H,T] for whole rows, [token, head] for packed documents (only backward reads it). */
void attention_cudnn_forward(gpu_ctx *g, const attention_cudnn_plan *p, void *workspace,
                             uint16_t *o, float *lse, const uint16_t *qkv,
                             const int32_t *ragged);
/* dqkv (bf16, every element written) from dout, qkv, o (bf16) and forward's lse; ragged as
 * forward's (the same micro-batch's). */
void attention_cudnn_backward(gpu_ctx *g, const attention_cudnn_plan *p, void *workspace,
                              uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv,
                              const uint16_t *o, const float *lse, const int32_t *ragged);

#ifdef __cplusplus
}
#endif

#endif
