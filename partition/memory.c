#include "partition/memory.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "model/optimizer.h"

static int64_t tied_duplicate_bytes(const pt_model *m, int first, int last) {
  int64_t dup = 0;
  for (int li = first; li < last; li++) {
    const pt_layer *L = &m->layers[li];
    if (!L->tie[0]) continue;
    for (int j = first; j < li; j++) {
      if (strcmp(m->layers[j].tie, L->tie) != 0) continue;
      for (int p = 0; p < L->n_params; p++)
        if (strcmp(L->params[p].name, "weight") == 0)
          dup += 4 * ((L->params[p].numel + 15) & ~(int64_t)15);
      break;
    }
  }
  return dup;
}

static int64_t param_bytes(const pt_model *m, int first, int last) {
  int64_t b = 0;
  for (int li = first; li < last; li++)
    for (int p = 0; p < m->layers[li].n_params; p++)
      b += 4 * ((m->layers[li].params[p].numel + 15) & ~(int64_t)15);
  return b - tied_duplicate_bytes(m, first, last);
}

typedef struct {
  int B, T, n, ckpt;
} shape_ctx;

static int64_t out_b(const pt_model *m, const shape_ctx *c, int li) {
  return 4 * (int64_t)c->B * c->T * m->layers[li].out_dim;
}

/* The kernel table whose sizes the stage will have (saved areas and scratch depend on it, e.g.
 * the attention's): the model's device once allocated, else the spec's device kind's. */
static const pt_kernels *table_of(const pt_model *m) {
  return m->dev ? m->dev->k : device_kernels_for(m->spec->pipeline.device);
}

static int64_t saved_b(const pt_model *m, const shape_ctx *c, int li) {
  return (int64_t)layer_saved_bytes(&m->layers[li], table_of(m), c->B, c->T);
}

/* train.precision bf16: the stage keeps activations packed (engine/stage_store.h). */
static int packed(const pt_model *m) {
  return m->spec && m->spec->train.precision == SPEC_PRECISION_BF16;
}

/* What a slot keeps of layer li's output and (without checkpointing) saved area: float32, or
 * packed (the output as bf16, the parts forward writes at rest). */
static int64_t kept_out_b(const pt_model *m, const shape_ctx *c, int li) {
  return packed(m) ? out_b(m, c, li) / 2 : out_b(m, c, li);
}

static int64_t kept_saved_b(const pt_model *m, const shape_ctx *c, int li) {
  if (!packed(m)) return saved_b(m, c, li);
  return (int64_t)layer_saved_rest_bytes(&m->layers[li], table_of(m), c->B, c->T, 0);
}

/* Same rule as the engine: with checkpointing, only segment ends and the last layer are kept. */
static int kept(const shape_ctx *c, int local) {
  return c->ckpt == 0 || (local + 1) % c->ckpt == 0 || local == c->n - 1;
}

static int target_cols(const pt_model *m) { return m->input_tokens ? 1 : m->spec->data.targets; }

static int64_t input_bytes(const pt_model *m, const shape_ctx *c, int first) {
  const pt_layer *L = &m->layers[first];
  return L->in_tokens ? 4 * (int64_t)c->B * c->T : 4 * (int64_t)c->B * c->T * L->in_dim;
}

/* train.precision bf16: the packed bf16 messages to and from the neighbour stages, two of half
 * a float buffer each way (engine/pipeline.h's wire buffers). */
static int64_t wire_slot_bytes(const pt_model *m, const shape_ctx *c, int first, int last) {
  if (!m->spec || m->spec->train.precision != SPEC_PRECISION_BF16) return 0;
  int64_t b = 0;
  if (last < m->n_layers) b += out_b(m, c, last - 1);
  if (first > 0) b += 4 * (int64_t)c->B * c->T * m->layers[first].in_dim;
  return b;
}

/* Buffers the pipeline engine keeps per micro-batch in flight beside the layers' own: the
 * received output gradient (all but the last stage), the input gradient to send (all but the
 * first) and the targets (last stage). */
static int64_t engine_slot_bytes(const pt_model *m, const shape_ctx *c, int first, int last) {
  int64_t b = 0;
  if (last < m->n_layers) b += out_b(m, c, last - 1);
  if (first > 0) b += 4 * (int64_t)c->B * c->T * m->layers[first].in_dim;
  if (last == m->n_layers) b += 4 * (int64_t)c->B * c->T * target_cols(m);
  return b + wire_slot_bytes(m, c, first, last);
}

