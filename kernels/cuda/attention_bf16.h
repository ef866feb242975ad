/* kernels/cuda/attention_bf16.h: the GPU table's attention under train.precision bf16
 * (kernels_gpu.c; fp32 and tf32 keep the in-house float32 kernels of ops_cuda.h, the bitwise
 * reference). Same tensors and contract as kernels/kernels.h's attention entries (float32 qkv,
 * o, dout, dqkv; saved = lse[B,H,T], cuda_op_attention_saved_floats; no table scratch):
 *   - plain causal shapes go to the library behind attention_cudnn.h (cuDNN on a real GPU, its
 *     substitute under the emulator): qkv (and in backward o and dout) converted to bf16 by one
 *     kernel each into a buffer kept here (a qkv or o with a registered activation copy is read
 *     there instead), the library's bf16 o and dqkv widened back to float32; with
 *     opts->shared (kernels.h) the library writes them into room the table keeps, registered
 *     as the activation copy of the float32 o or dqkv (products read those bits instead of
 *     converting, round_share_bf16 skips them: ops_cuda.h cuda_bf16_keep_room); an o or dqkv
 *     whose place was handed over alone (kernels.h share_bf16_into, for a part read at rest:
 *     cuda_attention_bf16_takes, kernels.h attention_reads_bf16; a dqkv of the stash,
 *     layers/layer.h backward_at_rest: its place at rest or room the table keeps) is written
 *     there only, its floats left undefined; a dqkv of opts->rotated not so is left as the
 *     library's bits in the buffer kept here, not widened, for the rope that follows
 *     (cuda_attention_bf16_left);
 *   - packed documents (doc_start != NULL) go to the library as ragged sequences, one per
 *     document (attention_cudnn.h's seqs: opts->documents rounded up to a power of two, the
 *     table built from doc_start by a kernel each call, cuda_op_attention_ragged), where opts
 *     gives their count (kernels.h pt_attention_opts.documents; without it, the in-house
 *     kernels);
 *   - a shape the library refuses runs the in-house fused float32 kernels on the float32
 *     tensors; so do soft-capped scores (kernels.h's pt_attention_opts.softcap: cuDNN's SDPA
 *     has no soft-cap), while a
 *     window and another scale are the library's (its diagonal band and attention scale, part
 *     of the plan's shape). Each reason is said once on stderr by rank 0 (a notice, not an
 *     error). Backward on documents of a shape the library takes, asked for before
 *     (cuda_attention_bf16_takes), widens the activation copies of qkv and o into float32 room
 *     kept here (their floats may be undefined: read at rest).
 * The library's plan is built at the first forward of a shape (B, T, H, KVH, hd, window, scale,
 * seqs), or at the first cuda_attention_bf16_takes asking about it, and kept for forward and
 * backward alike, so the two (and the layers' saved parts) always take the same path; forward's
 * lse is the same B*H*T floats on both paths ([B,H,T], or [token, head] for the library's
 * packed documents: only the backward of the path that wrote it reads it). Buffers grow to the
 * largest shape seen and are kept. One per table; the rank's one host thread calls it, in stream
 * order.
 */
#ifndef PT_ATTENTION_BF16_H
#define PT_ATTENTION_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/kernels.h"
#include "kernels/weight_copy.h"

typedef struct {
  attention_cudnn_shape shape;
  attention_cudnn_plan *plan; /* NULL: refused, the in-house kernels run it */
} cuda_attention_bf16_entry;

typedef struct {
  cuda_attention_bf16_entry *shapes; /* every shape seen, in order */
  int n_shapes, cap_shapes;
  int said_documents;          /* the packed-documents notice was given */
  int said_softcap;            /* the soft-capping notice was given */
  uint16_t *bf16;              /* device: the bf16 operands and results */
  size_t bf16_bytes;
  void *workspace;             /* device: the library's workspace */
  size_t workspace_bytes;
  float *floats;               /* device: copies widened for the in-house kernels */
  size_t floats_bytes;
  int32_t *ragged;             /* device: packed documents' ragged table (attention_cudnn.h) */
  size_t ragged_bytes;
  int64_t library_calls, fallback_calls; /* forward and backward calls on each path */
  /* The table's bf16 scratch: a qkv or o inside one of its activation copies (kernels.h
   * activation_copies) is handed to the library as it is, not converted; shared results are
   * kept there. NULL: none of either. */
  cuda_bf16_scratch *copies;
  /* The last backward's dqkv left as the library's bits (pt_attention_opts.rotated): its floats
   * at left_at (left_n of them) undefined, its bits at left_bits, in this struct's bf16 buffer,
   * until the next call here; left_at NULL: none. */
  const float *left_at;
  const uint16_t *left_bits;
  int64_t left_n;
} cuda_attention_bf16;

/* kernels.h's attention_forward / attention_backward (lse is the saved state). */
void cuda_attention_bf16_forward(gpu_ctx *g, cuda_attention_bf16 *a, float *o, float *lse,
                                 const float *qkv, int B, int T, int d, int H, int KVH,
                                 const int32_t *doc_start, const pt_attention_opts *opts);
void cuda_attention_bf16_backward(gpu_ctx *g, cuda_attention_bf16 *a, float *dqkv,
                                  const float *dout, const float *qkv, const float *o,
                                  const float *lse, int B, int T, int d, int H, int KVH,
                                  const int32_t *doc_start, const pt_attention_opts *opts);
/* The bits of x[0..n) where the last call was a backward with opts->rotated that left its dqkv,
 * x, as the library's bits (the table's rope reads them, kernels.h pt_attention_opts.rotated),
 * forgotten once given; else NULL (the floats are x's). */
const uint16_t *cuda_attention_bf16_left(cuda_attention_bf16 *a, const float *x, int64_t n);
/* kernels.h's attention_reads_bf16: 1 when the library takes this shape and opts (packed
 * documents where opts->documents > 0, whole rows otherwise), its plan built now where not yet
 * (the same plan the calls then use). */
int cuda_attention_bf16_takes(gpu_ctx *g, cuda_attention_bf16 *a, int B, int T, int d, int H,
                              int KVH, const pt_attention_opts *opts);
void cuda_attention_bf16_free(cuda_attention_bf16 *a);

#endif
