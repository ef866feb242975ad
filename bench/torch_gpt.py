#!/usr/bin/env python3
"""bench/torch_gpt.py SPEC --device cuda|cpu --precision fp32|tf32|bf16 [--compile] [--steps N]

PyTorch's time for one training step of the GPT model a pipetrain spec describes (the layers
embedding, pos_embedding, transformer_block, layernorm, lm_head; the same shapes, AdamW settings,
micro-batches, times pipeline.data_parallel as --sequential runs every replica's, and tied
head), on random tokens. The baseline bench/gpu_vs_torch.sh sets beside pipetrain. Prints one
JSON line: step_ms (median of the timed steps), params, flops_per_step.

Precision as pipetrain's train.precision means it: fp32 with TF32 off, tf32 with TF32 matmuls,
bf16 under autocast (bf16 products, fp32 master weights and optimizer state). Attention is
PyTorch's fused scaled_dot_product_attention (causal), the counterpart of pipetrain's fused one.
"""
import argparse
import json
import statistics
import sys
import time

import yaml

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("bench/torch_gpt.py: PyTorch is not installed; pip install torch (the baseline "
             "needs it)")

GPT_LAYERS = {"embedding", "pos_embedding", "transformer_block", "layernorm", "lm_head"}


def fail(spec, msg):
    sys.exit(f"{spec}: {msg}")


class Block(nn.Module):
    """pipetrain's transformer_block: pre-LayerNorm GPT-2 block, GELU tanh, eps 1e-5."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(B, T, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, spec_path, spec):
        super().__init__()
        m = spec.get("model", {})
        self.V, self.T, self.d = m["vocab"], m["seq_len"], m["dim"]
        self.wte = nn.Embedding(self.V, self.d)
        self.wpe = None
        self.layers = nn.ModuleList()
        self.head_tied, self.head = False, None
        for entry in spec["layers"]:
            (name, args), = entry.items()
            args = args or {}
            if name not in GPT_LAYERS:
                fail(spec_path, f"layer '{name}' has no PyTorch counterpart here; the baseline "
                     f"covers {', '.join(sorted(GPT_LAYERS))}")
            for _ in range(args.get("repeat", 1)):
                if name == "pos_embedding":
                    self.wpe = nn.Parameter(torch.randn(self.T, self.d) * 0.02)
                elif name == "transformer_block":
                    self.layers.append(Block(self.d, args.get("heads", m["heads"])))
                elif name == "layernorm":
                    self.layers.append(nn.LayerNorm(self.d, eps=1e-5))
                elif name == "lm_head":
                    self.head_tied = "tie" in args
                    if not self.head_tied:
                        self.head = nn.Linear(self.d, self.V, bias=False)

    def forward(self, ids):
        x = self.wte(ids)
        if self.wpe is not None:
            x = x + self.wpe[: ids.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return F.linear(x, self.wte.weight) if self.head_tied else self.head(x)


def model_flops(model, tokens):
    """6 N per token for the products (N: parameters in matrix products, the head counted once
    whether tied or not) plus attention's 12 L T d (QK^T and PV, forward and backward, over the
    full square, as the usual MFU convention counts it)."""
    n = sum(p.numel() for name, p in model.named_parameters()
            if p.dim() == 2 and name not in ("wte.weight", "wpe"))
    n += model.V * model.d  # the head's product (tied to wte or not)
    blocks = sum(isinstance(layer, Block) for layer in model.layers)
    return tokens * (6 * n + 12 * blocks * model.T * model.d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    with open(a.spec) as f:
        spec = yaml.safe_load(f)
    train = spec.get("train", {})
    B, M = train.get("micro_batch_size", 1), train.get("micro_batches", 1)
    # pipe_train --sequential runs every data-parallel replica's micro-batches in its one step
    M *= int(spec.get("pipeline", {}).get("data_parallel", 1))
    opt = train.get("optimizer", {})
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench/torch_gpt.py: no CUDA device visible to PyTorch")
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(int(train.get("seed", 1234)))
    model = GPT(a.spec, spec).to(a.device)
    betas = tuple(opt.get("betas", [0.9, 0.999]))
    adam = torch.optim.AdamW(model.parameters(), lr=float(opt.get("lr", 1e-3)), betas=betas,
                             eps=float(opt.get("eps", 1e-8)),
                             weight_decay=float(opt.get("weight_decay", 0.0)),
                             **({"fused": True} if a.device == "cuda" else {}))
    step_model = torch.compile(model) if a.compile else model
    clip = float(train.get("grad_clip", 0.0))
    ids = torch.randint(0, min(model.V, 256), (M, B, model.T + 1), device=a.device)

    def step():
        for mb in range(M):
            with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
                logits = step_model(ids[mb, :, :-1])
                loss = F.cross_entropy(logits.float().view(-1, model.V),
                                       ids[mb, :, 1:].reshape(-1)) / M
            loss.backward()
        if clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        adam.step()
        adam.zero_grad(set_to_none=True)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    out = {"step_ms": statistics.median(times),
           "params": sum(p.numel() for p in model.parameters()),
           "flops_per_step": model_flops(model, M * B * model.T)}
    if a.device == "cuda":  # the yardstick beside pipetrain's plan and its GPU's count
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
