#!/usr/bin/env bash
# shard_plan.sh PIPE_TRAIN: pipeline.shard_optimizer in `--plan --json` (and the text plan's
# header): at D = 2 and 4 replicas each stage's optimizer memory is the unsharded figure / D
# (give or take the 16-float rounding of the ranges, model/optimizer.h), every other component is
# unchanged, and the total drops by exactly what the optimizer does. The measured peak of a
# sharded run against this plan is the pipeline_memory_gpt_shard_* tests' part.
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
spec=tests/pipeline/gate.yaml
for d in 2 4; do
  base=(--plan --set pipeline.stages=2 --set pipeline.data_parallel="$d")
  "$pipe_train" "$spec" "${base[@]}" --json > "$work/un$d.json"
  "$pipe_train" "$spec" "${base[@]}" --json --set pipeline.shard_optimizer=true > "$work/sh$d.json"
  "$pipe_train" "$spec" "${base[@]}" --set pipeline.shard_optimizer=true > "$work/sh$d.txt"
  grep -q "optimizer sharded over $d replicas" "$work/sh$d.txt" ||
    fail "D=$d: the text plan does not say the optimizer is sharded: $(head -1 "$work/sh$d.txt")"
  python3 - "$work/un$d.json" "$work/sh$d.json" "$d" <<'PY' || fail "D=$d: see above"
import json, sys
un, sh, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
if un["shard_optimizer"] or not sh["shard_optimizer"]:
    sys.exit(f"shard_optimizer flags {un['shard_optimizer']} / {sh['shard_optimizer']}")
for a, b in zip(un["stage_plan"], sh["stage_plan"]):
    ma, mb = a["memory_bytes"], b["memory_bytes"]
    slack = 2 * 4 * 16  # two state buffers, a range rounded to 16 floats
    if abs(mb["optimizer"] - ma["optimizer"] / d) > slack:
        sys.exit(f"stage {a['stage']}: optimizer {mb['optimizer']} sharded, {ma['optimizer']} not")
    for k in ma:
        if k not in ("optimizer", "total") and ma[k] != mb[k]:
            sys.exit(f"stage {a['stage']}: {k} {mb[k]} sharded, {ma[k]} not")
    if ma["total"] - mb["total"] != ma["optimizer"] - mb["optimizer"]:
        sys.exit(f"stage {a['stage']}: total {mb['total']} sharded, {ma['total']} not")
    print(f"  D={d} stage {a['stage']}: optimizer {ma['optimizer']} -> {mb['optimizer']} bytes, "
          f"total {ma['total']} -> {mb['total']}")
PY
done
echo "sharded optimizer plan: per replica / D at D = 2 and 4"
