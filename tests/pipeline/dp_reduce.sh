#!/usr/bin/env bash
# dp_reduce.sh PIPE_TRAIN "SETTINGS" [STEPS]: comm.dp_reduce: allreduce against chain. Trains
# tests/pipeline/gate.yaml for STEPS (4) steps in 2 stages x 2 replicas (4 ranks) with SETTINGS
# (space-separated KEY=VALUE, e.g. the GPU path's) once per setting; every step's loss must
# agree within 1e-5 relative (allreduce adds in the library's order, so bitwise equality is not
# promised; float rounding of a sum of two replicas stays far below that). On the emulated NCCL
# (PT_EMU_NCCL_COUNTERS) the allreduce run must also make fewer point-to-point sends than the
# chain (whose running sum is a send per replica but the last): the setting reaches the
# data-parallel sum.
pipe_train=$(realpath "$1")
settings=${2:-}
steps=${3:-4}
source "$(dirname "$0")/../lib.sh"
export PT_EMU_NCCL_COUNTERS=1
sets=()
for kv in $settings pipeline.stages=2 pipeline.data_parallel=2 train.steps=$steps; do
  sets+=(--set "$kv")
done
for mode in chain allreduce; do
  pt_mpirun 4 "$pipe_train" tests/pipeline/gate.yaml --quiet \
    "${sets[@]}" --set comm.dp_reduce=$mode --metrics "$work/$mode.jsonl" 2>"$work/$mode.err" ||
    { cat "$work/$mode.err"; exit 1; }
done
python3 - "$work" "$steps" <<'PY'
import json, re, sys
work, steps = sys.argv[1], int(sys.argv[2])
def losses(mode):
    return [json.loads(l)["loss"] for l in open(f"{work}/{mode}.jsonl") if l.strip()]
def sends(mode):  # the emulated NCCL's sends over every rank, or None off the emulator
    found = re.findall(r"nccl-emu counters: sends=(\d+)", open(f"{work}/{mode}.err").read())
    return sum(map(int, found)) if found else None
chain, fast = losses("chain"), losses("allreduce")
ok = len(chain) == len(fast) == steps
for step, (a, b) in enumerate(zip(chain, fast), 1):
    rel = abs(a - b) / max(abs(a), 1e-30)
    print(f"step {step}: chain {a:.9g} allreduce {b:.9g} relative difference {rel:.2e}")
    ok &= rel <= 1e-5
sc, sa = sends("chain"), sends("allreduce")
if sc is not None:
    print(f"emulated NCCL sends: chain {sc}, allreduce {sa}")
    ok &= sa is not None and sa < sc
print("dp_reduce: allreduce agrees with chain" if ok else "FAIL: dp_reduce allreduce vs chain")
sys.exit(0 if ok else 1)
PY
