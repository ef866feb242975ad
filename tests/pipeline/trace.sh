#!/usr/bin/env bash
# trace.sh PIPE_TRAIN SCHEDULE [STAGES [--set K=V ...]]: a run of tests/pipeline/gate.yaml on
# STAGES (3) stages (6 steps, steps 2..4 traced), checked by check_trace.py against the
# schedule's action lists, with pipe_trace's picture of step 2 (next to pipe_train). SCHEDULE is
# a registered name or file:PATH (pipeline.schedule_file). With pipeline.offload=1.0 among the
# settings, check_offload_trace.py checks the copy track too, and
# tests/partition/check_copy_overlap.py the planner's overlap window against it. PT_TRACE_OUT: a
# folder the trace and the picture are copied to (scripts/gpu_check.sh keeps them).
pipe_train=$1 schedule=$2 stages=${3:-3}
shift $(($# < 3 ? $# : 3))
here=$(cd "$(dirname "$0")" && pwd)
which=pipeline.schedule="$schedule"
[[ $schedule != file:* ]] || which=pipeline.schedule_file="${schedule#file:}"
sets=(--set pipeline.stages="$stages" --set "$which" "$@")
source "$(dirname "$0")/../lib.sh"
"$pipe_train" "$here/gate.yaml" --print-schedule "${sets[@]}" > "$work/schedule.txt"
timeout 120 mpirun -np "$stages" --oversubscribe "$pipe_train" "$here/gate.yaml" --quiet \
  "${sets[@]}" --set train.steps=6 \
  --trace "$work/trace.json" --trace-steps 2:4 --metrics "$work/metrics.jsonl"
"$(dirname "$pipe_train")/pipe_trace" "$work/trace.json" "$work/step2.svg" --step 2 >/dev/null
# on a GPU each rank's compute is on its own track as well (check_trace.py PT_TRACE_DEVICE)
[[ " $* " != *" pipeline.device=gpu "* ]] || export PT_TRACE_DEVICE=1
[[ -z ${PT_TRACE_OUT:-} ]] || cp "$work/trace.json" "$work/step2.svg" "$PT_TRACE_OUT/"
python3 "$here/check_trace.py" "$work/trace.json" "$work/metrics.jsonl" "$stages" 4 2 4 6 \
  "$work/schedule.txt" "$work/step2.svg"
if [[ " $* " == *" pipeline.offload=1.0 "* ]]; then
  python3 "$here/check_offload_trace.py" "$work/trace.json" "$stages" &&
    python3 "$here/../partition/check_copy_overlap.py" "$work/trace.json"
fi
