#!/usr/bin/env python3
"""tests/gpu/roofline_check.py GPU_ROOFLINE: the GPU cost ledger (kernels/cuda/cost.h) and the
roofline bench (bench/gpu_roofline.c) on tests/gpu/roofline_tiny.yaml, so neither drifts:

0. every launch site of kernels/cuda notes its cost: a PT_LAUNCH( or a cuBLAS/cuDNN call (or
   attention_cudnn.h's) has a gpu_cost_note( (or a *_note( helper) in the lines before it in its
   function, or is a PT_LAUNCH_COSTED: before, so that a timed ledger (7.) gives the launch the
   time from its own event on;
1. the ledger under PT_EMU_COUNT_ONLY (nothing runs) equals the ledger of the same step with
   the kernels run (--execute): the counts depend on the shapes only;
2. the bench's scaling in blocks (from runs at 1 and 2 blocks) equals the direct run at 3;
3. rows against closed forms: the linear layers' products by role and cuBLASLt epilogue (2 N
   Ni No each, on tensor cores under bf16), the fused GELU and DGELU epilogues' FLOPs and
   bytes, LayerNorm forward and the fused residual backward, the launches, AdamW over every
   parameter (writing the bf16 weight copy, the clip folded in: no scaling pass), the gradient
   norm in two launches, cuDNN attention under bf16 (no in-house rows
   beside it), the bf16 conversions (the products' activation operands; the rounding at the
   layers' boundaries; the storage's packs, unpacks and rounding of the saved parts, the logits
   written at rest by the head's product; no pack of the attention's dout, which its product
   writes as bf16), the bias and LayerNorm weight gradients (read from bf16 copies), the finite
   checks and the cross entropy;
4. the report has its lines (the table, both GPUs' floors and MFU, the launch overhead, the
   memory plan against the measured peak);
5. that memory line at a real shape: bench/gpt2_small.yaml under bf16 (8192 tokens, a 50304
   vocabulary), its plan within MEMORY_REL of the measured peak (the plan once counted operand
   copies of the logits' width the head no longer converts: 20 % over), scaled = direct, a
   workspace without the logits' float32 working buffer, which gets no memory, and what the
   device itself counted taken within DEVICE_SCRATCH_REL above the measured peak;
6. the Llama's conversions on tests/gpu/roofline_tiny_llama.yaml: no unpack for backward (each
   layer's input read at rest; the rotation reading the attention's dq|dk|dv as cuDNN wrote
   them) and the rotation's bytes both ways, no pack of the attention's dout, the head's
   forward x the one operand conversion;
7. --time (each row timed on the device, here the emulator's): the same launches as the ledger
   counted, every row's seconds at least 0 and together the timed step's, its host-bound part
   between 0 and them, cuDNN's attention rows
   given the library's own work (their notes come before the call: noted after, the work went to
   the row before), and the report's measured column and line;
8. scripts/ledger_compare.py (gpu_check.sh's counters row) on that report against the counted
   ledger: alike, exit 0; with one row's launches changed, exit 1 naming the row.
Run from the repository root. Exits non-zero on any failed check; 77 (skipped) where a build
for real GPUs finds none."""
import glob
import os
import re
import subprocess
import sys
import tempfile

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


# A call that does device work: a launch, or a library product/attention call. Of cuBLASLt only
# cublasLtMatmul does: the rest describe the matmul or ask the heuristic, on the host. A plan's
# matmul (kernels/cuda/matmul_plan.h) is noted by its caller, who knows the product's role: the
# calls of matmul_plan_run are checked, not the cublasLtMatmul inside it (WRAPPED).
LAUNCH = re.compile(r"\bPT_LAUNCH\(|\bcublas(Lt)?[A-Z]\w*\(|\bcudnn[A-Z]\w*\(|"
                    r"\battention_cudnn_(forward|backward)\(|\bmatmul_plan_run\(")
NOT_WORK = re.compile(r"cublas(Create|Destroy|Set|Get)\w*\(|cublasLt(?!Matmul\()\w*\(|"
                      r"cudnn(Create|Destroy|Set|Get)\w*\(|^\w.*\battention_cudnn_\w+\(|"
                      r"^\w.*\bmatmul_plan_run\(")
WRAPPED = {("kernels/cuda/matmul_plan.c", "matmul_plan_run")}


