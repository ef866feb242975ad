#!/usr/bin/env bash
# self_launch.sh PIPE_TRAIN: pipe_train started without mpirun for a spec of several ranks starts
# them itself (launcher/self_launch.h):
#   (a) one line says what it started and the mpirun command; the 2-stage run gathers exactly
#       the sequential run's model (the bitwise gate, through the self-launch)
#   (b) data_parallel: auto with --nproc 4: 2 stages x 2 replicas, the same model bits
#   (c) a rank killed (SIGKILL) ends the whole job within pipeline.timeout_s, naming the rank;
#       the pipe_train that started the ranks killed (SIGKILL) leaves no mpiexec or rank behind
#   (d) SIGTERM to the ranks and the pipe_train that started them: the step ends, a checkpoint is
#       written, exit 0 (as under mpirun); SIGINT to pipe_train's process group (a terminal's
#       Ctrl-C) does the same, and a second one ends the job at once without a checkpoint
#   (e) one rank's error ends the job within 20 s of the error line (it used to linger 60 s and
#       more: launcher/launch_watch.h), with that rank's exit code and no rank left: a missing
#       --load (exit 2), and a rank hung in a save that another rank reports (exit 1)
#   (f) bad input: --nproc not matching the spec, --nproc with --sequential, a launcher that
#       cannot start, a child that finds no MPI environment: one line each, exit 2
# Runs from a clean environment for MPI (no OMPI_* variables of an outer launcher).
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
marker="$work/marker"
pt_at_exit 'pkill -9 -f -- "$marker" 2>/dev/null || true'
for v in $(env | sed -n 's/^\(OMPI_COMM_WORLD[A-Z_]*\|PMIX_RANK\|PMI_SIZE\)=.*/\1/p'); do unset "$v"; done
spec=tests/pipeline/gate.yaml
common=(--quiet --set train.steps=3)

"$pipe_train" "$spec" "${common[@]}" --sequential --gather "$work/seq.st" || fail "sequential run"
timeout 120 "$pipe_train" "$spec" "${common[@]}" --set pipeline.stages=2 --gather "$work/p2.st" \
  2>"$work/p2.err" || fail "self-launched 2-stage run: exit $? ($(cat "$work/p2.err"))"
grep -q "^pipetrain: starting 2 ranks on this node (.*2 stages x 1 replica) through Open MPI: .*-np 2 .*pipe_train" \
  "$work/p2.err" || fail "no line saying what was started: $(cat "$work/p2.err")"
cmp -s "$work/seq.st" "$work/p2.st" || fail "the self-launched 2-stage model differs from the sequential one"
echo "(a) $(head -c 160 "$work/p2.err")...; model bitwise equal to the sequential run's"

timeout 180 "$pipe_train" "$spec" "${common[@]}" --set pipeline.stages=2 \
  --set pipeline.data_parallel=auto --nproc 4 --gather "$work/dp.st" 2>"$work/dp.err" ||
  fail "--nproc 4 with data_parallel auto: exit $? ($(cat "$work/dp.err"))"
grep -q "starting 4 ranks on this node (.*2 stages x 2 replicas" "$work/dp.err" ||
  fail "--nproc 4: $(cat "$work/dp.err")"
grep -q -- "--nproc" "$work/dp.err" && fail "--nproc passed on to the ranks: $(cat "$work/dp.err")"
"$pipe_train" "$spec" "${common[@]}" --sequential --set pipeline.data_parallel=2 \
  --gather "$work/seq_dp.st" || fail "sequential run with 2 replicas"
cmp -s "$work/seq_dp.st" "$work/dp.st" || fail "the 2 x 2 model differs from the sequential one"
echo "(b) --nproc 4: 2 stages x 2 replicas, model bitwise equal to the sequential run's"

# pids of this run's pipe_train ranks (the parent pipe_train runs mpiexec, which runs them)
ranks_of_run() { pt_ranks_of_run "$marker"; }
"$pipe_train" "$spec" --quiet --set pipeline.stages=2 \
  --set train.steps=1000000 --set pipeline.timeout_s=5 --set train.lr_schedule.name=constant \
  --metrics "$marker.kill.jsonl" >"$work/kill.out" 2>&1 &
