/* attention_cudnn.h on cuDNN 9's fused scaled-dot-product attention, through the cudnn-frontend
 * graph API (C++ headers from the nvidia-cudnn-frontend wheel; cmake/FindCUDNNFrontend.cmake).
 * Compiled only in a real-CUDA build that found both (CMakeLists.txt picks this file).
 *
 * A plan is the two graphs of one shape, built once: forward (o and the float32 log-sum-exp
 * "Stats", natural log) and backward with the deterministic algorithm (set_deterministic_algorithm:
 * dK, dV summed over a kv head's query heads in a fixed order, so reruns and pipelined runs give
 * the same bits). q, k and v are read in place from the packed qkv rows through strides, as dq,
 * dk and dv are written into dqkv. Building is where cuDNN says no (head dim, architecture,
 * version): any failure there is a refusal with cuDNN's words, never fatal; a failure when
 * running a built plan is fatal (PT_CHECK_CUDNN_FE).
 *
 * Packed documents (a shape's seqs > 0): the same graphs over seqs sequences of up to T tokens,
 * each tensor's sequence j found through a ragged offset (attention_cudnn.h's table: q, k, v,
 * dq, dk, dv at off_qkv, o and dout at off_o, the stats at off_lse, [token, head]) and masked
 * by its length (the padding mask) and causally from its first token (top left): what
 * TransformerEngine calls the THD layout. Each tensor gets its own offset tensor (uid), all
 * reading the one table.
 *
 * One cuDNN handle per process (a rank drives one device, kernels/cuda/gpu.h), created with the
 * first plan (a failure there is a refusal too); every call sets it to the caller's stream.
 */
#include "kernels/cuda/attention_cudnn.h"

#include <math.h>
#include <stdio.h>

#include <cudnn.h>
#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

static bool fe_ok(const fe::error_t &e) { return e.is_good(); }
static const char *fe_text(const fe::error_t &e) { return e.err_msg.c_str(); }
static bool cudnn_ok(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }
static const char *cudnn_text(cudnnStatus_t s) { return cudnnGetErrorString(s); }
/* core/error.h's one shape for cuDNN's status and for the frontend's error objects. */
#define PT_CHECK_CUDNN(call) \
  PT_CHECK_CALL(cudnnStatus_t, call, #call, cudnn_ok, "cuDNN", cudnn_text)
#define PT_CHECK_CUDNN_FE(call) \
  PT_CHECK_CALL(fe::error_t, call, #call, fe_ok, "cuDNN frontend", fe_text)

enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };
/* the ragged table's tensors: a tensor's offsets at its uid + UID_OFFSET */
enum { UID_SEQ_LEN_Q = 20, UID_SEQ_LEN_KV, UID_OFFSET = 40 };

struct attention_cudnn_plan {
  attention_cudnn_shape s;
  std::shared_ptr<fe::graph::Graph> fwd, bwd;
  size_t workspace;
};

static cudnnHandle_t dnn;

extern "C" const char *attention_cudnn_backend(void) {
  static char text[64];
  const size_t v = cudnnGetVersion(); /* 91900: 9.19.0 */
  if (!text[0])
    snprintf(text, sizeof text, "cudnn %zu.%zu.%zu (frontend %d.%d.%d)", v / 10000,
             v / 100 % 100, v % 100, CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
             CUDNN_FRONTEND_PATCH_VERSION);
  return text;
}

/* The strides of a [B, heads, T, hd] view of rows of ld elements (heads hd apart). */
static std::vector<int64_t> strides(const attention_cudnn_shape &s, int64_t ld) {
  return {(int64_t)s.T * ld, s.hd, ld, 1};
}

using tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

/* Sequences of a graph: B rows, or the packed documents' slots. */
static int64_t batch(const attention_cudnn_shape &s) { return s.seqs > 0 ? s.seqs : s.B; }

/* An int32 column of n (a ragged table's array). */
static tensor int_column(fe::graph::Graph &g, const char *name, int64_t uid, int64_t n) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

/* t's ragged offset (its uid + UID_OFFSET) under packed documents; nothing for whole rows. */
static tensor with_offsets(fe::graph::Graph &g, const attention_cudnn_shape &s, tensor t) {
  if (s.seqs > 0)
    t->set_ragged_offset(int_column(g, "offset", t->get_uid() + UID_OFFSET, s.seqs + 1));
  return t;
}

static tensor input(fe::graph::Graph &g, const char *name, int64_t uid, int64_t heads,
                    const attention_cudnn_shape &s, int64_t ld) {
  return with_offsets(g, s,
                g.tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({batch(s), heads, s.T, s.hd})
                             .set_stride(strides(s, ld))));
}

