#!/usr/bin/env python3
"""hf_check_first.py PIPE_CONVERT: pipe_convert --from-hf reads the weight files' headers before
it allocates the model, and refuses a model the machine cannot hold from an estimate (exit 2, one
line naming config.json and the bytes), never by the allocator. The safetensors files are written
by hand (standard library only) as sparse files: headers for every tensor, no data on disk.
Address space is capped at 8 GiB, so a converter that allocated first would fail here."""
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

PIPE_CONVERT = sys.argv[1]
failures = []


def llama(hidden, inter, layers, heads, kv, vocab=32000):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
            "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "hidden_act": "silu",
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False}


def shapes(c):
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kvd = h // c["num_attention_heads"] * c["num_key_value_heads"]
    out = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h], "lm_head.weight": [v, h]}
    for b in range(c["num_hidden_layers"]):
        p = f"model.layers.{b}."
        out.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                    p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [kvd, h],
                    p + "self_attn.v_proj.weight": [kvd, h], p + "self_attn.o_proj.weight": [h, h],
                    p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h],
                    p + "mlp.down_proj.weight": [h, i]})
    return out


def sparse_safetensors(path, tensors):
    """BF16 headers for tensors {name: shape}; the data section is a hole of the right size."""
    header, pos = {}, 0
    for name, shape in tensors.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + pos)


def cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def expect(root, name, config, tensors, patterns, limit_s=30):
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    sparse_safetensors(os.path.join(d, "model.safetensors"), tensors)
    t0 = time.monotonic()
    try:
        r = subprocess.run([PIPE_CONVERT, "--from-hf", d, "--out", os.path.join(root, name + ".ckpt"),
                            "--spec-out", os.path.join(root, name + ".yaml")],
                           capture_output=True, text=True, timeout=120, preexec_fn=cap_memory)
        out, rc = (r.stdout + r.stderr).strip(), r.returncode
    except subprocess.TimeoutExpired:
        out, rc = "(timed out)", None
    took = time.monotonic() - t0
    ok = rc == 2 and len(out.splitlines()) == 1 and all(p in out for p in patterns) and took < limit_s
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc} after {took:.1f} s: {out[:300]}")
    if not ok:
        failures.append(name)


with tempfile.TemporaryDirectory() as root:
    big = llama(8192, 28672, 80, 64, 8)  # 69B parameters: over 1 TB to convert
    expect(root, "too_big", big, shapes(big), ["config.json", "needs", "bytes", "more memory"])
    wrong = shapes(big)
    wrong["model.layers.79.self_attn.q_proj.weight"] = [8192, 8000]
    expect(root, "wrong_shape_first", big, wrong,
           ["model.layers.79.self_attn.q_proj.weight", "[8192, 8000]", "[8192, 8192]"])
    small = llama(2048, 5632, 22, 32, 4)  # 1.1B parameters
    missing = shapes(small)
    del missing["model.layers.21.mlp.down_proj.weight"]
    expect(root, "missing_tensor_1b", small, missing,
           ["model.layers.21.mlp.down_proj.weight", "missing"], limit_s=15)

if failures:
    sys.exit(f"hf_check_first: {len(failures)} case(s) failed: {', '.join(failures)}")
print("hf_check_first: all checks passed")
