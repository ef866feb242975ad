#!/usr/bin/env bash
# memory.sh PIPE_TRAIN SPEC SCHEDULE STAGES MICRO_BATCHES [--set K=V ...]: a short pipelined run
# whose end-of-run report must match the plan and the schedule's slots (check_report.py), on
# STAGES x pipeline.data_parallel ranks (a --set of it among the settings; rank 0 reports
# replica 0's stages).
pipe_train=$1 spec=$2 schedule=$3 stages=$4 micro=$5
shift 5
replicas=1
for kv in "$@"; do
  if [[ $kv == pipeline.data_parallel=* ]]; then replicas=${kv#*=}; fi
done
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
sets=(--set pipeline.stages="$stages" --set pipeline.schedule="$schedule"
      --set train.micro_batches="$micro" "$@")
"$pipe_train" "$spec" --print-schedule "${sets[@]}" > "$work/schedule.txt"
pt_mpirun $((stages * replicas)) "$pipe_train" "$spec" --set train.steps=3 \
  "${sets[@]}" | python3 "$here/check_report.py" "$work/schedule.txt" "$stages" "$micro"
