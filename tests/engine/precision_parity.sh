#!/usr/bin/env bash
# precision_parity.sh PIPE_TRAIN "SETTINGS" [SPEC]: trains SPEC (tests/pipeline/gate.yaml, 20
# steps) sequentially with train.precision fp32, tf32 and bf16 (plus SETTINGS, space-separated
# KEY=VALUE) and requires every step's loss of tf32 within 2e-3 and of bf16 within 2e-2 of
# fp32's, relative, and neither bitwise equal to fp32 over the run (else the mode did nothing).
# Why these bounds: a product's inputs carry a relative error of at most 2^-11 (tf32, 10
# mantissa bits) or 2^-8 (bf16, 7 bits, plus the bf16 stored activations and gradients); over
# 20 AdamW steps the losses (about 5.5 falling to 2.5) drift by a few times that per step, and
# the measured maxima sit well inside (tf32 about 1e-4, bf16 about 4e-3 on the CPU).
pipe_train=$1 sets=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
spec=${3:-$here/../pipeline/gate.yaml}
source "$(dirname "$0")/../lib.sh"
args=()
for kv in $sets; do args+=(--set "$kv"); done
for p in fp32 tf32 bf16; do
  "$pipe_train" "$spec" --sequential --quiet "${args[@]}" --set train.precision=$p \
    --metrics "$work/$p.jsonl"
done
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
loss = {p: [json.loads(l)["loss"] for l in open(f"{w}/{p}.jsonl")] for p in ("fp32", "tf32", "bf16")}
bad = 0
for p, tol in (("tf32", 2e-3), ("bf16", 2e-2)):
    a, b = loss["fp32"], loss[p]
    if len(a) != len(b) or not a:
        print(f"{p}: {len(b)} steps vs fp32's {len(a)}"); bad = 1; continue
    rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    same = a == b
    print(f"{p}: {len(a)} steps, max relative loss difference to fp32 {rel:.3g} (bound {tol:g})"
          f"{', bitwise equal to fp32: the mode did nothing' if same else ''}")
    bad |= rel >= tol or same
sys.exit(1 if bad else 0)
PY
