#!/usr/bin/env python3
"""hf_models.py FAMILY PIPE_TRAIN PIPE_CONVERT: pipe_convert's Hugging Face import and export, checked against
transformers itself on a tiny random model it makes on the spot (FAMILY one of FAMILIES below:
gpt2, llama (Llama 2-style), llama31 (Llama 3.1-style: llama3 rope scaling, GQA), llama32
(Llama 3.2-style: llama3 rope scaling, tied head), llama_linear and llama_yarn (those rope
types; llama_linear's config.json rewritten in transformers 4's rope_scaling spelling), qwen2
(Qwen2/Qwen2.5: q/k/v biases, GQA, tied head), mistral_head_dim (MistralForCausalLM with a
head_dim other than hidden_size / heads, as Mistral Nemo's), llama_mlp_bias (Llama with
mlp_bias), qwen3 (Qwen3: q/k per-head RMSNorm, head_dim apart from hidden_size / heads, GQA,
tied head), phi3 (Phi-3: fused qkv_proj and gate_up_proj, GQA, a sliding_window of 5; exported
with --hf-arch),
mistral_window (MistralForCausalLM with a sliding_window of 5 under seq_len 16, GQA:
llama_block's window), gemma2 (Gemma2ForCausalLM: GQA, tied head, scaled embedding, (1 + w)
RMSNorms, post-norms, GeGLU, final-logit soft-capping, alternating
sliding windows shorter than seq_len, attention-logit soft-capping and a query_pre_attn_scalar
other than head_dim), gemma3 (Gemma3ForCausalLM: Gemma 2's layer with (1 + w) q/k norms, no
soft-caps, a rope per layer type: the full-attention layers' linear-scaled, the sliding ones'
plain with another base; layer_types sliding, full, sliding), gemma3_legacy (the same model with
its config.json in transformers 4's spelling: rope_theta, rope_local_base_freq, rope_scaling,
sliding_window_pattern, no layer_types), gemma3_mm (the gemma3 model as the language model of
a Gemma3ForConditionalGeneration with a small vision tower: its text_config read, its
language_model. tensors imported, the vision tower's left out with a notice, the export a
Gemma3ForCausalLM; a vocabulary of 104 with the image tokens above the data's 101)).

  1. import; pipetrain's loss on step 0's batch equals transformers' to 1e-5 relative (and,
     for scaled rope / Qwen2 / Qwen3 / mlp_bias / the window, transformers' loss without the
     scaling / the q, k, v biases / the q, k norms / the MLP biases / the window differs: the
     check has teeth)
  2. 10 steps pipelined (2 stages, mpirun; the families after llama with zbv, a V schedule)
     and sequential: --gather files equal byte for byte,
     --gather-hf directories too
  3. export (pipe_convert --to-hf); transformers loads it with no missing, unexpected or
     mismatched keys, and its loss on step 10's batch equals pipetrain's to 1e-5 relative;
     the export equals --gather-hf's byte for byte
  4. HF -> pipetrain -> HF without training is bitwise for fp32 weights
  5. bf16 and fp16 weights import as exactly their float32 values
Exit 77 (skipped) when torch or transformers is missing, or (llama) when this build has no
llama_block layer."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
try:
    import numpy as np
    import torch
    import transformers
    from safetensors.torch import load_file
except ImportError as exc:
    print(f"SKIP: {exc.name} is not importable by {sys.executable} (scripts/install-python.sh "
          "installs torch, transformers, safetensors, numpy)")
    sys.exit(SKIP)

FAMILY, PIPE_TRAIN, PIPE_CONVERT = sys.argv[1:4]
VOCAB, T, MBS, MB = 101, 16, 2, 4
G = MBS * MB
RTOL = 1e-5
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print("command failed:", " ".join(cmd), "\n", r.stdout, r.stderr)
        sys.exit(1)
    return r


# The Llama-family configs: (config arguments, rope_scaling or None); qwen2 is Qwen2's classes.
# Small original contexts put the 16 positions' pairs in every band of llama3 and yarn's ramp.
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8}
FAMILIES = {
    "llama": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2), None),
    "llama31": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                     rope_theta=500000.0), LLAMA3),
    "llama32": (dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                     rope_theta=500000.0, tie_word_embeddings=True), dict(LLAMA3, factor=32.0)),
    "llama_linear": (dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2),
                     {"rope_type": "linear", "factor": 4.0}),
    "llama_yarn": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2),
                   {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4}),
    "qwen2": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                   rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False),
              None),
    "mistral_head_dim": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, sliding_window=None), None),
    "llama_mlp_bias": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                            mlp_bias=True), None),
    "qwen3": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False),
              None),
    "phi3": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, pad_token_id=0,
                  sliding_window=5), None),
    "mistral_window": (dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                            sliding_window=5), None),
    "gemma2": ({}, None),  # gemma2_config
    "gemma3": ({}, None),  # gemma3_config
    "gemma3_legacy": ({}, None),
    "gemma3_mm": ({}, None),
}
# transformers' classes of a family: (config, model); Llama's where not named
CLASSES = {"qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
           "mistral_head_dim": ("MistralConfig", "MistralForCausalLM"),
           "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"), "phi3": ("Phi3Config", "Phi3ForCausalLM"),
           "mistral_window": ("MistralConfig", "MistralForCausalLM"),
           "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
           "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
           "gemma3_legacy": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
           "gemma3_mm": ("Gemma3Config", "Gemma3ForConditionalGeneration")}
GEMMA3 = FAMILY.startswith("gemma3")
# the families whose config has a sliding_window shorter than seq_len (llama_block's window)
WINDOWED = ("mistral_window", "phi3")
# --to-hf as the family's architecture where llama_block's blocks fit several (Phi-3's fused names)
HF_ARCH = ["--hf-arch", "Phi3ForCausalLM"] if FAMILY == "phi3" else []
# the parameters whose effect the loss must show (teeth), and their neutral value
NEUTRAL = {"qwen2": (("proj.bias",), 0.0), "qwen3": (("q_norm.weight", "k_norm.weight"), 1.0),
           "llama_mlp_bias": (("mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias"), 0.0),
           # Gemma 3's norms are (1 + w): w = 0 is the neutral norm
           "gemma3": (("q_norm.weight", "k_norm.weight"), 0.0),
           "gemma3_mm": (("q_norm.weight", "k_norm.weight"), 0.0)}
# a multimodal family's language model: its tensors' prefix in the files (the export is the text
# model alone, without it)
TEXT_PREFIX = "language_model." if FAMILY == "gemma3_mm" else ""


def gemma2_config(capped=True):
    kw = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=8,
              max_position_embeddings=T, tie_word_embeddings=True, bos_token_id=0,
              eos_token_id=0, pad_token_id=0,
              # a cap the logits reach, so the check below has teeth
              final_logit_softcapping=2.0 if capped else None)
    # layer 0 slides over 8 of the 16 positions, layer 1 attends all (llama_block's window,
    # attn_softcap, attn_scale)
    kw.update(sliding_window=8, attn_logit_softcapping=5.0 if capped else None,
              query_pre_attn_scalar=16)
    return transformers.Gemma2Config(**kw)


def gemma3_config(per_type=True):
    # the sliding layers' plain rope and the full layer's linear-scaled one on another base, so
    # that a rope read for the wrong layer type shows in the loss; without per_type, the
    # sliding layers' rope everywhere
    local = {"rope_type": "default", "rope_theta": 10000.0}
    full = {"rope_type": "linear", "factor": 4.0, "rope_theta": 100.0} if per_type else local
    text = transformers.Gemma3TextConfig(
        vocab_size=VOCAB + 3 if FAMILY == "gemma3_mm" else VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=T,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        sliding_window=8, query_pre_attn_scalar=16,
        rope_parameters={"sliding_attention": local, "full_attention": dict(full)})
    if FAMILY != "gemma3_mm":
        return text
    vision = transformers.SiglipVisionConfig(hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2,
                                             image_size=28, patch_size=14)
    return transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                     boi_token_index=VOCAB, eoi_token_index=VOCAB + 1,
                                     image_token_index=VOCAB + 2)


def gemma3_legacy_spelling(out):
    """config.json as transformers 4.50 wrote Gemma 3's: the full layers' rope at the top,
    the sliding ones' base as rope_local_base_freq, a sliding_window_pattern (every 2nd layer
    full: sliding, full, sliding) instead of layer_types; the soft-caps left out (their
    default is none)."""
    path = os.path.join(out, "config.json")
    cfg = json.load(open(path))
    rope = cfg.pop("rope_parameters")
    cfg.pop("layer_types")
    cfg.pop("_sliding_window_pattern", None)
    for cap in ("attn_logit_softcapping", "final_logit_softcapping"):  # absent: Gemma 3's none
        cfg.pop(cap)
    full = dict(rope["full_attention"])
    cfg["rope_theta"] = full.pop("rope_theta")
    cfg["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
    cfg["rope_scaling"] = full  # with rope_type, as Gemma 3's files spell it
    cfg["sliding_window_pattern"] = 2
    json.dump(cfg, open(path, "w"), indent=2)


def causal_lm(cfg):
    return getattr(transformers, CLASSES.get(FAMILY, ("", "LlamaForCausalLM"))[1])(cfg)


def llama_config(scaled=True, windowed=True):
    if FAMILY == "gemma2":
        return gemma2_config(capped=scaled)
    if GEMMA3:
        return gemma3_config(per_type=scaled)
    args, rope = FAMILIES[FAMILY]
    kw = dict(vocab_size=VOCAB, intermediate_size=64, num_hidden_layers=2,
              max_position_embeddings=T, rope_theta=10000.0, tie_word_embeddings=False,
              bos_token_id=0, eos_token_id=0)
    kw.update(args)
    if not windowed:
        kw["sliding_window"] = None
    if rope and scaled:
        kw["rope_scaling"] = dict(rope)
    return getattr(transformers, CLASSES.get(FAMILY, ("LlamaConfig", ""))[0])(**kw)


def legacy_rope_spelling(out):
    """config.json as transformers 4 wrote it: rope_theta at the top, rope_scaling with `type`."""
    path = os.path.join(out, "config.json")
    cfg = json.load(open(path))
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    cfg["rope_scaling"] = rope
    json.dump(cfg, open(path, "w"), indent=2)


def make_model(out):
    torch.manual_seed(1234)
    if FAMILY == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB,
                                      n_positions=T, bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        model = causal_lm(llama_config())
    sharpen = FAMILY in FAMILIES and FAMILIES[FAMILY][1] is not None or FAMILY in WINDOWED
    with torch.no_grad():  # LayerNorm / RMSNorm weights away from 1, biases away from 0
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
            if name.endswith(("q_norm.weight", "k_norm.weight")):  # Qwen3's: far from 1
                p.add_(torch.randn_like(p))
            # scaled RoPE, window: attention far from uniform, so the positions' angles (and the
            # keys the window drops) show in the loss
            if sharpen and (name.endswith("q_proj.weight") or name.endswith("k_proj.weight")):
                p.mul_(20.0)
            # Gemma 2: logits (through the tied head) large enough for the soft-cap to bend
            if FAMILY == "gemma2" and name.endswith("embed_tokens.weight"):
                p.mul_(50.0)
    model.save_pretrained(out)
    if FAMILY == "llama_linear":
        legacy_rope_spelling(out)
    if FAMILY == "gemma3_legacy":
        gemma3_legacy_spelling(out)
        model = transformers.AutoModelForCausalLM.from_pretrained(out)  # as that file reads
    return model


def batch(tokens, step):
    """The rows pipetrain's data reader gives step `step` (data/data.h)."""
    n = len(tokens)
    rows = [((step * G + j) * T) % (n - T) for j in range(G)]
    x = np.stack([tokens[o:o + T] for o in rows]).astype(np.int64)
    y = np.stack([tokens[o + 1:o + T + 1] for o in rows]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def hf_loss(model, tokens, step):
    x, y = batch(tokens, step)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=x).logits.double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             y.reshape(-1)).item()


