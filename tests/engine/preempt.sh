#!/usr/bin/env bash
# preempt.sh PIPE_TRAIN: SIGTERM finishes the step, writes a checkpoint, exits 0, and the run
# resumes from it exactly; a second signal exits at once. Sequential, 2-rank pipelined under
# mpirun, and 2 ranks that pipe_train started itself (SIGTERM to that pipe_train).
# The learning rate is constant so a fresh run of k+5 steps is the uninterrupted reference.
pipe_train=$1
source "$(dirname "$0")/../lib.sh"
pids=()
pt_at_exit 'kill -9 "${pids[@]}" 2>/dev/null || true'
spec=tests/pipeline/gate.yaml
common=(--quiet --set train.lr_schedule.name=constant --set train.steps=100000)

# last_step CKPT_ROOT -> k of its only step-k checkpoint
last_step() { ls "$1" | sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' | tail -1; }

# check_resume ROOT [mpirun args...]: resume k -> k+5 (pipelined on 2 ranks when mpirun args
# are given) and compare with a fresh uninterrupted k+5-step run.
check_resume() {
  local root=$1; shift
  local k; k=$(last_step "$root")
  [ -n "$k" ] || fail "no step-N checkpoint in $root"
  local launch=() extra=()
  if [ $# -gt 0 ]; then launch=(timeout 120 mpirun "$@"); extra=(--set pipeline.stages=2); fi
  "${launch[@]}" "$pipe_train" "$spec" "${common[@]}" "${extra[@]}" --set train.steps=$((k + 5)) \
    --load "$root/step-$(printf %08d "$k")" --metrics "$work/resumed.jsonl"
  "$pipe_train" "$spec" "${common[@]}" --sequential --set train.steps=$((k + 5)) \
    --metrics "$work/fresh.jsonl"
  python3 - "$work/fresh.jsonl" "$work/resumed.jsonl" "$k" <<'PY'
import json, sys
fresh = [json.loads(l) for l in open(sys.argv[1])]
resumed = [json.loads(l) for l in open(sys.argv[2])]
k = int(sys.argv[3])
assert [r["step"] for r in resumed] == list(range(k + 1, k + 6)), [r["step"] for r in resumed]
assert [r["loss"] for r in resumed] == [r["loss"] for r in fresh[k:]], "losses differ after resume"
print(f"resumed at step {k}: steps {k + 1}..{k + 5} bitwise equal to an uninterrupted run")
PY
}

echo "== sequential: SIGTERM"
"$pipe_train" "$spec" "${common[@]}" --set "train.checkpoint={dir: $work/seq, every: 1000000}" \
  >"$work/seq.out" 2>&1 & pid=$!; pids+=("$pid")
sleep 1.5
kill -TERM "$pid"
wait "$pid" || fail "sequential run exited $? after SIGTERM (want 0)"
grep -q "preempted after step" "$work/seq.out" || fail "no preemption message: $(cat "$work/seq.out")"
check_resume "$work/seq"

echo "== 2 ranks: SIGTERM to every rank"
timeout 120 mpirun -np 2 --oversubscribe "$pipe_train" "$spec" "${common[@]}" \
  --set pipeline.stages=2 --set "train.checkpoint={dir: $work/pipe, every: 1000000}" \
  >"$work/pipe.out" 2>&1 & pid=$!; pids+=("$pid")
sleep 2.5
# signal the ranks (as a batch scheduler does), not mpirun
for p in $(pgrep -f -- "$work/pipe" || true); do
  [ "$(ps -o comm= -p "$p" 2>/dev/null)" = pipe_train ] && kill -TERM "$p"
done
wait "$pid" || fail "mpirun exited $? after SIGTERM to its ranks (want 0)"
grep -q "preempted after step" "$work/pipe.out" || fail "no preemption message: $(cat "$work/pipe.out")"
check_resume "$work/pipe" -np 2 --oversubscribe

echo "== self-started 2 ranks: SIGTERM to the pipe_train that started them"
"$pipe_train" "$spec" "${common[@]}" --set pipeline.stages=2 --metrics "$work/self.jsonl" \
  --set "train.checkpoint={dir: $work/self, every: 1000000}" >"$work/self.out" 2>&1 & pid=$!
pids+=("$pid")
pt_wait_step "$work/self.jsonl"
kill -TERM "$pid"
wait "$pid" || fail "self-started job exited $? after SIGTERM (want 0): $(cat "$work/self.out")"
grep -q "preempted after step" "$work/self.out" || fail "no preemption message: $(cat "$work/self.out")"
check_resume "$work/self" -np 2 --oversubscribe

echo "== a second signal exits at once"
"$pipe_train" "$spec" "${common[@]}" --set "train.checkpoint={dir: $work/twice, every: 1000000}" \
  >"$work/twice.out" 2>&1 & pid=$!; pids+=("$pid")
sleep 1
kill -TERM "$pid"; kill -TERM "$pid"
set +e; wait "$pid"; code=$?; set -e
[ "$code" = 143 ] || [ "$code" = 0 ] || fail "two SIGTERMs: exit $code (want 143, or 0 if the first save won)"
echo "two signals: exit $code"
echo "preempt: all checks passed"
