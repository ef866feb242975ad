#!/usr/bin/env bash
# stalled_wait.sh PIPE_TRAIN: a rank that stops inside a wait nobody used to watch must not hang
# the others; the job ends within pipeline.timeout_s (3 s here) and a margin, with a line naming
# that rank:
#   (a) rank 2 of 4 stalls in a checkpoint save before writing (the test-only hook
#       PIPETRAIN_TEST_STALL_SAVE=RANK:SECONDS, as a hung filesystem would);
#   (b) rank 2 of 4 data-parallel replicas is frozen (SIGSTOP) mid-run: the reduction's line
#       names rank 2, not rank 0 or "another rank".
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
marker="$work/marker"
pt_at_exit 'pkill -9 -f -- "$marker" 2>/dev/null || true'

ranks_of_run() { pt_ranks_of_run "$marker"; }

# wait_gone NAME LIMIT T0: every rank gone within LIMIT s of T0, else fail
wait_gone() {
  while [ -n "$(ranks_of_run)" ] && [ $((SECONDS - $3)) -le $(($2 + 5)) ]; do sleep 0.2; done
  local took=$((SECONDS - $3))
  [ -z "$(ranks_of_run)" ] || fail "$1: ranks still running after ${took} s"
  [ "$took" -le "$2" ] || fail "$1: the job took ${took} s to end (limit $2)"
  echo "$1: every rank gone after ${took} s"
}

echo "== (a) rank 2 stalls in a checkpoint save"
out="$work/save.out"
t0=$SECONDS
timeout 120 mpirun -np 4 --oversubscribe -x PIPETRAIN_TEST_STALL_SAVE=2:600 "$pipe_train" \
  tests/pipeline/gate.yaml --quiet --set pipeline.stages=4 --set train.steps=1000000 \
  --set pipeline.timeout_s=3 --set "train.checkpoint={dir: $marker.ckpt, every: 2}" \
  >"$out" 2>&1 &
job=$!
for _ in $(seq 100); do [ -n "$(ranks_of_run)" ] && break; sleep 0.1; done
wait_gone "stalled save" 40 "$t0" # start-up and 2 steps take seconds on a loaded machine
wait "$job" || true
grep -q "checkpoint save.* from rank 2" "$out" ||
  fail "stalled save: no line names rank 2 in the save: $(cat "$out")"
echo "message: $(grep -m1 "from rank 2" "$out" | cut -c1-140)"

echo "== (b) a data-parallel replica frozen mid-run"
out="$work/dp.out"
timeout 120 mpirun -np 4 --oversubscribe "$pipe_train" tests/pipeline/gate.yaml --quiet \
  --set pipeline.stages=1 --set pipeline.data_parallel=4 --set train.steps=1000000 \
  --set pipeline.timeout_s=3 --set train.lr_schedule.name=constant --metrics "$marker.jsonl" \
  >"$out" 2>&1 &
job=$!
pt_pick_rank "$marker" 4 3 "$marker.jsonl"
rank=$pt_picked_rank
t0=$SECONDS
kill -STOP "$pt_picked_pid"
wait_gone "frozen replica" 15 "$t0"
wait "$job" || true
grep -Eq "from rank $rank\b" "$out" || fail "frozen rank $rank: no line names it: $(cat "$out")"
echo "message: $(grep -m1 -E "from rank $rank\b" "$out" | cut -c1-140)"
echo "stalled_wait: all checks passed"
