#!/usr/bin/env bash
# trace.sh PIPE_TRAIN SCHEDULE [STAGES CHUNK_STAGES [--set K=V ...]]: a run of
# tests/pipeline/gate.yaml on STAGES (3) stages (6 steps, steps 2..4 traced), checked by
# check_trace.py; CHUNK_STAGES ("0,1,0,1") for a schedule with several chunks per stage.
# SCHEDULE is a registered name or file:PATH (pipeline.schedule_file).
set -euo pipefail
pipe_train=$1 schedule=$2 stages=${3:-3} chunks=${4:-}
shift $(($# < 4 ? $# : 4))
here=$(cd "$(dirname "$0")" && pwd)
which=pipeline.schedule="$schedule"
[[ $schedule != file:* ]] || which=pipeline.schedule_file="${schedule#file:}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
timeout 120 mpirun -np "$stages" --oversubscribe "$pipe_train" "$here/gate.yaml" --quiet \
  --set pipeline.stages="$stages" --set "$which" --set train.steps=6 "$@" \
  --trace "$work/trace.json" --trace-steps 2:4 --metrics "$work/metrics.jsonl"
python3 "$here/check_trace.py" "$work/trace.json" "$work/metrics.jsonl" "$stages" 4 2 4 6 $chunks
