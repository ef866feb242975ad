#!/usr/bin/env bash
# dead_rank.sh PIPE_TRAIN: one rank of 4 is killed (SIGKILL) or frozen (SIGSTOP) mid-run; every
# rank must be gone within 15 s, with a message naming that rank. The frozen case relies on the
# watchdog (pipeline.timeout_s, 5 s here); the killed case on mpirun noticing the death.
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
marker="$work/marker"
pt_at_exit 'pkill -9 -f -- "$marker" 2>/dev/null || true'

ranks_of_run() { pt_ranks_of_run "$marker"; }

run_case() { # SIGNAL
  local sig=$1 out="$work/$1.out"
  timeout 120 mpirun -np 4 --oversubscribe "$pipe_train" tests/pipeline/gate.yaml --quiet \
    --set pipeline.stages=4 --set train.steps=1000000 --set pipeline.timeout_s=5 \
    --set train.lr_schedule.name=constant --metrics "$marker.$sig.jsonl" >"$out" 2>&1 &
  local job=$!
  pt_pick_rank "$marker" 4 3 "$marker.$sig.jsonl"
  local rank=$pt_picked_rank t0=$SECONDS
  kill -"$sig" "$pt_picked_pid"
  while [ -n "$(ranks_of_run)" ] && [ $((SECONDS - t0)) -lt 20 ]; do sleep 0.2; done
  local took=$((SECONDS - t0))
  wait "$job" || true
  [ -z "$(ranks_of_run)" ] || fail "$sig of rank $rank: ranks still running after 20 s"
  [ "$took" -le 15 ] || fail "$sig of rank $rank: the job took ${took} s to end (limit 15)"
  grep -Eq "rank $rank\b" "$out" || fail "$sig of rank $rank: no message names it: $(cat "$out")"
  echo "$sig of rank $rank: every rank gone after ${took} s; message: $(grep -E "rank $rank\b" "$out" | head -1 | cut -c1-110)"
}

run_case KILL
run_case STOP
echo "dead_rank: all checks passed"
