#!/usr/bin/env python3
"""hf_bad_input.py PIPE_CONVERT PIPE_TRAIN SPEC: what pipe_convert --from-hf / --to-hf cannot
convert is refused with exit 2 and one line naming the file and the config key or tensor.
Needs only Python's standard library (the safetensors files are written by hand here)."""
import json
import os
import struct
import subprocess
import sys
import tempfile

PIPE_CONVERT, PIPE_TRAIN, MLP_SPEC = sys.argv[1:4]
failures = []

GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 11,
        "n_positions": 8, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_inner": None,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": True}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 11,
         "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
         "num_attention_heads": 2, "num_key_value_heads": 1, "hidden_act": "silu",
         "max_position_embeddings": 8, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
         "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False}


def safetensors(path, tensors):
    """tensors: {name: (shape, float list)} as F32."""
    header, data = {}, b""
    for name, (shape, values) in tensors.items():
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def gpt2_tensors():
    """Every tensor of GPT2 above (1 block, n_embd 8), zeros."""
    shapes = {"wte.weight": [11, 8], "wpe.weight": [8, 8], "ln_f.weight": [8], "ln_f.bias": [8]}
    for k, v in {"ln_1.weight": [8], "ln_1.bias": [8], "attn.c_attn.weight": [8, 24],
                 "attn.c_attn.bias": [24], "attn.c_proj.weight": [8, 8], "attn.c_proj.bias": [8],
                 "ln_2.weight": [8], "ln_2.bias": [8], "mlp.c_fc.weight": [8, 32],
                 "mlp.c_fc.bias": [32], "mlp.c_proj.weight": [32, 8], "mlp.c_proj.bias": [8]}.items():
        shapes["h.0." + k] = v
    out = {}
    for k, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        out["transformer." + k] = (shape, [0.0] * n)
    return out


def model_dir(root, name, config, tensors=None):
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    if tensors is not None:
        safetensors(os.path.join(d, "model.safetensors"), tensors)
    return d


def expect(what, cmd, *needles):
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and all(n in lines[0] for n in needles)
    print(("ok    " if ok else "FAIL  ") + f"{what}: exit {r.returncode}: {r.stderr.strip()}")
    if not ok:
        failures.append(what)
        print(f"      expected exit 2 and one line containing {needles}")


def one_step_checkpoint(spec, examples, root, what):
    """The checkpoint (in root) of one sequential step of spec on the shipped text, or None,
    failing `what`."""
    ck = os.path.join(root, os.path.basename(spec) + ".ck")
    r = subprocess.run([PIPE_TRAIN, spec, "--sequential", "--quiet", "--set", "train.steps=1",
                        "--set", f"data.path={os.path.join(examples, 'data', 'tiny.txt')}",
                        "--save", ck], capture_output=True, text=True)
    if r.returncode == 0:
        return ck
    print(r.stdout, r.stderr)
    failures.append(f"saving {what}")
    return None


def from_hf(d, root):
    return [PIPE_CONVERT, "--from-hf", d, "--out", os.path.join(root, "ck"), "--spec-out",
            os.path.join(root, "s.yaml")]


