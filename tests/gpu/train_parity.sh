#!/usr/bin/env bash
# train_parity.sh PIPE_TRAIN: training on a GPU against the CPU path, and pipelined GPU runs
# against the sequential GPU run. Exits 77 (CTest skip) where no GPU can be used.
#   (a) tests/pipeline/gate.yaml, 20 steps (PT_PARITY_STEPS), --sequential on the GPU vs on the CPU: every step's
#       loss within 1e-4 relative (the kernels agree to 1e-5 per op; 20 AdamW steps of a 10-layer
#       model compound that)
#   (b) 2 stages sharing GPU 0 over MPI staging (comm.backend: mpi) vs the sequential GPU run:
#       the gate's rules (losses 1e-6, untied parameters bitwise): the same kernels in the same
#       order on the same GPU
#   (c) where there are 2 GPUs: 2 stages over NCCL, the same rules
pipe_train=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
spec=tests/pipeline/gate.yaml
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if ! "$pipe_train" "$spec" --sequential --quiet --set train.steps=1 --set pipeline.device=gpu \
  >/dev/null 2>"$work/probe.err"; then
  skip "no GPU ($(head -c 200 "$work/probe.err"))"
fi
steps=${PT_PARITY_STEPS:-20}
run() { # NAME NP DEVICE SETTINGS...
  local name=$1 np=$2 dev=$3
  shift 3
  set -- --set train.steps="$steps" "$@"
  if [[ $np == 0 ]]; then
    "$pipe_train" "$spec" --sequential --quiet --set pipeline.device="$dev" "$@" \
      --metrics "$work/$name.jsonl" --dump-params "$work/$name"
  else
    timeout 300 mpirun -np "$np" --oversubscribe "$pipe_train" "$spec" --quiet \
      --set pipeline.device="$dev" "$@" --metrics "$work/$name.jsonl" --dump-params "$work/$name"
  fi
}
run cpu 0 cpu
run gpu 0 gpu
python3 - "$work/cpu.jsonl" "$work/gpu.jsonl" "$steps" <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == int(sys.argv[3]), (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"(a) GPU vs CPU, {len(a)} steps: worst loss difference {worst:.2e} relative")
sys.exit(0 if worst < 1e-4 else 1)
PY
# (b) shares GPU 0 between the two ranks, as a one-GPU machine must: the staged transport
# allows it (pipeline.devices repeats an id only under comm.backend: mpi)
run staged 2 gpu --set pipeline.stages=2 --set comm.backend=mpi \
  --set "pipeline.devices=[0, 0]"
python3 tests/pipeline/compare_runs.py "$work/gpu.jsonl" "$work/gpu" "$work/staged.jsonl" "$work/staged" 2
echo "(b) 2 stages sharing one GPU over MPI staging: equal to the sequential GPU run"
if [[ $gpus -ge 2 ]]; then
  run nccl 2 gpu --set pipeline.stages=2
  python3 tests/pipeline/compare_runs.py "$work/gpu.jsonl" "$work/gpu" "$work/nccl.jsonl" "$work/nccl" 2
  echo "(c) 2 stages on 2 GPUs over NCCL: equal to the sequential GPU run"
else
  echo "(c) skipped: one GPU"
fi