/* The engine's buffers besides the stage's, for all in-flight micro-batches: the slot buffers
 * above and where data_micro_batch writes the half of a sample an end stage does not use. The
 * loss gradient takes none: it is written over the last stage's output (stage_loss_gradient). */
static int64_t engine_bytes(const pt_model *m, const shape_ctx *c, int first, int last,
                            int in_flight) {
  int64_t b = in_flight * engine_slot_bytes(m, c, first, last), bt4 = 4 * (int64_t)c->B * c->T;
  if (first > 0 && last == m->n_layers) b += bt4 * (m->input_dim + 1);
  if (first == 0 && last < m->n_layers) b += bt4 * target_cols(m);
  return b;
}

static int64_t per_slot_bytes(const pt_model *m, const shape_ctx *c, int first, int last) {
  int64_t b = input_bytes(m, c, first) + engine_slot_bytes(m, c, first, last);
  for (int j = 0; j < c->n; j++) {
    if (kept(c, j)) b += kept_out_b(m, c, first + j);
    if (c->ckpt == 0) b += kept_saved_b(m, c, first + j);
  }
  return b;
}

static int64_t scratch_b(const pt_model *m, const shape_ctx *c, int li) {
  return (int64_t)layer_scratch_bytes(&m->layers[li], table_of(m), c->B, c->T);
}

/* train.precision tf32/bf16: the rounded operand copies of the largest product, bounded from
 * the 2-d parameters (a product's operand widths are its weight's dimensions). The CPU tables
 * (kernels/cpu/kernels_cpu_precision.c) keep the weight and PT_PRECISION_BLOCK_ROWS rows of
 * each activation operand as floats (bf16 through oneDNN, kernels/cpu/kernels_cpu_bf16.c: the
 * same as bf16, with oneDNN's working memory in the half left over); the GPU's bf16 products
 * (ops_linear.cu) keep both operands whole, as bf16: B*T rows of the wider side each (the
 * logits' layer: of its input's, logits_read_at_rest; no embedding table, whose rows are
 * gathered), or a weight where the model keeps no bf16 weight copy (weight_copy_halves). GPU
 * tf32 needs none. Which of the two is the device kind's precision_in_gemm (device.h). Per
 * process, whatever the stage count: bounded here by the range's parameters. */
static int weight_copy_halves(const pt_model *m);

/* The model's last layer whose loss gradient the GPU's bf16 loss writes at rest, read there by
 * its products (layers/layer.h dout_read_at_rest; kernels.h loss_acc dy16), and whose logits
 * are read there too: only its input, B*T rows of in_dim, is converted, not the B*T x
 * vocabulary of the logits' side. */
static int logits_read_at_rest(const pt_model *m, int li) {
  const pt_layer *L = &m->layers[li];
  return li == m->n_layers - 1 && L->type->dout_read_at_rest && L->type->dout_read_at_rest(L);
}

/* The device kind's products take the precision themselves (device.h precision_in_gemm): the
 * GPU. */
static int precision_in_gemm(const pt_model *m) {
  return m->spec && device_kind(m->spec->pipeline.device)->is.precision_in_gemm;
}

/* The logits of layer li on a GPU under bf16: written at rest by the head's product and read and
 * overwritten there by the loss, so no float of their working buffer is written (the engine's
 * twin: engine/stage_store.c logits_at_rest_only). */
static int logits_floats_unwritten(const pt_model *m, int li) {
  const pt_layer *L = &m->layers[li];
  return precision_in_gemm(m) && logits_read_at_rest(m, li) && L->type->out_by_product &&
         L->type->out_by_product(L);
}