def main():
    root = tempfile.mkdtemp(prefix="hf_bad_")
    wte = {"transformer.wte.weight": ([11, 8], [0.0] * 88)}
    d = model_dir(root, "bert", {**GPT2, "architectures": ["BertForMaskedLM"]}, wte)
    expect("unknown architecture", from_hf(d, root), f"{d}/config.json", "architectures",
           "BertForMaskedLM")
    d = model_dir(root, "rope", {**LLAMA, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    expect("rope_scaling of another type", from_hf(d, root), f"{d}/config.json", "rope_scaling",
           "dynamic")
    d = model_dir(root, "rope5", {**LLAMA, "rope_parameters": {"rope_type": "yarn", "factor": 2.0,
                                                               "mscale": 1.0}})
    expect("rope_parameters with a key llama_block lacks", from_hf(d, root), f"{d}/config.json",
           "rope_parameters", "mscale 1 is not supported")
    d = model_dir(root, "rope3", {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                            "low_freq_factor": 1.0}})
    expect("llama3 rope without high_freq_factor", from_hf(d, root), f"{d}/config.json",
           "rope_scaling", "high_freq_factor")
    d = model_dir(root, "bias", {**LLAMA, "attention_bias": True})
    expect("attention_bias true", from_hf(d, root), f"{d}/config.json", "attention_bias")
    d = model_dir(root, "act", {**LLAMA, "hidden_act": "gelu"})
    expect("hidden_act not silu", from_hf(d, root), f"{d}/config.json", "hidden_act")
    d = model_dir(root, "hd", {**LLAMA, "head_dim": 7})
    expect("odd head_dim", from_hf(d, root), f"{d}/config.json", "head_dim")
    # Mistral's window converts (llama_block's window); Qwen2's use_sliding_window does not
    d = model_dir(root, "qwen2win", {**LLAMA, "architectures": ["Qwen2ForCausalLM"],
                                     "use_sliding_window": True, "sliding_window": 4})
    expect("Qwen2 use_sliding_window", from_hf(d, root), f"{d}/config.json",
           "use_sliding_window")
    # Phi-3: what llama_block does not represent (Phi-3.5 / Phi-3-128k's longrope, partial rotary)
    PHI3 = {**LLAMA, "architectures": ["Phi3ForCausalLM"], "model_type": "phi3"}
    d = model_dir(root, "phi3_longrope", {**PHI3, "rope_scaling": {
        "type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [2.0, 2.0]}})
    expect("Phi-3 longrope", from_hf(d, root), f"{d}/config.json", "rope_scaling", "longrope")
    d = model_dir(root, "phi3_partial", {**PHI3, "partial_rotary_factor": 0.5})
    expect("Phi-3 partial_rotary_factor", from_hf(d, root), f"{d}/config.json",
           "partial_rotary_factor")
    d = model_dir(root, "phi3_partial5", {**PHI3, "rope_parameters": {
        "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75}})
    expect("Phi-3 partial_rotary_factor (transformers 5)", from_hf(d, root), f"{d}/config.json",
           "rope_parameters", "partial_rotary_factor")
    # Qwen3's attention_bias adds o's bias too; Qwen2 / Mistral have no mlp_bias
    d = model_dir(root, "qwen3_bias", {**LLAMA, "architectures": ["Qwen3ForCausalLM"],
                                       "attention_bias": True})
    expect("Qwen3 attention_bias", from_hf(d, root), f"{d}/config.json", "attention_bias")
    d = model_dir(root, "qwen2_mlp_bias", {**LLAMA, "architectures": ["Qwen2ForCausalLM"],
                                           "mlp_bias": True})
    expect("Qwen2 mlp_bias", from_hf(d, root), f"{d}/config.json", "mlp_bias")
    d = model_dir(root, "eps", {**GPT2, "layer_norm_epsilon": 1e-6})
    expect("GPT-2 layer_norm_epsilon", from_hf(d, root), f"{d}/config.json", "layer_norm_epsilon")
    d = model_dir(root, "inner", {**GPT2, "n_inner": 16})
    expect("GPT-2 n_inner", from_hf(d, root), f"{d}/config.json", "n_inner")
    d = model_dir(root, "shard", GPT2)
    safetensors(os.path.join(d, "model-00001-of-00002.safetensors"), wte)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors",
                                  "transformer.wpe.weight": "model-00002-of-00002.safetensors"}}, f)
    expect("missing shard", from_hf(d, root), f"{d}/model-00002-of-00002.safetensors")
    d = model_dir(root, "trunc", GPT2, wte)
    path = os.path.join(d, "model.safetensors")
    os.truncate(path, os.path.getsize(path) - 10)
    expect("truncated safetensors", from_hf(d, root), path)
    d = model_dir(root, "shape", GPT2, {"transformer.wte.weight": ([8, 11], [0.0] * 88)})
    expect("wrong shape", from_hf(d, root), f"{d}/model.safetensors", "transformer.wte.weight")
    d = model_dir(root, "extra", GPT2, {**gpt2_tensors(),
                                        "transformer.h.0.attn.q_norm.weight": ([8], [0.0] * 8)})
    expect("a tensor with no place", from_hf(d, root), f"{d}/model.safetensors",
           "transformer.h.0.attn.q_norm.weight")
    full = gpt2_tensors()
    del full["transformer.ln_f.bias"]
    d = model_dir(root, "missing", GPT2, full)
    expect("a missing tensor", from_hf(d, root), d, "transformer.ln_f.bias")
    d = model_dir(root, "nojson", GPT2)
    expect("no weights", from_hf(d, root), d, "model.safetensors")
    # issue 29 case 6: cJSON would take the first n_layer, Python's json the last
    d = model_dir(root, "dupkey", GPT2, gpt2_tensors())
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(GPT2)[:-1] + ', "n_layer": 2}')
    expect("a duplicate key", from_hf(d, root), f"{d}/config.json", "n_layer", "twice")
    d = model_dir(root, "dupnested", {**LLAMA, "rope_parameters": {"rope_type": "default"}})
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(LLAMA)[:-1] + ', "rope_parameters": {"rope_theta": 1.0, "rope_theta": 2.0}}')
    expect("a duplicate nested key", from_hf(d, root), f"{d}/config.json", "rope_theta", "twice")
    # case 5: tied, but lm_head.weight has its own values (transformers keeps them apart)
    d = model_dir(root, "tiedhead", GPT2, {**gpt2_tensors(), "lm_head.weight": ([11, 8], [1.0] * 88)})
    expect("tied with a different lm_head", from_hf(d, root), f"{d}/model.safetensors",
           "lm_head.weight", "tie_word_embeddings")
    d = model_dir(root, "tiedsame", GPT2, {**gpt2_tensors(), "lm_head.weight": ([11, 8], [0.0] * 88)})
    r = subprocess.run(from_hf(d, os.path.join(root, "tiedsame")), capture_output=True, text=True)
    print(("ok    " if r.returncode == 0 else "FAIL  ") + f"tied with an equal lm_head converts: exit {r.returncode} {r.stderr.strip()}")
    if r.returncode != 0:
        failures.append("tied with an equal lm_head")
    # case 12: config.json a directory; rope_theta 0 names the value
    d = os.path.join(root, "cfgdir")
    os.makedirs(os.path.join(d, "config.json"))
    expect("config.json a directory", from_hf(d, root), f"{d}/config.json", "is a directory")
    d = model_dir(root, "theta0", {**LLAMA, "rope_theta": 0})
    expect("rope_theta 0", from_hf(d, root), f"{d}/config.json", "rope_theta: 0:", "positive")
    d = model_dir(root, "theta0p", {**LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 0}})
    expect("rope_parameters.rope_theta 0", from_hf(d, root), f"{d}/config.json", "rope_theta 0:",
           "positive")
    # Gemma 3: a rope per layer type, for the two types llama_block tells apart by the window
    GEMMA3 = {**LLAMA, "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
              "head_dim": 4, "sliding_window": 4, "rope_theta": None, "rope_scaling": None,
              "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh"}
    d = model_dir(root, "gemma3_type", {**GEMMA3, "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "chunked_attention": {"rope_type": "default", "rope_theta": 10000.0}}})
    expect("Gemma 3 rope_parameters of another layer type", from_hf(d, root),
           f"{d}/config.json", "rope_parameters", "chunked_attention")
    d = model_dir(root, "gemma3_key", {**GEMMA3, "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "yarn", "factor": 2.0, "mscale": 1.0}}})
    expect("Gemma 3 rope_parameters.full_attention with a key llama_block lacks",
           from_hf(d, root), f"{d}/config.json", "rope_parameters.full_attention", "mscale")
    d = model_dir(root, "gemma3_nowin", {**GEMMA3, "sliding_window": None})
    expect("Gemma 3 without a sliding_window", from_hf(d, root), f"{d}/config.json",
           "sliding_window", "rope per layer type")
    # Gemma 3's multimodal model: its language model's config is text_config, where the keys
    # left out take Gemma3TextConfig's defaults (the 4B's files give no vocab_size)
    MM = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"}
    d = model_dir(root, "gemma3_mm_notext", MM)
    expect("Gemma 3 multimodal without text_config", from_hf(d, root), f"{d}/config.json",
           "text_config", "missing")
    text = {"model_type": "gemma3_text", "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 4}
    d = model_dir(root, "gemma3_mm_defaults", {**MM, "text_config": text},
                  {"language_model.model.embed_tokens.weight": ([11, 8], [0.0] * 88)})
    expect("Gemma 3 multimodal: vocab_size's default", from_hf(d, root),
           "language_model.model.embed_tokens.weight", "[11, 8]", "[262208, 8]")
    d = model_dir(root, "gemma3_mm_act", {**MM, "text_config": {**text,
                                                                 "hidden_activation": "relu"}})
    expect("Gemma 3 multimodal: a text_config key named as such", from_hf(d, root),
           f"{d}/config.json", "text_config.hidden_activation", "relu")
    d = model_dir(root, "seqlen", LLAMA)
    expect("--seq-len 1e12", [*from_hf(d, root), "--seq-len", "1000000000000"], "--seq-len",
           "2147483647")
    # --to-hf of a model that is neither GPT-2 nor Llama shaped
    ck = os.path.join(root, "mlp-ck")
    r = subprocess.run([PIPE_TRAIN, MLP_SPEC, "--sequential", "--quiet", "--set",
                        "train.steps=1", "--save", ck], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        failures.append("saving the MLP checkpoint")
    else:
        expect("--to-hf of an MLP", [PIPE_CONVERT, ck, "--to-hf", os.path.join(root, "out")],
               "layer 0 (linear)")
        afile = os.path.join(root, "afile")
        open(afile, "w").close()
        expect("--to-hf into a file", [PIPE_CONVERT, ck, "--to-hf", afile], f"--to-hf {afile}",
               "not a directory")
        expect("--to-hf under a file", [PIPE_CONVERT, ck, "--to-hf", os.path.join(afile, "x")],
               "not a directory")
        expect("--gather-hf of an MLP", [PIPE_TRAIN, MLP_SPEC, "--sequential", "--quiet",
                                         "--set", "train.steps=1", "--gather-hf",
                                         os.path.join(root, "out")], "layer 0 (linear)")
    # --to-hf of llama_block options no one transformers architecture has together, and
    # --hf-arch naming one that cannot hold the blocks
    examples = os.path.dirname(os.path.abspath(MLP_SPEC))
    gates = os.path.join(examples, "..", "tests", "pipeline")
    out = os.path.join(root, "out")
    ck = one_step_checkpoint(os.path.join(gates, "qk_norm_gate.yaml"), examples, root,
                             "the qk_norm + mlp_bias checkpoint")
    if ck:
        expect("--to-hf of qk_norm with mlp_bias", [PIPE_CONVERT, ck, "--to-hf", out],
               "layer 1 (llama_block)", "qk_norm 1", "mlp_bias 1")
        expect("--hf-arch that cannot hold the blocks", [
            PIPE_CONVERT, ck, "--to-hf", out, "--hf-arch", "Phi3ForCausalLM"],
            "Phi3ForCausalLM cannot hold")
        expect("--hf-arch unknown", [PIPE_CONVERT, ck, "--to-hf", out, "--hf-arch", "Bert"],
               "--hf-arch Bert")
    # --to-hf of Gemma 2's blocks with a rope per window: only Gemma 3 (with q/k norms) has one
    text = open(os.path.join(gates, "gemma2_gate.yaml")).read()
    for name, new, needles in (
            ("per type", text.replace("window: 8,", "window: 8, rope_theta: 500.0,"),
             ("layer 1 (llama_block)", "only Gemma3ForCausalLM has a rope per layer type")),
            ("per block", text.replace("window: 8,", "window: 8, rope_theta: 500.0,", 1),
             ("layer 3 (llama_block)", "its rope differs from an earlier block's with a window"))):
        spec = os.path.join(root, f"gemma2-rope-{name.replace(' ', '-')}.yaml")
        open(spec, "w").write(new)
        ck = one_step_checkpoint(spec, examples, root,
                                 f"the Gemma 2 checkpoint with a rope {name}")
        if ck:
            expect(f"--to-hf of Gemma 2's blocks with a rope {name}",
                   [PIPE_CONVERT, ck, "--to-hf", out], *needles)
    # the multimodal model converts in only: its language model exports as the text model
    ck = one_step_checkpoint(os.path.join(gates, "gemma3_gate.yaml"), examples, root,
                             "the Gemma 3 checkpoint")
    if ck:
        expect("--hf-arch Gemma3ForConditionalGeneration", [
            PIPE_CONVERT, ck, "--to-hf", out, "--hf-arch", "Gemma3ForConditionalGeneration"],
            "converts only its language model", "Gemma3ForCausalLM")
    subprocess.run(["rm", "-rf", root])
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("hf_bad_input: every bad input refused with one line")


main()
