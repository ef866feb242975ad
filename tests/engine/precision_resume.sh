#!/usr/bin/env bash
# precision_resume.sh PIPE_TRAIN: train.precision is not part of the model. Checkpoints hold the
# float32 master weights and optimizer state whatever the precision, so
#   (a) a bf16 run resumed under bf16 from its step-10 checkpoint repeats steps 11..20 bit for bit
#   (b) that checkpoint's tensors are F32, and it resumes under fp32 (losses within precision
#       parity's bf16 bound, 2e-2 relative, of the bf16 run's)
#   (c) an fp32 step-10 checkpoint resumes under bf16 (within 2e-2 of the fp32 run's losses)
pipe_train=$1
here=$(cd "$(dirname "$0")" && pwd)
spec=$here/../pipeline/gate.yaml
source "$(dirname "$0")/../lib.sh"
w=$work
run() { "$pipe_train" "$spec" --sequential --quiet "$@"; }
for p in bf16 fp32; do
  run --set train.precision=$p --set "train.checkpoint={dir: $w/$p, every: 10, keep: 2}" \
    --metrics "$w/$p.jsonl"
done
run --set train.precision=bf16 --load "$w/bf16/step-00000010" --metrics "$w/bf16_bf16.jsonl"
run --set train.precision=fp32 --load "$w/bf16/step-00000010" --metrics "$w/bf16_fp32.jsonl"
run --set train.precision=bf16 --load "$w/fp32/step-00000010" --metrics "$w/fp32_bf16.jsonl"
python3 - "$w" <<'PY'
import json, struct, sys
w = sys.argv[1]
def losses(name):
    return {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(f"{w}/{name}.jsonl")}
bad = []
ref, again = losses("bf16"), losses("bf16_bf16")
if sorted(again) != list(range(11, 21)) or any(again[s] != ref[s] for s in again):
    bad.append("(a) bf16 resumed under bf16 is not bitwise the uninterrupted bf16 run")
for f in ("model-s000.safetensors", "optim-s000.safetensors"):
    raw = open(f"{w}/bf16/step-00000010/{f}", "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    head = json.loads(raw[8:8 + n])
    kinds = {v["dtype"] for k, v in head.items() if k != "__metadata__"}
    if kinds != {"F32"}:
        bad.append(f"(b) {f} of the bf16 run holds {sorted(kinds)}, not F32 only")
for name, base, what in (("bf16_fp32", "bf16", "(b) bf16 checkpoint under fp32"),
                         ("fp32_bf16", "fp32", "(c) fp32 checkpoint under bf16")):
    got, want = losses(name), losses(base)
    rel = max((abs(got[s] - want[s]) / abs(want[s]) for s in got), default=1.0)
    print(f"{what}: steps {min(got)}..{max(got)}, max relative loss difference {rel:.3g}")
    if sorted(got) != list(range(11, 21)) or rel >= 2e-2:
        bad.append(f"{what}: {rel:.3g} >= 2e-2 or wrong steps")
print("\n".join(bad) if bad else "precision resume: ok")
sys.exit(1 if bad else 0)
PY