def pt_loss(spec, sets, ckpt, step, work):
    """pipetrain's loss of step `step` continuing from ckpt (sequential, lr irrelevant)."""
    metrics = os.path.join(work, f"m{step}.jsonl")
    run([PIPE_TRAIN, spec, "--sequential", "--quiet", "--load", ckpt, "--metrics", metrics,
         *sets, "--set", f"train.steps={step + 1}"])
    lines = [json.loads(l) for l in open(metrics)]
    return lines[-1]["loss"]


def close(a, b):
    return abs(a - b) <= RTOL * abs(b)


def text_of(tensors):
    """The language model's tensors of a file's, named as its text model's export names them."""
    n = len(TEXT_PREFIX)
    return {k[n:]: v for k, v in tensors.items() if k.startswith(TEXT_PREFIX)}


def same_tensors(a_dir, b, what, exact_from=None):
    a = load_file(os.path.join(a_dir, "model.safetensors"))
    b = text_of(b)
    ok = set(a) == set(b)
    for k in b:
        want = b[k].float() if exact_from else b[k]
        ok = ok and k in a and a[k].dtype == torch.float32 and torch.equal(a[k], want)
    check(ok, what)


def load_checked(d, what):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    check(not bad, f"{what}: transformers loads it with no missing/unexpected keys {bad or ''}")
    return model


