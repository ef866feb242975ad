#!/usr/bin/env bash
# bench/gpu_targets.sh [SPEC] [ROUNDS]: issue 26's targets on one GPU, each measurement beside
# the roofline's prediction (bench/gpu_roofline.c --time, run first on the same GPU: its table
# with each kernel's measured time against its floor printed whole). SPEC (default
# bench/gpt2_small.yaml) under train.precision bf16, ROUNDS (default 2) rounds alternating:
#   seq      pipe_train --sequential
#   2stage   the same spec as 2 pipeline stages on the one GPU (mpirun -np 2, comm.backend mpi,
#            pipeline.devices [0,0]: the staged transport, as scripts/gpu_check.sh's gates)
#   torch    PyTorch with torch.compile, SDPA and fused AdamW (bench/torch_gpt.py --compile)
# Each row: the median step time over the rounds (each run's median after 3 warm-up steps),
# tokens/s, MFU (the roofline's model FLOPs per step, 6 params + 12 L dim T a token, over the
# GPU's dense bf16 peak), the roofline's floor and its achievable estimate for this GPU, and
# measured / floor. Then the targets: seq at least as fast as torch, seq MFU >= 40%, 2stage
# within 10% of seq. A summary is printed after every round, so a time limit keeps the rounds
# done. Last, the memory of the seq run beside the plan and torch.compile's (memory_summary).
# PT_BENCH_DEVICE=cpu: a dry run on the CPU (no roofline, no MFU; give it a small spec).
# Needs: PIPE_TRAIN (default build/pipe_train), GPU_ROOFLINE (default gpu_roofline beside it),
# mpirun, python3 with torch and pyyaml (PYTHON=...).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=$(realpath "${1:-$root/bench/gpt2_small.yaml}")
rounds=${2:-2}
bin=${PIPE_TRAIN:-$root/build/pipe_train}
roof=${GPU_ROOFLINE:-$(dirname "$bin")/gpu_roofline}
device=${PT_BENCH_DEVICE:-gpu}
py=${PYTHON:-python3}
[[ -x $bin ]] || { echo "bench/gpu_targets.sh: $bin not built; build first (README)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--quiet --set "pipeline.device=$device" --set train.precision=bf16 --set train.steps=13)
torch_device=cuda two_stage=(--set pipeline.stages=2 --set comm.backend=mpi)
if [[ $device == gpu ]]; then
  two_stage+=(--set 'pipeline.devices=[0,0]')
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
else
  torch_device=cpu gpu=cpu
fi

median_ms() { # METRICS.jsonl -> the median step_ms after the first 3 steps
  "$py" -c 'import json,statistics,sys; r=[json.loads(l)["step_ms"] for l in open(sys.argv[1])][3:]; print(statistics.median(r))' "$1"
}

# The prediction first: the floor of this step on this GPU, from the kernels' cost ledger, and
# each kernel row measured on the GPU beside its floor (--time), the whole table in the log.
if [[ $device == gpu ]]; then
  if "$roof" "$spec" --set train.precision=bf16 --time > "$work/roof.txt" 2>&1; then
    cat "$work/roof.txt"
  else
    echo "bench/gpu_targets.sh: $roof failed: $(tail -1 "$work/roof.txt"); no prediction"
  fi
fi
: > "$work/roof.txt.keep"
[[ -f $work/roof.txt ]] && cp "$work/roof.txt" "$work/roof.txt.keep"

summary() {
  "$py" - "$work/raw" "$work/roof.txt.keep" "$gpu" <<'PY'
import json, re, statistics, sys
raw, roof, gpu = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3]
runs = {}
for line in open(raw):
    kind, value = line.split(" ", 1)
    ms = float(value) if kind != "torch" else json.loads(value)["step_ms"]
    runs.setdefault(kind, []).append(ms)
tokens = flops = floor = achieve = None
m = re.search(r"model FLOPs per step: (\S+) .* x (\d+) tokens\)", roof)
if m:
    flops, tokens = float(m.group(1)), float(m.group(2))
card = "H200" if "H200" in gpu else "H100"
m = re.search(card + r": step floor (\S+) ms.*?: (\S+) ms, \d+ tokens/s, MFU", roof)
if m:
    floor, achieve = float(m.group(1)), float(m.group(2))
peak = 989.4e12 if ("H100" in gpu or "H200" in gpu) else None
print(f"{'run':<7} {'rounds':>6} {'step_ms':>9} {'tokens/s':>10} {'MFU':>6} "
      f"{card + ' floor':>11} {'achievable':>10} {'meas/floor':>10}")
med = {k: statistics.median(v) for k, v in runs.items()}
for kind in ("seq", "2stage", "torch"):
    if kind not in med:
        continue
    ms = med[kind]
    tps = f"{tokens / (ms / 1e3):10.0f}" if tokens else f"{'n/a':>10}"
    mfu = f"{100 * flops / (ms / 1e3) / peak:5.1f}%" if flops and peak else f"{'n/a':>6}"
    fl = f"{floor:9.2f}ms" if floor else f"{'n/a':>11}"
    ac = f"{achieve:8.2f}ms" if achieve else f"{'n/a':>10}"
    ratio = f"{ms / floor:10.2f}" if floor else f"{'n/a':>10}"
    print(f"{kind:<7} {len(runs[kind]):>6} {ms:9.2f} {tps} {mfu} {fl} {ac} {ratio}")
t = []
if "seq" in med and "torch" in med:
    t.append(f"seq vs torch.compile {med['torch'] / med['seq']:.3f}x (target >= 1)")
if "seq" in med and flops and peak:
    t.append(f"seq MFU {100 * flops / (med['seq'] / 1e3) / peak:.1f}% (target >= 40%)")
if "seq" in med and "2stage" in med:
    t.append(f"2stage / seq {med['2stage'] / med['seq']:.3f} (target <= 1.10)")
print("targets: " + "; ".join(t))
PY
}

