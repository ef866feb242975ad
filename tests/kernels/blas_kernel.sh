#!/usr/bin/env bash
# blas_kernel.sh PIPE_TRAIN: OpenBLAS's kernel mis-detection, simulated with
# OPENBLAS_CORETYPE=Prescott, is corrected at start-up (kernels/cpu/blas_kernel.h):
#   (a) the start-up output names the best kernel for this CPU "(corrected from Prescott)", in
#       one line of stderr saying the restart;
#   (b) that run's losses and parameters equal, bit for bit, a run started with
#       OPENBLAS_CORETYPE=<best>;
#   (c) a 2-stage run under mpirun (and timeout) with the Prescott setting equals the
#       sequential run, one correction line for the job (rank 0's);
#   (d) PIPETRAIN_BLAS_CORETYPE=Prescott keeps Prescott: no restart, the output says Prescott;
#   (e) a job of 2 ranks pipe_train starts itself: one correction line, the ranks' start-up line
#       says it, and every process is still named pipe_train (pkill and schedulers find them).
# Skipped (77) on a CPU without AVX2 (Prescott is then as good as it gets) or an OpenBLAS that
# cannot switch kernels (not a DYNAMIC_ARCH build).
pipe_train=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
grep -qw avx2 /proc/cpuinfo 2>/dev/null || skip "this CPU has no AVX2: Prescott is its kernel"
spec=tests/pipeline/gate.yaml
sets=(--set train.steps=3 --set pipeline.device=cpu)
unset OPENBLAS_CORETYPE PIPETRAIN_BLAS_CORETYPE
best=$("$pipe_train" "$spec" --plan --json "${sets[@]}" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["blas_kernel"])')
[ "$best" != Prescott ] || fail "the best kernel for this AVX2 CPU came out as Prescott"
OPENBLAS_CORETYPE=Prescott "$pipe_train" "$spec" --plan "${sets[@]}" >"$work/probe" 2>&1
if grep -q "cannot switch" "$work/probe"; then skip "this OpenBLAS cannot switch kernels"; fi
echo "best kernel here: $best"

echo "(a) OPENBLAS_CORETYPE=Prescott: restarted with $best"
OPENBLAS_CORETYPE=Prescott timeout 240 "$pipe_train" "$spec" --sequential "${sets[@]}" \
  --metrics "$work/pres.jsonl" --dump-params "$work/pres" >"$work/pres.out" 2>"$work/pres.err"
cat "$work/pres.err" "$work/pres.out"
grep -q "^pipetrain: cpu, OpenBLAS $best kernel (corrected from Prescott), " "$work/pres.out" ||
  fail "the start-up line does not name the corrected kernel $best"
[ "$(grep -c "OpenBLAS chose the Prescott kernel; .*restarted with OPENBLAS_CORETYPE=$best" \
  "$work/pres.err")" = 1 ] || fail "not one line on stderr saying the restart"

echo "(b) the same bits as OPENBLAS_CORETYPE=$best"
OPENBLAS_CORETYPE=$best "$pipe_train" "$spec" --sequential --quiet "${sets[@]}" \
  --metrics "$work/best.jsonl" --dump-params "$work/best" 2>"$work/best.err"
[ ! -s "$work/best.err" ] || fail "a run on the best kernel said: $(cat "$work/best.err")"
python3 tests/pipeline/compare_runs.py "$work/best.jsonl" "$work/best" "$work/pres.jsonl" \
  "$work/pres" 1 --exact
pt_same_bits "$work/best.0.bin" "$work/pres.0.bin"

echo "(c) 2 stages under mpirun with OPENBLAS_CORETYPE=Prescott: the sequential run's bits"
OPENBLAS_CORETYPE=Prescott pt_mpirun 2 "$pipe_train" "$spec" "${sets[@]}" \
  --set pipeline.stages=2 --metrics "$work/p2.jsonl" --dump-params "$work/p2" --verbose \
  >"$work/p2.out" 2>"$work/p2.err"
[ "$(grep -c "restarted with OPENBLAS_CORETYPE=$best" "$work/p2.err")" = 1 ] ||
  fail "mpirun: not one restart line for the job: $(cat "$work/p2.err")"
[ "$(grep -c "OpenBLAS $best kernel (corrected from Prescott)" "$work/p2.out")" = 2 ] ||
  fail "mpirun: not both ranks on $best: $(cat "$work/p2.out")"
python3 tests/pipeline/compare_runs.py "$work/best.jsonl" "$work/best" "$work/p2.jsonl" \
  "$work/p2" 2 --exact

echo "(d) PIPETRAIN_BLAS_CORETYPE=Prescott keeps Prescott"
for env in "OPENBLAS_CORETYPE=Prescott PIPETRAIN_BLAS_CORETYPE=Prescott" \
           "PIPETRAIN_BLAS_CORETYPE=Prescott"; do
  env $env "$pipe_train" "$spec" --sequential "${sets[@]}" --set train.steps=1 \
    >"$work/keep.out" 2>"$work/keep.err"
  grep -q "^pipetrain: cpu, OpenBLAS Prescott kernel (PIPETRAIN_BLAS_CORETYPE), " \
    "$work/keep.out" || fail "$env: the start-up line does not say Prescott"
  [ ! -s "$work/keep.err" ] || fail "$env: said $(cat "$work/keep.err")"
done
echo "(e) a self-started job of 2 ranks: the ranks say the correction; the processes keep their name"
# --save: the SIGTERM's preemption checkpoint goes to the test's folder, not the source tree
OPENBLAS_CORETYPE=Prescott timeout 240 "$pipe_train" "$spec" "${sets[@]}" --set pipeline.stages=2 \
  --set train.steps=100000 --metrics "$work/self.jsonl" --save "$work/preempted" \
  >"$work/self.out" 2>"$work/self.err" &
self_pid=$!
pt_wait_step "$work/self.jsonl"
names=$(for p in $(pgrep -f -- "--metrics $work/self.jsonl"); do ps -o comm= -p "$p"; done | sort -u)
kill -TERM "$self_pid"
wait "$self_pid" || true
echo "process names: $names"
[ "$(printf '%s\n' "$names" | grep -v '^mpiexec$\|^orterun$\|^mpirun$\|^timeout$')" = pipe_train ] ||
  fail "after the restart the processes are named: $names (pkill pipe_train would miss them)"
[ "$(grep -c "restarted with OPENBLAS_CORETYPE=$best" "$work/self.err")" = 1 ] ||
  fail "self-started: not one restart line for the job: $(cat "$work/self.err")"
grep -q "OpenBLAS $best kernel (corrected from Prescott)" "$work/self.out" ||
  fail "self-started: the ranks' start-up line does not say the correction: $(cat "$work/self.out")"
echo "blas_kernel: all checks passed"