static int64_t precision_scratch_bytes(const pt_model *m, const shape_ctx *c, int first,
                                       int last) {
  spec_precision p = m->spec ? m->spec->train.precision : SPEC_PRECISION_FP32;
  int in_gemm = precision_in_gemm(m);
  if (p == SPEC_PRECISION_FP32 || (in_gemm && p == SPEC_PRECISION_TF32)) return 0;
  int64_t most = 0, BT = (int64_t)c->B * c->T;
  int64_t rows = BT < PT_PRECISION_BLOCK_ROWS ? BT : PT_PRECISION_BLOCK_ROWS;
  for (int li = first; li < last; li++) {
    const pt_layer *L = &m->layers[li];
    if (in_gemm && L->in_tokens) continue; /* its rows gathered and scattered: no product */
    for (int q = 0; q < L->n_params; q++) {
      const pt_param_desc *d = &L->params[q];
      if (d->ndim != 2) continue;
      int64_t wide = d->shape[0] > d->shape[1] ? d->shape[0] : d->shape[1], b;
      if (in_gemm && logits_read_at_rest(m, li)) wide = L->in_dim;
      int64_t weight = weight_copy_halves(m) ? 0 : d->numel; /* read from the copy */
      if (in_gemm) b = 2 * 2 * (weight > BT * wide ? weight : BT * wide);
      else b = 4 * (d->numel + rows * (d->shape[0] + d->shape[1]));
      if (b > most) most = b;
    }
  }
  return most;
}

/* Packed storage's float32 working buffers: a kept output of each parity (of the index in the
 * stage) and, without checkpointing, the largest saved area. Not the logits where the GPU's
 * head writes them at rest and its loss reads and overwrites them there (engine/stage_store.c
 * logits_at_rest_only, logits_floats_unwritten): no float of theirs is written, and the device
 * commits none. */
static int64_t packed_work_bytes(const pt_model *m, const shape_ctx *c, int first, int last) {
  if (!packed(m)) return 0;
  int64_t wk[2] = {0, 0}, ws = 0;
  for (int li = first; li < last; li++) {
    int j = li - first;
    if (kept(c, j) && !logits_floats_unwritten(m, li) && out_b(m, c, li) > wk[j & 1])
      wk[j & 1] = out_b(m, c, li);
    if (c->ckpt == 0 && saved_b(m, c, li) > ws) ws = saved_b(m, c, li);
  }
  return wk[0] + wk[1] + ws;
}

/* The stage's two input-gradient buffers (engine/stage.c alloc_workspace): any layer's input,
 * or the received output gradient of a stage that does not end the model. */
static int64_t grad_buffer_bytes(const pt_model *m, const shape_ctx *c, int first, int last) {
  int64_t g = 0;
  for (int li = first; li < last; li++)
    if (4 * (int64_t)c->B * c->T * m->layers[li].in_dim > g)
      g = 4 * (int64_t)c->B * c->T * m->layers[li].in_dim;
  if (last < m->n_layers && out_b(m, c, last - 1) > g) g = out_b(m, c, last - 1);
  return g;
}

static int64_t workspace_bytes(const pt_model *m, const shape_ctx *c, int first, int last) {
  int64_t max_scratch = 0, ws = 0;
  for (int li = first; li < last; li++)
    if (scratch_b(m, c, li) > max_scratch) max_scratch = scratch_b(m, c, li);
  ws = max_scratch + 2 * grad_buffer_bytes(m, c, first, last);
  for (int j = 0; c->ckpt && j < c->ckpt; j++) {
    int64_t o = 0, s = 0;
    for (int local = j; local < c->n; local += c->ckpt) {
      if (!kept(c, local) && out_b(m, c, first + local) > o) o = out_b(m, c, first + local);
      if (saved_b(m, c, first + local) > s) s = saved_b(m, c, first + local);
    }
    ws += o + s;
  }
  return ws + engine_bytes(m, c, first, last, 1) - engine_slot_bytes(m, c, first, last) +
         precision_scratch_bytes(m, c, first, last) + packed_work_bytes(m, c, first, last);
}

static shape_ctx shape_of(const pt_model *m, int first, int last) {
  const pt_spec *s = m->spec;
  shape_ctx c = {.B = (int)s->train.micro_batch_size,
                 .T = m->input_tokens ? (int)s->seq_len : 1,
                 .n = last - first,
                 .ckpt = (int)s->train.activation_checkpoint_interval};
  if (c.ckpt > c.n) c.ckpt = c.n; /* a short stage is one segment, as in the engine */
  return c;
}

/* The bf16 weight copy's bytes per parameter byte, times 2: 1 (half) or 0. Once allocated, the
 * model says; before, the device kind the spec names. */
static int weight_copy_halves(const pt_model *m) {
  if (m->dev) return m->params_bf16 != NULL;
  return device_kind_weight_copy_used(m->spec->pipeline.device, m->spec->train.precision);
}

static int optimizer_copies(const pt_model *m) {
  return m->spec->train.optimizer == SPEC_OPTIMIZER_SGD ? 1 : 2;
}