job=$!
pt_pick_rank "$marker" 2 2 "$marker.kill.jsonl"
rank=$pt_picked_rank
t0=$SECONDS
kill -KILL "$pt_picked_pid"
while [ -n "$(ranks_of_run)" ] && [ $((SECONDS - t0)) -lt 20 ]; do sleep 0.2; done
took=$((SECONDS - t0))
[ -z "$(ranks_of_run)" ] || fail "ranks still running 20 s after rank $rank was killed"
set +e; wait "$job"; code=$?; set -e
[ "$took" -le 10 ] || fail "the job took ${took} s to end after rank $rank was killed (timeout_s 5)"
[ "$code" != 0 ] || fail "the job exited 0 after rank $rank was killed"
grep -Eq "rank $rank\b" "$work/kill.out" || fail "no message names rank $rank: $(cat "$work/kill.out")"
echo "(c) rank $rank killed: the job ended after ${took} s, exit $code"

"$pipe_train" "$spec" --quiet --set pipeline.stages=2 --set train.steps=1000000 \
  --set train.lr_schedule.name=constant --metrics "$marker.orphan.jsonl" \
  --set "train.checkpoint={dir: $marker.orphan.ckpt, every: 1000000}" >"$work/orphan.out" 2>&1 &
job=$!
pt_wait_step "$marker.orphan.jsonl"
kill -KILL "$job"
t0=$SECONDS
while [ -n "$(pgrep -f -- "$marker.orphan" || true)" ] && [ $((SECONDS - t0)) -lt 10 ]; do sleep 0.2; done
[ -z "$(pgrep -f -- "$marker.orphan" || true)" ] ||
  fail "mpiexec or ranks still running 10 s after the pipe_train that started them was killed"
{ wait "$job"; } 2>/dev/null || true
echo "(c) the pipe_train that started the ranks killed: mpiexec and the ranks gone after $((SECONDS - t0)) s"

"$pipe_train" "$spec" --quiet --set pipeline.stages=2 --set train.steps=1000000 \
  --set train.lr_schedule.name=constant --set "train.checkpoint={dir: $marker.ckpt, every: 1000000}" \
  --metrics "$marker.term.jsonl" >"$work/term.out" 2>&1 &
job=$!
pt_wait_step "$marker.term.jsonl"
# the ranks and the pipe_train that started them (pkill pipe_train): each rank gets SIGTERM and
# its parent's forwarded copy, one preemption (not two signals, which would save nothing)
for p in $(ranks_of_run) "$job"; do kill -TERM "$p"; done
set +e; wait "$job"; code=$?; set -e
[ "$code" = 0 ] || fail "SIGTERM to every pipe_train: exit $code (want 0): $(cat "$work/term.out")"
grep -q "preempted after step" "$work/term.out" || fail "no preemption: $(cat "$work/term.out")"
ls "$marker.ckpt" | grep -q '^step-' || fail "no checkpoint written"
echo "(d) SIGTERM to every pipe_train: checkpoint $(ls "$marker.ckpt"), exit 0"

# ctrl_c N [ENV...]: (N 1 or 2) a self-started job in a process group of its own (as a terminal's
# foreground job) gets SIGINT N times on that group once it has done a step; sets code and ended
# (seconds from the first SIGINT to the job's exit)
ctrl_c() {
  local n=$1; shift
  rm -rf "$marker.int" "$marker.int.jsonl"
  set -m # the job's own process group, which a terminal's Ctrl-C signals
  env "$@" "$pipe_train" "$spec" --quiet --set pipeline.stages=2 --set train.steps=1000000 \
    --set train.lr_schedule.name=constant --set "train.checkpoint={dir: $marker.int, every: 1000000}" \
    --metrics "$marker.int.jsonl" >"$work/int.out" 2>&1 &
  job=$!
  set +m
  pt_wait_step "$marker.int.jsonl"
  local t0=$SECONDS i
  kill -INT -- "-$job"
  if [ "$n" = 2 ]; then # once the first is through: two at once are one pending signal
    for i in $(seq 100); do grep -q "passed to the ranks" "$work/int.out" && break; sleep 0.1; done
    sleep 0.5
    kill -INT -- "-$job"
  fi
  set +e; wait "$job"; code=$?; set -e
  ended=$((SECONDS - t0))
  [ -z "$(ranks_of_run)" ] || fail "Ctrl-C x $n: ranks still running after the job exited"
}
ctrl_c 1
[ "$code" = 0 ] || fail "Ctrl-C: exit $code (want 0): $(cat "$work/int.out")"
grep -q "interrupted after step" "$work/int.out" || fail "Ctrl-C: no save: $(cat "$work/int.out")"
ls "$marker.int" | grep -q '^step-' || fail "Ctrl-C: no checkpoint written: $(cat "$work/int.out")"
echo "(d) Ctrl-C: checkpoint $(ls "$marker.int"), exit 0 after ${ended} s"
# rank 0's save stalls (as on a hung filesystem), so only the second Ctrl-C can end the job
ctrl_c 2 PIPETRAIN_TEST_STALL_SAVE=0:600
[ "$code" = 130 ] || fail "Ctrl-C twice: exit $code (want 130): $(cat "$work/int.out")"
[ "$ended" -le 20 ] || fail "Ctrl-C twice: the job took ${ended} s to exit"
echo "(d) Ctrl-C twice, rank 0's save stalled: exit $code after ${ended} s"

