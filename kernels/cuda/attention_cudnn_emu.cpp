/* attention_cudnn.h under the CUDA emulator, which has no cuDNN: the same contract computed by
 * the in-house fused float32 kernels (ops_cuda.h) on the bf16 operands widened exactly to
 * float32, with o and dqkv rounded back to bf16, so the numbers resemble a bf16 library's and
 * everything around the call (conversions, plan cache, workspace, fallback, saved sizes) runs
 * here. It refuses what cuDNN's SDPA documents it refuses for bf16 (a head dim that is not a
 * multiple of 8, or above 256), so the fallback path runs here too, and it ends the run on a
 * tensor less than 16-byte aligned: cudnn-frontend's tensors declare 16 bytes (its default
 * alignment), which the real graph then assumes of every pointer given it (q, k and v too, at
 * their offsets in qkv). The float32 copies live in the caller's workspace, which this plan
 * asks for.
 *
 * Packed documents (a shape's seqs > 0) read the ragged table as cuDNN would: the documents are
 * rebuilt from its lengths and offsets (cuda_op_attention_ragged_docs; a token no valid sequence
 * covers becomes a one-token document, so a wrong table gives wrong results) and the in-house
 * kernels run on them. lse is theirs, [B,H,T]: only this substitute's backward reads it.
 */
#include "kernels/cuda/attention_cudnn.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cost.h"
#include "kernels/cuda/ops_cuda.h"

struct attention_cudnn_plan {
  attention_cudnn_shape s;
  int64_t n_qkv, n_o; /* elements of qkv and of o */
};

/* Bytes of the float32 copies (forward: qkv, o; backward adds dout and dqkv), then the
 * documents rebuilt from a ragged table (B*T int32, kept 16-byte aligned). */
static size_t floats_bytes(const attention_cudnn_plan *p) {
  return (sizeof(float) * (size_t)(2 * p->n_qkv + 2 * p->n_o) + 15) / 16 * 16;
}

extern "C" const char *attention_cudnn_backend(void) { return "emulator substitute"; }

extern "C" attention_cudnn_plan *attention_cudnn_plan_build(gpu_ctx *g,
                                                            const attention_cudnn_shape *s,
                                                            char *why, size_t whysz) {
  (void)g;
  if (s->hd % 8 != 0 || s->hd > 256) {
    snprintf(why, whysz, "head dim %d: cuDNN's bf16 attention takes multiples of 8 up to 256",
             s->hd);
    return NULL;
  }
  attention_cudnn_plan *p = (attention_cudnn_plan *)calloc(1, sizeof *p);
  if (!p) pt_fatal("attention plan: out of memory");
  p->s = *s;
  p->n_o = (int64_t)s->B * s->T * s->H * s->hd;
  p->n_qkv = (int64_t)s->B * s->T * (s->H + 2 * s->KVH) * s->hd;
  return p;
}

/* Ends the run when a tensor given the graph breaks the 16 bytes its descriptor declares. */
static void require_aligned(const char *call, const char *what, const void *p) {
  if ((uintptr_t)p % 16 != 0)
    pt_fatal("%s: %s at %p is not 16-byte aligned, as cudnn-frontend's tensors are declared "
             "(kernels/cuda/attention_cudnn.cpp)", call, what, p);
}

/* q, k and v where the graph reads them in qkv (the offsets of attention_cudnn.cpp's pack). */
static void require_qkv_aligned(const char *call, const attention_cudnn_shape *s,
                                const uint16_t *qkv, const char *what) {
  require_aligned(call, what, qkv);
  require_aligned(call, what, qkv + (int64_t)s->H * s->hd);
  require_aligned(call, what, qkv + (int64_t)(s->H + s->KVH) * s->hd);
}

extern "C" size_t attention_cudnn_plan_workspace(const attention_cudnn_plan *p) {
  const size_t docs = p->s.seqs > 0 ? sizeof(int32_t) * (size_t)p->s.B * p->s.T : 0;
  return floats_bytes(p) + docs;
}

