/* checkpoint/hf_arch.c: the registry of Hugging Face architectures and their name mappings. */
#include <string.h>

#include "checkpoint/hf.h"

/* GPT2LMHeadModel: Conv1D weights are [in, out], pipetrain's linear weights [out, in]. */
static const hf_name k_gpt2[] = {
    {HF_ROLE_EMBED, "weight", "transformer.wte.weight", 0, 0, 0},
    {HF_ROLE_POS, "weight", "transformer.wpe.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "ln1.weight", "transformer.h.%d.ln_1.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "ln1.bias", "transformer.h.%d.ln_1.bias", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn.qkv.weight", "transformer.h.%d.attn.c_attn.weight", 1, 0, 0},
    {HF_ROLE_BLOCK, "attn.qkv.bias", "transformer.h.%d.attn.c_attn.bias", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn.proj.weight", "transformer.h.%d.attn.c_proj.weight", 1, 0, 0},
    {HF_ROLE_BLOCK, "attn.proj.bias", "transformer.h.%d.attn.c_proj.bias", 0, 0, 0},
    {HF_ROLE_BLOCK, "ln2.weight", "transformer.h.%d.ln_2.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "ln2.bias", "transformer.h.%d.ln_2.bias", 0, 0, 0},
    {HF_ROLE_BLOCK, "mlp.fc.weight", "transformer.h.%d.mlp.c_fc.weight", 1, 0, 0},
    {HF_ROLE_BLOCK, "mlp.fc.bias", "transformer.h.%d.mlp.c_fc.bias", 0, 0, 0},
    {HF_ROLE_BLOCK, "mlp.proj.weight", "transformer.h.%d.mlp.c_proj.weight", 1, 0, 0},
    {HF_ROLE_BLOCK, "mlp.proj.bias", "transformer.h.%d.mlp.c_proj.bias", 0, 0, 0},
    {HF_ROLE_NORM, "weight", "transformer.ln_f.weight", 0, 0, 0},
    {HF_ROLE_NORM, "bias", "transformer.ln_f.bias", 0, 0, 0},
    {HF_ROLE_HEAD, "weight", "lm_head.weight", 0, 0, 0},
};
/* Causal-mask buffers older GPT-2 files carry. */
static const char *const k_gpt2_ignored[] = {".attn.bias", ".attn.masked_bias", NULL};

/* The projections the Llama family and Gemma name alike. */
#define LLAMA_ATTN_NAMES                                                                          \
  {HF_ROLE_BLOCK, "attn.q.weight", "model.layers.%d.self_attn.q_proj.weight", 0, 0, 0},           \
  {HF_ROLE_BLOCK, "attn.k.weight", "model.layers.%d.self_attn.k_proj.weight", 0, 0, 0},           \
  {HF_ROLE_BLOCK, "attn.v.weight", "model.layers.%d.self_attn.v_proj.weight", 0, 0, 0},           \
  {HF_ROLE_BLOCK, "attn.o.weight", "model.layers.%d.self_attn.o_proj.weight", 0, 0, 0}
#define LLAMA_MLP_NAMES                                                                           \
  {HF_ROLE_BLOCK, "mlp.gate.weight", "model.layers.%d.mlp.gate_proj.weight", 0, 0, 0},            \
  {HF_ROLE_BLOCK, "mlp.up.weight", "model.layers.%d.mlp.up_proj.weight", 0, 0, 0},                \
  {HF_ROLE_BLOCK, "mlp.down.weight", "model.layers.%d.mlp.down_proj.weight", 0, 0, 0}

static const hf_name k_llama[] = {
    {HF_ROLE_EMBED, "weight", "model.embed_tokens.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn_norm.weight", "model.layers.%d.input_layernorm.weight", 0, 0, 0},
    LLAMA_ATTN_NAMES,
    {HF_ROLE_BLOCK, "mlp_norm.weight", "model.layers.%d.post_attention_layernorm.weight", 0, 0, 0},
    LLAMA_MLP_NAMES,
    /* Qwen2's (llama_block's qkv_bias): skipped where the blocks have none */
    {HF_ROLE_BLOCK, "attn.q.bias", "model.layers.%d.self_attn.q_proj.bias", 0, 1, 0},
    {HF_ROLE_BLOCK, "attn.k.bias", "model.layers.%d.self_attn.k_proj.bias", 0, 1, 0},
    {HF_ROLE_BLOCK, "attn.v.bias", "model.layers.%d.self_attn.v_proj.bias", 0, 1, 0},
    /* Qwen3's (qk_norm) and Llama's mlp_bias */
    {HF_ROLE_BLOCK, "attn.q_norm.weight", "model.layers.%d.self_attn.q_norm.weight", 0, 1, 0},
    {HF_ROLE_BLOCK, "attn.k_norm.weight", "model.layers.%d.self_attn.k_norm.weight", 0, 1, 0},
    {HF_ROLE_BLOCK, "mlp.gate.bias", "model.layers.%d.mlp.gate_proj.bias", 0, 1, 0},
    {HF_ROLE_BLOCK, "mlp.up.bias", "model.layers.%d.mlp.up_proj.bias", 0, 1, 0},
    {HF_ROLE_BLOCK, "mlp.down.bias", "model.layers.%d.mlp.down_proj.bias", 0, 1, 0},
    {HF_ROLE_NORM, "weight", "model.norm.weight", 0, 0, 0},
    {HF_ROLE_HEAD, "weight", "lm_head.weight", 0, 0, 0},
};
static const char *const k_llama_ignored[] = {".rotary_emb.inv_freq", NULL};

/* Phi3ForCausalLM: Llama's layer with q|k|v and gate|up each one tensor (llama_block's groups). */
static const hf_name k_phi3[] = {
    {HF_ROLE_EMBED, "weight", "model.embed_tokens.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn_norm.weight", "model.layers.%d.input_layernorm.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn.q.weight", "model.layers.%d.self_attn.qkv_proj.weight", 0, 0, 3},
    {HF_ROLE_BLOCK, "attn.o.weight", "model.layers.%d.self_attn.o_proj.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "mlp_norm.weight", "model.layers.%d.post_attention_layernorm.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "mlp.gate.weight", "model.layers.%d.mlp.gate_up_proj.weight", 0, 0, 2},
    {HF_ROLE_BLOCK, "mlp.down.weight", "model.layers.%d.mlp.down_proj.weight", 0, 0, 0},
    {HF_ROLE_NORM, "weight", "model.norm.weight", 0, 0, 0},
    {HF_ROLE_HEAD, "weight", "lm_head.weight", 0, 0, 0},
};

/* Gemma2ForCausalLM: llama_block with post_norms. Gemma's post_attention_layernorm is the
 * norm after attention (Llama's name for the norm before the MLP, which Gemma calls
 * pre_feedforward_layernorm). */
#define GEMMA_NORM_NAMES                                                                          \
  {HF_ROLE_BLOCK, "attn_post_norm.weight", "model.layers.%d.post_attention_layernorm.weight",     \
   0, 0, 0},                                                                                      \
  {HF_ROLE_BLOCK, "mlp_norm.weight", "model.layers.%d.pre_feedforward_layernorm.weight", 0, 0,    \
   0},                                                                                            \
  LLAMA_MLP_NAMES,                                                                                \
  {HF_ROLE_BLOCK, "mlp_post_norm.weight", "model.layers.%d.post_feedforward_layernorm.weight",    \
   0, 0, 0},                                                                                      \
  {HF_ROLE_NORM, "weight", "model.norm.weight", 0, 0, 0},                                         \
  {HF_ROLE_HEAD, "weight", "lm_head.weight", 0, 0, 0}

static const hf_name k_gemma2[] = {
    {HF_ROLE_EMBED, "weight", "model.embed_tokens.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn_norm.weight", "model.layers.%d.input_layernorm.weight", 0, 0, 0},
    LLAMA_ATTN_NAMES,
    GEMMA_NORM_NAMES,
};

/* Gemma3ForCausalLM (the text model, model_type gemma3_text): Gemma 2's layer with Qwen3's
 * per-head q and k RMSNorms, (1 + w) as its other norms (llama_block's norm_offset covers them). */
static const hf_name k_gemma3[] = {
    {HF_ROLE_EMBED, "weight", "model.embed_tokens.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn_norm.weight", "model.layers.%d.input_layernorm.weight", 0, 0, 0},
    LLAMA_ATTN_NAMES,
    {HF_ROLE_BLOCK, "attn.q_norm.weight", "model.layers.%d.self_attn.q_norm.weight", 0, 0, 0},
    {HF_ROLE_BLOCK, "attn.k_norm.weight", "model.layers.%d.self_attn.k_norm.weight", 0, 0, 0},
    GEMMA_NORM_NAMES,
};


/* Gemma3TextConfig's defaults (transformers), which Gemma 3's files rely on: the 4B's
 * text_config gives neither vocab_size nor head_dim; no soft-caps (Gemma 2's default 50 and 30). */
static const char k_gemma3_defaults[] =
    "{\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216, "
    "\"num_hidden_layers\": 26, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, "
    "\"head_dim\": 256, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-06, "
    "\"sliding_window\": 4096, \"query_pre_attn_scalar\": 256, \"tie_word_embeddings\": true, "
    "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": null}";
/* Gemma3ForConditionalGeneration's image encoder and its projection into the text model */
static const char *const k_gemma3_vision[] = {"vision_tower.", "multi_modal_projector.", NULL};

#define N(a) ((int)(sizeof a / sizeof a[0]))
/* Export picks the first Llama-family entry that fits the blocks (hf_arch_for_blocks). */
static const hf_arch k_archs[] = {
    {"GPT2LMHeadModel", "gpt2", HF_GPT2, k_gpt2, N(k_gpt2), k_gpt2_ignored, 0, 0, 0, 0, 0, 0, 0,
     NULL, NULL, NULL, NULL},
    {"LlamaForCausalLM", "llama", HF_LLAMA, k_llama, N(k_llama), k_llama_ignored, HF_OPT_NO,
     HF_OPT_NO, HF_OPT_CONFIG, HF_OPT_NO, HF_OPT_NO, 0, 0, NULL, NULL, NULL, NULL},
    {"MistralForCausalLM", "mistral", HF_LLAMA, k_llama, N(k_llama), k_llama_ignored, HF_OPT_NO,
     HF_OPT_NO, HF_OPT_NO, HF_OPT_NO, HF_OPT_CONFIG, 0, 0, NULL, NULL, NULL, NULL},
    {"Qwen2ForCausalLM", "qwen2", HF_LLAMA, k_llama, N(k_llama), k_llama_ignored, HF_OPT_YES,
     HF_OPT_NO, HF_OPT_NO, HF_OPT_NO, HF_OPT_NO, 0, 0, NULL, NULL, NULL, NULL},
    {"Qwen3ForCausalLM", "qwen3", HF_LLAMA, k_llama, N(k_llama), k_llama_ignored, HF_OPT_NO,
     HF_OPT_YES, HF_OPT_NO, HF_OPT_NO, HF_OPT_NO, 0, 0, NULL, NULL, NULL, NULL},
    {"Phi3ForCausalLM", "phi3", HF_LLAMA, k_phi3, N(k_phi3), k_llama_ignored, HF_OPT_NO,
     HF_OPT_NO, HF_OPT_NO, HF_OPT_NO, HF_OPT_CONFIG, 0, 0, NULL, NULL, NULL, NULL},
    {"Gemma2ForCausalLM", "gemma2", HF_LLAMA, k_gemma2, N(k_gemma2), k_llama_ignored, HF_OPT_NO,
     HF_OPT_NO, HF_OPT_NO, HF_OPT_YES, HF_OPT_NO, 0, 0, NULL, NULL, NULL, NULL},
    {"Gemma3ForCausalLM", "gemma3_text", HF_LLAMA, k_gemma3, N(k_gemma3), k_llama_ignored,
     HF_OPT_NO, HF_OPT_YES, HF_OPT_NO, HF_OPT_YES, HF_OPT_NO, 1, 6, k_gemma3_defaults, NULL, NULL,
     NULL},
    /* after Gemma3ForCausalLM, so that export picks the text model */
    {"Gemma3ForConditionalGeneration", "gemma3", HF_LLAMA, k_gemma3, N(k_gemma3), k_llama_ignored,
     HF_OPT_NO, HF_OPT_YES, HF_OPT_NO, HF_OPT_YES, HF_OPT_NO, 1, 6, k_gemma3_defaults,
     "text_config", "language_model.", k_gemma3_vision},
};

const hf_arch *hf_arch_find(const char *architecture) {
  for (int i = 0; i < N(k_archs); i++)
    if (!strcmp(k_archs[i].architecture, architecture)) return &k_archs[i];
  return NULL;
}

const char *hf_arch_list(void) {
  return "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
         "Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
         "Gemma3ForConditionalGeneration (its language model)";
}

static int opt_fits(hf_opt o, int on) { return o == HF_OPT_CONFIG || (int)(o == HF_OPT_YES) == on; }

int hf_arch_fits(const hf_arch *a, int qkv_bias, int qk_norm, int mlp_bias, int gemma2,
                 int window) {
  return a->family == HF_LLAMA && opt_fits(a->qkv_bias, qkv_bias) &&
         opt_fits(a->qk_norm, qk_norm) && opt_fits(a->mlp_bias, mlp_bias) &&
         opt_fits(a->gemma2, gemma2) && (!window || a->window != HF_OPT_NO);
}

const hf_arch *hf_arch_for_blocks(int qkv_bias, int qk_norm, int mlp_bias, int gemma2,
                                  int window) {
  for (int i = 0; i < N(k_archs); i++)
    if (hf_arch_fits(&k_archs[i], qkv_bias, qk_norm, mlp_bias, gemma2, window))
      return &k_archs[i];
  return NULL;
}

int hf_role_layer(hf_family f, hf_role role, int b, int n_blocks) {
  int first_block = f == HF_GPT2 ? 2 : 1;
  switch (role) {
  case HF_ROLE_EMBED: return 0;
  case HF_ROLE_POS: return 1;
  case HF_ROLE_BLOCK: return first_block + b;
  case HF_ROLE_NORM: return first_block + n_blocks;
  case HF_ROLE_HEAD: return first_block + n_blocks + 1;
  }
  return -1;
}
