#!/usr/bin/env bash
# input_files.sh PIPE_TRAIN: no input can make pipe_train read without bound or block in open():
# /dev/zero as the spec, a FIFO (no writer) as the spec, data.path or pipeline.schedule_file end
# at once with one line naming the file (exit 2).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
mkfifo "$work/fifo"
spec=tests/pipeline/gate.yaml

# expect WHAT PATTERN ARGS...: exit 2 within 20 s, one line matching PATTERN
expect() {
  local what=$1 pattern=$2 rc
  shift 2
  set +e
  # 2 GiB of address space: reading /dev/zero without bound ends there, not in the machine's RAM
  (ulimit -v 2097152; timeout 20 "$pipe_train" "$@" --quiet --set train.steps=1 >"$work/out" 2>&1)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$what: exit $rc (want 2; 124 is a hang): $(head -c 600 "$work/out")"
  [ "$(wc -l <"$work/out")" = 1 ] || fail "$what: not one line: $(cat "$work/out")"
  grep -Eq "$pattern" "$work/out" || fail "$what: the line does not say '$pattern': $(cat "$work/out")"
  echo "$what: $(cut -c1-140 "$work/out")"
}

expect "/dev/zero as the spec" "/dev/zero.*a device, not a regular file" /dev/zero
expect "a FIFO as the spec" "fifo.*a FIFO" "$work/fifo"
expect "a FIFO as data.path" "data.path.*fifo.*a FIFO" "$spec" --set "data.path=$work/fifo"
expect "a FIFO as pipeline.schedule_file" "schedule_file.*fifo.*a FIFO" "$spec" \
  --set pipeline.stages=2 --set "pipeline.schedule_file=$work/fifo" --print-schedule

echo "input_files: all checks passed"
