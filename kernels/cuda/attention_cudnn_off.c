/* attention_cudnn.h in a real-CUDA build that found no cuDNN or no cudnn-frontend headers at
 * configure time (cmake/FindCUDNNFrontend.cmake): every shape is refused, so bf16 attention runs
 * the in-house fused kernels. Nothing here is ever run. */
#include "kernels/cuda/attention_cudnn.h"

#include <stdio.h>

const char *attention_cudnn_backend(void) {
  return "none (built without cuDNN or the cudnn-frontend headers)";
}

attention_cudnn_plan *attention_cudnn_plan_build(gpu_ctx *g, const attention_cudnn_shape *s,
                                                 char *why, size_t whysz) {
  (void)g, (void)s;
  snprintf(why, whysz, "this build has no cuDNN attention (cmake found no cuDNN or no "
                       "cudnn-frontend headers; scripts/install-python.sh installs them)");
  return NULL;
}

size_t attention_cudnn_plan_workspace(const attention_cudnn_plan *p) {
  (void)p;
  return 0;
}

void attention_cudnn_plan_free(attention_cudnn_plan *p) { (void)p; }

void attention_cudnn_forward(gpu_ctx *g, const attention_cudnn_plan *p, void *workspace,
                             uint16_t *o, float *lse, const uint16_t *qkv,
                             const int32_t *ragged) {
  (void)g, (void)p, (void)workspace, (void)o, (void)lse, (void)qkv, (void)ragged;
  pt_fatal("attention_cudnn_forward: no plan can exist in this build");
}

void attention_cudnn_backward(gpu_ctx *g, const attention_cudnn_plan *p, void *workspace,
                              uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv,
                              const uint16_t *o, const float *lse, const int32_t *ragged) {
  (void)g, (void)p, (void)workspace, (void)dqkv, (void)dout, (void)qkv, (void)o, (void)lse;
  (void)ragged;
  pt_fatal("attention_cudnn_backward: no plan can exist in this build");
}
