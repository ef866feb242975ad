/* checkpoint/hf.h: Hugging Face transformers model directories in and out.
 *
 * A transformers directory is config.json plus model.safetensors (or shards listed by
 * model.safetensors.index.json). Supported: GPT2LMHeadModel (pipetrain's GPT-2 layers) and
 * the Llama family (LlamaForCausalLM with llama_block's optional mlp_bias, MistralForCausalLM
 * with its window, Qwen2ForCausalLM with its qkv_bias, Qwen3ForCausalLM with its qk_norm,
 * Phi3ForCausalLM with fused q|k|v and gate|up tensors, Gemma2ForCausalLM with its Gemma
 * options, Gemma3ForCausalLM with those, q/k norms and a rope per layer type, and the language
 * model of Gemma3ForConditionalGeneration, import only) as llama_block layers; docs/checkpoint.md's family table says what each takes.
 * Everything the layers cannot represent is refused with one line naming the file and the
 * config key or tensor. The name mapping per architecture is data
 * (hf_arch.c); import and export walk the same table.
 *
 * Layer order of a converted spec (what export accepts, too):
 *   GPT-2:  embedding, pos_embedding, transformer_block x n, layernorm, lm_head
 *   Llama:  embedding, llama_block x n, rmsnorm, lm_head
 * with the head tied to the embedding (tie: wte) when the model ties them.
 */
#ifndef PT_HF_H
#define PT_HF_H

#include <stddef.h>
#include <stdint.h>

#include "layers/rope_freqs.h"
#include "model/model.h"

typedef enum { HF_GPT2, HF_LLAMA } hf_family;

#define HF_MAX_GEMMA2_LAYERS 1024 /* layer_types entries a Gemma 2 config may have */

/* Where a mapped tensor lives in pipetrain's layer list. */
typedef enum { HF_ROLE_EMBED, HF_ROLE_POS, HF_ROLE_BLOCK, HF_ROLE_NORM, HF_ROLE_HEAD } hf_role;

/* One tensor: pipetrain's "<layer>.<pt>" is transformers' `hf` (%d: the block index), stored
 * transposed there when `transpose` (GPT-2's Conv1D keeps [in, out]). `optional`: a tensor of
 * a layer option (llama_block's qkv_bias, qk_norm, mlp_bias) that import and export skip where
 * the layer has no such parameter; a file's tensor of that name then stays unused, and is
 * refused. `fused` > 1: the hf tensor is that many of the layer's parameters from `pt` on,
 * stacked along dim 0 (one parameter group, adjacent in storage: Phi-3's qkv_proj, gate_up_proj). */
typedef struct {
  hf_role role;
  const char *pt, *hf;
  int transpose, optional, fused;
} hf_name;

/* Whether an architecture's blocks have a llama_block option: never, always, or as config.json's
 * key says (mlp_bias). */
typedef enum { HF_OPT_NO, HF_OPT_YES, HF_OPT_CONFIG } hf_opt;

typedef struct {
  const char *architecture; /* config.json architectures[0] */
  const char *model_type;   /* config.json model_type of an export */
  hf_family family;
  const hf_name *names;
  int n_names;
  const char *const *ignored; /* tensor-name suffixes a file may hold that carry no weights */
  hf_opt qkv_bias, qk_norm, mlp_bias; /* the llama_block options of its blocks */
  hf_opt gemma2; /* Gemma 2's block options together (norm_offset 1, post_norms, mlp_act
                    gelu_tanh) with its embedding scale, final norm offset and soft-caps */
  hf_opt window; /* one sliding_window for every block (llama_block's window); Gemma 2's
                    alternating ones are its own (gemma2) */
  int rope_per_type; /* sliding and full-attention layers each have their own rope (Gemma 3:
                        rope_parameters per layer type, or rope_local_base_freq) */
  int window_pattern; /* layer_types' default: every window_pattern-th layer full, the others
                         sliding (Gemma 3's sliding_window_pattern, 6); 0: they alternate,
                         sliding first (Gemma 2's) */
  const char *defaults; /* the text config class's defaults (JSON) for the keys a config.json
                           leaves out (Gemma3TextConfig's: Gemma 3's files give few); NULL: none */
  /* A model of which pipetrain converts the language model only (import only): its text
   * config is config.json's `text_config`, its tensors' names are the names above after
   * `prefix`, and the tensors under `skipped` (the vision tower) are left out, said in a
   * notice. NULLs elsewhere. */
  const char *text_config, *prefix;
  const char *const *skipped;
} hf_arch;

/* The registry entry for an architecture name, or NULL. */
const hf_arch *hf_arch_find(const char *architecture);
/* The names of every registered architecture, ", "-separated (for messages). */
const char *hf_arch_list(void);
/* The first registered Llama-family architecture whose options fit blocks with these
 * llama_block options (export's default), or NULL. */
const hf_arch *hf_arch_for_blocks(int qkv_bias, int qk_norm, int mlp_bias, int gemma2,
                                  int window);
/* Whether architecture a represents blocks with these options. */
int hf_arch_fits(const hf_arch *a, int qkv_bias, int qk_norm, int mlp_bias, int gemma2,
                 int window);