# Memory at the same shape beside PyTorch's: the plan, the peak of pipetrain's buffers, what its
# GPU counted taken (the kernel tables' scratch and the libraries' workspaces too: metrics'
# gpu_memory_bytes), and torch.compile's peaks (allocated, reserved) from the last round.
memory_summary() {
  "$bin" "$spec" "${common[@]}" --plan --json > "$work/plan.json" 2>/dev/null
  "$py" - "$work/plan.json" "$work/seq.jsonl" "$work/torch.json" <<'PY'
import json, sys
def load(path, last):
    try:
        lines = [l for l in open(path) if l.strip()]
        return json.loads(lines[-1] if last else "".join(lines))
    except (OSError, ValueError, IndexError):
        return {}
plan, seq, torch = load(sys.argv[1], False), load(sys.argv[2], True), load(sys.argv[3], True)
def gib(b):
    if not isinstance(b, (int, float)):
        return "n/a"
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.2f} MiB"
first = lambda v: v[0] if isinstance(v, list) and v else None
stage = first(plan.get("stage_plan")) or {}
print(f"memory (seq): planned {gib(stage.get('memory_bytes', {}).get('total'))}, buffers' peak "
      f"{gib(first(seq.get('peak_memory_bytes')))}, the GPU counted "
      f"{gib(first(seq.get('gpu_memory_bytes')))} taken; torch.compile: allocated "
      f"{gib(torch.get('peak_allocated_bytes'))}, reserved {gib(torch.get('peak_reserved_bytes'))}")
PY
}

: > "$work/raw"
echo "$(basename "$spec") bf16 on $gpu, $rounds rounds alternating (seq, 2stage, torch):"
for ((r = 1; r <= rounds; r++)); do
  if "$bin" "$spec" --sequential "${common[@]}" --metrics "$work/seq.jsonl" >/dev/null; then
    echo "seq $(median_ms "$work/seq.jsonl")" >> "$work/raw"
  else echo "round $r: pipe_train --sequential failed (exit $?)"; fi
  if mpirun -np 2 --oversubscribe "$bin" "$spec" "${common[@]}" "${two_stage[@]}" \
      --metrics "$work/two.jsonl" >/dev/null; then
    echo "2stage $(median_ms "$work/two.jsonl")" >> "$work/raw"
  else echo "round $r: pipe_train in 2 stages failed (exit $?)"; fi
  if "$py" "$root/bench/torch_gpt.py" "$spec" --device "$torch_device" --precision bf16 \
      --compile > "$work/torch.json"; then
    echo "torch $(tail -1 "$work/torch.json")" >> "$work/raw"
  else echo "round $r: bench/torch_gpt.py --compile failed (exit $?)"; fi
  [[ -s $work/raw ]] || { echo "bench/gpu_targets.sh: no run succeeded" >&2; exit 1; }
  echo "after round $r:"
  summary
done
memory_summary
