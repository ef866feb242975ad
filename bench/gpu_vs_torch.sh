#!/usr/bin/env bash
# bench/gpu_vs_torch.sh [SPEC] [ROUNDS]: pipetrain against PyTorch on one GPU, same model, same
# step (bench/gpt2_small.yaml by default: GPT-2 small, 8 x 1024 tokens), for each precision
# fp32, tf32 and bf16: PyTorch eager and torch.compile (bench/torch_gpt.py) beside pipetrain
# --sequential, run alternately ROUNDS times (default 3). Prints each one's median step time,
# pipetrain's speed relative to each baseline (>1: pipetrain faster) and each one's MFU: model
# FLOPs per second over the GPU's dense peak at that precision.
#
# Peaks (TFLOP/s, dense fp32/tf32/bf16) are known for H100 SXM and H200 (67/495/989), H100 PCIe
# (51/378/756) and A100 (19.5/156/312); elsewhere set PT_PEAK_TFLOPS="fp32 tf32 bf16".
# PT_BENCH_DEVICE=cpu runs the same comparison on the CPU (no MFU unless PT_PEAK_TFLOPS is set):
# a dry run of this script where no GPU is lent; give it a small spec (examples/gpt.yaml).
# Needs: build/pipe_train (PIPE_TRAIN=... to use another), python3 with torch and pyyaml.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=$(realpath "${1:-$root/bench/gpt2_small.yaml}")
rounds=${2:-3}
bin=${PIPE_TRAIN:-$root/build/pipe_train}
device=${PT_BENCH_DEVICE:-gpu}
py=${PYTHON:-python3}
[[ -x $bin ]] || { echo "bench/gpu_vs_torch.sh: $bin not built; build first (README)" >&2; exit 2; }
"$py" -c 'import torch, yaml' 2>/dev/null || {
  echo "bench/gpu_vs_torch.sh: $py lacks torch or pyyaml; pip install torch pyyaml (or PYTHON=...)" >&2
  exit 2; }
if [[ $device == gpu ]]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
  [[ -n $gpu ]] || { echo "bench/gpu_vs_torch.sh: no GPU visible (nvidia-smi lists none); for a" \
    "dry run on the CPU: PT_BENCH_DEVICE=cpu bench/gpu_vs_torch.sh examples/gpt.yaml" >&2; exit 2; }
  torch_device=cuda
else
  gpu="cpu"
  torch_device=cpu
fi
case "${PT_PEAK_TFLOPS:-}:$gpu" in
  :*H100*PCIe*) peaks="51 378 756" ;;
  :*H100*|:*H200*) peaks="67 495 989" ;;
  :*A100*) peaks="19.5 156 312" ;;
  :*) peaks="" ;;
  *) peaks=$PT_PEAK_TFLOPS ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pipetrain_ms() { # PRECISION -> median step_ms after the first 3 steps
  "$bin" "$spec" --sequential --quiet --set "pipeline.device=$device" \
    --set "train.precision=$1" --set train.steps=13 --metrics "$work/m.jsonl" >/dev/null
  "$py" -c 'import json,statistics,sys; r=[json.loads(l)["step_ms"] for l in open(sys.argv[1])][3:]; print(statistics.median(r))' "$work/m.jsonl"
}
torch_json() { # PRECISION [--compile]
  "$py" "$root/bench/torch_gpt.py" "$spec" --device "$torch_device" --precision "$@"
}
echo "$(basename "$spec") on $gpu, $rounds rounds alternating, medians:"
printf '%-5s %10s %10s %10s %9s %9s   %s\n' prec pt_ms eager_ms compile_ms vs_eager \
  vs_compile "MFU pipetrain / eager / compile"
i=0
for prec in fp32 tf32 bf16; do
  i=$((i + 1))
  : >"$work/$prec"
  for ((r = 0; r < rounds; r++)); do
    echo "pt $(pipetrain_ms "$prec")" >>"$work/$prec"
    echo "eager $(torch_json "$prec")" >>"$work/$prec"
    echo "compile $(torch_json "$prec" --compile)" >>"$work/$prec"
  done
  "$py" - "$work/$prec" "$prec" "$(echo "$peaks" | cut -s -d' ' -f$i)" <<'PY'
import json, statistics, sys
rows = [line.split(" ", 1) for line in open(sys.argv[1])]
ms = {k: statistics.median(float(v) if k == "pt" else json.loads(v)["step_ms"]
                           for kk, v in rows if kk == k) for k in ("pt", "eager", "compile")}
flops = json.loads(next(v for k, v in rows if k == "eager"))["flops_per_step"]
peak = float(sys.argv[3]) * 1e12 if sys.argv[3] else 0
mfu = " / ".join(f"{100 * flops / (ms[k] / 1e3) / peak:.1f}%" if peak else "n/a"
                 for k in ("pt", "eager", "compile"))
print(f"{sys.argv[2]:<5} {ms['pt']:10.1f} {ms['eager']:10.1f} {ms['compile']:10.1f} "
      f"{ms['eager'] / ms['pt']:9.3f} {ms['compile'] / ms['pt']:9.3f}   {mfu}")
PY
done