def launch_sites_noted():
    for path in sorted(p for ext in ("c", "cu", "cpp") for p in glob.glob(f"kernels/cuda/*.{ext}")):
        lines = open(path).read().split("\n")
        for i, line in enumerate(lines):
            code = line.split("//")[0]
            if not LAUNCH.search(code) or NOT_WORK.search(code) or "#define" in code:
                continue
            start = i
            while start > 0 and not lines[start - 1].startswith("}"):  # back to the function's top
                start -= 1
            before = "\n".join(lines[start:i])
            if any(path == f and re.search(rf"^\w.*\b{fn}\(", before, re.M) for f, fn in WRAPPED):
                continue
            check("gpu_cost_note(" in before or re.search(r"\w_note\(", before),
                  f"{path}:{i + 1}: a launch with no cost noted before it (kernels/cuda/cost.h: "
                  f"PT_LAUNCH_COSTED, or gpu_cost_note beside it)")


def run(binary, *args, env_extra=None, spec=SPEC):
    env = dict(os.environ)
    env.update(env_extra or {})
    out = subprocess.run([binary, spec, *args], env=env, capture_output=True, text=True,
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


def memory(text):
    """(planned, measured peak, planned workspace, device's count) bytes of --raw's memory
    line."""
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "memory":
            return float(f[1]), float(f[2]), float(f[3]), float(f[4])
    sys.exit("no memory line in the output:\n" + text)


# The plan's total against the measured peak at GPT-2 small's shape: what is planned but not
# measured is the bound on the products' bf16 operand copies (kernels/cuda/ops_linear.cu,
# partition/memory.c precision_scratch_bytes), 1.2 % of it.
MEMORY_REL = 0.02
# What the device itself counted taken (cudaMemGetInfo since it was opened) over the measured
# peak: the kernel tables' scratch, which neither the plan nor the buffers' totals hold (the
# products' bf16 copies kept, the attention's bf16 rooms, the input gradients' bits, the cuDNN
# substitute's float32 workspace), less the logits' managed buffer, which the emulator does not
# count. 0.46 GiB at GPT-2 small's shape, 7.6 % of the peak (0.19 GiB of it the substitute's
# workspace, which cuDNN does not ask for): a new scratch buffer the plan leaves out shows here.
DEVICE_SCRATCH_REL = 0.10


def real_shape_memory(binary):
    spec, sets = "bench/gpt2_small.yaml", ("--set", "train.precision=bf16")
    planned, peak, work, device = memory(run(binary, *sets, "--raw", spec=spec))
    check(planned >= peak, f"{spec}: planned {planned:.4g} bytes, under the measured {peak:.4g}")
    check(abs(planned - peak) <= MEMORY_REL * peak,
          f"{spec}: planned {planned / 2**30:.3f} GiB against the measured peak "
          f"{peak / 2**30:.3f} GiB: over {100 * MEMORY_REL:.0f} % apart")
    check(peak < device <= (1 + DEVICE_SCRATCH_REL) * peak,
          f"{spec}: the device counted {device / 2**30:.3f} GiB taken against the buffers' peak "
          f"{peak / 2**30:.3f} GiB: the kernel tables' scratch over "
          f"{100 * DEVICE_SCRATCH_REL:.0f} % of it, or the count missing buffers")
    direct = memory(run(binary, *sets, "--raw", "--direct", spec=spec))
    close(planned, direct[0], f"{spec}: planned memory scaled against direct", rel=1e-9)
    close(peak, direct[1], f"{spec}: measured peak scaled against direct", rel=1e-9)
    close(device, direct[3], f"{spec}: the device's count scaled against direct", rel=1e-9)
    # the logits' float32 working buffer gets no memory (engine/stage_store.c
    # logits_at_rest_only): the whole workspace is less than those floats, 8192 x 50304 x 4 bytes
    logits = 8 * 1024 * 50304 * 4
    check(work < logits, f"{spec}: the planned workspace, {work / 2**30:.3f} GiB, holds the "
          f"logits' float32 working buffer ({logits / 2**30:.3f} GiB)")


def same_ledger(a, b, what):
    check(set(a) == set(b), f"{what}: kernels differ: {sorted(set(a) ^ set(b))}")
    for k in set(a) & set(b):
        for i, col in enumerate(("launches", "tensor", "other", "bytes")):
            close(a[k][i], b[k][i], f"{what}: {k} {col}", rel=1e-9)


def closed_forms(r):
    """Rows of the tiny GPT's bf16 step against forms derived from its shapes. A block's linear
    layers: qkv D->3D and the projection D->D, fc D->4D and fc2 4D->D, each with a bias; the
    tied head D->V has none. cuBLASLt runs each biased forward product with its epilogue: qkv
    BIAS, the projections BIAS with the residual as C (beta 1), fc GELU_AUX_BIAS; fc2's input
    gradient is DGELU (times gelu'(h)); the projection's, the attention's dout, cuBLASLt's plain
    matmul with a bf16 D (cuDNN reads it as bf16 alone); the other input gradients and every
    weight gradient are cublasGemmEx. The head's forward is cuBLASLt's plain matmul with a bf16
    D: the logits' place at rest is handed over alone (layers/layer.h out_by_product), the loss
    reads them there. qkv's and fc's (g and h) outputs have their places at rest handed over
    alone (read only by the attention and products; h by nothing in forward), so their matmuls
    write them there as bf16 (the :bf16 rows: a bf16 D, and aux)."""
    sq = D * D
    tensor = {  # row: (launches, sum of Ni No over them in one micro-batch)
        "cublasLt_bias:bf16": (M * L, L * 3 * sq),
        "cublasLt_bias_residual": (2 * M * L, L * 5 * sq),
        "cublasLt_gelu_aux_bias:bf16": (M * L, L * 4 * sq),
        "cublasLt:bf16": (M, D * V),
        "cublasGemmEx_bf16:bwd_input": (M * (2 * L + 1), L * 7 * sq + D * V),
        "cublasLt_bwd_input:bf16": (M * L, L * sq),
        "cublasLt_dgelu:bf16": (M * L, L * 4 * sq),
        "cublasGemmEx_bf16:bwd_weight": (M * (4 * L + 1), L * 12 * sq + D * V),
    }
    for row, (launches, mm) in tensor.items():
        got = r[row]
        close(got[0], launches, f"{row} launches")
        close(got[1], 2.0 * M * N * mm, f"{row} tensor FLOPs = 2 N sum(Ni No) (bf16)")
    check("cublasGemmEx_bf16:fwd" not in r, "the head's forward wrote float32 logits")
    # the projection's input gradient, the attention's dout, which cuDNN reads as bf16 alone
    # (layers/builtin.h layer_attention_dout_at_rest): W and dy in bf16, dx written as bf16
    close(r["cublasLt_bwd_input:bf16"][3], M * L * (2.0 * (sq + N * D) + 2.0 * N * D),
          "the attention's dout product bytes")
    close(r["cublasLt:bf16"][3], M * (2.0 * (V * D + N * D) + 2.0 * N * V),
          "the head's forward bytes: W and x in bf16, the logits written as bf16")
    for role in ("bwd_input", "bwd_weight"):
        close(r["cublasGemmEx_bf16:" + role][2], 0.0, f"bf16 {role}: no FLOPs off the tensor cores")
    # the epilogues' FLOPs an element of D (4D x N per micro-batch and block for GELU and DGELU,
    # D x N for the projections: bias and residual)
    close(r["cublasLt_gelu_aux_bias:bf16"][2], M * L * 11.0 * N * 4 * D, "GELU_AUX_BIAS: 10 + bias")
    close(r["cublasLt_dgelu:bf16"][2], M * L * 16.0 * N * 4 * D, "DGELU: 16 an element")
    close(r["cublasLt_bias_residual"][2], 2 * M * L * 2.0 * N * D, "bias + residual: 2")
    # GELU_AUX_BIAS's bytes: W [4D, D] and x [N, D] in bf16, D and the aux written as bf16, the
    # float32 bias; the plain bias's: W [3D, D] and x in bf16, D as bf16, the bias
    close(r["cublasLt_gelu_aux_bias:bf16"][3],
          M * L * (2.0 * (4 * D * D + N * D) + 2.0 * 2 * 4 * D * N + 4.0 * 4 * D),
          "GELU_AUX_BIAS bytes")
    close(r["cublasLt_bias:bf16"][3],
          M * L * (2.0 * (3 * D * D + N * D) + 2.0 * 3 * D * N + 4.0 * 3 * D), "BIAS bytes")
    check("cublasLt_bias" not in r and "cublasLt_gelu_aux_bias" not in r,
          "a block's qkv or fc product wrote float32 D")
    check(not any(k.startswith("gelu_") for k in r), "the GELU kernels run only where cuBLASLt "
          f"cannot fuse: {[k for k in r if k.startswith('gelu_')]}")
    # norms: forward plain (the residual add is the projections' epilogue), backward fused
    launches, _, other, nbytes = r["layernorm_forward_kernel"]
    close(launches, M * (2 * L + 1), "layernorm launches")
    # a block's two write their output as bf16 straight to its place at rest (ops_cuda.h y16:
    # xln1 and xln2, read only by products), the final norm's is a layer output (float32); the
    # second writes its x's bits too (x1's place at rest: layers/layer.h forward_reads)
    close(nbytes, M * (2 * L + 1) * 4.0 * (2 * N * D + 2 * D + 2 * N) - M * 2 * L * 2.0 * N * D
          + M * L * 2.0 * N * D, "layernorm bytes")
    close(other, M * (2 * L + 1) * 8.0 * N * D, "layernorm FLOPs")
    launches, _, other, nbytes = r["layernorm_backward_input_residual_kernel"]
    close(launches, 2 * M * L, "fused residual layernorm backward launches")
    close(other, 2 * M * L * 13.0 * N * D, "fused residual layernorm backward FLOPs")
    # dy's bits too, written to its place at rest as the kernel reads it (dxln2, dxln1: the
    # stash parts' copies, layers/layer.h backward_reads; no pass of their own after it), and
    # dx's as it writes it: the second norm's dx1 (a stash part too), the first norm's the
    # block's input gradient, which it rounds (the layer before reads those bits: kernels.h
    # din_copy); both norms' x read from copies at rest (2 bytes an element): the second's, x1,
    # its saved part's (layer.h read_at_rest), the first's, the block's input, the previous
    # layer's output at rest (layer.h in_read_at_rest)
    close(nbytes, 2 * M * L * (4.0 * (4 * N * D + D + 2 * N) + 2.0 * 2.0 * N * D)
          - 2 * M * L * 2.0 * N * D,
          "fused residual layernorm backward bytes: dy, x, dres in, dx out, dy's and dx's bits; "
          "w; mean, rstd")
    params = L * (12 * D * D + 13 * D) + V * D + T * D + 2 * D
    launches, _, other, nbytes = r["adamw_chunks_kernel"]
    close(launches, 1, "adamw: one launch")
    close(other, 15.0 * params, "adamw FLOPs: 15 a parameter (the clip's multiply one of them)")
    close(nbytes, 30.0 * params, "adamw bytes: w, g, m, v read, w, m, v and the bf16 copy written")
    check("scale_kernel" not in r, "no gradient scaling pass: the clip is the optimizer's")
    # the gradient norm: one launch over every tensor's blocks (a block per 4096 floats: one for
    # each of a block's 12 tensors, wte 2, wpe 1, ln_f's 2), one adding each tensor's partials
    blocks = 12 * L + 5
    launches, _, other, nbytes = r["sumsq_spans_partial_kernel"]
    close(launches, 1, "sumsq: one launch over every tensor")
    close(other, 2.0 * params, "sumsq FLOPs: 2 a parameter")
    close(nbytes, 4.0 * params + 8.0 * blocks, "sumsq bytes: the gradients read, a partial a block")
    launches, _, other, _ = r["sumsq_spans_finish_kernel"]
    close(launches, 1, "sumsq: one launch adding every tensor's partials")
    close(other, blocks, "sumsq: each partial added once")
    check("sumsq_partial_kernel" not in r, "no per-tensor sumsq launches")
    # attention under bf16: the library's rows only (the emulator's substitute runs the in-house
    # kernels with the ledger paused); QK^T and PV over the causal half, backward 2.5 times
    check(not any(k.startswith("flash_") for k in r), "no in-house attention rows under bf16")
    n_qkv, n_o, lse = B * T * 3 * D, B * T * D, 4.0 * B * 2 * T  # 2 heads
    for row, products, tensors in (("cudnn_attention_forward", 1.0, 1),
                                   ("cudnn_attention_backward", 2.5, 2)):
        launches, tflops, other, nbytes = r[row]
        close(launches, M * L, f"{row} launches")
        close(tflops, M * L * products * 4.0 * B * T * T * D / 2, f"{row} tensor FLOPs")
        close(other, 0.0, f"{row}: no other FLOPs counted")
        close(nbytes, M * L * (2.0 * tensors * (n_qkv + n_o) + lse), f"{row} bytes")
    # conversions: the products' activation operands (weights read from the copy): x of each
    # forward, dy of each input gradient, x of each weight gradient but a block's (xln1, atty,
    # xln2, g: 7D, read from their copies at rest); no dy of a weight gradient: the layer's
    # dout is read where its input gradient converted it (share_bf16), nor a block's dout (D)
    # at all: the norm writing it as the layer after's input gradient kept its bits (kernels.h
    # din_copy; the final norm's for the last block), a block's h (d(fc
    # output)) where the DGELU wrote it as bf16, into room the table keeps (share_bf16_into
    # without a place, alone: layers/layer.h backward_at_rest; nor is it converted for fc's
    # input gradient: 4D), nor dx1 (D), whose bits the second norm's backward writes to its
    # place as it writes it (share_bf16_into not alone: layers/layer.h backward_reads); nor the
    # block's
    # atty forward (D) and dqkv backward (3D): the attention's bf16 results are kept as their
    # copies (pt_attention_opts.shared); nor the block's xln1 and xln2 forward (2D), which their
    # norms write as bf16 to their places at rest, nor the attention's qkv (3D) and fc2's g (4D)
    # forward, which their products write as bf16 to their places at rest (kernels.h
    # share_bf16_into, alone: a bf16 D, ops_linear.cu lt_args D16); nor the head's dy (V): the
    # loss writes its gradient as bf16 (kernels.h loss_acc dy16; the head reads it only through
    # products, layers/layer.h dout_read_at_rest), nor the head's x backward (D): the final
    # norm's output at rest (layers/layer.h in_read_at_rest)
    sum_ni, sum_no = L * 7 * D + D, L * 9 * D
    launches, _, _, nbytes = r["to_bf16_kernel:operand"]
    close(launches, M, "operand conversions: none a block's, the head's forward x")
    close(nbytes, 6.0 * M * N * (2 * sum_ni + sum_no - 23 * D * L - D),
          "operand conversions: 6 bytes each")
    # the bias gradients: a block's four read their dy from its copy, 2 bytes an element (fc2's
    # dout shared with values, fc's h its room kept, the projection's dx1 converted there by its
    # input gradient, qkv's dqkv the attention's result there), none the floats; one chunk
    # (N < 128 rows): the accumulators read and written
    launched, _, other, nbytes = r["colsum_acc_kernel:bf16"]
    close(launched, M * 4 * L, "bias gradients: 4 a block")
    close(other, M * N * 9 * D * L, "bias gradients: 1 FLOP an element")
    close(nbytes, M * L * 9 * D * (2.0 * N + 8.0), "bias gradients: dy's copy and the sums")
    check("colsum_acc_kernel" not in r, "a bias gradient sums dy's floats")
    # LayerNorm's weight gradients: a block's two read dy from the stash part's copy that the
    # norms' backward wrote as it read it (dxln2, dxln1: 2 bytes an element) and x from its copy
    # at rest (x1's; the block's input, the layer before's output at rest: layers/layer.h
    # in_read_at_rest); the final norm's dy as floats (its dout has no copy: no product reads
    # it), its x, the last block's output, at rest; mean and rstd, and the sums (one chunk) read
    # and written
    launched, _, _, nbytes = r["layernorm_backward_weight_kernel:bf16"]
    close(launched, M * (2 * L + 1), "LayerNorm weight gradients from copies: 2 a block, ln_f")
    close(nbytes, M * L * (N * D * 8.0 + 2 * (8.0 * N + 16.0 * D))
          + M * (N * D * 6.0 + 8.0 * N + 16.0 * D),
          "LayerNorm weight gradients from copies: bytes")
    check("layernorm_backward_weight_kernel" not in r, "a LayerNorm weight gradient of floats")
    # A micro-batch's other conversions (one stage, no stash sets, no checkpointing), per token:
    # - rounded and packed in one pass (10 bytes an element), to rest: every layer's output but
    #   the head's (D each), L + 3 (the head's product writes the logits to their place at rest
    #   as bf16 alone, where the loss reads them), and the block's saved parts in bf16 that
    #   forward writes, one launch a run of adjacent parts (engine/stage_store.c; the block
    #   keeps them adjacent): none (xln1 and xln2 go there as their norms' bf16 outputs, qkv,
    #   g and h as their products' bf16 D and aux, kernels.h share_bf16_into alone, atty as the
    #   attention's bf16 result, written there alone, not widened: kernels.h
    #   attention_reads_bf16, and x1 as the bits the second norm writes as it reads it,
    #   layers/layer.h forward_reads; the norms' mean and rstd and the attention's lse stay
    #   float32, adjacent too: one device copy);
    # - nothing packed after backward_input: every part it writes went to room the table keeps
    #   from backward_input (layers/layer.h backward_at_rest): h and dqkv alone (the DGELU's bf16
    #   D, the attention's bf16 result), dx1 converted by the projection's input gradient,
    #   dxln2 and dxln1 written by the norms' backward as they read them (backward_reads);
    # - rounded only (8 bytes): the input gradients backward that no norm writes (D each): the
    #   head's and the position embedding's, 2 (the blocks' and the final norm's are written
    #   rounded by their norm's backward: layers/layer.h din_by_norm);
    # - nothing packed for the attention backward: its dout is written as bf16 alone by the
    #   projection's input gradient (cublasLt_bwd_input:bf16); its qkv and o backward are read
    #   from their copies at rest);
    # - no unpacks: the input of each block, the final norm and the head is read from the layer
    #   before's output at rest (layers/layer.h in_read_at_rest); nor the
    #   block's parts (xln1, xln2, g, qkv, atty and x1, read only as weight gradients' x, by the
    #   library's attention and as the second norm's x, are read from their copies at rest:
    #   layers/layer.h read_at_rest; nor h, the DGELU's aux, read from its copy at rest); not
    #   the attention's results (its o forward and dqkv backward are written alone to their
    #   places, not widened).
    outs = D * (L + 3)
    # The finite checks (train.on_nonfinite abort): every layer's output but the logits, each in
    # the pass keeping it at rest (round_pack_bf16 with a mark: 1 FLOP an element, no bytes
    # more), none in a pass of its own; the logits' check the loss makes as it reads them (one
    # read of N V bf16 at rest, its gradient's bits written over them: a partial sum a block,
    # min(N, 1024) blocks).
    forms = {  # row: (launches, elements, bytes an element, FLOPs an element) a micro-batch
        "round_pack_bf16_kernel": (L + 3, outs, 10.0, 1.0),
        "round_bf16_kernel": (2, 2 * D, 8.0, 0.0),
    }
    check("from_bf16_kernel" not in r, "a layer's input or part unpacked for backward")
    check("pack_bf16_around_kernel" not in r, "a stash part packed after backward_input")
    check("to_bf16_kernel" not in r, "the attention's dout packed")
    check("finite_mark_kernel" not in r, "a finite check in a pass of its own")
    for row, (launches, per_token, width, flops) in forms.items():
        launched, _, other, nbytes = r[row]
        close(launched, M * launches, f"{row} launches")
        close(other, flops * M * N * per_token, f"{row} FLOPs")
        close(nbytes, width * M * N * per_token, f"{row} bytes")
    launched, _, other, nbytes = r["cross_entropy_kernel"]
    close(launched, M, "cross entropy: one launch a micro-batch")
    close(other, 4.0 * M * N * V, "cross entropy: 4 FLOPs a logit")
    close(nbytes, M * (4.0 * N * V + 4 * N + 8 * min(N, 1024)),
          "cross entropy: the logits read once as bf16 and the gradient written as bf16, ids, "
          "partial sums")


def llama_rows(binary):
    spec = "tests/gpu/roofline_tiny_llama.yaml"
    r = ledger(run(binary, "--raw", "--direct", spec=spec))
    Bl, Ml, Tl, Dl, Hl, KVHl, Ll = 2, 2, 32, 64, 4, 2, 2  # the spec's sizes
    hd, Nl = Dl // Hl, Bl * Tl
    check("from_bf16_kernel" not in r,
          f"{spec}: a tensor unpacked for backward (a layer's input, or dq|dk|dv widened for the "
          f"rotation: kernels.h pt_attention_opts.rotated)")
    check("to_bf16_kernel" not in r, f"{spec}: the attention's dout packed")
    launched, _, _, nbytes = r["to_bf16_kernel:operand"]
    close(launched, Ml, f"{spec}: operand conversions: the head's forward x alone")
    # the rotated pairs and v's elements of one call: forward writes q|k|v's bits as it rotates
    # (16 bytes a pair, 4 more for the bits; v read and its bits written, 6), backward reads
    # the attention's bits (12 a pair, the bits 4; v's bits read, widened and written, 8)
    pairs, nv = Nl * (Hl + KVHl) * (hd // 2), Nl * KVHl * hd
    launched, _, _, nbytes = r["rope_kernel"]
    close(launched, 2 * Ml * Ll, f"{spec}: rope launches: forward and backward a block")
    close(nbytes, Ml * Ll * ((16 + 4) * pairs + 6 * nv + (12 + 4) * pairs + 8 * nv),
          f"{spec}: rope bytes: forward from floats, backward from the attention's bits")


def timed(binary, counted_raw):
    """7.: the ledger timed on the device (the emulator: the CPU's time emulating each launch),
    against the counted ledger's --direct --raw text."""
    text = run(binary, "--time", "--raw")
    same_ledger(ledger(text), ledger(counted_raw), "timed against counted")
    seconds, host_bound, timed_s, untimed_s = {}, {}, 0.0, 0.0
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "row":
            seconds[f[1]], host_bound[f[1]] = float(f[6]), float(f[7])
        elif f and f[0] == "time":
            timed_s, untimed_s = float(f[1]), float(f[2])
    check(all(v >= 0 for v in seconds.values()), f"a row timed below 0: {seconds}")
    check(all(0 <= host_bound[k] <= seconds[k] for k in seconds),
          f"a row's host-bound time outside [0, its time]: {host_bound} against {seconds}")
    check(timed_s > 0 and untimed_s > 0, f"the steps took {timed_s} s timed, {untimed_s} s not")
    close(sum(seconds.values()), timed_s, "the rows' seconds against the timed step", rel=1e-3)
    report = run(binary, "--time")
    # the emulator's cuDNN substitute runs kernels inside the call: about 3 % of the emulated
    # step each way (a real GPU's tiny calls are the host's time: not held to a share)
    for row in ("cudnn_attention_forward", "cudnn_attention_backward"):
        check("CUDA emulator" not in report or seconds.get(row, 0) > 0.005 * timed_s,
              f"{row}: {seconds.get(row, 0):.3g} s of a {timed_s:.3g} s step: the call's work "
              f"went to another row (its note after the call?)")
    for want in ("measured", "x floor", "measured on ", "the untimed step", "The timed step",
                 "host-bound: "):
        check(want in report, f"--time report with {want!r}")
    ledger_compare(counted_raw, report)


def ledger_compare(raw, report):
    """8.: the counters row's comparison, alike and with one row changed."""
    changed = re.sub(r"^(cublasLt_bias:bf16\s+)(\d+)", lambda m: m.group(1) + "99", report,
                     count=1, flags=re.M)
    check(changed != report, "no cublasLt_bias:bf16 row in the --time report to change")
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("emu.txt", "gpu.txt", "changed.txt")]
        for path, text in zip(paths, (raw, report, changed)):
            open(path, "w").write(text)
        for gpu, want in ((paths[1], 0), (paths[2], 1)):
            out = subprocess.run([sys.executable, "scripts/ledger_compare.py", paths[0], gpu],
                                 capture_output=True, text=True)
            check(out.returncode == want,
                  f"ledger_compare.py on {os.path.basename(gpu)}: exit {out.returncode}, want "
                  f"{want}\n{out.stdout}{out.stderr}")
            if want == 1:
                check("cublasLt_bias:bf16" in out.stdout and "1 of" in out.stdout,
                      f"ledger_compare.py does not name the changed row:\n{out.stdout}")


def report_lines(text):
    for want in ("peaks (dense, published)", "cublasLt:bf16", "H100: step floor",
                 "H200: step floor", "MFU", "tokens/s", "launches per step",
                 "launch overhead at", "memory (one process, the device's buffers): planned",
                 "the device counted"):
        check(want in text, f"report line with {want!r}")


def main():
    binary = sys.argv[1]
    launch_sites_noted()
    counted_raw = run(binary, "--direct", "--raw")
    counted = ledger(counted_raw)
    executed = ledger(run(binary, "--direct", "--raw", "--execute"))
    same_ledger(counted, executed, "count-only against executed")
    scaled = ledger(run(binary, "--raw"))
    same_ledger(scaled, counted, "scaled from 1 and 2 blocks against 3 blocks run")
    closed_forms(counted)
    report_lines(run(binary))
    real_shape_memory(binary)
    llama_rows(binary)
    timed(binary, counted_raw)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