def main():
    work = tempfile.mkdtemp(prefix=f"hf_{FAMILY}_")
    try:
        steps(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print(f"hf_models {FAMILY}: all checks passed")


def steps(work):
    hf = os.path.join(work, "hf")
    model = make_model(hf)
    orig = load_file(os.path.join(hf, "model.safetensors"))
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, VOCAB, size=3000, dtype=np.uint16)
    data = os.path.join(work, "tokens.u16")
    tokens.tofile(data)
    spec, ck = os.path.join(work, "model.yaml"), os.path.join(work, "ck")
    r = subprocess.run([PIPE_CONVERT, "--from-hf", hf, "--out", ck, "--spec-out", spec],
                       capture_output=True, text=True)
    if r.returncode != 0 and "unknown layer type 'llama_block'" in r.stderr:
        print(f"SKIP: layer type llama_block not in this build ({r.stderr.strip()})")
        sys.exit(SKIP)
    check(r.returncode == 0, f"pipe_convert --from-hf: {r.stderr.strip()}")
    if r.returncode != 0:
        return
    if TEXT_PREFIX:
        check("vision_tower." in r.stderr and "not converted" in r.stderr,
              f"the vision tower's tensors are left out with a notice: {r.stderr.strip()}")
    sets = ["--set", f"data.path={data}", "--set", f"train.micro_batch_size={MBS}",
            "--set", f"train.micro_batches={MB}", "--set", "train.optimizer.lr=3.0e-3",
            "--set", "pipeline.stages=2"]
    scaled = FAMILY in FAMILIES and FAMILIES[FAMILY][1] is not None
    if FAMILY not in ("gpt2", "llama"):
        sets += ["--set", "pipeline.schedule=zbv"]
    # 1. the imported model's loss
    a, b = pt_loss(spec, sets, ck, 0, work), hf_loss(model, tokens, 0)
    check(close(a, b), f"import: pipetrain loss {a:.9g} vs transformers {b:.9g} "
          f"(relative difference {abs(a - b) / abs(b):.2e}, rtol {RTOL})")
    if scaled:
        plain = causal_lm(llama_config(scaled=False))
        plain.load_state_dict(model.state_dict())
        u = hf_loss(plain, tokens, 0)
        check(not close(u, b), f"the rope scaling changes transformers' loss ({u:.9g} unscaled)")
    if FAMILY == "gemma2" or GEMMA3:
        plain = causal_lm(llama_config(scaled=False))
        plain.load_state_dict(model.state_dict())
        u = hf_loss(plain, tokens, 0)
        what = "the full layer's own rope" if GEMMA3 else "the soft-caps"
        check(not close(u, b), f"{what} changes transformers' loss ({u:.9g} without)")
    if GEMMA3:
        text = open(spec).read()
        check("window: 8" in text and "qk_norm: true" in text and "rope_theta: 100.0" in text
              and "rope_theta: 10000.0" in text and "type: linear" in text
              and "softcap" not in text,
              "the converted spec has the sliding layers' window and rope, the full layer's "
              "scaled rope and the q/k norms, and no soft-caps")
    if FAMILY in NEUTRAL:
        names, value = NEUTRAL[FAMILY]
        plain = causal_lm(llama_config())
        plain.load_state_dict({k: (torch.full_like(v, value) if k.endswith(names) else v)
                               for k, v in model.state_dict().items()})
        u = hf_loss(plain, tokens, 0)
        check(not close(u, b), f"{', '.join(names)} change transformers' loss ({u:.9g} "
              f"with them {value})")
    if FAMILY in WINDOWED:
        plain = causal_lm(llama_config(windowed=False))
        plain.load_state_dict(model.state_dict())
        u = hf_loss(plain, tokens, 0)
        check(not close(u, b), f"the window changes transformers' loss ({u:.9g} without)")
        check("window: 5" in open(spec).read(), "the converted spec has llama_block's window: 5")
    # 2. 10 steps, pipelined and sequential
    outs = {}
    for mode in ("seq", "p2"):
        pre = [] if mode == "seq" else ["timeout", "300", "mpirun", "-np", "2", "--oversubscribe"]
        flag = ["--sequential"] if mode == "seq" else []
        g, ghf, save = (os.path.join(work, f"{x}-{mode}") for x in ("gather", "hf", "ck10"))
        run(pre + [PIPE_TRAIN, spec, *flag, "--quiet", "--load", ck, *sets, "--set",
                   "train.steps=10", "--gather", g, "--gather-hf", ghf, "--save", save])
        outs[mode] = (g, ghf, save)
    same = lambda f1, f2: open(f1, "rb").read() == open(f2, "rb").read()
    check(same(outs["seq"][0], outs["p2"][0]), "10 steps: pipelined --gather == sequential")
    check(same(os.path.join(outs["seq"][1], "model.safetensors"),
               os.path.join(outs["p2"][1], "model.safetensors")),
          "10 steps: pipelined --gather-hf == sequential")
    # 3. export and transformers' loss on the next batch
    out = os.path.join(work, "export")
    run([PIPE_CONVERT, outs["p2"][2], "--to-hf", out])
    check(same(os.path.join(out, "model.safetensors"),
               os.path.join(outs["seq"][1], "model.safetensors")),
          "--to-hf of the trained checkpoint == --gather-hf")
    if HF_ARCH:
        out = os.path.join(work, "export-arch")
        run([PIPE_CONVERT, outs["p2"][2], "--to-hf", out, *HF_ARCH])
        arch = json.load(open(os.path.join(out, "config.json")))["architectures"]
        check(arch == [HF_ARCH[1]], f"--to-hf {' '.join(HF_ARCH)} writes {arch}")
    trained = load_checked(out, "export")
    if TEXT_PREFIX:
        arch = json.load(open(os.path.join(out, "config.json")))["architectures"]
        check(arch == ["Gemma3ForCausalLM"], f"the language model exports as its text model: {arch}")
    a, b = pt_loss(spec, sets, outs["p2"][2], 10, work), hf_loss(trained, tokens, 10)
    check(close(a, b), f"export: pipetrain loss {a:.9g} vs transformers {b:.9g} at step 10 "
          f"(relative difference {abs(a - b) / abs(b):.2e})")
    check(not close(a, hf_loss(model, tokens, 10)), "training changed the loss")
    # 4. HF -> pipetrain -> HF
    back = os.path.join(work, "back")
    run([PIPE_CONVERT, ck, "--to-hf", back, *HF_ARCH])
    same_tensors(back, orig, "HF -> pipetrain -> HF is bitwise for fp32 weights")
    load_checked(back, "round trip")
    # 5. shards (model.safetensors.index.json) and half-precision weights
    sharded = os.path.join(work, "hf-sharded")
    model.save_pretrained(sharded, max_shard_size="20KB")
    n_shards = len([f for f in os.listdir(sharded) if f.endswith(".safetensors")])
    ck3, back3 = os.path.join(work, "ck-sharded"), os.path.join(work, "back-sharded")
    run([PIPE_CONVERT, "--from-hf", sharded, "--out", ck3, "--spec-out",
         os.path.join(work, "sharded.yaml")])
    run([PIPE_CONVERT, ck3, "--to-hf", back3, *HF_ARCH])
    same_tensors(back3, orig, f"{n_shards} shards import bitwise")
    for dt in (torch.bfloat16, torch.float16):
        low = os.path.join(work, f"hf-{dt}")
        model.to(dt).save_pretrained(low)
        lowt = load_file(os.path.join(low, "model.safetensors"))
        ck2, back2 = os.path.join(work, f"ck-{dt}"), os.path.join(work, f"back-{dt}")
        run([PIPE_CONVERT, "--from-hf", low, "--out", ck2, "--spec-out",
             os.path.join(work, "low.yaml")])
        run([PIPE_CONVERT, ck2, "--to-hf", back2, *HF_ARCH])
        same_tensors(back2, lowt, f"{dt} weights import as their exact float32 values", True)
        model.float()


main()