/* Replicas sharing a stage's optimizer state (pipeline.shard_optimizer), else 1. */
static int optimizer_shards(const pt_model *m) {
  const spec_pipeline *p = &m->spec->pipeline;
  return p->shard_optimizer && p->data_parallel > 1 ? (int)p->data_parallel : 1;
}

/* The optimizer state one replica keeps for params bytes of parameters: all of it, or sharded
 * the largest range optimizer_shard_end cuts (what the engine allocates). */
static int64_t optimizer_bytes(const pt_model *m, int64_t params) {
  return optimizer_copies(m) * 4 * optimizer_shard_max(params / 4, optimizer_shards(m));
}

int64_t memory_engine_bytes(const pt_model *m, int first, int last, int in_flight) {
  shape_ctx c = shape_of(m, first, last);
  return engine_bytes(m, &c, first, last, in_flight);
}

void memory_estimate_stage(const pt_model *m, int first, int last, int in_flight,
                           pt_stage_memory *out) {
  shape_ctx c = shape_of(m, first, last);
  memset(out, 0, sizeof *out);
  out->params = param_bytes(m, first, last);
  /* a tied copy held twice by one stage shares the weight but keeps its own gradient */
  out->grads = out->params + tied_duplicate_bytes(m, first, last);
  out->optimizer = optimizer_bytes(m, out->params);
  out->weight_copy = weight_copy_halves(m) * out->params / 2;
  out->in_flight = in_flight;
  out->activations = in_flight * per_slot_bytes(m, &c, first, last);
  out->workspace = workspace_bytes(m, &c, first, last);
  out->total = out->params + out->grads + out->optimizer + out->weight_copy + out->activations +
               out->workspace;
}

/* Layer li's stored and borrowed parameter bytes under model_alloc_ranges' rule: a tied weight
 * that an earlier layer of the rank's ranges shares is borrowed, everything else stored. */
static void layer_storage(const pt_model *m, const pt_range *r, int n, int li, int64_t *stored,
                          int64_t *borrowed) {
  const pt_layer *L = &m->layers[li];
  int held = 0;
  for (int i = 0; i < n && L->tie[0]; i++)
    for (int j = r[i].first; j < r[i].last && j < li; j++)
      held |= !strcmp(m->layers[j].tie, L->tie);
  for (int p = 0; p < L->n_params; p++) {
    int64_t b = 4 * ((L->params[p].numel + 15) & ~(int64_t)15);
    *(held && p == model_tied_param(L) ? borrowed : stored) += b;
  }
}

void memory_estimate_rank(const pt_model *m, const pt_range *ranges,
                          const pt_stage_memory *chunk, const int *local_prev, int n,
                          pt_stage_memory *out) {
  if (n == 1 && !local_prev[0]) {
    *out = chunk[0];
    return;
  }
  int64_t stored = 0, borrowed = 0;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < n; i++) {
    int a = ranges[i].first, b = ranges[i].last;
    shape_ctx sh = shape_of(m, a, b);
    int64_t din = local_prev[i] ? 4 * (int64_t)sh.B * sh.T * m->layers[a].in_dim : 0;
    out->activations += chunk[i].activations - chunk[i].in_flight * din;
    out->workspace += chunk[i].workspace;
    out->stash += chunk[i].stash;
    out->activations_host += chunk[i].activations_host;
    out->in_flight += chunk[i].in_flight;
    out->w_pending += chunk[i].w_pending;
    for (int li = a; li < b; li++) layer_storage(m, ranges, n, li, &stored, &borrowed);
  }
  out->params = stored;
  out->grads = stored + borrowed;
  out->optimizer = optimizer_bytes(m, stored);
  out->weight_copy = weight_copy_halves(m) * stored / 2;
  out->total = out->params + out->grads + out->optimizer + out->weight_copy + out->activations +
               out->workspace;
}

/* engine/stage.c's dout sets: one output-sized buffer per layer with parameters, per set.
 * Packed (engine/stage_store.c): the dout as bf16 (float32 for the loss gradient, on the model's
 * last layer) and the saved parts only backward_input writes, each rounded up to 64 bytes. */