/* The stats: [B,H,T] for whole rows, [token, head] under packed documents. */
static tensor stats_layout(fe::graph::Graph &g, const attention_cudnn_shape &s, tensor t) {
  const int64_t H = s.H, T = s.T;
  t->set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT).set_dim({batch(s), H, T, 1});
  if (s.seqs > 0) t->set_stride({T * H, 1, H, 1});
  else t->set_stride({H * T, T, 1, 1});
  return with_offsets(g, s, t);
}

/* Packed documents: the padding mask over the table's lengths (q and kv alike). */
template <class A> static void mask_lengths(fe::graph::Graph &g, const attention_cudnn_shape &s,
                                            A &opt) {
  if (s.seqs <= 0) return;
  opt.set_padding_mask(true)
      .set_seq_len_q(int_column(g, "seq_len_q", UID_SEQ_LEN_Q, s.seqs))
      .set_seq_len_kv(int_column(g, "seq_len_kv", UID_SEQ_LEN_KV, s.seqs));
}

static std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

static std::shared_ptr<fe::graph::Graph> forward_graph(const attention_cudnn_shape &s) {
  const int64_t ld = (int64_t)(s.H + 2 * s.KVH) * s.hd, ldo = (int64_t)s.H * s.hd;
  auto g = new_graph();
  auto q = input(*g, "q", UID_Q, s.H, s, ld), k = input(*g, "k", UID_K, s.KVH, s, ld);
  auto v = input(*g, "v", UID_V, s.KVH, s, ld);
  auto opt = fe::graph::SDPA_attributes()
                 .set_name("attention_forward")
                 .set_generate_stats(true)
                 .set_causal_mask(true)
                 .set_attn_scale(s.scale);
  if (s.window > 0) opt.set_diagonal_band_left_bound(s.window); /* keys s > t - window */
  mask_lengths(*g, s, opt);
  auto [o, stats] = g->sdpa(q, k, v, opt);
  o->set_output(true).set_uid(UID_O).set_dim({batch(s), s.H, s.T, s.hd});
  o->set_stride(strides(s, ldo));
  with_offsets(*g, s, o);
  stats->set_output(true);
  stats_layout(*g, s, stats);
  return g;
}

static std::shared_ptr<fe::graph::Graph> backward_graph(const attention_cudnn_shape &s) {
  const int64_t ld = (int64_t)(s.H + 2 * s.KVH) * s.hd, ldo = (int64_t)s.H * s.hd;
  auto g = new_graph();
  auto q = input(*g, "q", UID_Q, s.H, s, ld), k = input(*g, "k", UID_K, s.KVH, s, ld);
  auto v = input(*g, "v", UID_V, s.KVH, s, ld), o = input(*g, "o", UID_O, s.H, s, ldo);
  auto dout = input(*g, "dout", UID_DO, s.H, s, ldo);
  auto stats = stats_layout(*g, s, g->tensor(fe::graph::Tensor_attributes().set_name("stats")));
  auto opt = fe::graph::SDPA_backward_attributes()
                 .set_name("attention_backward")
                 .set_causal_mask(true)
                 .set_deterministic_algorithm(true)
                 .set_attn_scale(s.scale);
  if (s.window > 0) opt.set_diagonal_band_left_bound(s.window);
  mask_lengths(*g, s, opt);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opt);
  const int64_t uids[3] = {UID_DQ, UID_DK, UID_DV}, heads[3] = {s.H, s.KVH, s.KVH};
  tensor grads[3] = {dq, dk, dv};
  for (int i = 0; i < 3; i++) {
    grads[i]->set_output(true).set_uid(uids[i]).set_dim({batch(s), heads[i], s.T, s.hd});
    grads[i]->set_stride(strides(s, ld));
    with_offsets(*g, s, grads[i]);
  }
  return g;
}

/* validate .. build_plans; false with the failing step and cuDNN's words in why. */
static bool build(fe::graph::Graph &g, const char *which, char *why, size_t whysz) {
  fe::error_t e = g.validate();
  const char *at = "validate";
  if (e.is_good()) at = "build_operation_graph", e = g.build_operation_graph(dnn);
  if (e.is_good()) at = "create_execution_plans", e = g.create_execution_plans({fe::HeurMode_t::A});
  if (e.is_good()) at = "check_support", e = g.check_support();
  if (e.is_good()) at = "build_plans", e = g.build_plans();
  if (!e.is_good()) snprintf(why, whysz, "cuDNN %s %s: %s", which, at, e.err_msg.c_str());
  return e.is_good();
}