/* The documents of the call's ragged table, rebuilt in the workspace; NULL for whole rows. */
static const int32_t *documents(gpu_ctx *g, const attention_cudnn_plan *p, void *workspace,
                                const int32_t *ragged, const char *call) {
  const attention_cudnn_shape *s = &p->s;
  if (s->seqs <= 0) return NULL;
  if (!ragged) pt_fatal("%s: a packed-documents plan needs its ragged table", call);
  require_aligned(call, "the ragged table", ragged);
  int32_t *doc = (int32_t *)((char *)workspace + floats_bytes(p));
  cuda_op_attention_ragged_docs(g, doc, ragged, s);
  return doc;
}

extern "C" void attention_cudnn_plan_free(attention_cudnn_plan *p) { free(p); }

/* The shape's window and scale as the in-house kernels take them. */
static pt_attention_opts opts_of(const attention_cudnn_shape *s) {
  pt_attention_opts o = {};
  o.window = s->window;
  o.scale = s->scale;
  return o;
}

extern "C" void attention_cudnn_forward(gpu_ctx *g, const attention_cudnn_plan *p,
                                        void *workspace, uint16_t *o, float *lse,
                                        const uint16_t *qkv, const int32_t *ragged) {
  const attention_cudnn_shape *s = &p->s;
  const char *call = "attention_cudnn_forward";
  require_qkv_aligned(call, s, qkv, "q|k|v");
  require_aligned(call, "o", o), require_aligned(call, "lse", lse);
  require_aligned(call, "workspace", workspace);
  float *qkv_f = (float *)workspace, *o_f = qkv_f + p->n_qkv;
  gpu_cost_pause();
  const int32_t *doc = documents(g, p, workspace, ragged, call);
  cuda_unpack_bf16(g, qkv_f, qkv, p->n_qkv);
  const pt_attention_opts opts = opts_of(s);
  cuda_op_attention_forward(g, o_f, lse, qkv_f, s->B, s->T, s->H * s->hd, s->H, s->KVH, doc,
                            &opts, NULL);
  cuda_pack_bf16(g, o, o_f, p->n_o);
  gpu_cost_resume();
}

extern "C" void attention_cudnn_backward(gpu_ctx *g, const attention_cudnn_plan *p,
                                         void *workspace, uint16_t *dqkv, const uint16_t *dout,
                                         const uint16_t *qkv, const uint16_t *o,
                                         const float *lse, const int32_t *ragged) {
  const attention_cudnn_shape *s = &p->s;
  const char *call = "attention_cudnn_backward";
  require_qkv_aligned(call, s, qkv, "q|k|v");
  require_qkv_aligned(call, s, dqkv, "dq|dk|dv");
  require_aligned(call, "o", o), require_aligned(call, "dout", dout);
  require_aligned(call, "lse", lse), require_aligned(call, "workspace", workspace);
  float *qkv_f = (float *)workspace, *dqkv_f = qkv_f + p->n_qkv;
  float *o_f = dqkv_f + p->n_qkv, *dout_f = o_f + p->n_o;
  gpu_cost_pause();
  const int32_t *doc = documents(g, p, workspace, ragged, call);
  cuda_unpack_bf16(g, qkv_f, qkv, p->n_qkv);
  cuda_unpack_bf16(g, o_f, o, p->n_o);
  cuda_unpack_bf16(g, dout_f, dout, p->n_o);
  const pt_attention_opts opts = opts_of(s);
  cuda_op_attention_backward(g, dqkv_f, dout_f, qkv_f, o_f, lse, s->B, s->T, s->H * s->hd, s->H,
                             s->KVH, doc, &opts, NULL);
  cuda_pack_bf16(g, dqkv, dqkv_f, p->n_qkv);
  gpu_cost_resume();
}