# ends_after_error NAME CODE PATTERN ENV... -- ARGS...: a self-started 2-rank job in which one
# rank prints a line matching PATTERN exits CODE within 20 s of that line, no rank left
ends_after_error() {
  local name=$1 want=$2 pattern=$3; shift 3
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" "$pipe_train" "$spec" --quiet --set pipeline.stages=2 "$@" >"$work/err.out" 2>&1 &
  local job=$! seen= i now
  for i in $(seq 1200); do # start-up on a loaded machine, then the error: up to 120 s
    grep -Eq -- "$pattern" "$work/err.out" && seen=${EPOCHREALTIME/./} && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$seen" ] || grep -Eq -- "$pattern" "$work/err.out" ||
    fail "$name: no line matching '$pattern': $(cat "$work/err.out")"
  seen=${seen:-${EPOCHREALTIME/./}}
  while kill -0 "$job" 2>/dev/null; do
    now=${EPOCHREALTIME/./}
    [ $((now - seen)) -le 20000000 ] || fail "$name: the job still runs 20 s after the error line"
    sleep 0.1
  done
  set +e; wait "$job"; local code=$?; set -e
  local ms=$(((${EPOCHREALTIME/./} - seen) / 1000))
  [ "$code" = "$want" ] || fail "$name: exit $code (want $want): $(cat "$work/err.out")"
  [ -z "$(ranks_of_run)" ] || fail "$name: ranks still running after the job exited"
  echo "(e) $name: exit $code ${ms} ms after the error line"
}
ends_after_error "a missing --load on rank 0" 2 "no such checkpoint" -- --load "$marker.none"
ends_after_error "rank 1 hung in a save, rank 0's error" 1 "checkpoint save.* from rank 1" \
  PIPETRAIN_TEST_STALL_SAVE=1:600 -- --set train.steps=1000000 --set pipeline.timeout_s=2 \
  --set "train.checkpoint={dir: $marker.stall, every: 2}"

bad() { # WANT_PATTERN ENV... -- ARGS...: exit 2 and one line matching
  local want=$1; shift
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  set +e; env "${envs[@]}" timeout 60 "$pipe_train" "$spec" --quiet "$@" >"$work/bad.out" 2>&1; local c=$?; set -e
  [ "$c" = 2 ] || fail "$*: exit $c (want 2): $(cat "$work/bad.out")"
  grep -Eq -- "$want" "$work/bad.out" || fail "$*: no line matching '$want': $(cat "$work/bad.out")"
  echo "(f) $* -> $(grep -E -- "$want" "$work/bad.out" | head -1 | cut -c1-150)"
}
bad "--nproc 3: .*needs pipeline.stages \(2\) x pipeline.data_parallel \(1\) = 2 ranks" -- \
  --set pipeline.stages=2 --nproc 3
bad "--nproc 3: pipeline.data_parallel: auto .* multiple of 2" -- --set pipeline.stages=2 \
  --set pipeline.data_parallel=auto --nproc 3
bad "--nproc starts ranks for a pipelined run" -- --sequential --nproc 2
bad "cannot start $work/none to run 2 ranks .*mpirun -np 2" PIPETRAIN_MPIEXEC="$work/none" -- \
  --set pipeline.stages=2
bad "MPI's environment did not reach this process" PIPETRAIN_SELF_LAUNCHED=1 -- --set pipeline.stages=2
echo "self_launch: all checks passed"
