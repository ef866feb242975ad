#!/usr/bin/env python3
"""tests/gpu/roofline_check.py GPU_ROOFLINE: the GPU cost ledger (kernels/cuda/cost.h) and the
roofline bench (bench/gpu_roofline.c) on tests/gpu/roofline_tiny.yaml, so neither drifts:

0. every launch site of kernels/cuda/*.cu notes its cost: a PT_LAUNCH( or a cuBLAS/cuDNN call
   has a gpu_cost_note( (or a *_note( helper) in the lines before it in its function, or is a
   PT_LAUNCH_COSTED;
1. the ledger under PT_EMU_COUNT_ONLY (nothing runs) equals the ledger of the same step with
   the kernels run (--execute): the counts depend on the shapes only;
2. the bench's scaling in blocks (from runs at 1 and 2 blocks) equals the direct run at 3;
3. rows against closed forms: the linear layers' products (2 N Ni No each, forward, backward
   input and backward weight, on tensor cores under bf16), GELU's and LayerNorm's bytes and
   FLOPs, the launches, AdamW over every parameter (writing the bf16 weight copy), the bf16
   conversions (activation operands only);
4. the report has its lines (the table, both GPUs' floors and MFU, the launch overhead).
Run from the repository root. Exits non-zero on any failed check; 77 (skipped) where a build
for real GPUs finds none."""
import glob
import os
import re
import subprocess
import sys

SPEC = "tests/gpu/roofline_tiny.yaml"
# the spec's sizes
B, M, T, D, V, L = 2, 2, 32, 32, 256, 3
N = B * T  # tokens a micro-batch
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def close(a, b, what, rel=1e-12):
    check(abs(a - b) <= rel * max(abs(a), abs(b), 1.0), f"{what}: {a!r} != {b!r}")


# A call that does device work: a launch, or a library product/attention call.
LAUNCH = re.compile(r"\bPT_LAUNCH\(|\bcublas(Lt)?[A-Z]\w*\(|\bcudnn[A-Z]\w*\(")
NOT_WORK = re.compile(r"cublas(Lt)?(Create|Destroy|Set|Get)\w*\(|cudnn(Create|Destroy|Set|Get)\w*\(")


def launch_sites_noted():
    for path in sorted(glob.glob("kernels/cuda/*.cu")) + sorted(glob.glob("kernels/cuda/*.cpp")):
        lines = open(path).read().split("\n")
        for i, line in enumerate(lines):
            code = line.split("//")[0]
            if not LAUNCH.search(code) or NOT_WORK.search(code) or "#define" in code:
                continue
            start = i
            while start > 0 and not lines[start - 1].startswith("}"):  # back to the function's top
                start -= 1
            before = "\n".join(lines[start:i])
            check("gpu_cost_note(" in before or re.search(r"\w_note\(", before),
                  f"{path}:{i + 1}: a launch with no cost noted before it (kernels/cuda/cost.h: "
                  f"PT_LAUNCH_COSTED, or gpu_cost_note beside it)")


def run(binary, *args, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    out = subprocess.run([binary, SPEC, *args], env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0 and "no GPU can be used" in out.stderr:
        print("SKIP:", out.stderr.strip())
        sys.exit(77)
    if out.returncode != 0:
        sys.exit(f"{binary} {' '.join(args)}: exit {out.returncode}\n{out.stdout}{out.stderr}")
    return out.stdout


def ledger(text):
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "row":
            rows[f[1]] = tuple(float(x) for x in f[2:6])  # launches, tensor, other, bytes
    if not rows:
        sys.exit("no ledger rows in the output:\n" + text)
    return rows


def same_ledger(a, b, what):
    check(set(a) == set(b), f"{what}: kernels differ: {sorted(set(a) ^ set(b))}")
    for k in set(a) & set(b):
        for i, col in enumerate(("launches", "tensor", "other", "bytes")):
            close(a[k][i], b[k][i], f"{what}: {k} {col}", rel=1e-9)


def closed_forms(r):
    mm = 12 * D * D * L + D * V  # weights of the products: 4 linear layers a block, the head
    for role in ("fwd", "bwd_input", "bwd_weight"):
        launches, tensor, other, _ = r["cublasGemmEx_bf16:" + role]
        close(tensor, 2.0 * M * N * mm, f"bf16 {role} tensor FLOPs = 2 N sum(Ni No)")
        close(other, 0.0, f"bf16 {role}: no FLOPs off the tensor cores")
        close(launches, M * (4 * L + 1), f"bf16 {role} launches")
    launches, _, other, nbytes = r["gelu_forward_kernel"]
    close(launches, M * L, "gelu launches")
    close(nbytes, M * L * 8.0 * N * 4 * D, "gelu bytes: 4 N 4D in and out")
    close(other, M * L * 9.0 * N * 4 * D, "gelu FLOPs: 9 an element")
    launches, _, other, nbytes = r["layernorm_forward_kernel"]
    close(launches, M * (2 * L + 1), "layernorm launches")
    close(nbytes, M * (2 * L + 1) * 4.0 * (2 * N * D + 2 * D + 2 * N), "layernorm bytes")
    close(other, M * (2 * L + 1) * 8.0 * N * D, "layernorm FLOPs")
    params = L * (12 * D * D + 13 * D) + V * D + T * D + 2 * D
    launches, _, other, nbytes = r["adamw_chunks_kernel"]
    close(launches, 1, "adamw: one launch")
    close(other, 14.0 * params, "adamw FLOPs: 14 a parameter")
    close(nbytes, 30.0 * params, "adamw bytes: w, g, m, v read, w, m, v and the bf16 copy written")
    launches, _, _, _ = r["to_bf16_kernel"]
    close(launches, 4 * M * (4 * L + 1),
          "to_bf16 launches: the products' activation operands only (weights read from the copy)")


def report_lines(text):
    for want in ("peaks (dense, published)", "cublasGemmEx_bf16:fwd", "H100: step floor",
                 "H200: step floor", "MFU", "tokens/s", "launches per step",
                 "launch overhead at"):
        check(want in text, f"report line with {want!r}")


def main():
    binary = sys.argv[1]
    launch_sites_noted()
    counted = ledger(run(binary, "--direct", "--raw"))
    executed = ledger(run(binary, "--direct", "--raw", "--execute"))
    same_ledger(counted, executed, "count-only against executed")
    scaled = ledger(run(binary, "--raw"))
    same_ledger(scaled, counted, "scaled from 1 and 2 blocks against 3 blocks run")
    closed_forms(counted)
    report_lines(run(binary))
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
