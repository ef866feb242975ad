#!/usr/bin/env bash
# round_trip.sh PIPE_TRAIN: --print-schedule --format actions of every registered schedule (3
# stages, 7 micro-batches), read back through pipeline.schedule_file, prints the same actions
# (the name in the first comment line differs).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
print() { "$pipe_train" tests/pipeline/gate.yaml --print-schedule --format actions \
  --set pipeline.stages=3 --set train.micro_batches=7 "$@"; }
# The registry's names, as its refusal of an unknown one lists them (schedule/registry.c)
names=$( (print --set pipeline.schedule=not_a_schedule 2>&1 || true) | sed -n 's/.*expected one of \(.*\), got.*/\1/p' | tr -d ',')
[ -n "$names" ] || fail "no schedule names in pipe_train's refusal of an unknown schedule"
for s in $names; do
  print --set pipeline.schedule=$s >"$work/$s"
  print --set pipeline.schedule_file="$work/$s" >"$work/$s.back"
  tail -n +2 "$work/$s" >"$work/a"
  tail -n +2 "$work/$s.back" >"$work/b"
  cmp "$work/a" "$work/b" || fail "$s: the actions read back differ"
done
