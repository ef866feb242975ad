#!/usr/bin/env bash
# auto_memory.sh PIPE_TRAIN [--set K=V ...]: the planner under a cap of a third of 1F1B's stage-0
# memory (tests/pipeline/gate.yaml on 4 stages, 16 micro-batches, the rest uncapped; schedule,
# split, checkpointing and offload auto): its pick fits the cap, its simulated step is within 5%
# of 1F1B's, and a short run of the pick measures the memory its plan says
# (tests/pipeline/memory.sh: plan = measured peak). Times are FLOP counts at a given rate and
# the copy rate is given, so the pick does not depend on this machine.
pipe_train=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
export PIPETRAIN_COPY_BYTES_PER_S=8e9
spec=tests/pipeline/gate.yaml
sets=(--set pipeline.stages=4 --set train.micro_batches=16 "$@")
plan() { "$pipe_train" "$spec" --plan --json --layer-times flops:10 "${sets[@]}" "$@"; }
base=$(plan --set pipeline.schedule=1f1b) || exit 1
cap=$(python3 -c 'import json,sys; print(int(json.load(sys.stdin)["stage_plan"][0]["memory_bytes"]["total"] / 3))' <<<"$base")
step0=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["simulated_step_ms"])' <<<"$base")
pick=$(plan --set pipeline.schedule=auto --set pipeline.partition=auto \
  --set train.activation_checkpoint_interval=auto --set pipeline.offload=auto \
  --set "pipeline.max_memory=[$cap, 1TiB, 1TiB, 1TiB]") || exit 1
mapfile -t pins < <(PICK=$pick python3 - "$cap" "$step0" <<'PY'
import json, os, sys
cap, step0 = int(sys.argv[1]), float(sys.argv[2])
p = json.loads(os.environ["PICK"])
got = p["stage_plan"][0]["memory_bytes"]["total"]
if got > cap:
    sys.exit(f"stage 0 plans {got} bytes over its cap {cap}")
if p["simulated_step_ms"] > 1.05 * step0:
    sys.exit(f"the pick steps {p['simulated_step_ms']} ms, over 5% beyond 1F1B's {step0} ms")
print(f"pick {p['schedule']}: stage 0 {got} <= {cap} bytes, {p['simulated_step_ms']:.2f} ms "
      f"against 1F1B's {step0:.2f} ms", file=sys.stderr)
for s in p["pinned"]:
    print(s)
PY
) || exit 1
[[ ${#pins[@]} -gt 0 ]] || { echo "no pinned values"; exit 1; }
schedule=
extra=()
for kv in "${pins[@]}"; do
  if [[ $kv == pipeline.schedule=* ]]; then schedule=${kv#*=}; else extra+=(--set "$kv"); fi
done
exec "$here/../pipeline/memory.sh" "$pipe_train" "$spec" "$schedule" 4 16 "$@" "${extra[@]}"
