#!/usr/bin/env bash
# rebalance.sh PIPE_TRAIN: the re-balancing workflow of docs/planner.md on tests/pipeline/gate.yaml.
# A 2-stage run with a lopsided split (stage 0 holds every transformer block) records a trace and
# a checkpoint; --plan --from-trace plans from what that run measured and prints --set values
# that pin a new split; the job resumes from its checkpoint under them. Checks: the plan names
# the trace as its source, the new split moves blocks to stage 1 (the trace says stage 0 was the
# slow one), the resumed run starts at the saved step and finishes, and a file that is not a
# trace is refused with one line. The trace covers 8 steps, so each median is taken over 28
# micro-batches (7 steps x 4) and a few slowed by other load on the machine weigh less than over 12.
pipe_train=$1
spec=tests/pipeline/gate.yaml
source "$(dirname "$0")/../lib.sh"
run() { timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" --quiet "$@"; }

run --set pipeline.stages=2 --set 'pipeline.boundaries=[0, 8]' --set train.steps=8 \
  --trace "$work/t.json" --save "$work/ck"
"$pipe_train" "$spec" --plan --from-trace "$work/t.json" --set pipeline.stages=2 \
  --set 'pipeline.boundaries=[0, 8]' > "$work/plan.txt"
grep -q "layer times trace $work/t.json" "$work/plan.txt" || { cat "$work/plan.txt"; exit 1; }
pins=$(grep '^to pin this plan:' "$work/plan.txt" | sed 's/^to pin this plan: //')
first=$(printf '%s\n' "$pins" | sed -n "s/.*pipeline.boundaries=\[0, \([0-9]*\)\].*/\1/p")
if [ -z "$first" ] || [ "$first" -ge 8 ] || [ "$first" -lt 3 ]; then
  echo "rebalance: expected stage 1 to start between layers 3 and 7, got pins: $pins"
  cat "$work/plan.txt"
  exit 1
fi
eval "set -- $pins"
run --set pipeline.stages=2 "$@" --set train.steps=10 --load "$work/ck" --metrics "$work/m.jsonl"
steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$work/m.jsonl")
[ "$steps" = "9 10" ] || { echo "rebalance: resumed steps '$steps', want '9 10'"; exit 1; }
out=$("$pipe_train" "$spec" --plan --from-trace "$spec" 2>&1) && { echo "accepted a YAML file as a trace"; exit 1; }
[ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || { echo "not one line: $out"; exit 1; }
echo "rebalance: ok (stage 1 now starts at layer $first)"
