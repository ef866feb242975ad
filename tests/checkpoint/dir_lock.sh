#!/usr/bin/env bash
# dir_lock.sh PIPE_TRAIN: two jobs given the same checkpoint directory would replace each other's
# checkpoints. The second one (train.checkpoint.dir or --save) refuses before training: exit 2,
# one line naming the holder's host and pid; a lock left by a killed job is taken over with a
# note; a job that ends removes its lock file.
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
pids=()
pt_at_exit 'kill -9 "${pids[@]}" 2>/dev/null || true'
spec=tests/pipeline/gate.yaml
common=(--quiet --set train.lr_schedule.name=constant)
dir="$work/ckpt"

"$pipe_train" "$spec" "${common[@]}" --set train.steps=1000000 \
  --set "train.checkpoint={dir: $dir, every: 1000000}" >"$work/a.out" 2>&1 & holder=$!
pids+=("$holder")
for _ in $(seq 100); do [ -s "$dir/.pipetrain.lock" ] && break; sleep 0.1; done
[ -s "$dir/.pipetrain.lock" ] || fail "the first job wrote no lock file: $(cat "$work/a.out")"

for how in checkpoint.dir save; do
  args=(--set "train.checkpoint={dir: $dir, every: 1}")
  [ "$how" = save ] && args=(--save "$dir")
  set +e
  timeout 60 "$pipe_train" "$spec" "${common[@]}" --set train.steps=2 "${args[@]}" >"$work/b.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "second job ($how) exited $rc (want 2): $(cat "$work/b.out")"
  [ "$(wc -l <"$work/b.out")" = 1 ] || fail "second job ($how): not one line: $(cat "$work/b.out")"
  grep -q "in use by another pipetrain job (host $(hostname), pid $holder, started" "$work/b.out" ||
    fail "second job ($how): the line does not name the holder: $(cat "$work/b.out")"
  echo "second job ($how) refused: $(cut -c1-150 "$work/b.out")"
done

kill -9 "$holder"
wait "$holder" 2>/dev/null || true
[ -s "$dir/.pipetrain.lock" ] || fail "the killed job's lock file is gone (nothing to take over)"
"$pipe_train" "$spec" "${common[@]}" --set train.steps=2 \
  --set "train.checkpoint={dir: $dir, every: 1}" >"$work/c.out" 2>&1 ||
  fail "the job after a killed one failed: $(cat "$work/c.out")"
grep -q "taking over the lock left by a job that ended (host $(hostname), pid $holder" \
  "$work/c.out" || fail "no note on taking over the lock: $(cat "$work/c.out")"
[ ! -e "$dir/.pipetrain.lock" ] || fail "a job that ended left its lock file"
echo "dir_lock: all checks passed"