/* Index in the layer list of the layer holding role (block b for HF_ROLE_BLOCK). */
int hf_role_layer(hf_family f, hf_role role, int b, int n_blocks);

/* The model of a config.json, as pipetrain's layers see it. */
typedef struct {
  const hf_arch *arch;
  int64_t vocab, seq_len, dim, heads, kv_heads, layers, ffn;
  double eps, rope_theta;
  pt_rope_scaling rope; /* Llama family: the rotary type and its parameters (theta unused) */
  int qkv_bias;         /* Llama family: biases on q, k, v (Qwen2) */
  int qk_norm;          /* Llama family: per-head RMSNorm of q and k (Qwen3) */
  int mlp_bias;         /* Llama family: biases on gate, up, down (Llama's mlp_bias) */
  int64_t head_dim;     /* Llama family: dims of a head (hidden_size / heads by default) */
  int64_t window;       /* Mistral: sliding_window when shorter than seq_len (llama_block's
                           window), else 0: attention over the whole sequence */
  int tied;
  /* Gemma2ForCausalLM: llama_block's Gemma options (norm_offset 1, post_norms, mlp_act
   * gelu_tanh; embedding scale_sqrt_dim, rmsnorm weight_offset 1); the soft-caps of the
   * attention logits and of the head's (lm_head softcap), 0 for none; query_pre_attn_scalar
   * (the attention scale is its -1/2 power); sliding_window, 0 for none, on the layers whose
   * layer_types entry is sliding_attention (sliding[i] 1) */
  int gemma2;
  double attn_softcap, final_softcap, query_scalar;
  int64_t sliding_window;
  unsigned char sliding[HF_MAX_GEMMA2_LAYERS];
  /* The sliding layers' rope where the architecture has one per layer type (rope_per_type:
   * Gemma 3's local base frequency); rope_theta and rope above are the full-attention layers'.
   * Elsewhere equal to those. */
  double local_rope_theta;
  pt_rope_scaling local_rope;
} hf_config;

/* Reads DIR/config.json. seq_len: 0 for the default (GPT-2: n_positions, which its learned
 * position table needs; Llama family: max_position_embeddings capped at 2048), or a value to
 * use. 0, or -1 with one line in err naming the file and the key. */
int hf_config_read(const char *dir, int64_t seq_len, hf_config *c, char *err, size_t errsz);
/* The spec text of c's model (model, layers, loss, train defaults, a data section to fill in);
 * `source` is named in its first comment. Returns a malloc'd string. */
char *hf_spec_text(const hf_config *c, const char *source);
/* Fills every parameter of m (configured from hf_spec_text's spec, storage for all layers on the
 * host) from DIR's safetensors, F32/F16/BF16 widened to float32. Every tensor of the files must
 * be used (or be a known non-weight buffer). 0, or -1 with err naming the file and tensor. */
int hf_import_weights(const char *dir, const hf_config *c, pt_model *m, char *err, size_t errsz);
/* The same checks without reading any data or needing storage (m configured, not allocated):
 * every tensor the mapping needs present in the index and safetensors headers with the shape
 * m's layers give and a float dtype, none left over. Before allocating a model to import into. */
int hf_check_weights(const char *dir, const hf_config *c, const pt_model *m, char *err,
                     size_t errsz);

/* The config of a model m if it has one of the convertible shapes (layer order above, every
 * block alike), else -1 with err naming the layer that does not fit. */
int hf_config_from_model(const pt_model *m, hf_config *c, char *err, size_t errsz);
/* The same with the architecture named (NULL: hf_arch_for_blocks's), e.g. Phi3ForCausalLM for
 * blocks Llama's would also fit: -1 with err when it is unknown or cannot hold the blocks. */
int hf_config_from_model_as(const pt_model *m, const char *arch, hf_config *c, char *err,
                            size_t errsz);
/* Whether spec's model converts (hf_config_from_model), before a run that will export it. */
int hf_check_spec(const pt_spec *spec, char *err, size_t errsz);
/* Writes config.json (per c) to path atomically. 0 or -1 with err. */
int hf_config_write(const hf_config *c, const char *path, char *err, size_t errsz);
/* Writes DIR/config.json and DIR/model.safetensors (F32) of m (host storage for every layer),
 * loadable by transformers' AutoModelForCausalLM.from_pretrained(DIR). The files are written in
 * DIR.tmp.<pid> and renamed into DIR (created if needed); other files in DIR (a tokenizer) stay.
 * 0 or -1 with err. */
int hf_export(const pt_model *m, const char *dir, char *err, size_t errsz);
/* hf_export as architecture arch (hf_config_from_model_as; NULL: the default). */
int hf_export_as(const pt_model *m, const char *arch, const char *dir, char *err, size_t errsz);
/* hf_export of the whole model in a sequential safetensors file (checkpoint_write_sequential's
 * output, e.g. --gather's) of spec's model. 0 or -1 with err. */
int hf_export_sequential_file(const pt_spec *spec, const char *file, const char *dir, char *err,
                              size_t errsz);

#endif
