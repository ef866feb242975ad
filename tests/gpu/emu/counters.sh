#!/usr/bin/env bash
# counters.sh PIPE_TRAIN: what one training step asks of the (emulated) GPU, from the CUDA
# emulator's counters (PT_EMU_COUNTERS, tests/gpu/emu/emu.h): kernel launches, cuBLAS products,
# host-device synchronisations and bytes copied each way, per step and per stage, for
# tests/pipeline/gate.yaml sequential and in 2 stages (comm.backend: mpi). A step's counts are
# the difference between runs of 4 and 2 steps, halved: start-up and the end are left out.
# Later work compares its numbers with these. Fails only if a run fails or a step does nothing.
set -euo pipefail
pipe_train=$(realpath "$1")
cd "$(dirname "$0")/../../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { # NAME NP STEPS SETTINGS...: appends each rank's counter line to $work/NAME.STEPS
  local name=$1 np=$2 steps=$3
  shift 3
  local cmd=("$pipe_train" tests/pipeline/gate.yaml --quiet --set pipeline.device=gpu
             --set train.steps="$steps" "$@")
  if [[ $np == 0 ]]; then
    PT_EMU_COUNTERS="$work/$name.$steps" "${cmd[@]}" --sequential >/dev/null
  else
    PT_EMU_COUNTERS="$work/$name.$steps" timeout 300 mpirun -np "$np" --oversubscribe \
      -x PT_EMU_COUNTERS "${cmd[@]}" >/dev/null
  fi
}
for steps in 2 4; do
  run sequential 0 "$steps"
  run stages2 2 "$steps" --set pipeline.stages=2 --set comm.backend=mpi --set "pipeline.devices=[0, 1]"
done
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
def read(path):  # {rank: {counter: value}}
    out = {}
    for line in open(path):
        fields = dict(re.findall(r"(\w+)=(-?\d+)", line))
        out[int(fields.pop("rank"))] = {k: int(v) for k, v in fields.items() if k != "pid"}
    return out
cols = ["launches", "blas", "syncs", "queries", "h2d_bytes", "d2h_bytes", "d2d_bytes", "memset_bytes"]
print("per training step of tests/pipeline/gate.yaml (4 micro-batches), on the emulated GPU:")
print(f"{'run':<12} {'stage':>5} " + " ".join(f"{c:>12}" for c in cols))
ok = True
for name in ["sequential", "stages2"]:
    two, four = read(f"{work}/{name}.2"), read(f"{work}/{name}.4")
    for rank in sorted(four):
        step = {c: (four[rank][c] - two[rank][c]) / 2 for c in cols}
        print(f"{name:<12} {max(rank, 0):>5} " + " ".join(f"{step[c]:>12.10g}" for c in cols))
        ok &= step["launches"] > 0 and step["syncs"] > 0
sys.exit(0 if ok else 1)
PY
