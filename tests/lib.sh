# shellcheck shell=bash
# tests/lib.sh: what the shell tests share. A test script starts with
#     source "$(dirname "$0")/../lib.sh"     (the path to tests/ from the script's folder)
# once it has read its arguments (ctest passes absolute paths). It then has:
#   - strict mode (set -euo pipefail) and the repository root as the working directory, so spec
#     files name paths like examples/data/tiny.txt;
#   - $work: a temporary directory, removed on exit (pt_at_exit adds commands to run first);
#   - one BLAS thread (so every layout runs the same GEMM code paths) and Open MPI allowed to
#     run as root;
#   - fail MSG (exit 1), skip MSG (exit 77: ctest reports the test skipped, saying why),
#     pt_mpirun NP ARGS (mpirun -np NP --oversubscribe, bounded by a timeout),
#     pt_same_bits A B (files equal byte for byte, else fail naming both),
#     pt_ranks_of_run MARKER (the pids of the pipe_train ranks whose arguments hold MARKER) and
#     pt_pick_rank MARKER N K METRICS (one rank of a running job, for a test to kill or stop)
#     and pt_wait_step METRICS (until a run's --metrics file shows a finished step).
set -euo pipefail
pt_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$pt_root"
work=$(mktemp -d)
pt_exit_cmds=()
pt_at_exit() { pt_exit_cmds+=("$1"); }
pt_on_exit() {
  local c
  for c in "${pt_exit_cmds[@]}"; do eval "$c" || true; done
  rm -rf "$work"
}
trap pt_on_exit EXIT
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
pt_mpirun() {
  local np=$1
  shift
  timeout "${PT_MPI_TIMEOUT:-240}" mpirun -np "$np" --oversubscribe "$@"
}
pt_same_bits() { cmp -s "$1" "$2" || fail "$1 and $2 differ"; }
# pt_probe_gpu CMD...: a short run that needs a GPU; skips (77) where none can be used (a build for
# real GPUs run without one), fails where it fails for another reason
pt_probe_gpu() {
  "$@" >/dev/null 2>"$work/probe.err" && return 0
  grep -q "no GPU can be used" "$work/probe.err" && skip "no GPU ($(head -c 200 "$work/probe.err"))"
  fail "a 1-step run failed: $(head -c 300 "$work/probe.err")"
}
# pt_ranks_of_run MARKER: the pids of the pipe_train ranks whose command line holds MARKER (an MPI
# rank in their environment: not the pipe_train that started a job's ranks itself)
pt_ranks_of_run() {
  local p
  for p in $(pgrep -f -- "$1" || true); do
    [ "$(ps -o comm= -p "$p" 2>/dev/null)" = pipe_train ] &&
      grep -qz '^OMPI_COMM_WORLD_RANK=' "/proc/$p/environ" 2>/dev/null && echo "$p"
  done
  return 0
}
# pt_wait_step METRICS: waits (up to 120 s) until the run writing METRICS (--metrics) finished a
# step, so every rank is past its start-up (its watchdog and signal handlers in place: a loaded
# machine once took over 2 s to get there); fails otherwise.
pt_wait_step() {
  local i
  for i in $(seq 600); do [ -s "$1" ] && return 0; sleep 0.2; done
  fail "no step finished within 120 s ($1 is empty)"
}
# pt_pick_rank MARKER N K METRICS: waits (up to 20 s) for the N ranks of the run MARKER to be
# up and until the run's --metrics file METRICS shows a step (pt_wait_step), then sets
# pt_picked_pid to the K-th's pid and pt_picked_rank to its MPI rank (OMPI_COMM_WORLD_RANK);
# fails if they did not come up.
pt_pick_rank() {
  local i
  for i in $(seq 100); do [ "$(pt_ranks_of_run "$1" | wc -l)" = "$2" ] && break; sleep 0.2; done
  pt_wait_step "$4"
  pt_picked_pid=$(pt_ranks_of_run "$1" | sed -n "$3p")
  [ -n "$pt_picked_pid" ] || fail "could not find rank $3 of the $2 of the run ($1)"
  pt_picked_rank=$(tr '\0' '\n' <"/proc/$pt_picked_pid/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
}
