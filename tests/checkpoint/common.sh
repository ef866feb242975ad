# tests/checkpoint/common.sh: what the checkpoint scripts share, sourced once they set pipe_train
# (and pipe_convert): tests/lib.sh (the repository root as the working directory, a work
# directory removed on exit, one BLAS thread, fail), gate.yaml as the spec, and the helpers that
# run pipe_train and the checks (ck.py), failing the script on any error.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
source "$here/../lib.sh"
spec=tests/pipeline/gate.yaml
start=$SECONDS

say() { echo "== $*"; }
seq_run() { timeout 120 "$pipe_train" "$spec" --sequential --quiet "$@" || fail "pipe_train --sequential $* exited $?"; }
mpi_run() {
  local np=$1
  shift
  timeout 120 mpirun -np "$np" --oversubscribe "$pipe_train" "$spec" --quiet "$@" ||
    fail "mpirun -np $np pipe_train $* exited $?"
}
ck() { python3 "$here/ck.py" "$@" || fail "check failed: ck.py $*"; }
