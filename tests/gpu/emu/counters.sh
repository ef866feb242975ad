#!/usr/bin/env bash
# counters.sh PIPE_TRAIN [--set K=V ...]: what one training step asks of the (emulated) GPU,
# from the CUDA emulator's counters (PT_EMU_COUNTERS, tests/gpu/emu/emu.h): kernel launches,
# cuBLAS products, host-device synchronisations and bytes copied each way, per step and per
# stage, for tests/pipeline/gate.yaml sequential and in 2 stages (comm.backend: mpi), with the
# settings given (e.g. --set train.precision=bf16). A step's counts are the difference between
# runs of 4 and 2 steps, halved: start-up and the end are left out.
#
# The targets it checks: at most 3 host-device synchronisations per step (issue 16), sequential and
# on each pipeline stage, outside the transport; and no call of cuBLASLt's heuristic after the first
# steps (each product's plan is made once, kernels/cuda/matmul_plan.h). The emulator says where each
# wait was called from ("pt_emu sync site" lines); the waits of comm/ (the staged MPI path copies
# every device send and receive through pinned host memory, waiting for the stream around each: a
# transport's business, reworked apart from the step) are shown in a column of their own and not
# counted against the target. Everything else a step waits for (the engine, the kernel table, the
# device) counts. Fails when a run fails, a step does nothing, or the target is missed.
pipe_train=$(realpath "$1")
shift
extra=("$@")
source "$(dirname "$0")/../../lib.sh"
run() { # NAME NP STEPS SETTINGS...: appends each rank's counter line to $work/NAME.STEPS
  local name=$1 np=$2 steps=$3
  shift 3
  local cmd=("$pipe_train" tests/pipeline/gate.yaml --quiet --set pipeline.device=gpu
             --set train.steps="$steps" "${extra[@]}" "$@")
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
LIMIT = 3  # host-device synchronisations per step and stage, outside comm/
def read(path):  # {rank: {counter: value}}, "comm_syncs" from the sync sites under comm/
    out, comm = {}, {}
    for line in open(path):
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        rank = int(fields["rank"])
        if line.startswith("pt_emu counters:"):
            out[rank] = {k: int(v) for k, v in fields.items() if k not in ("rank", "pid")}
        elif line.startswith("pt_emu sync site:") and "/comm/" in fields["at"]:
            comm[rank] = comm.get(rank, 0) + int(fields["n"])
    for rank in out:
        out[rank]["comm_syncs"] = comm.get(rank, 0)
        out[rank]["own_syncs"] = out[rank]["syncs"] - out[rank]["comm_syncs"]
    return out
cols = ["launches", "blas", "heuristics", "syncs", "comm_syncs", "own_syncs", "queries",
        "h2d_bytes", "d2h_bytes", "d2d_bytes", "memset_bytes"]
print("per training step of tests/pipeline/gate.yaml (4 micro-batches), on the emulated GPU "
      f"(own_syncs: syncs outside comm/, at most {LIMIT}):")
print(f"{'run':<12} {'stage':>5} " + " ".join(f"{c:>12}" for c in cols))
ok = True
for name in ["sequential", "stages2"]:
    two, four = read(f"{work}/{name}.2"), read(f"{work}/{name}.4")
    for rank in sorted(four):
        step = {c: (four[rank][c] - two[rank][c]) / 2 for c in cols}
        print(f"{name:<12} {max(rank, 0):>5} " + " ".join(f"{step[c]:>12.10g}" for c in cols))
        ok &= step["launches"] > 0 and step["syncs"] > 0
        if step["heuristics"] != 0:
            print(f"FAIL: {name} stage {max(rank, 0)}: cuBLASLt's heuristic asked "
                  f"{step['heuristics']:g} times a step after the first (its plans are kept)",
                  file=sys.stderr)
            ok = False
        if step["own_syncs"] > LIMIT:
            print(f"FAIL: {name} stage {max(rank, 0)}: {step['own_syncs']:g} host-device "
                  f"synchronisations per step outside comm/ (at most {LIMIT})", file=sys.stderr)
            ok = False
sys.exit(0 if ok else 1)
PY