int64_t memory_stash_bytes(const pt_model *m, int first, int last, int w_pending) {
  shape_ctx c = shape_of(m, first, last);
  int64_t set = 0;
  for (int li = first; li < last && c.ckpt == 0; li++) {
    if (m->layers[li].n_params == 0) continue;
    if (!packed(m)) {
      set += out_b(m, &c, li);
      continue;
    }
    int64_t dout = li == m->n_layers - 1 ? out_b(m, &c, li) : out_b(m, &c, li) / 2;
    set += ((dout + 63) & ~(int64_t)63) +
           (int64_t)layer_saved_rest_bytes(&m->layers[li], table_of(m), c.B, c.T, 1);
  }
  return w_pending * set;
}

void memory_add_stash(const pt_model *m, int first, int last, int w_pending,
                      pt_stage_memory *out) {
  out->w_pending = w_pending;
  out->stash = memory_stash_bytes(m, first, last, w_pending);
  out->activations += out->stash; /* per micro-batch like the slots: one column in --plan */
  out->total += out->stash;
}

int64_t memory_offload_bytes(const pt_model *m, int first, int last, int kind) {
  shape_ctx c = shape_of(m, first, last);
  int64_t b = 0;
  for (int li = first; li < last; li++) {
    int64_t x = kind == 0 ? (li < last - 1 && kept(&c, li - first) ? kept_out_b(m, &c, li) : 0)
                          : (c.ckpt == 0 ? kept_saved_b(m, &c, li) : 0);
    b += (x + 63) & ~(int64_t)63;
  }
  return b;
}

void memory_add_offload(const pt_model *m, int first, int last, int kind, int frames, int hosts,
                        pt_stage_memory *out) {
  int64_t b = memory_offload_bytes(m, first, last, kind);
  out->activations -= (int64_t)(out->in_flight - frames) * b;
  out->total -= (int64_t)(out->in_flight - frames) * b;
  out->activations_host += (int64_t)hosts * b;
}

int memory_uses_nccl(const pt_spec *s) {
  return s->comm_backend != SPEC_COMM_MPI && !device_kind(s->pipeline.device)->is.host_addressable;
}

/* comm's bound: the data-parallel scratch as all the range's gradients, a tie scratch for every
 * tied layer in it, and as peers two pipeline neighbours, two in the data-parallel ring and
 * every other stage for each tied layer: sums over the range or constants, never growing when
 * it shrinks (partition/plan_comm.c has the exact figure). */
static int64_t comm_bound(const pt_model *m, int n_stages, int first, int last, int64_t sum_p) {
  const pt_spec *s = m->spec;
  if (!memory_uses_nccl(s)) return 0;
  int dp = s->pipeline.data_parallel != 1, shards = optimizer_shards(m);
  int peers = (n_stages > 1 ? 2 : 0) + (!dp ? 0 : shards > 1 ? shards - 1 : 2); /* sharded: all */
  int64_t scratch = dp ? sum_p : 0;
  for (int li = first; li < last; li++) {
    const pt_layer *L = &m->layers[li];
    int t = L->tie[0] ? model_tied_param(L) : -1;
    if (t < 0 || n_stages < 2) continue;
    scratch += 4 * ((L->params[t].numel + 15) & ~(int64_t)15);
    peers += n_stages - 1;
  }
  return scratch + peers * memory_nccl_peer_bytes();
}

/* Every term of the estimate replaced by one that cannot grow when the range shrinks at a fixed
 * stage index: maxima over the range instead of the values at its ends, sums without the tie
 * discount, ceil(n / k) times the largest output for the kept checkpoint outputs. Which buffers
 * exist depends only on the stage index (stage 0 always starts at layer 0, the last stage always
 * ends at the last layer), so the bound is tight where no checkpointing is involved. */
