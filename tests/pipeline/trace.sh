#!/usr/bin/env bash
# trace.sh PIPE_TRAIN SCHEDULE: a 3-stage run of tests/pipeline/gate.yaml (6 steps, steps 2..4
# traced), checked by check_trace.py against the schedule's action lists, with pipe_trace's
# picture of step 2 (next to pipe_train).
set -euo pipefail
pipe_train=$1 schedule=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$pipe_train" "$here/gate.yaml" --print-schedule --set pipeline.stages=3 \
  --set pipeline.schedule="$schedule" > "$work/schedule.txt"
timeout 120 mpirun -np 3 --oversubscribe "$pipe_train" "$here/gate.yaml" --quiet \
  --set pipeline.stages=3 --set pipeline.schedule="$schedule" --set train.steps=6 \
  --trace "$work/trace.json" --trace-steps 2:4 --metrics "$work/metrics.jsonl"
"$(dirname "$pipe_train")/pipe_trace" "$work/trace.json" "$work/step2.svg" --step 2 >/dev/null
python3 "$here/check_trace.py" "$work/trace.json" "$work/metrics.jsonl" 3 4 2 4 6 \
  "$work/schedule.txt" "$work/step2.svg"
