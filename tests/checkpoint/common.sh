# tests/checkpoint/common.sh: what the checkpoint scripts share, sourced once they set pipe_train
# (and pipe_convert): the repository root as the working directory, gate.yaml as the spec, a work
# directory removed on exit, one BLAS thread (so every layout runs the same GEMM code paths),
# and the helpers that run pipe_train and the checks (ck.py), failing the script on any error.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
cd "$here/../.."
spec=tests/pipeline/gate.yaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
say() { echo "== $*"; }
seq_run() { timeout 120 "$pipe_train" "$spec" --sequential --quiet "$@" || fail "pipe_train --sequential $* exited $?"; }
mpi_run() {
  local np=$1
  shift
  timeout 120 mpirun -np "$np" --oversubscribe "$pipe_train" "$spec" --quiet "$@" ||
    fail "mpirun -np $np pipe_train $* exited $?"
}
ck() { python3 "$here/ck.py" "$@" || fail "check failed: ck.py $*"; }