int64_t memory_bound_stage(const pt_model *m, int n_stages, int stage, int first, int last,
                           int in_flight) {
  shape_ctx c = shape_of(m, first, last);
  int64_t sum_p = 0, max_out = 0, max_in = 0, max_saved = 0, max_sc = 0;
  int64_t sum_kept = 0; /* what slots keep of the outputs and saved areas without checkpointing */
  for (int li = first; li < last; li++) {
    const pt_layer *L = &m->layers[li];
    for (int p = 0; p < L->n_params; p++) sum_p += 4 * ((L->params[p].numel + 15) & ~(int64_t)15);
    sum_kept += kept_out_b(m, &c, li) + kept_saved_b(m, &c, li);
    if (out_b(m, &c, li) > max_out) max_out = out_b(m, &c, li);
    if (4 * (int64_t)c.B * c.T * L->in_dim > max_in) max_in = 4 * (int64_t)c.B * c.T * L->in_dim;
    if (saved_b(m, &c, li) > max_saved) max_saved = saved_b(m, &c, li);
    if (scratch_b(m, &c, li) > max_sc) max_sc = scratch_b(m, &c, li);
  }
  int is_first = stage == 0, is_last = stage == n_stages - 1;
  int64_t bt4 = 4 * (int64_t)c.B * c.T;
  int64_t slot = is_first ? input_bytes(m, &c, 0) : 2 * max_in; /* input, and its gradient */
  slot += (is_last ? 0 : max_out) + (is_last ? bt4 * target_cols(m) : 0);
  int64_t max_kept = packed(m) ? max_out / 2 : max_out;
  slot += c.ckpt ? (int64_t)((c.n + c.ckpt - 1) / c.ckpt) * max_kept : sum_kept;
  int64_t ws = max_sc + 2 * (!is_last && max_out > max_in ? max_out : max_in); /* gradients */
  if (packed(m)) { /* packed_work_bytes, the wire's packed messages and rounded operands */
    ws += 2 * max_out + (c.ckpt ? 0 : max_saved) + precision_scratch_bytes(m, &c, first, last);
    slot += (is_last ? 0 : max_out / 2) + (is_first ? 0 : max_in / 2);
  }
  if (c.ckpt) ws += (int64_t)c.ckpt * (max_out + max_saved);
  if (is_last && !is_first) ws += bt4 * (m->input_dim + 1);
  if (is_first && !is_last) ws += bt4 * target_cols(m);
  int64_t opt = optimizer_copies(m) * 4 * (sum_p / 4 / optimizer_shards(m) + 16); /* >= exact */
  if (optimizer_shards(m) == 1) opt = optimizer_copies(m) * sum_p;
  return 2 * sum_p + opt + in_flight * slot + ws +
         comm_bound(m, n_stages, first, last, sum_p);
}

int64_t memory_parse_size(const char *text) {
  static const struct { const char *unit; double scale; } units[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0},      {"", 1.0}};
  char *end;
  double v = strtod(text, &end);
  if (end == text || !isfinite(v) || v < 0) return -1;
  while (*end == ' ') end++;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].unit) != 0) continue;
    double bytes = v * units[i].scale;
    return bytes < 9.2e18 ? (int64_t)bytes : -1;
  }
  return -1;
}

void memory_format_size(int64_t bytes, char *out, size_t outsz) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int i = 0;
  while (v >= 1024.0 && i < 4) v /= 1024.0, i++;
  snprintf(out, outsz, i ? "%.2f %s" : "%.0f %s", v, u[i]);
}

int64_t memory_machine_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}

int memory_check_device(int64_t need, int64_t free_b, int64_t total, int sharers,
                        const char *what, char *err, size_t errsz) {
  if (need <= free_b) return 0;
  char n[32], f[32], t[32], held[128] = "";
  memory_format_size(need, n, sizeof n);
  memory_format_size(free_b, f, sizeof f);
  memory_format_size(total, t, sizeof t);
  if (total - free_b > total / 10) {
    char h[32];
    memory_format_size(total - free_b, h, sizeof h);
    snprintf(held, sizeof held, " (%s held by other processes: nvidia-smi lists them)", h);
  }
  int many = sharers > 1;
  snprintf(err, errsz, "%s need%s %s%s (estimated before allocating) but %s GPU has %s free of "
           "%s%s; %s, a smaller micro_batch_size or activation checkpointing (pipe_train --plan "
           "shows the estimate)", what, many ? "" : "s", n, many ? " together" : "",
           many ? "their" : "its", f, t, held,
           many ? "give them a GPU each (pipeline.devices)" : "use more stages");
  return -1;
}

int memory_check_fits(int64_t need, int procs, const char *what, char *err, size_t errsz) {
  int64_t machine = memory_machine_bytes();
  if (machine <= 0 || need <= machine / (procs > 0 ? procs : 1)) return 0;
  char n[32], m[32], share[32];
  memory_format_size(need, n, sizeof n);
  memory_format_size(machine, m, sizeof m);
  memory_format_size(machine / (procs > 0 ? procs : 1), share, sizeof share);
  snprintf(err, errsz, "%s needs %s (estimated before allocating) but this machine has %s (%s "
           "for each of its %d processes); use more stages, a smaller micro_batch_size or "
           "activation checkpointing (pipe_train --plan shows the estimate)", what, n, m, share,
           procs);
  return -1;
}