extern "C" attention_cudnn_plan *attention_cudnn_plan_build(gpu_ctx *g,
                                                            const attention_cudnn_shape *s,
                                                            char *why, size_t whysz) {
  (void)g;
  cudnnStatus_t made = dnn ? CUDNN_STATUS_SUCCESS : cudnnCreate(&dnn);
  if (made != CUDNN_STATUS_SUCCESS) { /* e.g. its libraries absent here: no cuDNN, no run */
    snprintf(why, whysz, "cudnnCreate: %s", cudnnGetErrorString(made));
    dnn = NULL;
    return NULL;
  }
  auto p = new attention_cudnn_plan{*s, forward_graph(*s), backward_graph(*s), 0};
  if (!build(*p->fwd, "forward", why, whysz) || !build(*p->bwd, "backward", why, whysz)) {
    delete p;
    return NULL;
  }
  p->workspace = (size_t)std::max(p->fwd->get_workspace_size(), p->bwd->get_workspace_size());
  return p;
}

extern "C" size_t attention_cudnn_plan_workspace(const attention_cudnn_plan *p) {
  return p->workspace;
}

extern "C" void attention_cudnn_plan_free(attention_cudnn_plan *p) { delete p; }

/* Element offsets of k and v in a qkv row. */
static int64_t k_at(const attention_cudnn_shape &s) { return (int64_t)s.H * s.hd; }
static int64_t v_at(const attention_cudnn_shape &s) { return (int64_t)(s.H + s.KVH) * s.hd; }

using variant_pack = std::unordered_map<int64_t, void *>;

/* Packed documents: the ragged table's arrays into pack, each tensor's offsets where its layout
 * says (attention_cudnn.h). */
static void pack_ragged(variant_pack &pack, const attention_cudnn_shape &s, const int32_t *table) {
  if (s.seqs <= 0) return;
  if (!table) pt_fatal("attention_cudnn: a packed-documents plan needs its ragged table");
  const int64_t stride = attention_cudnn_ragged_stride(s.seqs);
  int32_t *t = (int32_t *)table, *off_qkv = t + stride, *off_o = t + 2 * stride;
  pack[UID_SEQ_LEN_Q] = t, pack[UID_SEQ_LEN_KV] = t;
  for (int64_t uid : {UID_Q, UID_K, UID_V, UID_DQ, UID_DK, UID_DV})
    if (pack.count(uid)) pack[uid + UID_OFFSET] = off_qkv;
  for (int64_t uid : {UID_O, UID_DO})
    if (pack.count(uid)) pack[uid + UID_OFFSET] = off_o;
  pack[UID_STATS + UID_OFFSET] = t + 3 * stride;
}

extern "C" void attention_cudnn_forward(gpu_ctx *g, const attention_cudnn_plan *p,
                                        void *workspace, uint16_t *o, float *lse,
                                        const uint16_t *qkv, const int32_t *ragged) {
  const attention_cudnn_shape &s = p->s;
  variant_pack pack = {
      {UID_Q, (void *)qkv}, {UID_K, (void *)(qkv + k_at(s))}, {UID_V, (void *)(qkv + v_at(s))},
      {UID_O, o}, {UID_STATS, lse}};
  pack_ragged(pack, s, ragged);
  PT_CHECK_CUDNN(cudnnSetStream(dnn, g->stream));
  PT_CHECK_CUDNN_FE(p->fwd->execute(dnn, pack, workspace));
}

extern "C" void attention_cudnn_backward(gpu_ctx *g, const attention_cudnn_plan *p,
                                         void *workspace, uint16_t *dqkv, const uint16_t *dout,
                                         const uint16_t *qkv, const uint16_t *o,
                                         const float *lse, const int32_t *ragged) {
  const attention_cudnn_shape &s = p->s;
  variant_pack pack = {
      {UID_Q, (void *)qkv},   {UID_K, (void *)(qkv + k_at(s))}, {UID_V, (void *)(qkv + v_at(s))},
      {UID_O, (void *)o},     {UID_DO, (void *)dout},           {UID_STATS, (void *)lse},
      {UID_DQ, dqkv},         {UID_DK, dqkv + k_at(s)},         {UID_DV, dqkv + v_at(s)}};
  pack_ragged(pack, s, ragged);
  PT_CHECK_CUDNN(cudnnSetStream(dnn, g->stream));
  PT_CHECK_CUDNN_FE(p->bwd->execute(dnn, pack, workspace));
}
